"""benchmarks/roofline.py on the CPU at tiny scale: its work counts equal a brute count made
another way (the public snapshot API, per-state loops over the graph's arrays, a dict-based
epsilon closure), its table divides those counts by the speed file's times, and it refuses a
speed file whose statistics say the device decoded other inputs."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import roofline  # noqa: E402
from benchmarks.stream_tools import DEMO_SHARD, TINY, load_shard  # noqa: E402
from cuwfst import Decoder, DecoderOptions, Graph  # noqa: E402

LENGTHS = np.array([60, 45, 80, 30], np.int32)  # short rows: the brute count below is pure Python


@pytest.fixture(scope="module")
def rows():
    lp, _ = load_shard(DEMO_SHARD)
    return np.ascontiguousarray(lp[: len(LENGTHS), : LENGTHS.max()]), LENGTHS.copy()


def _ranges(a, s):
    """(emitting, final, epsilon, all) arc ranges of state s, from the image layout."""
    b, e = int(a.row_splits[s]), int(a.row_splits[s + 1])
    fc = int(a.final_count[s])
    ec = int(a.eps_count[s]) if a.has_eps else 0
    eps0 = b if a.finals_at_end else b + fc
    emit = (eps0 + ec, e - fc if a.finals_at_end else e)
    final = (e - fc, e) if a.finals_at_end else (b, b + fc)
    return emit, final, (eps0, eps0 + ec), (b, e)


def _brute_closure(a, frontier: dict, cutoff, passes: int):
    """reference_decoder.cc's ExpandEpsilon with dicts; per pass (entries, eps arcs, admitted,
    touched, new)."""
    f32 = np.float32
    tokens = dict(frontier)
    changed = list(tokens)
    stats = []
    for _ in range(passes):
        snap = dict(tokens)
        entries, arcs, admitted, best = len(changed), 0, 0, {}
        for s in changed:
            _, _, (b, e), _ = _ranges(a, s)
            for arc in range(b, e):
                arcs += 1
                end = f32(snap[s]) + f32(a.weight[arc])
                if not end > cutoff:
                    continue
                admitted += 1
                d = int(a.dest[arc])
                if d in snap and not end > snap[d]:
                    continue
                if d not in best or end > best[d]:
                    best[d] = end
        new = sum(1 for d in best if d not in tokens)
        stats.append((entries, arcs, admitted, len(best), new))
        tokens.update(best)
        changed = list(best)
    return tokens, stats


def _brute(graph, lp, length):
    """Per step: tokens, emitting (or final) arcs, admitted arcs, claims; per closure pass the
    counts of _brute_closure; all from Decoder.decode_snapshots and per-state loops."""
    a = graph.arrays
    f32 = np.float32
    dec = Decoder(graph, DecoderOptions())
    snaps = dec.decode_snapshots(lp, length)
    passes = dec.eps_iterations
    out = dict(tokens=0, slots=0, admitted=0, claims=0, max_frontier=0,
               closure=np.zeros((passes, 5), np.int64) if passes else None)
    if passes:  # the start closure
        tok, st = _brute_closure(a, {graph.start_state: f32(0)}, f32(0) - f32(20.0), passes)
        out["closure"] += np.array(st, np.int64)
        assert sorted(tok) == sorted(snaps[0]["tokens"])
    for k in range(length + 1):
        toks = snaps[k]["tokens"]
        nxt = snaps[k + 1]
        out["tokens"] += len(toks)
        out["max_frontier"] = max(out["max_frontier"], len(toks))
        cutoff = f32(nxt["cutoff"])
        final_phase = k == length
        any_final = any(_ranges(a, s)[1][1] > _ranges(a, s)[1][0] for s in toks)
        best = {}
        for s, (score, _) in toks.items():
            emit, final, _, every = _ranges(a, s)
            b, e = emit if not final_phase else (final if any_final else every)
            out["slots"] += e - b
            for arc in range(b, e):
                ac = f32(lp[k, a.ilabel[arc]]) if not final_phase else f32(0)
                end = f32(score) + (ac + f32(a.weight[arc]))
                if end > cutoff:
                    out["admitted"] += 1
                    d = int(a.dest[arc]) if not final_phase or any_final else graph.num_states - 1
                    best[d] = max(best.get(d, -np.inf), end)
        out["claims"] += len(best)
        assert len(best) == nxt["before_closure"]
        if passes and not final_phase:
            best, st = _brute_closure(a, best, cutoff, passes)
            out["closure"] += np.array(st, np.int64)
        assert sorted(best) == sorted(nxt["tokens"])
    return out


@pytest.mark.parametrize("name", ["HLG", "TLG"])
def test_counts_equal_a_brute_count(name, rows):
    lp, lens = rows
    g = Graph.load(TINY / f"{name}.img")
    tb, work = roofline.count_rows(g, lp, lens)
    hyps = Decoder(g, DecoderOptions()).decode(lp, lens)
    for i, w in enumerate(work):
        brute = _brute(g, lp[i], int(lens[i]))
        assert w.emit["tokens"].sum() == brute["tokens"] == w.frontier_total == hyps[i].frontier_total
        assert w.max_frontier == brute["max_frontier"] == hyps[i].max_frontier
        assert w.emit["slots"].sum() == brute["slots"]
        assert w.emit["admitted"].sum() == brute["admitted"]
        assert w.emit["claims"].sum() == brute["claims"]
        assert w.closure_added == hyps[i].closure_added
        assert 0 < w.emit["read_slots"].sum() <= w.emit["slots"].sum()
        if name == "TLG":
            got = np.stack([w.closure[k].sum(axis=0) for k in
                            ("scan_entries", "scan_slots", "eps_admitted", "eps_touched", "eps_new")], axis=1)
            assert (got == brute["closure"]).all(), (got, brute["closure"])
            assert brute["closure"][:, 1].sum() > 0 and brute["closure"][:, 4].sum() > 0  # closures did work
            # hash slots cleared after each closure = the frontier the closure leaves
            assert w.clear.sum() == w.emit["claims"][:-1].sum() + 1 + w.closure_added
    # the batch sums: per batch of 2 rows, the steps are the longer row's + 1
    bw = roofline.batch_work(work, 2, tb)
    assert bw["batches"] == 2 and bw["steps"] == np.mean([max(lens[0], lens[1]) + 1, max(lens[2], lens[3]) + 1])
    assert bw["slots"] * 2 == sum(w.emit["slots"].sum() for w in work)


def _fake_speed(path, lp, lens, B, *, skew=0):
    """A gpu_speed --json file for the tiny graphs: statistics from Decoder.decode on the same
    rows (skew adds to max_frontier), made-up times; us_per_step over the steps gpu_speed counts."""
    steps = float(np.mean([lens[s : s + B].max() + 1 for s in range(0, len(lens), B)]))
    out = []
    for name in ("HLG", "TLG"):
        g = Graph.load(TINY / f"{name}.img")
        hs = Decoder(g, DecoderOptions()).decode(lp, lens)
        total, added = sum(h.frontier_total for h in hs), sum(h.closure_added for h in hs)
        stats = dict(max_frontier=max(h.max_frontier for h in hs) + skew,
                     mean_frontier=total / float((lens + 1).sum()),
                     closure_growth=total / (total - added) if g.has_epsilon else 1.0)
        for v, lists in (("old", 0), ("new", int(g.has_epsilon))):
            out.append(dict(variant=v, closure_lists=lists, batch=B, ms_per_batch=2.0, us_per_step=2e3 / steps,
                            graph=f"{name}.img", commit="c0ffee", device="fake", **stats))
            ms = dict(scan=0.5, max=0.25, expand=0.25, finalize=0.125, backtrack=0.01)
            if g.has_epsilon:
                ms.update(eps_scan=0.0 if lists else 0.5, eps_expand=0.5, eps_resolve=0.25, clear_claims=0.0625)
            out.append(dict(variant=v, profile_batch=B, profile_ms=ms, profile_sum_ms=sum(ms.values()),
                            us_per_step={k: x / steps * 1e3 for k, x in ms.items() if x > 0},
                            graph=f"{name}.img", commit="c0ffee", device="fake"))
    path.write_text("".join(json.dumps(r) + "\n" for r in out))


def test_table_divides_the_counts_by_the_measured_times(rows, tmp_path):
    lp, lens = rows
    npz = tmp_path / "rows.npz"
    np.savez(npz, log_probs=lp, lengths=lens)
    speed = tmp_path / "speed.jsonl"
    _fake_speed(speed, lp, lens, 2)
    md, js = tmp_path / "out.md", tmp_path / "out.json"
    rc = roofline.main(["--corpus", str(TINY), "--log-probs", str(npz), "--speed", str(speed), "--utts", "4",
                        "--batch", "2", "--md", str(md), "--json", str(js)])
    assert rc == 0
    rep = json.loads(js.read_text())
    for gr in rep["graphs"]:
        g = Graph.load(TINY / gr["graph"])
        _, work = roofline.count_rows(g, lp, lens)
        slots = sum(w.emit["slots"].sum() for w in work) / 2  # per batch of 2
        tokens = sum(w.emit["tokens"].sum() for w in work) / 2
        by = {(r["variant"], r["kernel"]): r for r in gr["rows"]}
        assert by[("old", "max")]["work"] == slots and by[("old", "max")]["rate"] == pytest.approx(slots / 0.25e-3)
        assert by[("new", "scan")]["rate"] == pytest.approx(tokens / 0.5e-3)
        r = by[("old", "scan")]
        assert r["hbm_pct"] == pytest.approx(100 * r["sector_gbs"] * 1e9 / roofline.HBM_BYTES_S)
        assert r["us_step"] == pytest.approx(0.5e3 / gr["work"]["steps"])
        kernels = {k for v, k in by}
        if g.has_epsilon:
            assert ("new", "eps_scan") not in by and ("old", "eps_scan") in by  # lists: no EpsScan
            assert {s["variant"]: s["kernels"] for s in gr["steps"]} == {"old": 14, "new": 11}
        else:
            assert kernels == {"scan", "max", "expand", "finalize"}
            assert all(s["kernels"] == 4 for s in gr["steps"])
    text = md.read_text()
    assert "| old | max |" in text and "c0ffee" in text


def test_other_inputs_are_refused(rows, tmp_path, capsys):
    lp, lens = rows
    npz = tmp_path / "rows.npz"
    np.savez(npz, log_probs=lp, lengths=lens)
    speed = tmp_path / "speed.jsonl"
    _fake_speed(speed, lp, lens, 2, skew=1)  # the device "saw" a frontier one token larger
    rc = roofline.main(["--corpus", str(TINY), "--log-probs", str(npz), "--speed", str(speed), "--utts", "4",
                        "--batch", "2", "--graphs", "HLG"])
    assert rc == 1 and "max_frontier" in capsys.readouterr().err
    _fake_speed(speed, lp, lens, 2)
    rc = roofline.main(["--corpus", str(TINY), "--log-probs", str(npz), "--speed", str(speed), "--utts", "3",
                        "--batch", "2", "--graphs", "HLG"])  # other rows than the device decoded
    assert rc == 1


def test_byte_model_charges_at_least_the_useful_bytes():
    for eps in (False, True):
        for kernel, terms in roofline.byte_model(eps, 501).items():
            assert terms, kernel
            for count, useful, sector, what in terms:
                assert sector >= useful >= 0 and sector > 0, (kernel, what)


@pytest.mark.parametrize("ob", [2.0, 8.0])
def test_lattice_band_counts_every_record_the_trims_leave(rows, ob):
    """benchmarks.lattice_band: the 1-best trim's slots and the lattice trim's band between them
    hold every slot the records' rule keeps (the lattice trim's exactness, counted slot by slot),
    and the band is not empty (a lower trim than the 1-best's)."""
    from benchmarks import lattice_band

    g = Graph.load(TINY / "HLG.img")
    lp, lens = rows
    tot = lattice_band.count(g, lp, lens, min(4, len(lens)), ob=ob)
    assert tot["all_rec"] == tot["hi_rec"] + tot["band_rec"] > 0
    assert tot["band"] > 0 and tot["hi"] + tot["band"] <= tot["slots"]
    assert tot["adm"] <= tot["hi_cand"] + tot["band_cand"]
    # the band walked by (token, label) groups: an upper bound, so every band candidate lies in a
    # group it walks, with no more slots than the band and at least its candidates
    assert tot["lost_lab"] == 0 and tot["band_cand"] <= tot["band_lab"] <= tot["band"]
    assert 0 < tot["band_lab_groups"] <= tot["band"]
    # by the frame's labels best first: every passing group's slots are read (a passing group's label
    # is tested before the token stops), and no more than the band
    assert tot["band_lab"] <= tot["band_lab_read"] <= tot["band"] and tot["band_lab_tests"] > 0
    # the label bound (each state's own labels where it has at most K): an upper bound too, so no
    # record falls outside its walk, which is no larger than now and shrinks as K grows
    walked = [tot[f"hi_l{k}"] + tot[f"band_l{k}"] for k in lattice_band.LABEL_CAPS]
    assert all(tot[f"lost_l{k}"] == 0 for k in lattice_band.LABEL_CAPS), tot
    assert all(tot[f"hi_l{k}"] <= tot["hi"] for k in lattice_band.LABEL_CAPS)
    assert walked == sorted(walked, reverse=True) and walked[0] <= tot["hi"] + tot["band"]
    assert walked[-1] < tot["hi"] + tot["band"], "the label bound walks no fewer slots on the tiny graph"
    # the group bound (64 groups of labels, a mask a state): an upper bound, between the two
    assert tot["lost_g"] == 0 and walked[-1] <= tot["hi_g"] + tot["band_g"] <= tot["hi"] + tot["band"]
    # the cascade (the frame's R best labels tested against a bitmap of a heavy state's labels): an
    # upper bound too, never below the exact one
    assert all(tot[f"lost_c{r}"] == 0 and tot[f"hi_c{r}"] + tot[f"band_c{r}"] >= walked[-1]
               for r in lattice_band.CASCADE), tot
    # the folded cascade (the GPU's tables): an upper bound, looser as the bits fold further
    folded = [tot[f"hi_f{b}"] + tot[f"band_f{b}"] for b in lattice_band.FOLDS]
    assert all(tot[f"lost_f{b}"] == 0 for b in lattice_band.FOLDS), tot
    assert folded == sorted(folded) and walked[-1] <= folded[0] and folded[-1] <= tot["hi"] + tot["band"], tot
    # the running bound (a write as the search scores): sound (no record missed), between the records
    # and the walked candidates, and its writes into surviving destinations hold every record
    assert tot["run_lost"] == 0, tot
    assert tot["all_rec"] <= tot["run_surv"] <= tot["run_writes"] <= tot["hi_cand"] + tot["band_cand"], tot


@pytest.mark.parametrize("seed", range(6))
def test_lattice_band_running_bound_against_a_loop(seed):
    """lattice_band.run_counts' vectorised running best (a segmented prefix max by an offset) against a
    plain loop over the slots in order."""
    from benchmarks import lattice_band

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    dst = rng.integers(0, int(rng.integers(1, 40)), n)
    se = (rng.normal(-50.0, 6.0, n) * (1 + seed)).astype(np.float32)
    se[rng.random(n) < 0.05] = -np.inf
    cutoff, ob, slack = np.float32(np.quantile(se[np.isfinite(se)], 0.6)), np.float32(8.0), np.float32(0.5)
    cand = rng.random(n) < 0.8
    surv = rng.random(n) < 0.5
    rec = cand & surv & (rng.random(n) < 0.3)
    tot = dict(run_writes=0, run_surv=0, run_lost=0)
    lattice_band.run_counts(tot, dst, se, cand, rec, surv, cutoff, ob, slack)
    best, wr = {}, np.zeros(n, bool)
    for i in range(n):
        b = best.get(int(dst[i]), np.float32(-np.inf))
        adm = se[i] > cutoff
        wr[i] = cand[i] and (adm or b == -np.inf or not se[i] < np.float32(np.float32(b - ob) - slack))
        if adm:
            best[int(dst[i])] = max(b, se[i])
    assert tot == dict(run_writes=int(wr.sum()), run_surv=int((wr & surv).sum()),
                       run_lost=int((rec & cand & ~wr).sum()))


def test_lattice_band_with_the_gpu_slack_and_the_known_max(rows):
    """lattice_band with each step's slack by the GPU's rule (drift_k): the trims still leave every
    record between hi and the band; and every step it counts as "max known" (the tokens' upper
    bound at most the anchor) has its exact max equal to the anchor, on some steps at least."""
    from benchmarks import lattice_band

    g = Graph.load(TINY / "HLG.img")
    lp, lens = rows
    n = min(4, len(lens))
    tot = lattice_band.count(g, lp, lens, n, drift_k=16.0)
    assert tot["all_rec"] == tot["hi_rec"] + tot["band_rec"] > 0
    assert 0 < tot["max_known"] == tot["max_known_exact"] <= tot["steps"]
    tight = lattice_band.count(g, lp, lens, n, drift_k=4.0)
    assert tight["band"] <= tot["band"]  # (a smaller drift, a band no wider)


def test_lattice_reverse_windows_and_counts(rows):
    """benchmarks.lattice_reverse: k2's windows (b = -10, 10, 30, ...; frames [max(0, b), min(b + 30,
    n + 1)), the last the first reaching n + 1), and the counts' order: the kept records are records,
    the band and the records are arcs of the frontier, the walks hold the arcs they must read, the
    1-best's walk is no wider than the band's, the reverse pass over alive states reads no more than
    over every state, and a window's alive states are tokens of its frontiers."""
    from benchmarks import lattice_reverse

    assert lattice_reverse.windows(20) == [(0, 20)]
    assert lattice_reverse.windows(25) == [(0, 20), (10, 25)]
    assert lattice_reverse.windows(41) == [(0, 20), (10, 40), (30, 41)]
    assert lattice_reverse.windows(5) == [(0, 5)]
    g = Graph.load(TINY / "HLG.img")
    lp, lens = rows
    dec = Decoder(g, DecoderOptions(output_beam=8.0), num_threads=1)
    tb = roofline.graph_tables(g, dec.eps_iterations)
    _, arcs = roofline._ragged(tb.emit_b, tb.emit_e - tb.emit_b)
    indeg = np.bincount(tb.dest[arcs], minlength=g.num_states).astype(np.int64)
    for r in range(min(3, len(lens))):
        t = lattice_reverse.count_row(tb, indeg, dec, lp[r].astype(np.float32), int(lens[r]), np.float32(8.0))
        assert t["steps"] == int(lens[r])
        assert 0 < t["kept_band"] <= t["records"] <= t["fwd_all"] and 0 < t["fwd_band"] <= t["fwd_all"]
        assert t["fwd_band"] <= t["sorted_walk_band"] <= t["tok_walk_band"] <= t["fwd_all"]
        assert t["sorted_walk_best"] <= t["sorted_walk_band"] and t["tok_walk_best"] <= t["tok_walk_band"]
        assert 0 < t["alive"] <= t["frontier"] and 0 < t["rev_alive"] <= t["rev_end"] * 2  # (windows overlap)


def test_search_rounds_replays_the_trims_search(rows):
    """benchmarks.search_rounds: the GPU's 8-ary search over the arcs' real keep decisions ends at
    the first failing arc for every searched token, labelled, weights-only past the label-0 arcs and
    with round 0 at the first arc (count raises otherwise); grouping tokens never lengthens a warp's
    chain, and at 512-token granules (one token a thread) it changes nothing."""
    from benchmarks import search_rounds

    g = Graph.load(TINY / "HLG.img")
    lp, lens = rows
    tot = search_rounds.count(g, lp, lens, 2, granule=2048)
    assert tot["searched"] > 0 and tot["rounds_weights"] <= tot["rounds_labelled"]
    for v in search_rounds.VARIANTS:
        chains = [tot[f"chain_{v}_g{k}"] for k in search_rounds.GROUPS]
        assert chains == sorted(chains, reverse=True), tot
    one = search_rounds.count(g, lp, lens, 1, granule=512)
    assert len({one[f"chain_weights_g{k}"] for k in search_rounds.GROUPS}) == 1, one


def test_search_rounds_search_on_known_prefixes():
    """search_rounds.search on hand-made keep decisions: the end of a prefix and its rounds, round
    0 at the first arc ending an empty prefix at once, and a keep pattern that is not a prefix
    ending off its first failing arc (what count reports as a mismatch)."""
    from benchmarks.search_rounds import search

    prefix = lambda p: (lambda idx, pos: pos < p[idx])  # noqa: E731
    end, r = search(np.array([0, 0, 100]), np.array([20, 20, 1300]), prefix(np.array([7, 0, 117])))
    assert end.tolist() == [7, 0, 117] and r.tolist() == [2, 2, 4]
    end, r = search(np.array([0, 0]), np.array([20, 1212]), prefix(np.array([0, 0])), first=True)
    assert end.tolist() == [0, 0] and r.tolist() == [1, 1]
    holes = lambda idx, pos: (pos < 3) | (pos == 5) | (pos >= 9)  # noqa: E731
    end, _ = search(np.array([0]), np.array([20]), holes)
    assert end[0] != 3
