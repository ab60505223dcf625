"""benchmarks/lattice_post.py on the CPU at tiny scale: the counts its GPU kernel must equal
(numpy over every emitting arc of every frontier) against a pure-Python loop over the same
tokens and arcs, the walk's bound against every candidate, its checksum's arithmetic, and the
kernel's source compiling for sm_90 where nvcc is here (the GPU run itself is a device job)."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import lattice_post  # noqa: E402
from benchmarks.stream_tools import DEMO_SHARD, TINY, load_shard  # noqa: E402
from cuwfst import Decoder, DecoderOptions, Graph  # noqa: E402

F32 = np.float32
LENGTHS = np.array([16, 10, 22], np.int32)  # short rows: the brute loop is pure Python


def _brute(g, tb, steps, st, sc, lp, ob):
    """Every (token, emitting arc) pair of every row-step, one at a time."""
    a = g.arrays
    tot = dict(tokens=0, slots=0, cands=0, survived=0, kept=0, checksum=0)
    V = tb.vocab_size
    for s in steps:
        so, dn = int(s["dst_off"]), int(s["dst_n"])
        pos = {int(st[so + i]): i for i in range(dn)}
        row = lp[int(s["lp_off"]): int(s["lp_off"]) + V]
        for i in range(int(s["src_n"])):
            state, score = int(st[int(s["src_off"]) + i]), sc[int(s["src_off"]) + i]
            tot["tokens"] += 1
            b, e = int(tb.emit_b[state]), int(tb.emit_e[state])
            reading = True
            for arc in range(b, e):
                w, lab = F32(a.weight[arc]), int(a.ilabel[arc])
                bound_ok = score + (s["lp_rest"] + w) >= s["pre_low"]
                read = lab == 0 or (reading and bound_ok)
                if lab != 0 and not bound_ok:
                    reading = False  # (sorted: every later non-blank arc fails as well)
                end = score + (F32(row[lab]) + w)
                if end >= s["pre_low"]:
                    assert read, "a candidate the walk would not read"
                tot["slots"] += int(read)
                if not end >= s["pre_low"]:
                    continue
                tot["cands"] += 1
                p = pos.get(int(a.dest[arc]), -1)
                if p < 0:
                    continue
                tot["survived"] += 1
                admitted = end > s["cutoff"]
                keep = admitted or s["filter_on"] == 0 or not (end < (sc[so + p] - F32(ob)) - s["slack"])
                if keep:
                    tot["kept"] += 1
                    key = int(lattice_post.rec_key(np.array([s["row"]]), np.array([s["t"]]), np.array([arc]),
                                                   np.array([p]))[0])
                    tot["checksum"] = (tot["checksum"] + key) % (1 << 64)
    return tot


def _tiny_batch(rows, ob):
    """The tiny graph's emit tables and a batch of the demo shard's rows (short: LENGTHS), as the
    driver makes it: (graph, tables, per-row log-probs, frontiers, max |weight|, batch arrays)."""
    g = Graph.load(TINY / "HLG.img")
    tables = lattice_post.emit_tables(g)
    lp_all, _ = load_shard(DEMO_SHARD)
    dec = Decoder(g, DecoderOptions(output_beam=ob), num_threads=1)
    lp_rows = {r: np.ascontiguousarray(lp_all[r, : LENGTHS[r]], F32) for r in rows}
    fronts = {r: lattice_post.row_fronts(dec, lp_rows[r], int(LENGTHS[r])) for r in rows}
    mw = float(np.abs(tables[0].weight).max())
    batch = lattice_post.build_batch(rows, lp_rows, {r: int(LENGTHS[r]) for r in rows}, fronts, mw, ob)
    return g, tables, lp_rows, fronts, mw, batch


@pytest.mark.parametrize("ob,rows", [(8.0, [0, 1, 2]), (3.0, [1])])
def test_lattice_post_counts_equal_a_brute_loop(ob, rows):
    g, (tb, emit_b, emit_n, emit_n0), lp_rows, fronts, mw, (steps, st, sc, lp) = _tiny_batch(rows, ob)
    assert len(steps) == int(LENGTHS[rows].sum()) and steps["filter_on"].all()
    assert np.isfinite(steps["pre_low"]).all() and (steps["pre_low"] < steps["cutoff"] - ob).all()
    got = lattice_post.expected_counts(tb, emit_b, emit_n, emit_n0, steps, st, sc, lp, ob, g.num_states)
    want = _brute(g, tb, steps, st, sc, lp, ob)
    assert got == want
    assert 0 < got["kept"] <= got["survived"] <= got["cands"] <= got["slots"]
    # a row at a time (the driver's workers) sums to the batch
    per = [lattice_post.expected_counts(tb, emit_b, emit_n, emit_n0, *lattice_post.build_batch(
        [r], lp_rows, {r: int(LENGTHS[r])}, {r: fronts[r]}, mw, ob)[:4], ob, g.num_states) for r in rows]
    assert {k: sum(p[k] for p in per) % (1 << 64) for k in got} == got


def test_lattice_post_filter_scalars_and_layout():
    """The step scalars: the upward-rounded operations round up, the slack grows with the drift,
    pre_low sits below cutoff - output_beam, a magnitude past 8,192 turns the filter off (pre_low
    -inf), a final step's magnitude is its max's; the RowStep layout is the kernel's (72 bytes)."""
    one = np.float32(1)
    assert lattice_post._add_ru(one, np.float32(2.0 ** -30)) == np.nextafter(one, np.float32(2))
    assert lattice_post._add_ru(one, np.float32(1)) == np.float32(2)
    x = np.float32(1 + 2.0 ** -23)  # x * x = 1 + 2^-22 + 2^-46: up to the float after 1 + 2^-22
    assert lattice_post._mul_ru(x, x) == np.nextafter(np.float32(1 + 2.0 ** -22), np.float32(2)) > x * x
    steps = np.array([[0, 20, -30, 0], [0, 20, -40, 0], [0, 20, -9000, 0], [0, 20, -50, 0], [1, 1e10, -1e10, 0]],
                     np.float32)
    maxes = np.array([-20, -8980, -30, -31], np.float32)
    out = lattice_post.filter_scalars(steps, 3, 10.0, 8.0, maxes)
    assert [o[0] for o in out] == [0, 0, 0, 1] and [o[4] for o in out] == [True, False, True, False]
    assert out[0][3] < out[2][3] and out[0][2] < out[0][1] - 8 and out[1][2] == -np.inf
    assert all(o[2].dtype == np.float32 and o[3].dtype == np.float32 for o in out)
    assert lattice_post.ROWSTEP.itemsize == 72


