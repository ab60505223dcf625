"""Lattices from lattice records (cuwfst/decoder/lattice_records.py): the host half of the
GPU lattice, proven on the CPU. The CPU search records its arcs as the GPU records them
(every arc of a step whose destination survives, with the step's cutoff, in any order);
the replay of those records must give the CPU decoder's lattice exactly, array for array,
on random graphs with and without epsilon arcs, allow_partial, online beams and several
output beams. The GPU half (the GPU makes the same records) is tests/test_gpu_lattice.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions
from cuwfst.decoder.lattice_records import LatticeRecords, cpu_records, lattices_from_records
from helpers import random_ctc_graph, random_eps_graph, random_eps_graph_any, random_log_probs

LATTICE_FIELDS = ("num_states", "src", "dst", "frame", "graph_arc", "redirect_arc", "token", "acoustic",
                  "graph_score", "score", "word_splits", "word_ids", "state_frame", "state_graph", "state_level",
                  "recorded_arcs")
BEAMS = [(20.0, 8.0, 30, 10000), (8.0, 5.0, 5, 200), (3.0, 2.0, 1, 50), (15.0, 8.0, 1, 4), (10.0, 0.5, 0, 3)]


def assert_same_lattice(x, y, where=""):
    """Two Lattices are the same, field for field and bit for bit (float32 scores)."""
    for name in LATTICE_FIELDS:
        a, b = getattr(x, name), getattr(y, name)
        if isinstance(a, np.ndarray):
            if a.dtype.kind == "f":
                a, b = a.view(np.int32), b.view(np.int32)
            assert a.shape == b.shape and np.array_equal(a, b), f"{where}: {name} differs"
        else:
            assert a == b, f"{where}: {name} {a} vs {b}"


def shuffle_within_steps(rec: LatticeRecords, lens, rng) -> LatticeRecords:
    """The same records in another order inside each (row, step), as GPU atomics leave them."""
    step_of = np.concatenate([np.repeat(np.arange(b * 100000, b * 100000 + int(lens[b]) + 1),
                                        rec.counts[b, : int(lens[b]) + 1]) for b in range(len(lens))] or [[]])
    order = np.lexsort((rng.random(step_of.size), step_of))
    return LatticeRecords(rec.records[order], rec.counts, rec.cutoffs, rec.sizes, rec.producer_a)


def _acyclic_eps(rng, n, V, degree):
    while True:
        g = (random_eps_graph(rng, n, V, degree, eps_prob=0.6) if rng.random() < 0.5 else
             random_eps_graph_any(rng, n, V, degree, eps_prob=float(rng.choice([0.3, 0.7, 1.0])), cycles=False,
                                  chain=int(rng.choice([1, 2, 5]))))
        if g.max_epsilon_chain >= 0:
            return g


def random_lattice_case(seed: int):
    """A random graph (epsilon-free or with acyclic epsilon arcs), batch, beams and
    allow_partial; shared with tests/test_gpu_lattice.py."""
    rng = np.random.default_rng(91000 + seed)
    eps = seed % 3 == 2
    n = int(rng.choice([3, 8, 30, 150, 600]))
    V = int(rng.integers(2, 24))
    degree = int(rng.integers(1, 6))
    graph = _acyclic_eps(rng, n, V, degree) if eps else random_ctc_graph(rng, n, V, degree, float(rng.uniform(0.05, 0.5)))
    B = int(rng.integers(1, 6))
    T = int(rng.integers(1, 90))
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    if B > 2:
        lens[1], lens[2] = 1, 0
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    s, _, mn, mx = BEAMS[seed % len(BEAMS)]
    o = float(rng.choice([0.3, 2.0, 8.0, 1000.0]))
    eps_it = None if (not eps or seed % 4) else int(rng.integers(1, 4))
    opts = DecoderOptions(search_beam=s, output_beam=o, min_active_states=mn, max_active_states=mx,
                          allow_partial=bool(seed % 4 != 0), eps_iterations=eps_it)
    return rng, graph, lp, lens, opts


@pytest.mark.parametrize("seed", range(120))
def test_records_replay_is_the_cpu_lattice(seed, monkeypatch):
    """Every third seed with the replay's sort at every step (CUWFST_REPLAY_SORT=1); the others
    put a step's records at their places wherever the frontier's arc ranges are short enough."""
    if seed % 3 == 1:
        monkeypatch.setenv("CUWFST_REPLAY_SORT", "1")
    rng, graph, lp, lens, opts = random_lattice_case(seed)
    online = seed % 7 == 3
    dec = Decoder(graph, opts, num_threads=2)
    want = dec.decode(lp, lens, lattice=True, online=online)
    rec = shuffle_within_steps(cpu_records(dec, lp, lens, online), lens, rng)
    lats, scores = lattices_from_records(dec._ref, graph, opts, dec.eps_iterations, lens, rec, num_threads=3)
    for b, (h, lat) in enumerate(zip(want, lats)):
        assert_same_lattice(h.lattice, lat, f"seed {seed} row {b}")
        assert np.float32(h.score).view(np.int32) == scores[b].view(np.int32), f"seed {seed} row {b}: 1-best score"


def _without_recorded(lat):
    """A Lattice with recorded_arcs None (a producer-filtered replay does not know the count)."""
    import dataclasses

    return dataclasses.replace(lat, recorded_arcs=None)


@pytest.mark.parametrize("seed", range(0, 240, 2))
def test_producer_filtered_records_replay_to_the_cpu_lattice(seed, monkeypatch):
    """The CPU twin of the GPU's records filter on epsilon graphs (cpu_records(filter=True):
    non-admitted arcs of real steps ending below s(dst) - RecordsFilterOffset(A, ...), s the
    search's scores) drops records, and the replay of what is left is the CPU lattice bit for bit
    (recorded_arcs unknown: None), or the row is flagged for a decode without the filter, which
    happens only where eps_iterations is below the graph's longest epsilon chain (the closure's
    scores then need not be the forward's) or the CPU's own filter is off."""
    if seed % 6 == 4:
        monkeypatch.setenv("CUWFST_CPU_LATTICE_FILTER", "off")  # (the replay's own filter off)
    rng, graph, lp, lens, opts = random_lattice_case(seed)
    online = seed % 14 == 6
    dec = Decoder(graph, opts, num_threads=2)
    want = dec.decode(lp, lens, lattice=True, online=online)
    full = cpu_records(dec, lp, lens, online)
    rec = shuffle_within_steps(cpu_records(dec, lp, lens, online, filter=True), lens, rng)
    assert rec.producer_a is not None and len(rec.records) <= len(full.records)
    redo = np.ones(len(lens), np.uint8)
    lats, scores = lattices_from_records(dec._ref, graph, opts, dec.eps_iterations, lens, rec, num_threads=3,
                                         redo=redo)
    complete = not graph.has_epsilon or dec.eps_iterations >= graph.max_epsilon_chain
    for b, (h, lat) in enumerate(zip(want, lats)):
        filtered = bool((rec.producer_a[b, : lens[b] + 1] > 0).any())
        if redo[b]:
            assert filtered and not complete, f"seed {seed} row {b}: flagged for a redo"
            assert lat is None
            continue
        if filtered:
            assert lat.recorded_arcs is None
            assert_same_lattice(_without_recorded(h.lattice), lat, f"seed {seed} row {b}")
        else:
            assert_same_lattice(h.lattice, lat, f"seed {seed} row {b}")
        assert np.float32(h.score).view(np.int32) == scores[b].view(np.int32), f"seed {seed} row {b}: 1-best score"


def _eps_rows(rng, case, output_beam):
    """A CPU decoder on a random 200-state epsilon graph and three rows (80, 41 and 0 frames)."""
    g = _acyclic_eps(rng, 200, 12, 4)
    lp = random_log_probs(rng, 3, 80, 12, peaky=bool(case % 2))
    opts = DecoderOptions(search_beam=12.0, output_beam=output_beam, max_active_states=500, min_active_states=2)
    return Decoder(g, opts), lp, np.array([80, 41, 0], np.int32)


def test_producer_filter_drops_records_on_epsilon_graphs():
    """The twin's filter drops records (19 % of these random rows'), and marks
    exactly the real steps it filtered: never the final one."""
    rng = np.random.default_rng(17)
    kept = total = 0
    for case in range(12):
        dec, lp, lens = _eps_rows(rng, case, 3.0)
        full = cpu_records(dec, lp, lens)
        rec = cpu_records(dec, lp, lens, filter=True)
        assert full.producer_a is None
        for b in range(3):
            assert rec.producer_a[b, lens[b]] == 0  # (the final step)
        assert np.array_equal(rec.cutoffs, full.cutoffs) and np.array_equal(rec.sizes, full.sizes)
        assert (rec.counts <= full.counts).all()
        kept += len(rec.records)
        total += len(full.records)
    assert kept < 0.9 * total, (kept, total)  # (19 % dropped here; the small TLG's sim rows: see the GPU test)


def test_producer_filter_guard_flags_rows_of_an_incomplete_closure():
    """The twin's filter with eps_iterations below the graph's longest epsilon chain (the GPU
    filters only where it is not: here forced): the closure's scores need not be the forward's,
    so a row is either the CPU lattice bit for bit or flagged for a redo (never a wrong
    lattice), and some rows are flagged; without `redo` the replay raises."""
    rng = np.random.default_rng(23)
    flagged = rows = 0
    for case in range(16):
        while True:
            g = random_eps_graph_any(rng, 80, 6, 3, eps_prob=1.0, cycles=False, chain=5)
            if g.max_epsilon_chain >= 3:
                break
        lp = random_log_probs(rng, 4, 50, 6, peaky=bool(case % 2))
        lens = np.array([50, 33, 12, 1], np.int32)
        opts = DecoderOptions(search_beam=10.0, output_beam=4.0, max_active_states=300, min_active_states=2,
                              eps_iterations=1)
        dec = Decoder(g, opts)
        want = dec.decode(lp, lens, lattice=True)
        rec = cpu_records(dec, lp, lens, filter=True)
        redo = np.zeros(4, np.uint8)
        lats, _ = lattices_from_records(dec._ref, g, opts, dec.eps_iterations, lens, rec, 2, redo=redo)
        for b in range(4):
            rows += 1
            if redo[b]:
                flagged += 1
                assert lats[b] is None
            else:
                want_lat = want[b].lattice if lats[b].recorded_arcs is not None else _without_recorded(want[b].lattice)
                assert_same_lattice(want_lat, lats[b], f"case {case} row {b}")
        if redo.any():
            with pytest.raises(RuntimeError, match="records filter broke its guard"):
                lattices_from_records(dec._ref, g, opts, dec.eps_iterations, lens, rec, 2)
    assert 0 < flagged < rows, (flagged, rows)


def test_producer_filter_with_a_negative_pad_is_seen():
    """A twin filter told to drop too much (a negative pad, as the GPU's ws.lat_filter[2] in its
    tests) gives lattices that differ from the CPU's: the comparisons above would see a filter
    that drops kept arcs (the guard checks the filter's assumptions, not its offset)."""
    rng = np.random.default_rng(29)
    differ = 0
    for case in range(6):
        g = _acyclic_eps(rng, 100, 8, 3)
        lp = random_log_probs(rng, 2, 50, 8, peaky=bool(case % 2))
        lens = np.array([50, 33], np.int32)
        opts = DecoderOptions(search_beam=10.0, output_beam=4.0, max_active_states=300, min_active_states=2)
        dec = Decoder(g, opts)
        want = dec.decode(lp, lens, lattice=True)
        rec = cpu_records(dec, lp, lens, filter=True, filter_pad=-6.0)
        redo = np.zeros(2, np.uint8)
        lats, _ = lattices_from_records(dec._ref, g, opts, dec.eps_iterations, lens, rec, 2, redo=redo)
        for b in range(2):
            differ += bool(redo[b]) or lats[b].num_arcs != want[b].lattice.num_arcs
    assert differ > 0


def _same_records(x: LatticeRecords, y: LatticeRecords, where: str):
    for name in ("records", "counts", "cutoffs", "sizes", "producer_a"):
        a, b = getattr(x, name), getattr(y, name)
        if a.dtype.kind == "f":
            a, b = a.view(np.int32), b.view(np.int32)
        assert a.shape == b.shape and np.array_equal(a, b), f"{where}: {name} differs"


def _trim_against_filter(dec, lp, lens, where, online=False, **kw) -> LatticeRecords:
    """The trim's twin's records, required to be the filter's alone, array for array."""
    got = cpu_records(dec, lp, lens, online, filter=True, trim=True, **kw)
    _same_records(cpu_records(dec, lp, lens, online, filter=True, **kw), got, where)
    return got


@pytest.mark.parametrize("seed", range(120))
def test_trim_twin_leaves_out_only_arcs_the_filter_drops(seed):
    """The CPU twin of the GPU's lattice trim on epsilon graphs (cpu_records(trim=True),
    reference_lattice.h RecordingObserver; common.cuh LatTrimLow): a real step leaves out every
    arc ending below nextafter(cutoff - c_cap), c_cap the filter's offset at the magnitude cap,
    before it knows whether the arc's destination survived. The GPU trims at (L - beam) - c_cap
    with L at most the step's max, a subset of these. The records are those of the filter
    alone, array for array, in the same order; its guard reruns a row without the trim."""
    rng, graph, lp, lens, opts = random_lattice_case(seed)
    online = seed % 7 == 3
    dec = Decoder(graph, opts, num_threads=2)
    got = _trim_against_filter(dec, lp, lens, f"seed {seed}", online)
    assert got.trim_stats is not None and got.trim_stats[0] == 0  # (these scores stay far below the cap)
    assert cpu_records(dec, lp[:1], lens[:1]).trim_stats is None


def test_trim_twin_leaves_out_arcs_into_surviving_states():
    """The trim's twin has something to leave out: arcs into states that survived (ones the
    filter drops) on random epsilon graphs at output_beam 2, 1.7 % of the unfiltered records
    here (5,667 of 336,186); so the equality above is not an empty claim. (The GPU's gain is
    the arcs into states that did not survive, most of a step's walk, which no record shows.)"""
    rng = np.random.default_rng(43)
    trimmed = recorded = 0
    reach = [0, 0]
    for case in range(8):
        dec, lp, lens = _eps_rows(rng, case, 2.0)
        got = _trim_against_filter(dec, lp, lens, f"case {case}")
        trimmed += int(got.trim_stats[1])
        recorded += len(cpu_records(dec, lp, lens).records)
        walked, kept, best, bound_low, bound_cut = (int(x) for x in got.trim_stats[2:7])
        assert 0 < best <= kept <= walked, got.trim_stats  # (the cutoff is above the low)
        assert kept <= bound_low <= walked and best <= bound_cut <= bound_low, got.trim_stats  # (a bound >= the end)
        label_low, label_cut = (int(x) for x in got.trim_stats[7:9])
        assert label_cut <= label_low <= walked, got.trim_stats  # (a token's lookups: at most its arcs)
        sb_low, sb_cut = (int(x) for x in got.trim_stats[9:11])
        assert kept <= sb_low <= bound_low and best <= sb_cut <= bound_cut, got.trim_stats  # (tighter, still >= the end)
        t3_low, t3_cut = (int(x) for x in got.trim_stats[11:13])
        assert sb_low <= t3_low <= bound_low and sb_cut <= t3_cut <= bound_cut, got.trim_stats  # (between the two)
        p_row, p_lb = (int(x) for x in got.trim_stats[13:15])
        assert 32 * p_row >= bound_low and p_row <= walked and p_lb <= p_row, got.trim_stats  # (rounds of 32)
        reach[0] += kept
        reach[1] += walked
    assert trimmed > 0.01 * recorded, (trimmed, recorded)
    assert reach[0] < reach[1], reach


def test_trim_twin_guard_reruns_rows_past_the_cap():
    """Log-probs scaled by 3,000 carry the scores past the trim's magnitude cap within a step:
    the guard fires (the step's offset exceeds the cap's), those rows are recorded again without
    the trim, and the records are the filter's alone, array for array."""
    rng = np.random.default_rng(47)
    guards = 0
    for case in range(4):
        g = _acyclic_eps(rng, 80, 8, 3)
        lp = (random_log_probs(rng, 3, 40, 8, peaky=bool(case % 2)) * np.float32(3000.0)).astype(np.float32)
        lens = np.array([40, 25, 3], np.int32)
        opts = DecoderOptions(search_beam=40000.0, output_beam=3000.0, max_active_states=300, min_active_states=2)
        dec = Decoder(g, opts)
        guards += int(_trim_against_filter(dec, lp, lens, f"case {case}").trim_stats[0])
    assert guards > 0


def test_trim_twin_is_off_where_the_cap_offset_is_negative():
    """A pad below -(output_beam + the rounding term) makes the cap's offset negative: a trim there
    could leave out admitted arcs, so there is none (the GPU's LatEpsTrimOn asks the same), and the
    records are the (too tight) filter's alone."""
    rng = np.random.default_rng(53)
    g = _acyclic_eps(rng, 100, 8, 3)
    lp = random_log_probs(rng, 2, 50, 8, peaky=True)
    lens = np.array([50, 33], np.int32)
    dec = Decoder(g, DecoderOptions(search_beam=10.0, output_beam=4.0, max_active_states=300, min_active_states=2))
    for pad, trims in ((-2.0, True), (-9.0, False)):  # (c_cap = 4 + 3.22 + pad: 6 epsilon layers)
        got = _trim_against_filter(dec, lp, lens, f"pad {pad}", filter_pad=pad)
        assert (got.trim_stats[2] > 0) == trims, (pad, got.trim_stats)


def test_trim_twin_needs_the_filter():
    rng, graph, lp, lens, opts = random_lattice_case(2)
    with pytest.raises(ValueError, match="records' filter"):
        cpu_records(Decoder(graph, opts), lp, lens, trim=True)


def test_records_hold_every_surviving_arc_and_no_other():
    """Records are the non-epsilon arcs the CPU lattice recorded before pruning: as many,
    and a superset of the lattice's."""
    rng = np.random.default_rng(5)
    total = 0
    for case in range(20):
        eps = case % 2 == 1
        g = _acyclic_eps(rng, 30, 6, 3) if eps else random_ctc_graph(rng, 30, 6, 3, 0.3)
        lp = random_log_probs(rng, 3, 40, 6, peaky=bool(case % 3))
        lens = np.array([40, 17, 0], np.int32)
        opts = DecoderOptions(search_beam=6.0, output_beam=1e6, max_active_states=30, min_active_states=2)
        dec = Decoder(g, opts)
        want = dec.decode(lp, lens, lattice=True)
        rec = cpu_records(dec, lp, lens)
        for b, sl in enumerate(rec.row_slices(lens)):
            lat = want[b].lattice
            keep = lat.token != -2
            src_state = lat.state_graph[lat.src[keep]]
            code = np.where(lat.graph_arc[keep] >= 0, g.image_arc_ids(np.maximum(lat.graph_arc[keep], 0)),
                            g.image_arc_ids(np.maximum(lat.redirect_arc[keep], 0)) | (1 << 30))
            ours = sorted(zip(lat.frame[keep].tolist(), src_state.tolist(), code.tolist(),
                              lat.acoustic[keep].view(np.int32).tolist()))
            steps = np.repeat(np.arange(lens[b] + 1), rec.counts[b, : lens[b] + 1])
            r = rec.records[sl]
            theirs = sorted(zip(steps.tolist(), r[:, 0].tolist(), r[:, 1].tolist(), r[:, 2].tolist()))
            # the lattice is the records less what the output beam pruned (dead ends always go)
            assert not set(ours) - set(theirs), f"case {case} row {b}"
            if not eps:  # recorded_arcs also counts epsilon arcs, which the replay makes itself
                assert len(theirs) == lat.recorded_arcs, f"case {case} row {b}"
            total += len(theirs)
    assert total > 1000


def test_inconsistent_records_are_errors_not_crashes(monkeypatch):
    rng = np.random.default_rng(6)
    g = random_ctc_graph(rng, 20, 5, 3, 0.3)
    lp = random_log_probs(rng, 2, 30, 5, peaky=True)
    lens = np.array([30, 12], np.int32)
    opts = DecoderOptions(search_beam=8.0, output_beam=3.0)
    dec = Decoder(g, opts)
    rec = cpu_records(dec, lp, lens)
    assert rec.records.shape[0] > 10

    def replay(r, skip=None):
        return lattices_from_records(dec._ref, g, opts, dec.eps_iterations, lens, r, 1, skip)

    bad_state = LatticeRecords(rec.records.copy(), rec.counts, rec.cutoffs, rec.sizes)
    bad_state.records[3, 0] = g.num_states + 7
    with pytest.raises(RuntimeError, match="row 0: lattice records: step"):
        replay(bad_state)
    bad_arc = LatticeRecords(rec.records.copy(), rec.counts, rec.cutoffs, rec.sizes)
    bad_arc.records[3, 1] = 10**8
    with pytest.raises(RuntimeError, match="names a state, arc or phase"):
        replay(bad_arc)
    # a step's records lost: its frontier comes out empty, not the recorded size
    n0 = int(rec.counts[0, 0])
    dropped = LatticeRecords(rec.records[n0:], rec.counts.copy(), rec.cutoffs, rec.sizes)
    dropped.counts[0, 0] = 0
    with pytest.raises(RuntimeError, match="row 0: lattice records: step 0: the replayed frontier has 0"):
        replay(dropped)
    wrong_size = LatticeRecords(rec.records, rec.counts, rec.cutoffs, rec.sizes.copy())
    wrong_size.sizes[1, 4] += 1
    with pytest.raises(RuntimeError, match="row 1: .*replayed frontier"):
        replay(wrong_size)
    short = LatticeRecords(rec.records[:-1], rec.counts, rec.cutoffs, rec.sizes)
    with pytest.raises(ValueError, match="counts add up"):
        replay(short)
    # a step's record twice, and an arc that leaves another state: both ways of ordering a step
    t = int(np.flatnonzero(rec.counts[0] >= 2)[0])
    first = int(rec.counts[0, :t].sum())
    twice = LatticeRecords(rec.records.copy(), rec.counts, rec.cutoffs, rec.sizes)
    twice.records[first + 1] = twice.records[first]
    s = int(rec.records[first, 0])
    other = LatticeRecords(rec.records.copy(), rec.counts, rec.cutoffs, rec.sizes)
    other.records[first, 1] = g.arrays.row_splits[s + 1] % g.arrays.num_arcs
    assert not g.arrays.row_splits[s] <= other.records[first, 1] < g.arrays.row_splits[s + 1]
    for sort in ("0", "1"):
        monkeypatch.setenv("CUWFST_REPLAY_SORT", sort)
        with pytest.raises(RuntimeError, match=f"row 0: lattice records: step {t}: an arc is recorded twice"):
            replay(twice)
        with pytest.raises(RuntimeError, match=f"row 0: lattice records: step {t}: a record's arc does not leave"):
            replay(other)
    # a skipped row's records are not read at all
    lats, scores = replay(wrong_size, skip=np.array([0, 1], np.uint8))
    assert lats[1] is None and scores[1] == -np.inf and lats[0] is not None


def test_a_decode_without_records():
    """A row of 0 frames without allow_partial records nothing (no arc, no redirect): the
    [0, 3] output array, which numpy 2 makes with the strides (0, 0), passes the bindings'
    dense check (tensor_checks.h), and zero records replay to the CPU's empty lattice. The
    H200 run at cdd8330 failed 13 random GPU lattice cases on exactly such a sub-batch."""
    rng, graph, lp, lens, opts = random_lattice_case(0)  # allow_partial off, lens [48, 1, 0, 25]
    assert not opts.allow_partial and lens[2] == 0
    dec = Decoder(graph, opts)
    sub_lp, sub_lens = np.ascontiguousarray(lp[2:3]), np.ascontiguousarray(lens[2:3])
    rec = cpu_records(dec, sub_lp, sub_lens)
    assert rec.records.shape == (0, 3) and rec.counts[0, 0] == 0
    want = dec.decode(sub_lp, sub_lens, lattice=True)[0]
    lats, scores = lattices_from_records(dec._ref, graph, opts, dec.eps_iterations, sub_lens, rec, 1)
    assert_same_lattice(want.lattice, lats[0], "row of 0 frames")
    assert want.lattice.num_arcs == 0 and scores[0] == -np.inf


def test_dense_check_of_host_outputs():
    """tensor_checks.h's CheckHostTensor through ref_records_take: an empty array is dense
    whatever its strides; a stride gap, a column-major array, a wrong shape or dtype is
    refused."""
    rng, graph, lp, lens, opts = random_lattice_case(0)
    dec = Decoder(graph, opts)
    ref, o = dec._ref, opts

    def take(out, row):
        sub_lp, sub_lens = np.ascontiguousarray(lp[row : row + 1]), np.ascontiguousarray(lens[row : row + 1])
        S = lp.shape[1] + 1
        counts, cutoffs = np.zeros((1, S), np.int32), np.zeros((1, S), np.float32)
        sizes, total = np.zeros((1, S), np.int32), np.zeros(1, np.int64)
        h = ref.mod.ref_decode_records(ref.handle, sub_lp, sub_lens, o.search_beam, o.output_beam,
                                       o.min_active_states, o.max_active_states, o.allow_partial,
                                       dec.eps_iterations, False, 1, counts, cutoffs, sizes, total, False, 0.0,
                                       np.zeros((1, S), np.float32))
        try:
            n = int(total[0])
            ref.mod.ref_records_take(h, out(n))
            return n
        finally:
            ref.mod.ref_records_free(h)

    assert np.zeros((0, 3), np.int32).strides == (0, 0) or np.__version__ < "2"
    assert take(lambda n: np.zeros((n, 3), np.int32), 2) == 0  # row 2: 0 frames, no records
    assert take(lambda n: np.zeros((n, 6), np.int32)[:, ::2], 2) == 0  # empty with a stride gap
    assert take(lambda n: np.zeros((n, 3), np.int32), 0) > 1
    for bad, match in ((lambda n: np.zeros((n, 6), np.int32)[:, ::2], "dense"),
                       (lambda n: np.zeros((n, 3), np.int32, order="F"), "dense"),
                       (lambda n: np.zeros((n + 1, 3), np.int32), "dim 0"),
                       (lambda n: np.zeros((n, 3), np.int64), "int32")):
        with pytest.raises((ValueError, TypeError), match=match):
            take(bad, 0)


# ---------------------------------------------------------------------- the backend's glue
class _CpuInstance:
    """Stands in for a GpuInstance: the CPU decode in the GPU's output layout (redirected
    arc last with its bit, overflow bits in meta[:, 2]) and the CPU's records. Rows whose
    length is in `flag_lengths` come back flagged with an overflow (bit 16, the frontier)."""

    def __init__(self, dec, max_lanes, flag_lengths=()):
        self.dec, self.max_lanes, self.flag_lengths = dec, max_lanes, set(flag_lengths)
        self.eps_iterations = dec.eps_iterations
        self.calls = 0
        self.perturb = False  # the 1-best score off by one ulp: the replay must notice
        self.trims = 0

    def trim(self, log=True):  # GpuInstance.trim: the rescue gives its growth back after each rescue,
        self.trims += 1       # the main its pools' growth (log=False) before one
        self.trim_logs = getattr(self, "trim_logs", []) + [log]
        return 0

    def decode_lattice(self, lp, lens, stream, online=False, eps_filter=False, output_beam=0.0, filter_pad=0.0):
        assert lp.shape[0] <= self.max_lanes
        assert output_beam == self.dec.options.output_beam or not eps_filter
        self.calls += 1
        self.filtered_calls = getattr(self, "filtered_calls", 0) + bool(eps_filter)
        d, o = self.dec, self.dec.options
        B, T, _ = lp.shape
        cap = d.path_capacity(T)
        out = [np.zeros((B, cap), np.int32), np.zeros(B, np.int32), np.zeros(B, np.float32),
               np.zeros((B, 4), np.int32), np.zeros((B, 2), np.int64)]
        d._ref.mod.ref_decode(d._ref.handle, np.ascontiguousarray(lp), lens, o.search_beam, o.output_beam,
                              o.min_active_states, o.max_active_states, o.allow_partial, d.eps_iterations, online,
                              1, *out)
        arcs, n, score, meta, stats = out
        for b in range(B):
            if meta[b, 1]:  # the GPU keeps the redirected arc at the path's end, with its bit
                arcs[b, n[b]] = meta[b, 2] | (1 << 30)
                n[b] += 1
            meta[b, 2] = 16 if int(lens[b]) in self.flag_lengths else 0
        if self.perturb:
            score[0] = np.nextafter(score[0], np.float32(0))
        return (arcs, n, score, meta, stats), cpu_records(d, np.ascontiguousarray(lp), lens, online,
                                                          filter=eps_filter, filter_pad=filter_pad)


def _stand_in_backend(graph, opts, cpu, flag_lengths=(), **attrs):
    """A GpuBackend whose main (3 lanes) and rescue (2 lanes) instances are _CpuInstance stand-ins
    for the device, the rescue after the sub-batches (EarlyRescue's thread is tested in
    test_gpu_host.py), and `attrs` set on it (lattice_overlap, lattice_eps_filter, ...)."""
    from cuwfst.decoder.gpu import GpuBackend

    class Backend(GpuBackend):
        def __init__(self):
            self.graph, self.options, self.check_inputs, self.batching = graph, opts, False, "padded"
            self.main = _CpuInstance(cpu, max_lanes=3, flag_lengths=flag_lengths)
            self._rescue = _CpuInstance(cpu, max_lanes=2)
            self._ref, self.rescue_lanes = None, 2
            self.early_rescue = "off"
            for k, v in attrs.items():
                setattr(self, k, v)
            self.lock = __import__("threading").Lock()
            self.stats = {k: 0 for k in ("arena_batches", "arena_rows", "rescue_batches", "rescued_rows",
                                         "unabsorbed_rows")}

        def to_device(self, x):
            return x

        def _stream(self):
            return 0

        def _take_rows(self, x, rows):
            return x[rows]

        def rescue_instance(self):
            return self._rescue

    return Backend()


@pytest.mark.parametrize("overlap", ["on", "off"])
def test_backend_epsilon_lattices_with_the_records_filter(overlap):
    """GpuBackend's lattice path on epsilon graphs with the records' filter (the CPU twin in the
    stand-in's records): with the closure complete (eps_iterations = the chain) the filtered
    replays are the CPU's lattices (recorded_arcs None); forced below the chain, the rows whose
    guard breaks are decoded again without the filter (after the sub-batches when the host work
    runs on the overlap's worker, at once otherwise) and every lattice is still the CPU's."""
    rng = np.random.default_rng(31)
    while True:
        g = random_eps_graph_any(rng, 60, 6, 3, eps_prob=1.0, cycles=False, chain=5)
        if g.max_epsilon_chain >= 3:
            break
    lp = random_log_probs(rng, 7, 40, 6, peaky=True)
    lens = np.array([40, 3, 34, 0, 31, 40, 12], np.int32)
    for eps_it, mode in ((None, "on"), (1, "force")):
        opts = DecoderOptions(search_beam=10.0, output_beam=4.0, max_active_states=200, min_active_states=3,
                              eps_iterations=eps_it)
        cpu = Decoder(g, opts, num_threads=2)
        want = cpu.decode(lp, lens, lattice=True)

        backend = _stand_in_backend(g, opts, cpu, lattice_overlap=overlap, lattice_eps_filter=mode)
        got = backend.decode(lp, lens, cpu, lattice=True)
        redone = backend.stats.get("eps_filter_redone_rows", 0)
        assert backend.main.filtered_calls == 3
        if mode == "on":
            assert redone == 0 and backend.main.calls == 3
        else:  # (the redone rows: one more call a sub-batch of them, unfiltered)
            assert redone > 0 and backend.main.calls > 3, (redone, backend.main.calls)
        for b, (w, h) in enumerate(zip(want, got)):
            assert (h.words, h.score, h.word_times) == (w.words, w.score, w.word_times), b
            want_lat = w.lattice if h.lattice.recorded_arcs is not None else _without_recorded(w.lattice)
            assert_same_lattice(want_lat, h.lattice, f"{mode} row {b}")
            assert h.word_confidences == w.word_confidences


def test_backend_lattice_path_with_a_cpu_stand_in():
    """GpuBackend's lattice path (sub-batches, records to lattices, the score check, the
    overflow skip and the rescue) with the CPU in place of the device: every row's lattice
    is the CPU decoder's."""
    rng = np.random.default_rng(12)
    g = random_ctc_graph(rng, 40, 7, 3, 0.3)
    lp = random_log_probs(rng, 7, 50, 7, peaky=True)
    lens = np.array([50, 3, 44, 0, 31, 50, 12], np.int32)
    opts = DecoderOptions(search_beam=10.0, output_beam=4.0, max_active_states=40, min_active_states=3)
    cpu = Decoder(g, opts, num_threads=2)
    want = cpu.decode(lp, lens, lattice=True)

    backend = _stand_in_backend(g, opts, cpu, flag_lengths=(44, 3))
    backend.lattice_trace_replay = []  # (the benchmarks' stamps: one entry a sub-batch, its host job's too)
    got = backend.decode(lp, lens, cpu, lattice=True)
    assert backend.main.calls == 3 and backend._rescue.calls == 1 and backend.stats["rescued_rows"] == 2
    trace, backend.lattice_trace_replay = backend.lattice_trace_replay, None
    assert [e["rows"] for e in trace] == [3, 3, 1, 2]  # (the rescue's two rows last)
    for e in trace:
        assert len(e["job"]) == 4 and list(e["job"]) == sorted(e["job"]) and e["job"][0] >= e["take"]
    # the rescue's growth goes back after it; the main's pools' before it, its winners log stays
    assert backend._rescue.trims == 1 and backend._rescue.trim_logs == [True]
    assert backend.main.trims == 1 and backend.main.trim_logs == [False]
    for b, (w, h) in enumerate(zip(want, got)):
        assert h.overflow == 0 and (h.words, h.score, h.word_times) == (w.words, w.score, w.word_times), b
        assert_same_lattice(w.lattice, h.lattice, f"row {b}")
        assert h.word_confidences == w.word_confidences
    # a row the rescue cannot absorb keeps its bits and gets no lattice
    backend._rescue.flag_lengths = {3}
    got = backend.decode(lp, lens, cpu, lattice=True)
    assert got[1].overflow == 16 and got[1].lattice is None and got[2].lattice is not None
    backend.main.perturb = True
    with pytest.raises(RuntimeError, match="the replay of its records ends on score"):
        backend.decode(lp, lens, cpu, lattice=True)