def test_lattice_post_kernel_compiles():
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("needs nvcc")
    src = Path(lattice_post.__file__).with_name("lattice_post.cu")
    r = subprocess.run([nvcc, "-O3", "-arch=sm_90", "-c", str(src), "-o", "/dev/null"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def _step_sets(rec, lens):
    """Each row's records as (step, state, arc, acoustic bits) rows, sorted: a set per step."""
    out = []
    for b, sl in enumerate(rec.row_slices(lens)):
        n = int(lens[b]) + 1
        step = np.repeat(np.arange(n), rec.counts[b, :n])
        r = rec.records[sl]
        out.append(np.column_stack([step, r])[np.lexsort((r[:, 2], r[:, 1], r[:, 0], step))])
    return out


@pytest.mark.parametrize("seed", [s for s in range(45) if s % 3 != 2])  # (epsilon-free cases)
def test_twin_records_are_the_cpu_records_and_give_its_lattice(seed):
    """The records made after the search from its frontiers and step scalars alone (twin_records:
    real, final and allow_partial's redirect steps) are the CPU search's own records, step for step,
    with the same counts, cutoff bits and frontier sizes; replayed, they and the filtered ones give
    the CPU decoder's lattice field for field (the filtered ones but for recorded_arcs)."""
    from test_lattice_records import LATTICE_FIELDS, random_lattice_case

    from cuwfst.decoder.lattice_records import cpu_records, lattices_from_records

    _, graph, lp, lens, opts = random_lattice_case(seed)
    dec = Decoder(graph, opts, num_threads=1)
    want = cpu_records(dec, lp, lens)
    got = lattice_post.twin_records(dec, lp, lens)
    for b in range(len(lens)):
        n = int(lens[b]) + 1
        assert np.array_equal(want.counts[b, :n], got.counts[b, :n]), f"row {b}: records per step"
        assert np.array_equal(want.sizes[b, :n], got.sizes[b, :n]), f"row {b}: frontier sizes"
        assert np.array_equal(want.cutoffs[b, :n].view(np.int32), got.cutoffs[b, :n].view(np.int32)), f"row {b}"
    for b, (x, y) in enumerate(zip(_step_sets(want, lens), _step_sets(got, lens))):
        assert np.array_equal(x, y), f"row {b}: records"
    filt = lattice_post.twin_records(dec, lp, lens, filter_output_beam=opts.output_beam)
    assert len(filt.records) <= len(got.records)
    hyps = dec.decode(lp, lens, lattice=True)
    for rec, name in ((got, "plain"), (filt, "filtered")):
        lats, scores = lattices_from_records(dec._ref, graph, opts, 0, lens, rec, num_threads=1)
        for b, (h, lat) in enumerate(zip(hyps, lats)):
            for f in LATTICE_FIELDS:
                if name == "filtered" and f == "recorded_arcs":
                    continue
                x, y = getattr(h.lattice, f), getattr(lat, f)
                if isinstance(x, np.ndarray):
                    x, y = (x.view(np.int32), y.view(np.int32)) if x.dtype.kind == "f" else (x, y)
                    assert x.shape == y.shape and np.array_equal(x, y), f"{name} row {b}: {f}"
                else:
                    assert x == y, f"{name} row {b}: {f}"
            assert np.float32(h.score).view(np.int32) == scores[b].view(np.int32), f"{name} row {b}: 1-best score"


def test_the_pass_keeps_the_twins_records():
    """The GPU pass's rule (expected_counts: arcs below pre_low dropped unprobed, then the filter)
    keeps exactly the filtered twin's real-step records on the tiny graph's rows."""
    g = Graph.load(TINY / "HLG.img")
    tb, emit_b, emit_n, emit_n0 = lattice_post.emit_tables(g)
    lp_all, _ = load_shard(DEMO_SHARD)
    dec = Decoder(g, DecoderOptions(output_beam=8.0), num_threads=1)
    lens = LENGTHS.copy()
    lp = np.ascontiguousarray(lp_all[: len(lens), : lens.max()], F32)
    twin = lattice_post.twin_records(dec, lp, lens, filter_output_beam=8.0)
    real = sum(int(twin.counts[b, : int(lens[b])].sum()) for b in range(len(lens)))  # (steps before the final)
    rows = list(range(len(lens)))
    lp_rows = {r: lp[r, : lens[r]] for r in rows}
    fronts = {r: lattice_post.row_fronts(dec, lp_rows[r], int(lens[r])) for r in rows}
    steps, st, sc, blp = lattice_post.build_batch(rows, lp_rows, {r: int(lens[r]) for r in rows}, fronts,
                                                  float(np.abs(tb.weight).max()), 8.0)
    got = lattice_post.expected_counts(tb, emit_b, emit_n, emit_n0, steps, st, sc, blp, 8.0, g.num_states)
    assert got["kept"] == real > 0


def test_work_by_class_counts_the_walk():
    """work_by_class (the pass's work a table class): its arcs read, candidates, survivors and kept
    records sum to expected_counts'; its chunks are the warp walk's rounds, counted here by running
    the walk's loop (32 arcs a round, stopping after a round with an unread arc past the label-0
    ones); the classes follow lp_prepare_batch's rule (2 |S_{t+1}| within 2^11 / 2^13 / 2^14)."""
    ob = 8.0
    g, (tb, emit_b, emit_n, emit_n0), _, _, _, (steps, st, sc, lp) = _tiny_batch([0, 1, 2], ob)
    work = lattice_post.work_by_class(tb, emit_b, emit_n, emit_n0, steps, st, sc, lp, ob)
    want = lattice_post.expected_counts(tb, emit_b, emit_n, emit_n0, steps, st, sc, lp, ob, g.num_states)
    tot = {k: sum(w[k] for w in work.values()) for k in work["c11"]}
    assert (tot["read"], tot["cands"], tot["survived"], tot["kept"], tot["tokens"]) == (
        want["slots"], want["cands"], want["survived"], want["kept"], want["tokens"])
    chunks = probes = hits = keep_rounds = dsc_loads = dsc_rounds = dsc_all = 0
    V = tb.vocab_size
    pos_of = np.full(g.num_states, -1, np.int64)
    for s in steps:
        row = lp[int(s["lp_off"]): int(s["lp_off"]) + V]
        x = lattice_post._step_arcs(tb, emit_b, emit_n, emit_n0, s, st, sc, lp, ob, pos_of)
        kept = {(int(o), int(j) // 32) for o, j in zip(x["own"][x["keep"]], x["k"][x["keep"]])}
        dsc_at = {}  # (token, round) -> the round's lanes that load their destination's score
        for o, j, pp, e in zip(x["own"], x["k"], x["p"], x["end"]):
            if pp >= 0 and not e > s["cutoff"] and s["filter_on"] != 0:
                dsc_at[(int(o), int(j) // 32)] = dsc_at.get((int(o), int(j) // 32), 0) + 1
                dsc_all += 1
        for i in range(int(s["src_n"])):
            state, score = int(st[int(s["src_off"]) + i]), sc[int(s["src_off"]) + i]
            b, n, n0 = int(emit_b[state]), int(emit_n[state]), int(emit_n0[state])
            if n > n0:  # (the walk by label: labels that could end above pre_low, and its arcs with one)
                thr = (s["pre_low"] - score) - F32(tb.weight[b + n0])
                probes += sum(1 for lab in range(1, V) if row[lab] >= thr)
                hits += sum(1 for j in range(n0, n) if row[tb.ilabel[b + j]] >= thr)
            for k in range(0, n, 32):
                chunks += 1
                keep_rounds += (i, k // 32) in kept  # (a round that keeps a record: one atomicAdd)
                dsc_rounds += (i, k // 32) in dsc_at
                dsc_loads += dsc_at.get((i, k // 32), 0)
                js = range(k, min(k + 32, n))
                if any(j >= n0 and not score + (s["lp_rest"] + F32(tb.weight[b + j])) >= s["pre_low"] for j in js):
                    break
    assert tot["chunks"] == chunks > 0
    assert tot["keep_rounds"] == keep_rounds and 0 < keep_rounds <= min(chunks, tot["kept"])
    assert (tot["dsc_loads"], tot["dsc_rounds"]) == (dsc_loads, dsc_rounds) and 0 < dsc_rounds <= dsc_loads
    assert dsc_loads == dsc_all  # (every such arc is in a round the walk runs)
    assert (tot["label_probes"], tot["label_hits"]) == (probes, hits) and probes >= hits > 0
    sizes = {c: [int(x) for x in steps["dst_n"][lattice_post.class_of(steps["dst_n"]) == i]]
             for i, c in enumerate(lattice_post.CLASS_NAMES)}
    assert all(2 * x <= 2048 for x in sizes["c11"]) and all(2048 < 2 * x <= 8192 for x in sizes["c13"])
    assert {c: len(v) for c, v in sizes.items()} == {c: w["row_steps"] for c, w in work.items()}
    assert work["c11"]["row_steps"] > 0 and work["c11"]["cleared"] == 2048 * work["c11"]["items"]


def test_gap_bound_counts_a_python_loop():
    """gap_bound_counts (an analysis of a two-step bound on the records) against a plain loop over the
    same kept records: each token's gap the least deficit of its kept arcs into the next frontier (at
    most output_beam + slack), a non-admitted record kept where end >= (s(x) + gap) - output_beam -
    2 slack, admitted ones always, a row's last real step unbounded; and the admitted records a
    pruning needs, those ending at their destination's score and each destination's least
    (source index, arc place)."""
    ob = 8.0
    g, (tb, emit_b, emit_n, emit_n0), _, _, _, (steps, st, sc, lp) = _tiny_batch([0, 1, 2], ob)
    got = lattice_post.gap_bound_counts(tb, emit_b, emit_n, emit_n0, steps, st, sc, lp, ob)
    pos_of = np.full(g.num_states, -1, np.int64)
    recs = {}
    for s in steps:
        x = lattice_post._step_arcs(tb, emit_b, emit_n, emit_n0, s, st, sc, lp, ob, pos_of)
        recs[(int(s["row"]), int(s["t"]))] = [(int(o), int(p), F32(e), bool(e > s["cutoff"]), int(j))
                                             for o, p, e, k, j in zip(x["own"], x["p"], x["end"], x["keep"], x["k"])
                                             if k]
    by_key = {(int(s["row"]), int(s["t"])): s for s in steps}
    kept = two = adm = needed = at_score = one_all = two_all = 0
    for (r, t), rs in recs.items():
        s = by_key[(r, t)]
        kept += len(rs)
        adm += sum(1 for _, _, _, a, _ in rs if a)
        dsc0 = sc[int(s["dst_off"]):]
        first = {}  # destination -> its least (source, place) among admitted records
        for o, p, e, a, j in rs:
            if a:
                first[p] = min(first.get(p, (o, j)), (o, j))
        needed += sum(1 for o, p, e, a, j in rs if a and (e == dsc0[p] or first[p] == (o, j)))
        at_score += sum(1 for o, p, e, a, j in rs if a and e == dsc0[p])
        is_needed = {(o, p, j): a and (e == dsc0[p] or first[p] == (o, j)) for o, p, e, a, j in rs}
        ones = [is_needed[(o, p, j)] or not a or not e < (dsc0[p] - F32(ob)) - s["slack"] for o, p, e, a, j in rs]
        nxt = by_key.get((r, t + 1))
        if nxt is None or s["filter_on"] == 0:
            two += len(rs)
            one_all += len(rs) if s["filter_on"] == 0 else sum(ones)
            two_all += len(rs) if s["filter_on"] == 0 else sum(ones)
            continue
        one_all += sum(ones)
        dsc1 = sc[int(nxt["dst_off"]):]
        gap = {}
        for o, p, e, _, _ in recs[(r, t + 1)]:
            gap[o] = min(gap.get(o, np.inf), F32(dsc1[p] - e))
        dsc = sc[int(s["dst_off"]):]
        for o, p, e, a, j in rs:
            gp = min(gap.get(p, np.inf), F32(ob) + nxt["slack"])
            within = e >= (dsc[p] + F32(gp)) - F32(ob) - 2 * s["slack"]
            two += a or within
            two_all += is_needed[(o, p, j)] or within
    keys = ("kept", "admitted", "kept_two_step", "admitted_needed", "admitted_at_score", "kept_one_step_all",
            "kept_two_step_all")
    tot = {k: sum(v[k] for v in got.values()) for k in keys}
    assert tuple(tot[k] for k in keys) == (kept, adm, two, needed, at_score, one_all, two_all)
    assert adm <= two <= kept and 0 < at_score <= needed <= adm and two_all <= one_all <= kept
