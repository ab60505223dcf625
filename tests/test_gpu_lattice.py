"""GPU lattices: `Decoder(..., device="cuda").decode(lattice=True)` gives every row the CPU
decoder's lattice, field for field and bit for bit (states, arcs, frames, graph arcs,
float32 scores, words, levels), and so the same totals, n-best lists, word times and
confidences; k2's own lattices (the goldens) on the GPU; the records the GPU makes equal the
ones the CPU search makes (the diagnosis when a lattice differs); the lattice stage next to
1-best decodes, fp16 input, record growth, the overflow rescue, and every allocation of a
lattice decode failing cleanly.

Skipped where there is no CUDA GPU. The host half (records -> lattice) is proven on the CPU
in tests/test_lattice_records.py.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import re

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions
from cuwfst.decoder.lattice_records import cpu_records
from cuwfst.decoder.rescue import batches
from helpers import (POOLED_LANES, assert_outgrows_first_pieces, assert_pools_grew, load_cases,
                     outgrowing_pooled_batch, path_score_f32, random_ctc_graph, random_log_probs)
from lattice_helpers import compare_lattices_to_k2, lattice_case_inputs
from test_lattice_records import assert_same_lattice, random_lattice_case

pytestmark = pytest.mark.gpu

TOTALS = {"rows": 0, "arcs": 0, "eps_arcs": 0, "redirected": 0, "ties": 0, "uncounted": 0}


def assert_same_gpu_lattice(cpu_lat, gpu_lat, where: str) -> None:
    """assert_same_lattice, where a GPU lattice whose recorded arcs the lattice trim did not
    count (None; GpuBackend.lattice_trim_on, checked by the lattice-trim tests below) is held
    to every other field."""
    if gpu_lat is not None and gpu_lat.recorded_arcs is None and cpu_lat is not None:
        TOTALS["uncounted"] += 1
        gpu_lat = dataclasses.replace(gpu_lat, recorded_arcs=cpu_lat.recorded_arcs)
    assert_same_lattice(cpu_lat, gpu_lat, where)


def compare(cpu_h, gpu_h, where: str, nbest: int = 0) -> None:
    """Every row: no overflow, the CPU's lattice exactly, and (unless the two picked
    different paths of the same float32 score) the same words, times and confidences."""
    assert len(cpu_h) == len(gpu_h), where
    for b, (c, g) in enumerate(zip(cpu_h, gpu_h)):
        w = f"{where} row {b}"
        assert g.overflow == 0, f"{w}: overflow {g.overflow}"
        assert np.float32(c.score).view(np.int32) == np.float32(g.score).view(np.int32), f"{w}: 1-best score"
        assert g.lattice is not None, w
        assert_same_gpu_lattice(c.lattice, g.lattice, w)
        TOTALS["rows"] += 1
        TOTALS["arcs"] += g.lattice.num_arcs
        TOTALS["eps_arcs"] += int((g.lattice.token == -2).sum())
        TOTALS["redirected"] += int((g.lattice.redirect_arc >= 0).sum())
        if (c.arcs, c.redirect_arc) != (g.arcs, g.redirect_arc):
            TOTALS["ties"] += 1  # the score is the same bit for bit (above): an exact tie
            continue
        assert (c.words, c.word_times, c.word_confidences) == (g.words, g.word_times, g.word_confidences), w
        if nbest:  # (the exact A* runs in the reference module: milliseconds on the largest lattices)
            assert c.lattice.nbest(nbest) == g.lattice.nbest(nbest), w


def _gpu(graph, opts, rng=None, **kw):
    if rng is not None:
        kw.setdefault("max_lanes", int(rng.choice([1, 3, 32])))
    return Decoder(graph, opts, device="cuda", **kw)


@pytest.mark.parametrize("seed", range(300))
def test_random_lattices_gpu_equals_cpu(seed):
    """Random graphs (a third with acyclic epsilon arcs, some with fewer closure passes than
    their longest chain), allow_partial on and off, online beams, output beams from 0.3 to
    1000, batches split over 1, 3 or 32 lanes, both walkers."""
    rng, graph, lp, lens, opts = random_lattice_case(seed)
    online = seed % 7 == 3
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True, online=online)
    gpu = _gpu(graph, opts, rng, walker="thread" if seed % 4 == 1 else "warp").decode(lp, lens, lattice=True,
                                                                                       online=online)
    compare(cpu, gpu, f"seed {seed}", nbest=3 if seed % 10 == 0 else 0)


def assert_same_records(want, got, lens, where: str) -> None:
    """Per row and step the same set of {source state, arc, acoustic bits}, the same cutoff
    bits and frontier sizes (the order within a step is the device's)."""
    for b, (ws, gs) in enumerate(zip(want.row_slices(lens), got.row_slices(lens))):
        n = int(lens[b]) + 1
        w = f"{where} row {b}"
        assert np.array_equal(want.counts[b, :n], got.counts[b, :n]), f"{w}: records per step"
        assert np.array_equal(want.cutoffs[b, :n].view(np.int32), got.cutoffs[b, :n].view(np.int32)), w
        assert np.array_equal(want.sizes[b, :n], got.sizes[b, :n]), f"{w}: frontier sizes"
        step = np.repeat(np.arange(n), want.counts[b, :n])
        for r, name in ((want.records[ws], "cpu"), (got.records[gs], "gpu")):
            assert r.shape[0] == step.size, (w, name)
        a = want.records[ws][np.lexsort((*want.records[ws].T[::-1], step))]
        g = got.records[gs][np.lexsort((*got.records[gs].T[::-1], step))]
        assert np.array_equal(a, g), f"{w}: the records differ"


def assert_same_stats(cpu_h, gpu_h, where: str) -> None:
    """The search statistics of a lattice decode: LatStepEndKernel counts closure_added in
    place of ClearClaimsKernel (after a real step's closure in either closure kind), which
    neither the records nor the lattices see."""
    for b, (c, g) in enumerate(zip(cpu_h, gpu_h)):
        assert (c.max_frontier, c.frontier_total, c.closure_added) == \
               (g.max_frontier, g.frontier_total, g.closure_added), f"{where} row {b}: search statistics"


@pytest.mark.parametrize("seed", range(40))
def test_gpu_records_are_the_cpu_records(seed):
    """The records themselves (the lattice's input): per row and step the same set of
    {source state, arc, acoustic bits}, the same cutoff bits and frontier sizes. When a
    lattice differs, this says whether the device or the host half is at fault."""
    rng, graph, lp, lens, opts = random_lattice_case(seed)
    cpu_dec = Decoder(graph, opts)
    want = cpu_records(cpu_dec, lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=len(lens))
    be = dec._gpu
    res, got = be.main.decode_lattice(be.to_device(lp), lens, be._stream())
    assert (res[3][:, 2] == 0).all(), "overflow"
    assert_same_records(want, got, lens, f"seed {seed}")


# ------------------------------------------------------------ every kernel variant
# The lattice stage rides on whichever kernels a decoder runs (docs/design.md, "Kernel
# variants" and "Lattices on the GPU"): ScanSplitKernel must keep the step's phase, size and
# hint flag as ScanKernel does, the list closure must leave the step's slot space and claims
# for LatPersistKernel, and finalize_split sets LatStepEndKernel's grid. Each variant must
# record exactly the CPU's arcs.
from test_gpu_variants import NEW_SCAN, VARIANTS, expect_variant  # noqa: E402


@pytest.fixture(params=VARIANTS)
def variant(request, monkeypatch):
    monkeypatch.setenv("CUWFST_KERNELS", request.param)
    return request.param


@pytest.mark.parametrize("seed", range(12))
def test_variant_records_are_the_cpu_records(variant, seed):
    """Random cases (seeds 2, 5, 8, 11 on epsilon graphs) under each kernel variant: the
    records equal the CPU's, and so do the lattices."""
    rng, graph, lp, lens, opts = random_lattice_case(seed)
    want = cpu_records(Decoder(graph, opts), lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=len(lens), walker="thread" if seed % 4 == 1 else "warp")
    expect_variant(dec, variant, graph.num_epsilon_arcs > 0)
    be = dec._gpu
    res, got = be.main.decode_lattice(be.to_device(lp), lens, be._stream())
    assert (res[3][:, 2] == 0).all(), "overflow"
    assert_same_records(want, got, lens, f"{variant} seed {seed}")
    cpu, gpu = Decoder(graph, opts).decode(lp, lens, lattice=True), dec.decode(lp, lens, lattice=True)
    compare(cpu, gpu, f"{variant} seed {seed}")
    assert_same_stats(cpu, gpu, f"{variant} seed {seed}")


@pytest.mark.parametrize("eps", [True, False], ids=["eps", "noeps"])
def test_variant_lattices_of_large_frontiers(variant, eps):
    """Frontiers of several 2,048-token scan rounds (the split scan's chunks and look-back
    run, with 3 CTAs a lane where the variant splits) and many claims per lane (the wider
    Finalize and LatStepEnd grids), an epsilon DAG's exact closure: the CPU's records
    and lattices."""
    from helpers import random_eps_graph

    rng = np.random.default_rng(6100 + eps)
    V = 40
    graph = random_eps_graph(rng, 9000, V, 6, 1.0) if eps else random_ctc_graph(rng, 12000, V, 8, 0.3)
    lp = random_log_probs(rng, 3, 10, V, peaky=False)
    lens = np.array([10, 7, 1], np.int32)
    opts = DecoderOptions(search_beam=1000.0, output_beam=2.0, min_active_states=1, max_active_states=400)
    cpu_dec = Decoder(graph, opts)
    cpu = cpu_dec.decode(lp, lens, lattice=True)
    assert max(h.max_frontier for h in cpu) > 3 * 2048, "the frontier should span several scan rounds"
    kw = {"scan_split": 3} if variant in NEW_SCAN else {}
    dec = Decoder(graph, opts, device="cuda", max_lanes=4, **kw)
    expect_variant(dec, variant, eps)
    be = dec._gpu
    res, got = be.main.decode_lattice(be.to_device(lp), lens, be._stream())
    assert (res[3][:, 2] == 0).all(), "overflow"
    assert_same_records(cpu_records(cpu_dec, lp, lens), got, lens, f"{variant} large eps={eps}")
    gpu = dec.decode(lp, lens, lattice=True)
    compare(cpu, gpu, f"{variant} large eps={eps}")
    assert_same_stats(cpu, gpu, f"{variant} large eps={eps}")


# ------------------------------------------------------------ the pooled lane layout
# Offline batches on epsilon-free graphs take the pooled layout under memory="pooled" (or
# "lazy" with CUWFST_LANE_POOL=on, as here: the automatic choice keeps small decoders
# static; types.cuh): the
# lattice stage reads the frontier, the step's slot space, the hash and the claims through
# the lanes' per-step regions, and a batch that outgrows the pools pauses before a step and
# resumes from it (PooledUndoStep also idles step_phase, so no cutoff or size is written for
# the paused step; the records of the steps before the pause are kept, not zeroed again).
@pytest.mark.parametrize("seed", [s for s in range(24) if s % 3 != 2])  # the epsilon-free cases
def test_pooled_records_are_the_cpu_records(seed, monkeypatch):
    monkeypatch.setenv("CUWFST_LANE_POOL", "on")
    rng, graph, lp, lens, opts = random_lattice_case(seed)
    if graph.num_epsilon_arcs > 0:
        pytest.skip("epsilon graphs keep the static layout")
    want = cpu_records(Decoder(graph, opts), lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=len(lens), memory="lazy",
                  walker="thread" if seed % 4 == 1 else "warp")
    be = dec._gpu
    assert be.main.mem_stats()["pooled"] == 1
    res, got = be.main.decode_lattice(be.to_device(lp), lens, be._stream())
    assert (res[3][:, 2] == 0).all(), "overflow"
    assert_same_records(want, got, lens, f"pooled seed {seed}")
    cpu, gpu = Decoder(graph, opts).decode(lp, lens, lattice=True), dec.decode(lp, lens, lattice=True)
    compare(cpu, gpu, f"pooled seed {seed}")
    assert_same_stats(cpu, gpu, f"pooled seed {seed}")


def test_variant_pooled_lattices_pause_and_resume(variant, monkeypatch):
    """A first lattice batch that outgrows the pools' first pieces (helpers.outgrowing_pooled_batch:
    twelve rows of ~12,000-token frontiers at once), so it pauses and resumes mid-decode, under
    each kernel variant: the CPU's records (every step once, the steps before the pause
    included), lattices and search statistics; then again on the grown pools (no pause)."""
    monkeypatch.setenv("CUWFST_LANE_POOL", "on")
    lens = [12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 1, 0]
    graph, lp, lens, opts = outgrowing_pooled_batch(6200, 12, lens, output_beam=2.0)
    cpu_dec = Decoder(graph, opts)
    cpu = cpu_dec.decode(lp, lens, lattice=True)
    kw = {"scan_split": 3} if variant in NEW_SCAN else {}
    dec = Decoder(graph, opts, device="cuda", max_lanes=POOLED_LANES, memory="lazy", **kw)
    expect_variant(dec, variant, False)
    need = assert_outgrows_first_pieces(dec, graph, opts, lp, lens)
    be = dec._gpu
    res, got = be.main.decode_lattice(be.to_device(lp), lens, be._stream())
    assert (res[3][:, 2] == 0).all(), "overflow"
    assert_same_records(cpu_records(cpu_dec, lp, lens), got, lens, f"{variant} pooled pause")
    lanes = assert_pools_grew(dec, need)  # the batch paused at least once
    gpu = dec.decode(lp, lens, lattice=True)
    assert dec.memory_stats()["pools"]["lanes"]["grows"] == lanes["grows"]  # grown: one run
    compare(cpu, gpu, f"{variant} pooled")
    assert_same_stats(cpu, gpu, f"{variant} pooled")
    assert dec.memory_stats()["instances"]["main"]["lattice_bytes"] > 0


def test_k2_lattice_goldens_on_gpu():
    """k2's own lattices (tests/test_k2_lattice.py's goldens) on the GPU: the (frame, graph
    arc) sets, state counts, tot scores, best paths and arc score bits, and every lattice
    equal to the CPU decoder's."""
    cases = load_cases("k2_lattice_goldens.json.gz")
    bad, rows, arcs = [], 0, 0
    for case in cases:
        graph, lp, lens, opts = lattice_case_inputs(case)
        gpu = Decoder(graph, opts, device="cuda", max_lanes=4).decode(lp, lens, lattice=True)
        r = compare_lattices_to_k2(case, hyps=gpu)
        bad += r["bad"]
        rows += r["rows"]
        arcs += r["arcs"]
        cpu = Decoder(graph, opts).decode(lp, lens, lattice=True)
        for b, (c, g) in enumerate(zip(cpu, gpu)):
            assert_same_gpu_lattice(c.lattice, g.lattice, f"{case['name']} row {b}")
    print(f"\nk2 1.23.4 lattice goldens on the GPU: {len(cases)} cases, {rows} rows, {arcs} arcs: "
          f"{len(bad)} mismatches")
    assert rows >= 500 and not bad, "\n".join(bad[:20])


def test_lattice_and_one_best_decodes_interleave():
    """The lattice stage is a flag of one pipeline: 1-best decodes before and after a lattice
    decode on the same decoder are unchanged (graph cache, kept claims, hash positions), and
    the lattice decode is repeatable."""
    rng = np.random.default_rng(21)
    for eps in (False, True):
        _, graph, lp, lens, opts = random_lattice_case(2 if eps else 0)
        graph = random_ctc_graph(rng, 200, 9, 4, 0.2) if not eps else graph
        lp = random_log_probs(rng, 4, 60, graph.vocab_size, peaky=True)
        lens = np.array([60, 33, 0, 59], np.int32)
        dec = Decoder(graph, opts, device="cuda", max_lanes=4)
        first = dec.decode(lp, lens)
        lat1 = dec.decode(lp, lens, lattice=True)
        again = dec.decode(lp, lens)
        lat2 = dec.decode(lp, lens, lattice=True)
        for b in range(4):
            assert np.float32(first[b].score) == np.float32(again[b].score), (eps, b)
            if first[b].arcs != again[b].arcs:  # an exact-score tie may resolve either way between runs
                assert path_score_f32(graph, lp[b], again[b].arcs, again[b].redirect_arc) == \
                    np.float32(first[b].score), (eps, b)
            assert first[b].lattice is None and again[b].lattice is None
            assert_same_lattice(lat1[b].lattice, lat2[b].lattice, f"eps {eps} row {b}")
            assert np.float32(lat1[b].score) == np.float32(first[b].score)
        compare(Decoder(graph, opts).decode(lp, lens, lattice=True), lat1, f"interleave eps={eps}")


def test_lattice_records_grow_and_rerun(monkeypatch):
    """Lattice records that start at 64 entries grow and the batch decodes again (the in-step
    stage's: the records after the search never count recorded arcs; their own growth test is
    test_records_after_the_search_large_frontiers_and_growth)."""
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "step")
    rng = np.random.default_rng(22)
    graph = random_ctc_graph(rng, 400, 12, 5, 0.2)
    lp = random_log_probs(rng, 6, 80, 12, peaky=False)
    opts = DecoderOptions(search_beam=12.0, output_beam=6.0, max_active_states=300)
    dec = Decoder(graph, opts, device="cuda", max_lanes=8, lattice_entries=64)
    dec._gpu.lattice_trim = "off"  # (so the rows count their recorded arcs)
    got = dec.decode(lp, lattice=True)
    assert sum(h.lattice.recorded_arcs for h in got) > 10_000
    compare(Decoder(graph, opts).decode(lp, lattice=True), got, "growth")
    assert dec._gpu.main.mem_stats()["committed"] > 0


def test_lattice_without_cuda_graphs_fp16_and_more_rows_than_lanes():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(23)
    graph = random_ctc_graph(rng, 300, 20, 5, 0.2)
    lp = random_log_probs(rng, 9, 40, 20, peaky=True)
    lens = rng.integers(0, 41, 9).astype(np.int32)
    opts = DecoderOptions(search_beam=10.0, output_beam=5.0)
    cpu = Decoder(graph, opts).decode(lp, lens, lattice=True)
    compare(cpu, Decoder(graph, opts, device="cuda", use_cuda_graphs=False, max_lanes=4).decode(
        lp, lens, lattice=True), "plain launches")
    compare(cpu, Decoder(graph, opts, device="cuda", max_lanes=2, batching="continuous").decode(
        lp, lens, lattice=True), "continuous batching asked")
    half = torch.from_numpy(lp).half().cuda()
    cpu16 = Decoder(graph, opts).decode(half.float().cpu().numpy(), lens, lattice=True)
    compare(cpu16, Decoder(graph, opts, device="cuda").decode(half, lens, lattice=True), "fp16")


def test_overflowed_rows_get_their_lattice_from_the_rescue():
    """A frontier capacity far too small overflows; the rescue re-decodes the rows with the
    lattice stage, and their lattices are the CPU's."""
    rng = np.random.default_rng(5)
    graph = random_ctc_graph(rng, 3000, 30, 8, 0.1)
    lp = random_log_probs(rng, 3, 40, 30, peaky=False)
    opts = DecoderOptions(search_beam=1000.0, output_beam=3.0, min_active_states=1, max_active_states=100)
    cpu = Decoder(graph, opts).decode(lp, lattice=True)
    assert max(h.max_frontier for h in cpu) > 1024  # the main instance holds 1024 tokens
    dec = Decoder(graph, opts, device="cuda", main_q_factor=1)
    gpu = dec.decode(lp, lattice=True)
    assert dec._gpu.stats["rescued_rows"] == 3
    compare(cpu, gpu, "rescued")


@pytest.mark.parametrize("finish", ["worker", "thread"])
def test_rows_rescued_beside_the_next_sub_batches(finish, monkeypatch):
    """Nine rows in sub-batches of 2 lanes at beam 30, max_active 100: most rows' frontiers pass
    the main instance's 1,024 tokens, the others stay below. With CUWFST_EARLY_RESCUE=on
    each sub-batch's flagged rows are rescued on the rescue instance on a thread of its own
    while the next sub-batches decode (decoder/gpu.py EarlyRescue); off, after the sub-batches.
    The CPU's lattices either way (and on a second call, the rescue instance reused), the same
    rescue counts, no row left flagged."""
    from helpers import early_rescue_case

    graph, lp, lens = early_rescue_case()
    opts = DecoderOptions(search_beam=30.0, output_beam=3.0, min_active_states=1, max_active_states=100)
    cpu = Decoder(graph, opts).decode(lp, lens, lattice=True)
    big = sum(1 for h in cpu if h.max_frontier > 1024)  # (CPU: 5 of the 9 rows)
    assert 2 <= big < len(cpu)
    monkeypatch.setenv("CUWFST_LATTICE_FINISH", finish)
    stats = {}
    for early in ("off", "on"):
        monkeypatch.setenv("CUWFST_EARLY_RESCUE", early)
        dec = Decoder(graph, opts, device="cuda", main_q_factor=1, max_lanes=2)
        assert dec._gpu.early_rescue_on() == (early == "on")
        for call in ("first", "second"):  # (the second: the rescue instance reused)
            gpu = dec.decode(lp, lens, lattice=True)
            assert all(h.overflow == 0 for h in gpu)
            compare(cpu, gpu, f"early rescue {early}, finish {finish}, {call} call")
        # (the rows' counts; rescue_batches differ: early, a sub-batch's flagged rows are a batch)
        stats[early] = {k: dec._gpu.stats[k] for k in ("flagged_rows", "flagged_bits", "rescued_rows", "unabsorbed_rows")}
    # flagged_bits ORs the flagged rows' bits: the frontier past main_q (16) on every side; whether a
    # row's step also fills the distinct-state claims list (8) first varies from run to run (the
    # H100, 5bce007: 16 on one side and 24 on the other, either way round)
    for s in stats.values():
        assert s.pop("flagged_bits") & ~8 == 16, stats
    assert stats["on"] == stats["off"] and stats["on"]["rescued_rows"] >= 2 and stats["on"]["unabsorbed_rows"] == 0, stats


def test_cyclic_epsilon_graph_is_refused_on_gpu():
    from helpers import random_eps_graph_any

    rng = np.random.default_rng(9)
    for _ in range(50):
        g = random_eps_graph_any(rng, 6, 3, 2, eps_prob=0.9, cycles=True)
        if g.max_epsilon_chain < 0:
            break
    with pytest.raises(ValueError, match="epsilon arcs form a cycle"):
        Decoder(g, device="cuda").decode(random_log_probs(rng, 1, 4, 3, peaky=False), lattice=True)


def test_every_lattice_allocation_fails_cleanly():
    """Every CUDA acquisition of a lattice decode (its buffers, the records' growth, the
    pinned readback, graph instantiation) failing in turn: a MemoryError that names what
    and what to lower, nothing orphaned, and the same decoder then gives the CPU's lattices."""
    from test_gpu_faults import OPTS, _mem, _mod, _released, _small, _torch_still_works

    rng = np.random.default_rng(14)
    graph = random_ctc_graph(rng, 300, 12, 5, 0.2)
    lp = random_log_probs(rng, 4, 60, 12, peaky=True)
    lens = np.array([60, 41, 1, 57], np.int32)
    cpu = Decoder(graph, OPTS).decode(lp, lens, lattice=True)
    mod = _mod()
    Decoder(graph, OPTS, device="cuda", max_lanes=4).decode(lp, lens, lattice=True)  # load every kernel
    gc.collect()

    def fresh():
        return _small(Decoder(graph, OPTS, device="cuda", max_lanes=4), graph, max_frames=16, lattice_entries=64)

    import weakref

    before = _mem(mod)
    dec = fresh()
    mod.gpu_fault_injection(1 << 40)
    compare(cpu, dec.decode(lp, lens, lattice=True), "counting run")
    sites = mod.gpu_fault_injection(0)
    refs = [weakref.ref(dec._gpu.main)]
    del dec
    _released(mod, before, refs, "counting run")
    raised = 0
    for i in range(1, sites + 1):
        dec = fresh()
        live0, st0 = _mem(mod), dec._gpu.main.mem_stats()
        mod.gpu_fault_injection(i)
        err = got = None
        try:
            got = dec.decode(lp, lens, lattice=True)
        except MemoryError as e:
            err = str(e)
        finally:
            mod.gpu_fault_injection(0)
        live1, st1 = _mem(mod), dec._gpu.main.mem_stats()
        assert live1["device"] - live0["device"] == st1["committed"] - st0["committed"], f"site {i}: {err}"
        assert live1["pinned"] - live0["pinned"] == st1["pinned"] - st0["pinned"], f"site {i}: {err}"
        if err is not None:
            raised += 1
            assert re.search(r"cannot (allocate|grow|create)", err), f"site {i}: {err}"
            assert re.search(r"stays usable", err), f"site {i}: {err}"
            assert re.search(r"max_lanes", err), f"site {i}: no option named in {err}"
        else:  # a graph executable that cannot be instantiated: plain launches instead
            compare(cpu, got, f"site {i} (fell back)")
        _torch_still_works()
        compare(cpu, dec.decode(lp, lens, lattice=True), f"site {i}: the decoder after the failure")
        refs.append(weakref.ref(dec._gpu.main))
        del dec
        _released(mod, before, refs, f"site {i}: the decoder did not give everything back")
    # path growth, the lattice buffers (cursor, records, hash positions, 3 step arrays),
    # record growth, the pinned readback
    assert sites >= 8 and raised >= 7, (sites, raised)


# ---------------------------------------------------------------- GPU pruning (gpu_lattice_prune.cu)
# Epsilon-free graphs prune on the GPU by default ("gpu"); "replay" is the host replay of
# every record. Both must give the CPU lattice, array for array.

def _both_modes(graph, opts, lp, lens, online=False, **kw):
    dec = Decoder(graph, opts, device="cuda", **kw)
    out = {}
    for mode in ("gpu", "replay"):
        dec._gpu.lattice_prune = mode
        out[mode] = dec.decode(lp, lens, lattice=True, online=online)
    return dec, out


@pytest.mark.parametrize("seed", [s for s in range(180) if s % 3 != 2])  # random_lattice_case's epsilon-free ones
def test_gpu_pruning_equals_replay_and_cpu(seed):
    rng, graph, lp, lens, opts = random_lattice_case(seed)
    online = seed % 7 == 3
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True, online=online)
    dec, out = _both_modes(graph, opts, lp, lens, online, max_lanes=int(rng.choice([1, 3, 32])),
                           walker="thread" if seed % 4 == 1 else "warp")
    assert dec._gpu.lattice_prune_on_gpu(dec._gpu.main) is False  # the attribute says replay now
    compare(cpu, out["gpu"], f"gpu pruning seed {seed}")
    compare(cpu, out["replay"], f"replay seed {seed}")


@pytest.mark.parametrize("seed", range(40))
def test_device_numbering_equals_host_numbering(seed, monkeypatch):
    """The kept states and arcs numbered on the device (gpu_lattice_prune.cu NumberOnDevice,
    the default) and by lattice_number.h on the host (CUWFST_LATTICE_NUMBER=host): the same
    arrays, bit for bit, and the CPU's lattices; rows of 0 frames, single lanes and more rows
    than lanes among them."""
    rng, graph, lp, lens, opts = random_lattice_case(3 * (seed // 2) + seed % 2)  # (its epsilon-free cases)
    dec = Decoder(graph, opts, device="cuda", max_lanes=int(rng.choice([1, 3, 32])))
    got = dec.decode(lp, lens, lattice=True)
    monkeypatch.setenv("CUWFST_LATTICE_NUMBER", "host")
    host = dec.decode(lp, lens, lattice=True)
    monkeypatch.delenv("CUWFST_LATTICE_NUMBER")
    for b, (x, y) in enumerate(zip(got, host)):
        assert (x.lattice is None) == (y.lattice is None), f"seed {seed} row {b}"
        if x.lattice is not None:
            assert_same_lattice(y.lattice, x.lattice, f"device vs host numbering, seed {seed} row {b}")
    compare(Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True), got, f"device numbering seed {seed}")


@pytest.mark.parametrize("seed", range(24))
def test_gpu_pruning_long_inputs_many_windows(seed):
    """Rows of 0 to 400 frames in one batch (each lane its own window schedule: the last
    window ends at its own T = n + 1, k2's windows of 30 shifted by 20 up to 20 of them),
    lengths around the window edges (19, 20, 21, 29, 30, 31, 49, 50, 51), allow_partial on and
    off, output beams from 0.5 to 1000."""
    rng = np.random.default_rng(77000 + seed)
    V = int(rng.integers(3, 16))
    graph = random_ctc_graph(rng, int(rng.choice([30, 200, 800])), V, int(rng.integers(2, 6)),
                             float(rng.uniform(0.02, 0.4)))
    edges = [0, 1, 19, 20, 21, 29, 30, 31, 49, 50, 51, 69, 70, 71]
    B = int(rng.integers(2, 9))
    T = int(rng.choice([60, 150, 400]))
    lens = np.array([T] + [int(rng.choice(edges + [int(rng.integers(0, T + 1))])) for _ in range(B - 1)], np.int32)
    lens = np.minimum(lens, T)
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    opts = DecoderOptions(search_beam=float(rng.choice([6.0, 12.0, 20.0])), output_beam=float(rng.choice([0.5, 3.0, 8.0, 1000.0])),
                          max_active_states=int(rng.choice([50, 500, 10000])), allow_partial=bool(seed % 3 != 0))
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    _, out = _both_modes(graph, opts, lp, lens, max_lanes=int(rng.choice([B, 3, 32])))
    compare(cpu, out["gpu"], f"long seed {seed}")
    compare(cpu, out["replay"], f"long replay seed {seed}")


def test_gpu_pruning_env_var_selects_replay(monkeypatch):
    rng = np.random.default_rng(5)
    graph = random_ctc_graph(rng, 100, 8, 4, 0.2)
    lp = random_log_probs(rng, 3, 50, 8, peaky=True)
    opts = DecoderOptions(search_beam=10.0, output_beam=4.0)
    dec = Decoder(graph, opts, device="cuda")
    monkeypatch.setenv("CUWFST_LATTICE_PRUNE", "replay")
    assert not dec._gpu.lattice_prune_on_gpu(dec._gpu.main)
    a = dec.decode(lp, lattice=True)
    monkeypatch.setenv("CUWFST_LATTICE_PRUNE", "gpu")
    assert dec._gpu.lattice_prune_on_gpu(dec._gpu.main)
    b = dec.decode(lp, lattice=True)
    assert set(dec._gpu.main.last_prune_ms) == {"device", "readback", "host", "native", "rows"}
    compare(a, b, "env var")


def test_stream_priority_switch(monkeypatch):
    """CUWFST_STREAM_PRIORITY=high (the decoder's own streams at the device's greatest priority,
    issue 10's experiment with a lattice pass beside the search) or search (the search's stream
    greatest, the pruning's least) changes no result; a value it does not know is refused when the
    decoder is made."""
    rng = np.random.default_rng(11)
    graph = random_ctc_graph(rng, 100, 8, 4, 0.2)
    lp = random_log_probs(rng, 3, 50, 8, peaky=True)
    opts = DecoderOptions(search_beam=10.0, output_beam=4.0)
    cpu = Decoder(graph, opts).decode(lp, lattice=True)
    monkeypatch.setenv("CUWFST_STREAM_PRIORITY", "soon")
    with pytest.raises(ValueError, match="CUWFST_STREAM_PRIORITY"):
        Decoder(graph, opts, device="cuda")
    for prio in ("high", "search", "default"):
        monkeypatch.setenv("CUWFST_STREAM_PRIORITY", prio)
        dec = Decoder(graph, opts, device="cuda")
        compare(cpu, dec.decode(lp, lattice=True), f"priority {prio}")
        one = dec.decode(lp)
        assert [h.words for h in one] == [h.words for h in cpu], prio


def _after_stats(dec):
    return dec._gpu.main.mem_stats()["lattice_after_decodes"]


@pytest.mark.parametrize("seed", range(40))
def test_records_after_the_search(seed, monkeypatch):
    """CUWFST_LATTICE_RECORDS=after (csrc/include/cuwfst/lattice_after.cuh, issue 10): the search
    runs as the 1-best's and one pass after it finds every step's records from the logged
    frontiers. Random epsilon-free graphs and batches (rows of 0 frames up, allow_partial on and
    off, so final and redirect steps; output beams 0.5 to 1000; fp32 and fp16 rows; lane counts
    above the batch): the CPU's lattices, words and scores, each decode counted as the pass's."""
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    graph, lp, lens, opts, lanes, cpu = _random_after_case(seed)
    dec = _gpu(graph, opts, max_lanes=lanes)
    compare(cpu, dec.decode(lp, lens, lattice=True), f"after seed {seed}")
    assert _after_stats(dec) == 1
    dec.decode(lp, lens)  # (a 1-best decode between: the switch is a lattice decode's alone)
    compare(cpu, dec.decode(lp, lens, lattice=True), f"after again seed {seed}")
    assert _after_stats(dec) == 2


def _wide_states_case(seed):
    """States of up to ~100 emitting arcs (~50 a state; random_ctc_graph's usual states have at most
    ~8): graph, log-probs, options and the CPU's lattices of case `seed`."""
    rng = np.random.default_rng(777 + seed)
    V = 40
    graph = random_ctc_graph(rng, 3000, V, 100, 0.1)
    lp = random_log_probs(rng, 4, 30, V, peaky=bool(seed % 2))
    opts = DecoderOptions(search_beam=float(rng.choice([5.0, 8.0])), output_beam=float(rng.choice([2.0, 5.0])),
                          max_active_states=2000)
    return graph, lp, opts, Decoder(graph, opts, num_threads=2).decode(lp, lattice=True)


@pytest.mark.parametrize("seed", range(6))
def test_records_after_the_search_wide_states(seed, monkeypatch):
    """States of up to ~100 emitting arcs (tokens of one to four warp rounds in the pass, walks that
    stop after any of them on the sorted arcs; the other cases' states have at most ~8): the CPU's
    lattices, with the slots taken a chunk a warp (the default) and a round at a time."""
    graph, lp, opts, cpu = _wide_states_case(seed)
    assert graph.num_arcs > 3000 * 40  # (~50 arcs a state, up to ~100)
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    for value in ("chunk", "round"):
        dec, st = _switched(monkeypatch, "CUWFST_LATTICE_RESERVE", value, graph, opts, lp, cpu,
                            f"wide states, slots {value}, seed {seed}")
        assert _after_stats(dec) == 1


def _random_after_case(seed):
    """test_records_after_the_search's case `seed`: graph, log-probs, lengths, options, lanes and
    the CPU's lattices."""
    rng = np.random.default_rng(123000 + seed)
    V = int(rng.integers(3, 16))
    graph = random_ctc_graph(rng, int(rng.choice([30, 200, 2000])), V, int(rng.integers(2, 6)),
                             float(rng.uniform(0.02, 0.4)))
    B = int(rng.integers(1, 9))
    T = int(rng.choice([1, 20, 90]))
    lens = np.array([T] + [int(rng.integers(0, T + 1)) for _ in range(B - 1)], np.int32)
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    if seed % 5 == 4:
        lp = lp.astype(np.float16)
    opts = DecoderOptions(search_beam=float(rng.choice([6.0, 12.0, 20.0])),
                          output_beam=float(rng.choice([0.5, 3.0, 8.0, 1000.0])),
                          max_active_states=int(rng.choice([50, 500, 10000])), allow_partial=bool(seed % 3 != 0))
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    return graph, lp, lens, opts, int(rng.choice([B, 8, 32])), cpu


@functools.lru_cache(maxsize=1)
def _random_after_checked(seeds, what):
    """Each seed's _random_after_case decoded with lattices by a GPU decoder made for it (under the
    environment as it stands) and compared with the CPU's: [(decoder, graph, options, lanes)]."""
    out = []
    for seed in seeds:
        graph, lp, lens, opts, lanes, cpu = _random_after_case(seed)
        dec = _gpu(graph, opts, max_lanes=lanes)
        compare(cpu, dec.decode(lp, lens, lattice=True), f"{what}, seed {seed}")
        out.append((dec, graph, opts, lanes))
    return out


def _random_after_twice(seeds, what, stat, value):
    """Each seed's _random_after_case: a lattice decode, a 1-best one, a lattice one again on the same
    decoder, both lattices the CPU's; two records-after decodes counted and MemStats stat == value."""
    for seed in seeds:
        graph, lp, lens, opts, lanes, cpu = _random_after_case(seed)
        dec = _gpu(graph, opts, max_lanes=lanes)
        compare(cpu, dec.decode(lp, lens, lattice=True), f"{what}, seed {seed}")
        dec.decode(lp, lens)
        compare(cpu, dec.decode(lp, lens, lattice=True), f"{what} again, seed {seed}")
        assert _after_stats(dec) == 2 and dec._gpu.main.mem_stats()[stat] == value


def _table_classes_case():
    """Frontiers of up to ~28,000 tokens on a 30,000-state graph (every table class of the records
    pass), and the CPU's lattices (made once: the tests below only read them)."""
    rng = np.random.default_rng(5)
    graph = random_ctc_graph(rng, 30000, 20, 6, 0.1)
    lp = random_log_probs(rng, 3, 14, 20, peaky=False)
    opts = DecoderOptions(search_beam=30.0, output_beam=3.0, max_active_states=40000)
    return graph, lp, opts, Decoder(graph, opts, num_threads=2).decode(lp, lattice=True)


def test_records_after_the_search_large_frontiers_and_growth(monkeypatch):
    """Frontiers of up to ~28,000 tokens (S_{t+1} in every table class: 2^11, 2^13 and 2^14 slots in
    shared memory, then global tables), with and without the records' filter; then the same under
    first sizes far too small (CUWFST_LATTICE_AFTER_ROOM): the frontier log and the global tables
    outgrow them, the batch is decoded again, and the lattices are the CPU's. A value the switch
    does not know is refused when the decoder is made; `step` is the in-step stage."""
    graph, lp, opts, cpu = _table_classes_case()
    assert max(h.max_frontier for h in cpu) > 16384  # (the global class)
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "later")
    with pytest.raises(ValueError, match="CUWFST_LATTICE_RECORDS"):
        Decoder(graph, opts, device="cuda")
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "step")
    dec = Decoder(graph, opts, device="cuda")
    compare(cpu, dec.decode(lp, lattice=True), "step")
    assert _after_stats(dec) == 0
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    dec = Decoder(graph, opts, device="cuda")
    compare(cpu, dec.decode(lp, lattice=True), "after")
    assert _after_stats(dec) == 1
    # without the records' filter (or the lattice trim) the in-step stage records and counts k2's
    # recorded arcs, as the default's (the pass leaves them uncounted)
    for switch in ("lattice_filter", "lattice_trim"):
        setattr(dec._gpu, switch, "off")
        got = dec.decode(lp, lattice=True)
        compare(cpu, got, f"after, {switch} off")
        assert [h.lattice.recorded_arcs for h in got] == [h.lattice.recorded_arcs for h in cpu]
        setattr(dec._gpu, switch, "on")
    assert _after_stats(dec) == 1
    compare(cpu, dec.decode(lp, lattice=True), "after")
    assert _after_stats(dec) == 2
    _grown(monkeypatch, graph, opts, lp, cpu, "after")


# The most record slots CUWFST_LATTICE_RESERVE=chunk leaves unfilled in one run: 31 a warp of the
# records pass's four records launches of 4 CTAs a multiprocessor of 8 warps, 1,024 multiprocessors
# bounding any GPU's grid (GpuDecoder::AfterHoleBound, for the GPU at hand, is below it)
_MAX_HOLES = 31 * 4 * (4 * 8 * 1024)


def _switched(monkeypatch, var, value, graph, opts, lp, cpu, what):
    """A decoder made under var=value, its lattice decode of lp compared with the CPU's; its stats."""
    monkeypatch.setenv(var, value)
    dec = Decoder(graph, opts, device="cuda")
    compare(cpu, dec.decode(lp, lattice=True), what)
    return dec, dec._gpu.main.mem_stats()


def _grown(monkeypatch, graph, opts, lp, cpu, what):
    """Under first sizes far too small (records, frontier log, global tables: CUWFST_LATTICE_AFTER_ROOM
    and lattice_entries=64) a records-after decode grows and runs again; the CPU's lattices, and
    again on the grown buffers. Its stats after the first decode."""
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_ROOM", "64,64")
    small = Decoder(graph, opts, device="cuda", lattice_entries=64)
    compare(cpu, small.decode(lp, lattice=True), f"{what}, grown")
    st = small._gpu.main.mem_stats()
    assert st["lattice_after_decodes"] == 1 and st["lattice_grows"] >= 1
    compare(cpu, small.decode(lp, lattice=True), f"{what}, on the grown buffers")
    return st


def _switch_checked(monkeypatch, case, var, value, bads, stat, what):
    """A construction-time switch: its values in bads refused; a decoder made under var=value (left
    set) with MemStats stat 1, one records-after decode, the CPU's lattices (case: graph, log-probs,
    options, the CPU's) on two decodes, then also grown from first sizes far too small (_grown)."""
    graph, lp, opts, cpu = case
    _refused_when_made(monkeypatch, graph, opts, var, bads)
    dec, st = _switched(monkeypatch, var, value, graph, opts, lp, cpu, what)
    assert st[stat] == 1 and _after_stats(dec) == 1
    compare(cpu, dec.decode(lp, lattice=True), f"{what}, again")
    _grown(monkeypatch, graph, opts, lp, cpu, what)
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_ROOM")


def _refused_when_made(monkeypatch, graph, opts, var, bads):
    """Each value in bads of the construction-time switch var is a ValueError naming it."""
    for bad in bads:
        monkeypatch.setenv(var, bad)
        with pytest.raises(ValueError, match=var):
            Decoder(graph, opts, device="cuda")


def test_records_after_the_search_slots_a_chunk_a_warp(monkeypatch):
    """CUWFST_LATTICE_RESERVE=chunk: the pass's warps take their records' slots 32 at a time and
    leave the rest of their last chunk as holes, so the cursor counts more slots than records; the
    pruning's bucketing reads every slot and skips the holes, and records too many for their
    first room (lattice_entries=64) grow by the cursor and are decoded again. The lattices are the
    CPU's; values the switch does not know are refused when the decoder is made."""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    _refused_when_made(monkeypatch, graph, opts, "CUWFST_LATTICE_RESERVE", ("warp", "1", "on"))
    dec, st = _switched(monkeypatch, "CUWFST_LATTICE_RESERVE", "round", graph, opts, lp, cpu, "reserve round")
    assert st["lat_reserve"] == 0 and _after_stats(dec) == 1
    records = st["lattice_live_records"]  # (the cursor: one slot a record)
    dec, st = _switched(monkeypatch, "CUWFST_LATTICE_RESERVE", "chunk", graph, opts, lp, cpu, "reserve chunk")
    assert st["lat_reserve"] == 1 and _after_stats(dec) == 1
    # the slots: the records and the holes
    assert records < st["lattice_live_records"] <= records + _MAX_HOLES
    compare(cpu, dec.decode(lp, lattice=True), "reserve chunk, again")
    small = Decoder(graph, opts, device="cuda", lattice_entries=64)
    compare(cpu, small.decode(lp, lattice=True), "reserve chunk, grown")
    st = small._gpu.main.mem_stats()
    # grown once: to the records plus the most holes a run can leave (GpuDecoder::AfterHoleBound),
    # so the run again fits whatever its holes
    assert st["lattice_grows"] == 1 and st["lattice_capacity"] >= st["lattice_live_records"]
    compare(cpu, small.decode(lp, lattice=True), "reserve chunk, on the grown records")
    assert small._gpu.main.mem_stats()["lattice_grows"] == 1


def test_records_after_the_search_phase_sums(monkeypatch, capfd):
    """CUWFST_LATTICE_AFTER_PROF=on (a measurement): each records pass's phase sums reach stderr, a
    line a table class with items ([records-prof]: items, the warps' cycles waiting, staging and
    walking, the CTAs' active time and the class's span) and a timeline line (the grid, the pass's
    kernels' starts and ends, the plan first); the lattices are the CPU's, and values
    the switch does not know are refused when the decoder is made. (The four class launches,
    CUWFST_LATTICE_AFTER_GRID=classes; the one grid's lines: test_records_after_the_search_one_grid.)"""
    graph, lp, opts, cpu = _table_classes_case()
    assert max(h.max_frontier for h in cpu) > 16384  # (the global class)
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_GRID", "classes")
    _refused_when_made(monkeypatch, graph, opts, "CUWFST_LATTICE_AFTER_PROF", ("1", "yes"))
    capfd.readouterr()
    _switched(monkeypatch, "CUWFST_LATTICE_AFTER_PROF", "on", graph, opts, lp, cpu, "profiled")
    lines = [x for x in capfd.readouterr().err.splitlines() if x.startswith("[records-prof]")]
    timeline = [x.split()[4:] for x in lines if x.split()[1] == "timeline"]
    assert all(x.split()[2] == "ctas" and int(x.split()[3]) > 0 for x in lines if x.split()[1] == "timeline")
    lines = [x for x in lines if x.split()[1] != "timeline"]
    classes = {x.split()[1] for x in lines}
    assert "global" in classes and classes <= {"c11", "c13", "c14", "global"}, lines
    # a timeline a pass: each kernel that ran, its start and end in ms from the pass's first start
    assert timeline
    for t in timeline:
        spans = {name: (float(a), float(b)) for name, a, b in zip(t[0::3], t[1::3], t[2::3])}
        assert {"plan", "global"} <= set(spans) and min(a for a, _ in spans.values()) == 0.0, t
        assert all(0 <= a <= b < 60_000 for a, b in spans.values()), t
        assert spans["plan"][0] <= spans["global"][0], t
    for x in lines:
        f = x.split()
        v = dict(zip(f[2::2], f[3::2]))
        assert int(v["items"]) > 0 and float(v["walk_mcyc"]) > 0 and 0 < float(v["active_ms"])
        assert 0 < float(v["span_ms"]) < 60_000
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_PROF", "off")
    capfd.readouterr()
    compare(cpu, Decoder(graph, opts, device="cuda").decode(lp, lattice=True), "not profiled")
    assert "[records-prof]" not in capfd.readouterr().err


def test_records_after_the_search_one_grid(monkeypatch, capfd):
    """The one grid (the default; CUWFST_LATTICE_AFTER_GRID=one): the records pass's items in one
    launch, claimed longest class first (the global tables' steps, then the 2^14-slot ones, then the
    2^13-slot and the 2^11-slot ones; the 2^14-slot steps by default in a shared table of indices
    alone that reads the states from the log, under CUWFST_LATTICE_AFTER_C14=global on global
    tables). The lattices are the CPU's in every class both ways, also grown from tiny first rooms
    and on random batches; the profile names the one launch; values the switches do not know are
    refused when the decoder is made."""
    graph, lp, opts, cpu = _table_classes_case()
    assert max(h.max_frontier for h in cpu) > 16384  # (the global class)
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_C14", raising=False)  # (the default's c14 first; a suite may run under it)
    _refused_when_made(monkeypatch, graph, opts, "CUWFST_LATTICE_AFTER_GRID", ("1", "single", "One"))
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_PROF", "on")
    capfd.readouterr()
    dec, st = _switched(monkeypatch, "CUWFST_LATTICE_AFTER_GRID", "one", graph, opts, lp, cpu, "one grid")
    assert st["lat_one_grid"] == 1 and _after_stats(dec) == 1
    lines = [x.split() for x in capfd.readouterr().err.splitlines() if x.startswith("[records-prof]")]
    classes = {f[1] for f in lines if f[1] != "timeline"}
    assert classes == {"one"}, lines  # (every item in the one launch's sums, none in the classes')
    timeline = [f for f in lines if f[1] == "timeline"]
    assert timeline and all("one" in f and "c13" not in f and "global" not in f for f in timeline), timeline
    assert st["lat_c14_index"] == 1  # (the default: c14's steps in shared tables of indices)
    for k in (1, 2):
        compare(cpu, dec.decode(lp, lattice=True), f"one grid, decode {k}")
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_PROF", "off")
    _grown(monkeypatch, graph, opts, lp, cpu, "one grid")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_ROOM")
    # c14's steps on global tables (CUWFST_LATTICE_AFTER_C14=global, the default before 2026-12-06 06:26)
    _refused_when_made(monkeypatch, graph, opts, "CUWFST_LATTICE_AFTER_C14", ("shared", "1", "Index"))
    dec, st = _switched(monkeypatch, "CUWFST_LATTICE_AFTER_C14", "global", graph, opts, lp, cpu, "c14 on global tables")
    assert st["lat_c14_index"] == 0 and _after_stats(dec) == 1
    compare(cpu, dec.decode(lp, lattice=True), "c14 on global tables, again")
    _grown(monkeypatch, graph, opts, lp, cpu, "c14 on global tables")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_ROOM")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_C14")
    ran = _random_after_checked((0, 2, 5, 9, 13), "one grid")
    assert all(dec._gpu.main.mem_stats()["lat_one_grid"] == 1 for dec, *_ in ran)
    _, graph, opts, lanes = ran[-1]
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_GRID", "classes")
    assert _gpu(graph, opts, max_lanes=lanes)._gpu.main.mem_stats()["lat_one_grid"] == 0


def test_records_after_the_search_compacted(monkeypatch):
    """The compacted walk (the default; CUWFST_LATTICE_AFTER_COMPACT=off: the walk probing in each
    round): the one grid's walk with each round's candidates queued a warp and probed 32 at a time
    (lattice_after.cuh LatRecordsKernel kCompact), the same records in another slot order. Under
    slots a round at a time the cursor numbers exactly the other walk's records; the lattices are the
    CPU's in every table class with the slots a chunk or a round at a time, also grown from tiny first
    rooms, on 40 random batches, and on states of up to ~100 arcs (queues that fill inside a token's
    rounds and carry across tokens); values the switch does not know are refused when the decoder is
    made, and so is the switch on beside the class grids (which walk uncompacted)."""
    graph, lp, opts, cpu = _table_classes_case()
    assert max(h.max_frontier for h in cpu) > 16384  # (the global class)
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_COMPACT", raising=False)  # (a suite may run under it)
    assert Decoder(graph, opts, device="cuda")._gpu.main.mem_stats()["lat_compact"] == 1
    _walk_switch_checked(monkeypatch, (graph, lp, opts, cpu), "CUWFST_LATTICE_AFTER_COMPACT", ("off", "on"),
                         ("1", "compact", "On"), "lat_compact", "compacted")
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_GRID", "classes")
    with pytest.raises(ValueError, match="CUWFST_LATTICE_AFTER_COMPACT"):
        Decoder(graph, opts, device="cuda")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_COMPACT")
    assert Decoder(graph, opts, device="cuda")._gpu.main.mem_stats()["lat_compact"] == 0
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_GRID")
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_COMPACT", "on")
    ran = _random_after_checked(tuple(range(40)), "compacted")
    assert all(d._gpu.main.mem_stats()["lat_compact"] == 1 for d, *_ in ran)
    _wide_states_both(monkeypatch, "CUWFST_LATTICE_AFTER_COMPACT", ("off", "on"))


def _walk_switch_checked(monkeypatch, case, var, values, bads, stat, what):
    """A records-walk switch var made values[0] then values[1], the slots a round at a time: the CPU's
    lattices both times (case: graph, log-probs, options, the CPU's), the records (the cursor)
    numbered the same, MemStats stat 0 then 1, one records-after decode; then _switch_checked with
    var = values[1] (left set) and the refused values bads. The second decoder's stats."""
    graph, lp, opts, cpu = case
    monkeypatch.setenv("CUWFST_LATTICE_RESERVE", "round")
    _, st0 = _switched(monkeypatch, var, values[0], graph, opts, lp, cpu, f"{what}: {values[0]}, round")
    dec, st = _switched(monkeypatch, var, values[1], graph, opts, lp, cpu, f"{what}: {values[1]}, round")
    assert (st0[stat], st[stat], _after_stats(dec)) == (0, 1, 1)
    assert st["lattice_live_records"] == st0["lattice_live_records"] > 0
    monkeypatch.delenv("CUWFST_LATTICE_RESERVE")  # (the default: a chunk a warp)
    _switch_checked(monkeypatch, case, var, values[1], bads, stat, what)
    return st


def _wide_states_both(monkeypatch, var, values):
    """test_records_after_the_search_wide_states' first three cases (states of up to ~100 arcs) under
    var = each of values: the CPU's lattices; with the slots a round at a time the records (the
    cursor) number the same under each; then var = the last value with the slots a chunk a warp."""
    for seed in range(3):
        wide, wlp, wopts, wcpu = _wide_states_case(seed)
        counts = []
        monkeypatch.setenv("CUWFST_LATTICE_RESERVE", "round")
        for value in values:
            _, st = _switched(monkeypatch, var, value, wide, wopts, wlp, wcpu, f"wide states, {var}={value}, seed {seed}")
            counts.append(st["lattice_live_records"])
        assert len(set(counts)) == 1 and counts[0] > 0, counts
        monkeypatch.delenv("CUWFST_LATTICE_RESERVE")
        _switched(monkeypatch, var, values[-1], wide, wopts, wlp, wcpu, f"wide states, {var}={values[-1]}, chunks, seed {seed}")


def test_records_after_the_search_claimed_tokens(monkeypatch):
    """Claimed tokens (the default; CUWFST_LATTICE_AFTER_TOKENS=stride: every 8th token a warp): the
    compacted walk's warps claim their item's third and later tokens from a counter in shared memory
    (LatRecordsKernel kClaim), so each token is walked once whoever takes it. Under slots a round at
    a time the cursor numbers exactly the stride walk's records; the lattices are the CPU's in every
    table class, grown from tiny first rooms, on 40 random batches (items of a few tokens to 1,024)
    and on states of up to ~100 arcs; values the switch does not know are refused when the decoder is
    made; without the compacted walk the switch does nothing."""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_COMPACT", raising=False)
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_TOKENS", raising=False)  # (a suite may run under it)
    assert Decoder(graph, opts, device="cuda")._gpu.main.mem_stats()["lat_token_claims"] == 1
    st = _walk_switch_checked(monkeypatch, (graph, lp, opts, cpu), "CUWFST_LATTICE_AFTER_TOKENS", ("stride", "claim"),
                              ("1", "claimed", "dynamic"), "lat_token_claims", "tokens claimed")
    assert st["lat_compact"] == 1
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_COMPACT", "off")
    dec, st = _switched(monkeypatch, "CUWFST_LATTICE_AFTER_TOKENS", "claim", graph, opts, lp, cpu, "claim, not compacted")
    assert (st["lat_compact"], st["lat_token_claims"]) == (0, 0)
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_COMPACT")
    ran = _random_after_checked(tuple(range(40)), "tokens claimed")
    assert all(d._gpu.main.mem_stats()["lat_token_claims"] == 1 for d, *_ in ran)
    _wide_states_both(monkeypatch, "CUWFST_LATTICE_AFTER_TOKENS", ("stride", "claim"))


def test_records_after_the_search_packed_walk(monkeypatch):
    """The packed walk (the default since s200; CUWFST_LATTICE_AFTER_PACKED=off: not): the claimed
    tokens' walk compiled for packed, sorted arcs and staged log-prob rows (LatRecordsKernel kPacked),
    taken where the graph has them. Under slots a round at a time the cursor numbers exactly the
    claimed tokens' walk's records; the lattices are the CPU's in every table class, grown from tiny
    first rooms, on 40 random batches (fp16 rows among them) and on states of up to ~100 arcs; values
    the switch does not know are refused when the decoder is made; with the tokens by stride the
    switch does nothing. (With the octets' walk, the default on it since the session of 2026-12-06 22:19,
    off: this is the packed walk's own test; test_records_after_the_search_octet_walk is the octets'.)"""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    for var in ("CUWFST_LATTICE_AFTER_COMPACT", "CUWFST_LATTICE_AFTER_TOKENS", "CUWFST_LATTICE_AFTER_PACKED"):
        monkeypatch.delenv(var, raising=False)  # (a suite may run under them)
    assert Decoder(graph, opts, device="cuda")._gpu.main.mem_stats()["lat_packed_walk"] == 1  # (the default)
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_OCTETS", "off")  # (the packed walk itself, not the octets' on it)
    _walk_switch_checked(monkeypatch, (graph, lp, opts, cpu), "CUWFST_LATTICE_AFTER_PACKED", ("off", "on"),
                         ("1", "packed", "On"), "lat_packed_walk", "packed walk")
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_TOKENS", "stride")
    _, st = _switched(monkeypatch, "CUWFST_LATTICE_AFTER_PACKED", "on", graph, opts, lp, cpu, "packed, tokens by stride")
    assert st["lat_packed_walk"] == 0
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_TOKENS")
    ran = _random_after_checked(tuple(range(40)), "packed walk")
    assert any(d._gpu.main.mem_stats()["lat_packed_walk"] == 1 for d, *_ in ran)
    _wide_states_both(monkeypatch, "CUWFST_LATTICE_AFTER_PACKED", ("off", "on"))


def test_records_after_the_search_octet_walk(monkeypatch):
    """The octets' walk (the default since the session of 2026-12-06 22:19; CUWFST_LATTICE_AFTER_OCTETS=off:
    not): the packed walk's tokens four
    at a time, their first round an octet of lanes a token, then each token with more arcs and none of
    its first 8 past the sorted bound walked on from its 9th arc (LatRecordsKernel kOct). Under slots a
    round at a time the cursor numbers exactly the packed walk's records; the lattices are the CPU's in
    every table class, grown from tiny first rooms, on 40 random batches (fp16 rows among them) and on
    states of up to ~100 arcs (tokens walked on past their octet); values the switch does not know are
    refused when the decoder is made; without the packed walk the switch does nothing."""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    for var in ("CUWFST_LATTICE_AFTER_COMPACT", "CUWFST_LATTICE_AFTER_TOKENS", "CUWFST_LATTICE_AFTER_PACKED",
                "CUWFST_LATTICE_AFTER_OCTETS"):
        monkeypatch.delenv(var, raising=False)  # (a suite may run under them)
    st = Decoder(graph, opts, device="cuda")._gpu.main.mem_stats()
    assert (st["lat_packed_walk"], st["lat_octet_walk"]) == (1, 1)  # (the defaults)
    _walk_switch_checked(monkeypatch, (graph, lp, opts, cpu), "CUWFST_LATTICE_AFTER_OCTETS", ("off", "on"),
                         ("1", "octets", "On"), "lat_octet_walk", "octet walk")
    monkeypatch.setenv("CUWFST_LATTICE_AFTER_PACKED", "off")
    _, st = _switched(monkeypatch, "CUWFST_LATTICE_AFTER_OCTETS", "on", graph, opts, lp, cpu, "octets, not packed")
    assert (st["lat_packed_walk"], st["lat_octet_walk"]) == (0, 0)
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_PACKED")
    ran = _random_after_checked(tuple(range(40)), "octet walk")
    assert any(d._gpu.main.mem_stats()["lat_octet_walk"] == 1 for d, *_ in ran)
    _wide_states_both(monkeypatch, "CUWFST_LATTICE_AFTER_OCTETS", ("off", "on"))


def test_records_after_the_search_packed_global_tables(monkeypatch):
    """CUWFST_LATTICE_TABLES=packed: the pass's global tables (S_{t+1} past 8,192 tokens) hold each
    slot's state, frontier index and score in one 16-byte slot, so a probe that finds its state has
    the index, and the filter the destination's score, in the same load. The lattices are the CPU's,
    also when the tables outgrow their first room (CUWFST_LATTICE_AFTER_ROOM) and with the chunked
    record slots beside; values the switch does not know are refused when the decoder is made."""
    graph, lp, opts, cpu = _table_classes_case()
    assert max(h.max_frontier for h in cpu) > 16384  # (the global class)
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    _refused_when_made(monkeypatch, graph, opts, "CUWFST_LATTICE_TABLES", ("pack", "1", "on"))
    dec, st = _switched(monkeypatch, "CUWFST_LATTICE_TABLES", "packed", graph, opts, lp, cpu, "packed tables")
    assert st["lat_tab_packed"] == 1 and _after_stats(dec) == 1
    both, st = _switched(monkeypatch, "CUWFST_LATTICE_RESERVE", "chunk", graph, opts, lp, cpu,
                         "packed tables, chunked slots")
    assert [st[k] for k in ("lat_tab_packed", "lat_reserve")] == [1, 1]
    monkeypatch.delenv("CUWFST_LATTICE_RESERVE")
    _grown(monkeypatch, graph, opts, lp, cpu, "packed tables")
    monkeypatch.setenv("CUWFST_LATTICE_TABLES", "split")
    assert Decoder(graph, opts, device="cuda")._gpu.main.mem_stats()["lat_tab_packed"] == 0


def test_records_after_the_search_log_copied_twice(monkeypatch):
    """CUWFST_LATTICE_LOG_EXTRA=copy (a measurement of the log copy's cost on the step's chain): each
    step's copy of S_t runs once more after LatLogKernel, writing the same values, so the lattices
    are the CPU's, also grown from first sizes far too small and on random batches; values the switch
    does not know are refused when the decoder is made."""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    _switch_checked(monkeypatch, (graph, lp, opts, cpu), "CUWFST_LATTICE_LOG_EXTRA", "copy", ("twice", "1"),
                    "lat_log_extra", "log copied twice")
    _, graph, opts, lanes = _random_after_checked((0, 3, 8), "log copied twice")[-1]
    monkeypatch.setenv("CUWFST_LATTICE_LOG_EXTRA", "none")
    assert _gpu(graph, opts, max_lanes=lanes)._gpu.main.mem_stats()["lat_log_extra"] == 0


def test_records_after_the_search_log_in_finalize(monkeypatch):
    """CUWFST_LATTICE_LOG=finalize: each step's records log (its scalars and the copy of the frontier
    it expanded) is written at the end of the step's FinalizeKernel, the lane's last CTA writing the
    scalars, in place of a LatLogKernel launch a step. The lattices are the CPU's: frontiers of up to
    ~28,000 tokens (the copy's loops), decodes again on the same decoder (each lane's arrival count
    back to 0 after every step), a log and tables grown from first sizes far too small, and random
    batches with rows of 0 frames up, final and redirect steps and lanes above the batch (idle lanes
    log nothing). Values the switch does not know are refused when the decoder is made."""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    _refused_when_made(monkeypatch, graph, opts, "CUWFST_LATTICE_LOG", ("fold", "1", "Finalize"))

    def profiled(dec, what):  # a decode launch by launch, its kernels timed by kind
        inst = dec._gpu.main
        before = inst.profile(True)
        compare(cpu, dec.decode(lp, lattice=True), f"{what}, profiled")
        after = inst.profile(False)
        return {k: after[k] - before[k] for k in ("lat_step_end", "lat_persist", "finalize")}

    monkeypatch.setenv("CUWFST_LATTICE_LOG", "kernel")
    dec = Decoder(graph, opts, device="cuda")
    assert dec._gpu.main.mem_stats()["lat_log_fold"] == 0
    ran = profiled(dec, "log kernel")  # (kind lat_step_end: LatLogKernel in a records-after decode)
    assert ran["lat_step_end"] > 0 and ran["lat_persist"] > 0
    dec, _ = _switched(monkeypatch, "CUWFST_LATTICE_LOG", "finalize", graph, opts, lp, cpu, "log in finalize, decode 0")
    for k in (1, 2):
        compare(cpu, dec.decode(lp, lattice=True), f"log in finalize, decode {k}")
    st = dec._gpu.main.mem_stats()
    assert st["lat_log_fold"] == 1 and _after_stats(dec) == 3
    ran = profiled(dec, "log in finalize")  # no LatLogKernel launch: the log came from FinalizeKernel
    assert ran["lat_step_end"] == 0 and ran["lat_persist"] > 0 and ran["finalize"] > 0
    _grown(monkeypatch, graph, opts, lp, cpu, "log in finalize")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_ROOM")
    _random_after_twice((0, 1, 3, 4, 7, 11), "log in finalize", "lat_log_fold", 1)


@functools.lru_cache(maxsize=1)
def _long_rows_case():
    """Rows long enough for the captured chunks of steps (700, 433 and 1 frames) and the CPU's
    lattices (made once: the tests only read them)."""
    rng = np.random.default_rng(17)
    graph = random_ctc_graph(rng, 400, 12, 4, 0.1)
    lp = random_log_probs(rng, 3, 700, 12, peaky=True)
    lens = np.array([700, 433, 1], np.int32)
    opts = DecoderOptions(search_beam=12.0, output_beam=4.0)
    return graph, lp, lens, opts, Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)


def _long_rows_checked(what, fold):
    """_long_rows_case decoded twice by one GPU decoder made under the environment as it stands: the
    CPU's lattices both times, and MemStats lat_log_fold == fold."""
    graph, lp, lens, opts, cpu = _long_rows_case()
    dec = Decoder(graph, opts, device="cuda")
    for k in range(2):
        compare(cpu, dec.decode(lp, lens, lattice=True), f"{what}, long rows {k}")
    assert dec._gpu.main.mem_stats()["lat_log_fold"] == fold


def test_records_after_the_search_log_on_a_side_stream(monkeypatch):
    """CUWFST_LATTICE_LOG=side: each step's FinalizeKernel writes the step's scalars and a copy job
    (its lane's last CTA), and LatLogSideKernel copies S_t into the log on a side stream, forked after
    that FinalizeKernel and joined before the next step's (the first launch to write into S_t's
    buffer) or at the end of the sequence or captured chunk. The lattices are the CPU's: frontiers of
    up to ~28,000 tokens, decodes again on the same decoder (the jobs emptied by each copy), profiled
    (the copy on the decoder's stream, timed as LatLogKernel), a log and tables grown from first sizes
    far too small, long rows (captured chunks of steps, each joining its copies), and random batches
    with rows of 0 frames up, final and redirect steps and idle lanes (no job: the copy does nothing).
    Values the switch does not know are refused when the decoder is made."""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    _refused_when_made(monkeypatch, graph, opts, "CUWFST_LATTICE_LOG", ("Side", "2", "stream"))
    dec, st = _switched(monkeypatch, "CUWFST_LATTICE_LOG", "side", graph, opts, lp, cpu, "log on a side stream, decode 0")
    assert st["lat_log_fold"] == 2 and _after_stats(dec) == 1
    for k in (1, 2):
        compare(cpu, dec.decode(lp, lattice=True), f"log on a side stream, decode {k}")
    inst = dec._gpu.main
    before = inst.profile(True)
    compare(cpu, dec.decode(lp, lattice=True), "log on a side stream, profiled")
    after = inst.profile(False)
    assert after["lat_step_end"] > before["lat_step_end"] and after["lat_persist"] > before["lat_persist"]
    compare(cpu, dec.decode(lp, lattice=True), "log on a side stream, after the profiled decode")
    _grown(monkeypatch, graph, opts, lp, cpu, "log on a side stream")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_ROOM")
    _long_rows_checked("log on a side stream", 2)  # (each captured chunk joins the copies it forked)
    _random_after_twice((0, 1, 3, 4, 7, 11), "log on a side stream", "lat_log_fold", 2)


@pytest.mark.parametrize("kernels", ["new", "new:1", "new_lane", "new_fused"])
def test_records_after_the_search_log_in_the_scan(kernels, monkeypatch):
    """CUWFST_LATTICE_LOG=scan (the default): no log launch a step. Each step's scan copies S_t into
    the log as it reads the tokens (TokenLoad), and the next step's scan writes the step's scalars
    before it applies its own step (ApplyLaneStep, or ScanKernel's idle lanes); the sequence's last ones come from
    LatLogPendingKernel before the records pass. Under the persistent split scan (the default), the
    one-CTA ScanKernel (new:1), the lane-major split scan (new_lane) and the fused persistent one:
    the CPU's lattices on frontiers of up to ~28,000 tokens, decodes again on the same decoder, a
    profiled decode (no log kind timed), a log and tables grown from first sizes far too small, a
    pooled batch that pauses and resumes (the undone step's scalars pending no more), long rows
    (captured chunks of steps) and random batches with rows of 0 frames up, final and redirect
    steps and idle lanes. Values the switch does not know are refused when the decoder is made."""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    monkeypatch.setenv("CUWFST_KERNELS", kernels)
    _refused_when_made(monkeypatch, graph, opts, "CUWFST_LATTICE_LOG", ("Scan", "3", "scans"))
    dec, st = _switched(monkeypatch, "CUWFST_LATTICE_LOG", "scan", graph, opts, lp, cpu, f"{kernels}: log in the scan")
    assert st["lat_log_fold"] == 3 and _after_stats(dec) == 1
    assert (st["scan_split"] == 1) == (kernels == "new:1") and st["fused_max"] == (kernels == "new_fused"), st
    for k in (1, 2):
        compare(cpu, dec.decode(lp, lattice=True), f"{kernels}: log in the scan, decode {k}")
    inst = dec._gpu.main
    before = inst.profile(True)
    compare(cpu, dec.decode(lp, lattice=True), f"{kernels}: log in the scan, profiled")
    after = inst.profile(False)
    assert after["lat_step_end"] == before["lat_step_end"] and after["lat_persist"] > before["lat_persist"]
    _grown(monkeypatch, graph, opts, lp, cpu, f"{kernels}: log in the scan")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_ROOM")
    # a pooled first batch that pauses mid-decode and resumes from the paused step
    with monkeypatch.context() as m:
        m.setenv("CUWFST_LANE_POOL", "on")
        lp3, lens3, cpu3, d3 = _pooled_pause_decoded(f"{kernels}: log in the scan")
        compare(cpu3, d3.decode(lp3, lens3, lattice=True), f"{kernels}: log in the scan, grown pools")
        assert d3._gpu.main.mem_stats()["lat_log_fold"] == 3 and _after_stats(d3) == 2
    _long_rows_checked(f"{kernels}: log in the scan", 3)
    _random_after_twice((0, 1, 3, 4, 7, 11), f"{kernels}: log in the scan", "lat_log_fold", 3)
    monkeypatch.delenv("CUWFST_LATTICE_LOG")  # (the default since the session of 2026-12-06 07:39)
    assert Decoder(graph, opts, device="cuda")._gpu.main.mem_stats()["lat_log_fold"] == 3


@pytest.mark.parametrize("chunk", [256, 512, 2048, 4096])
def test_records_after_the_search_item_sizes(chunk, monkeypatch):
    """CUWFST_LATTICE_AFTER_CHUNK: S_t's tokens a records (and tail) work item of the pass, 1,024 by
    default (the global tables' build items stay at 1,024 of S_{t+1}). The lattices are the CPU's in
    every table class (frontiers of up to ~28,000 tokens: steps of one item and of many, a last item
    of a few tokens), also grown from first sizes far too small (the item lists sized by the smaller
    chunk) and on random batches with final and redirect steps; values it does not know are refused
    when the decoder is made."""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    _refused_when_made(monkeypatch, graph, opts, "CUWFST_LATTICE_AFTER_CHUNK", ("1000", "128", "8192", "big"))
    dec, st = _switched(monkeypatch, "CUWFST_LATTICE_AFTER_CHUNK", str(chunk), graph, opts, lp, cpu, f"chunk {chunk}")
    assert st["lat_chunk"] == chunk and _after_stats(dec) == 1
    compare(cpu, dec.decode(lp, lattice=True), f"chunk {chunk}, again")
    _grown(monkeypatch, graph, opts, lp, cpu, f"chunk {chunk}")
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_ROOM")
    ran = _random_after_checked((0, 3, 8), f"chunk {chunk}")
    assert all(d._gpu.main.mem_stats()["lat_chunk"] == chunk for d, *_ in ran)
    monkeypatch.delenv("CUWFST_LATTICE_AFTER_CHUNK")
    _, graph, opts, lanes = ran[-1]
    assert _gpu(graph, opts, max_lanes=lanes)._gpu.main.mem_stats()["lat_chunk"] == 1024


@pytest.mark.parametrize("var,value", [("CUWFST_LATTICE_CLAIMS", "stride"), ("CUWFST_LATTICE_LOG_SPLIT", "1"),
                                       ("CUWFST_LATTICE_LOG_SPLIT", "3"), ("CUWFST_LATTICE_LOG_SPLIT", "64")])
def test_records_after_the_search_measurement_switches(var, value, monkeypatch):
    """The pass's measurement switches give the same lattices: work items at a fixed stride instead
    of claimed (CUWFST_LATTICE_CLAIMS=stride), LatLogKernel on 1 to 64 CTAs a lane (its copy's
    unrolled loop and its remainder both run: frontiers of ~28,000 tokens against 256 to 16,384
    threads a lane); values the switches do not know are refused when the decoder is made."""
    graph, lp, opts, cpu = _table_classes_case()
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    _refused_when_made(monkeypatch, graph, opts, var,
                       {"CUWFST_LATTICE_CLAIMS": ["static", "0"], "CUWFST_LATTICE_LOG_SPLIT": ["0", "129", "8x"]}[var])
    monkeypatch.setenv(var, value)
    dec = Decoder(graph, opts, device="cuda")
    compare(cpu, dec.decode(lp, lattice=True), f"{var}={value}")
    assert _after_stats(dec) == 1


def _pooled_pause_decoded(what):
    """A pooled first batch that outgrows the pools' first pieces (helpers.outgrowing_pooled_batch),
    decoded with lattices by a GPU decoder made under the environment as it stands (the pooled layout
    asked for: CUWFST_LANE_POOL=on), so it pauses and resumes mid-decode; the CPU's lattices. Returns
    the log-probs, lengths, the CPU's hypotheses and the decoder."""
    lens = [12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 1, 0]
    graph, lp, lens, opts = outgrowing_pooled_batch(6200, 12, lens, output_beam=2.0)
    cpu = Decoder(graph, opts).decode(lp, lens, lattice=True)
    dec = Decoder(graph, opts, device="cuda", max_lanes=POOLED_LANES, memory="lazy")
    need = assert_outgrows_first_pieces(dec, graph, opts, lp, lens)
    gpu = dec.decode(lp, lens, lattice=True)
    assert_pools_grew(dec, need)  # the batch paused at least once
    compare(cpu, gpu, f"{what}, pooled pause")
    return lp, lens, cpu, dec


def test_records_after_the_search_pooled_pause(monkeypatch):
    """The pooled layout's first batch pauses and resumes (helpers.outgrowing_pooled_batch): the
    pass after the resumed sequence finds every step's records again (the steps before the pause
    included), and the lattices are the CPU's."""
    monkeypatch.setenv("CUWFST_LANE_POOL", "on")
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    _, _, _, dec = _pooled_pause_decoded("after")
    assert _after_stats(dec) == 1


def test_gpu_pruning_batches_interleave_and_regrow():
    """Small then large then small batches reuse and grow the pruning buffers; 1-best
    decodes in between; every lattice is the CPU's."""
    rng = np.random.default_rng(8)
    graph = random_ctc_graph(rng, 500, 12, 5, 0.2)
    opts = DecoderOptions(search_beam=12.0, output_beam=6.0, max_active_states=400)
    dec = Decoder(graph, opts, device="cuda", max_lanes=16, lattice_entries=64)
    cpu = Decoder(graph, opts)
    for B, T in [(1, 5), (16, 120), (2, 30), (16, 200), (3, 1)]:
        lp = random_log_probs(rng, B, T, 12, peaky=bool(T % 2))
        lens = rng.integers(0, T + 1, B).astype(np.int32)
        lens[0] = T
        compare(cpu.decode(lp, lens, lattice=True), dec.decode(lp, lens, lattice=True), f"B {B} T {T}")
        dec.decode(lp, lens)


def test_gpu_pruning_buffers_in_memory_stats():
    """The pruning's work buffers are in the decoder's committed bytes (lattice_bytes, of it
    lattice_prune_bytes) and its pinned readback in pinned: the process's live allocations
    move by what the stats say; they stay at their high water."""
    from test_gpu_faults import _mem, _mod

    rng = np.random.default_rng(9)
    graph = random_ctc_graph(rng, 300, 10, 4, 0.2)
    lp = random_log_probs(rng, 4, 80, 10, peaky=True)
    dec = Decoder(graph, DecoderOptions(search_beam=12.0, output_beam=6.0), device="cuda", max_lanes=4)
    mod = _mod()
    dec._gpu.lattice_prune = "replay"
    dec.decode(lp, lattice=True)  # the lattice buffers, none of the pruning's
    st0, live0 = dec._gpu.main.mem_stats(), _mem(mod)
    assert st0["lattice_prune_bytes"] == 0
    dec._gpu.lattice_prune = "gpu"
    dec._gpu.lattice_chunk = 0  # the whole-batch PruneLattice, whose readback is pinned (the
    # bounded path reads its kept arcs into pageable vectors: no pinned memory to account)
    assert dec._gpu.lattice_prune_on_gpu(dec._gpu.main)
    dec.decode(lp, lattice=True)
    st1, live1 = dec._gpu.main.mem_stats(), _mem(mod)
    assert st1["lattice_prune_bytes"] > 0
    assert st1["lattice_bytes"] - st0["lattice_bytes"] >= st1["lattice_prune_bytes"]  # (+ the records' side array)
    assert live1["device"] - live0["device"] == st1["committed"] - st0["committed"]
    assert live1["pinned"] - live0["pinned"] == st1["pinned"] - st0["pinned"] > 0
    assert dec.memory_stats()["pools"]["lattice"]["prune_committed"] == st1["lattice_prune_bytes"]
    dec.decode(lp)
    dec._gpu.lattice_prune = "replay"
    dec.decode(lp, lattice=True)
    assert dec._gpu.main.mem_stats()["lattice_prune_bytes"] == st1["lattice_prune_bytes"]


def test_report_totals():
    print(f"\nGPU lattices vs CPU: {TOTALS['rows']} rows, {TOTALS['arcs']} lattice arcs ({TOTALS['eps_arcs']} "
          f"epsilon, {TOTALS['redirected']} redirected) identical; {TOTALS['ties']} rows whose 1-best took another "
          "path of the same float32 score")


# ------------------------------------------------- bounded lattice memory (LatticeOutputs::chunk)
# A GPU-pruned lattice decode runs CUWFST_LATTICE_CHUNK steps at a time (default 64; 0: the
# whole batch, then pruned) and prunes each run's records with k2's windows whose end exists
# (GpuDecoder::IncPass); the frames no later window reaches leave the device. Same lattices
# for every chunk; live records follow the chunk, not the input's length.

def _chunked(dec, chunk, lp, lens, online=False):
    dec._gpu.lattice_chunk = chunk
    out = dec.decode(lp, lens, lattice=True, online=online)
    return out, dec._gpu.main.mem_stats()


@pytest.mark.parametrize("seed", range(16))
def test_bounded_lattice_equals_whole_and_cpu(seed):
    """Chunks of 1, 7, 19, 20, 33, 64 and 160 steps (window ends inside, at and across run
    ends), rows of 0 to 400 frames of different lengths in one batch, allow_partial on and off:
    the CPU's lattice and the whole-batch path's, and the runs the chunk implies."""
    rng = np.random.default_rng(91000 + seed)
    V = int(rng.integers(3, 12))
    graph = random_ctc_graph(rng, int(rng.choice([30, 200, 800])), V, int(rng.integers(2, 6)),
                             float(rng.uniform(0.02, 0.4)))
    B = int(rng.integers(2, 7))
    T = int(rng.choice([45, 150, 400]))
    lens = np.array([T] + [int(rng.choice([0, 1, 19, 20, 21, 29, 30, 31, int(rng.integers(0, T + 1))]))
                           for _ in range(B - 1)], np.int32)
    lens = np.minimum(lens, T)
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    opts = DecoderOptions(search_beam=float(rng.choice([6.0, 12.0])), output_beam=float(rng.choice([0.5, 3.0, 8.0])),
                          max_active_states=int(rng.choice([50, 500])), allow_partial=bool(seed % 3 != 0))
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    dec = Decoder(graph, opts, device="cuda", max_lanes=int(rng.choice([B, 8])))
    whole, st = _chunked(dec, 0, lp, lens)
    assert st["lattice_runs"] == 1
    compare(cpu, whole, f"whole seed {seed}")
    for chunk in (1, 7, 19, 20, 33, 64, 160):
        got, st = _chunked(dec, chunk, lp, lens)
        compare(cpu, got, f"chunk {chunk} seed {seed}")
        # bucketed CUDA-graph steps may run a little past the chunk on the last run only
        assert st["lattice_runs"] >= -(-(T + 1) // max(chunk, 1)) - 1, (chunk, st["lattice_runs"])


def test_bounded_lattice_long_inputs():
    """Thousands of frames, four lanes of different lengths (3,000, 2,417, 1,001, 20),
    allow_partial: the CPU's lattices under the default chunk and under 0."""
    rng = np.random.default_rng(4242)
    V = 10
    graph = random_ctc_graph(rng, 300, V, 4, 0.2)
    lens = np.array([3000, 2417, 1001, 20], np.int32)
    lp = random_log_probs(rng, len(lens), 3000, V, peaky=True)
    opts = DecoderOptions(search_beam=10.0, output_beam=5.0, max_active_states=300, allow_partial=True)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    dec = Decoder(graph, opts, device="cuda", max_lanes=4)
    got, st = _chunked(dec, 160, lp, lens)
    compare(cpu, got, "long, chunk 160")
    assert st["lattice_runs"] >= 3001 // 160
    got, _ = _chunked(dec, 0, lp, lens)
    compare(cpu, got, "long, whole")


def test_bounded_lattice_memory_is_flat_in_T():
    """T = 2,000 vs 8,000 frames (three lanes), a fresh decoder each with a small first records
    arena (so it grows to what it needs): bounded, the most records held at once and the
    lattice buffers stay within 1.5x (they follow the chunk); the whole-batch path's grow ~4x.
    Both give the CPU's lattices (checked on the 2,000-frame batch)."""
    rng = np.random.default_rng(31)
    V = 10
    graph = random_ctc_graph(rng, 400, V, 4, 0.2)
    opts = DecoderOptions(search_beam=10.0, output_beam=4.0, max_active_states=300)
    lp = random_log_probs(rng, 3, 8000, V, peaky=True)
    stats = {}
    for chunk in (160, 0):
        for T in (2000, 8000):
            lens = np.array([T, T - 333, T // 2], np.int32)
            dec = Decoder(graph, opts, device="cuda", max_lanes=3, lattice_entries=4096)
            got, st = _chunked(dec, chunk, np.ascontiguousarray(lp[:, :T]), lens)
            stats[chunk, T] = st
            if T == 2000:
                compare(Decoder(graph, opts).decode(lp[:, :T], lens, lattice=True), got, f"chunk {chunk} T {T}")
    live = {k: v["lattice_live_records"] for k, v in stats.items()}
    held = {k: v["lattice_bytes"] for k, v in stats.items()}
    print("live records", live, "lattice bytes", held)
    assert live[160, 8000] <= 1.5 * live[160, 2000], live
    assert held[160, 8000] <= 1.5 * held[160, 2000], held
    assert live[0, 8000] >= 3.0 * live[0, 2000], live
    assert held[160, 8000] * 4 <= held[0, 8000], held


def test_bounded_lattice_pooled_pause_between_runs(monkeypatch):
    """A pooled batch that outgrows the pools' first pieces with 3-step runs: the pause comes
    inside a later run, whose steps before it are pruned, and the next run resumes the
    paused step (RunBoundedLattice): the CPU's lattices."""
    monkeypatch.setenv("CUWFST_LANE_POOL", "on")
    lens = [12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 1, 0]
    graph, lp, lens, opts = outgrowing_pooled_batch(6200, 12, lens, output_beam=2.0)
    cpu = Decoder(graph, opts).decode(lp, lens, lattice=True)
    dec = Decoder(graph, opts, device="cuda", max_lanes=POOLED_LANES, memory="lazy")
    need = assert_outgrows_first_pieces(dec, graph, opts, lp, lens)
    got, st = _chunked(dec, 3, lp, lens)
    assert_pools_grew(dec, need)
    assert st["lattice_runs"] >= 5, st["lattice_runs"]
    compare(cpu, got, "pooled, 3-step runs")


def test_bounded_lattice_records_regrow_restarts():
    """A records arena of 64 entries: the first run overflows it, the arena grows and the batch
    starts again (idempotent from its first run); the lattices are the CPU's."""
    rng = np.random.default_rng(12)
    graph = random_ctc_graph(rng, 500, 12, 5, 0.2)
    opts = DecoderOptions(search_beam=12.0, output_beam=6.0, max_active_states=400)
    dec = Decoder(graph, opts, device="cuda", max_lanes=8, lattice_entries=64)
    cpu = Decoder(graph, opts)
    for B, T in [(8, 500), (2, 30), (8, 700)]:
        lp = random_log_probs(rng, B, T, 12, peaky=bool(T % 2))
        lens = rng.integers(0, T + 1, B).astype(np.int32)
        lens[0] = T
        got, _ = _chunked(dec, 40, lp, lens)
        compare(cpu.decode(lp, lens, lattice=True), got, f"B {B} T {T}")


def test_bounded_lattice_chunk_env_var(monkeypatch):
    rng = np.random.default_rng(5)
    graph = random_ctc_graph(rng, 100, 8, 4, 0.2)
    lp = random_log_probs(rng, 3, 500, 8, peaky=True)
    opts = DecoderOptions(search_beam=10.0, output_beam=4.0)
    dec = Decoder(graph, opts, device="cuda")
    monkeypatch.setenv("CUWFST_LATTICE_CHUNK", "0")
    a = dec.decode(lp, lattice=True)
    assert dec._gpu.main.mem_stats()["lattice_runs"] == 1
    monkeypatch.setenv("CUWFST_LATTICE_CHUNK", "40")
    b = dec.decode(lp, lattice=True)
    assert dec._gpu.main.mem_stats()["lattice_runs"] >= 501 // 40
    compare(a, b, "env var")
    monkeypatch.setenv("CUWFST_LATTICE_CHUNK", "x")
    with pytest.raises(ValueError, match="lattice_chunk"):
        dec.decode(lp, lattice=True)


def _peaky_then_flat(rng, B, T, V, split):
    """Log-probs peaky for the first `split` frames (small frontiers, few records a step) and
    flat after (wide frontiers, many): a bounded decode's later runs make more records a step
    than its first run did."""
    lp = random_log_probs(rng, B, T, V, peaky=True)
    sharp = lp[:, :split] * 4  # (on the CPU, seed 1064: ~77 records a row and step in the first 64
    lp[:, :split] = sharp - np.log(np.exp(sharp).sum(-1, keepdims=True))  # frames, ~890 over the batch)
    flat = np.full((B, T - split, V), -np.log(V), np.float32) + rng.normal(0, 0.05, (B, T - split, V)).astype(np.float32)
    lp[:, split:] = flat - np.log(np.exp(flat).sum(-1, keepdims=True))
    return np.ascontiguousarray(lp)


@pytest.mark.parametrize("chunk", [64, 40])
def test_bounded_lattice_records_overflow_first_and_later_runs(chunk):
    """The trigger of lattice_speed --long at c0be1f0 (16 rows of 1,000 and 858 frames, chunk 64:
    the first run overflowed the records and the growth asked 81 GiB), small: rows of two
    lengths (T and T - T // 7) on a fresh decoder whose records start at 64 entries, so the
    first run overflows; peaky frames first and flat ones after, so a later run makes more
    records a step and overflows what the first growth gave. Every growth comes from the run's
    step counts (types.cuh LatticeNeedOfRun; a cursor that disagrees with them raises), and
    the bounded decode's records stay below the whole-batch decode's (a run's need, not the
    batch's). Lattices: the CPU's and the whole-batch path's, bit for bit, on a fresh decoder
    and again on the grown one."""
    rng = np.random.default_rng(1000 + chunk)
    V = 12
    graph = random_ctc_graph(rng, 800, V, 5, 0.2)
    B, T = 8, 600
    lens = np.full(B, T, np.int32)
    lens[1::2] = T - T // 7
    lp = _peaky_then_flat(rng, B, T, V, 150)
    opts = DecoderOptions(search_beam=12.0, output_beam=5.0, max_active_states=2000)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    stats = {}
    for c in (chunk, 0):
        dec = Decoder(graph, opts, device="cuda", max_lanes=B, lattice_entries=64)
        got, st = _chunked(dec, c, lp, lens)
        compare(cpu, got, f"chunk {c}, fresh")
        stats[c] = st
        again, st2 = _chunked(dec, c, lp, lens)  # grown: no more growth, same lattices
        compare(cpu, again, f"chunk {c}, grown")
        assert st2["lattice_grows"] == st["lattice_grows"], (c, st, st2)
        assert st2["lattice_capacity"] == st["lattice_capacity"]
    b, w = stats[chunk], stats[0]
    print("bounded", {k: b[k] for k in ("lattice_grows", "lattice_capacity", "lattice_runs", "lattice_live_records")},
          "whole", {k: w[k] for k in ("lattice_grows", "lattice_capacity", "lattice_runs", "lattice_live_records")})
    assert w["lattice_runs"] == 1 and w["lattice_grows"] == 1
    assert b["lattice_runs"] >= -(-(T + 1) // chunk) - 1
    # the first run overflowed 64 entries, and a later (flat) run what that growth gave
    assert b["lattice_grows"] >= 2, b
    # a run's need (chunk x its largest step, plus a quarter) stays below the batch's records
    assert 64 < b["lattice_capacity"] < w["lattice_capacity"], (b, w)
    recorded = sum(h.lattice.recorded_arcs for h in cpu)
    # (the whole batch through the records pass with CUWFST_LATTICE_RESERVE=chunk: its growth adds
    # the most holes a run can leave)
    holes = _MAX_HOLES if w["lat_reserve"] and w["lattice_after_decodes"] else 0
    assert w["lattice_capacity"] <= (recorded + holes) + (recorded + holes) // 4 + 1, (w, recorded)


@pytest.mark.parametrize("filt", ["on", "off"])
def test_automatic_chunk_is_whole_for_short_batches_and_bounded_for_long(monkeypatch, filt):
    """CUWFST_LATTICE_CHUNK unset: a batch whose longest row takes at most
    LATTICE_WHOLE_MAX_STEPS steps (LATTICE_WHOLE_MAX_STEPS_FILTERED with the records' filter)
    runs whole (one run), a longer one in runs of LATTICE_CHUNK_DEFAULT; the variable and the
    attribute override it; the lattices are the CPU's in every case (and the same as each
    other)."""
    from cuwfst.decoder.gpu import LATTICE_CHUNK_DEFAULT, LATTICE_WHOLE_MAX_STEPS, LATTICE_WHOLE_MAX_STEPS_FILTERED

    monkeypatch.delenv("CUWFST_LATTICE_CHUNK", raising=False)
    monkeypatch.setenv("CUWFST_LATTICE_FILTER", filt)
    bound = LATTICE_WHOLE_MAX_STEPS_FILTERED if filt == "on" else LATTICE_WHOLE_MAX_STEPS
    rng = np.random.default_rng(17)
    V = 10
    graph = random_ctc_graph(rng, 300, V, 4, 0.2)
    opts = DecoderOptions(search_beam=10.0, output_beam=4.0, max_active_states=300)
    dec = Decoder(graph, opts, device="cuda", max_lanes=4)
    cpu = Decoder(graph, opts, num_threads=2)
    short = bound - 1  # frames: steps = frames + 1 = the bound
    for T, runs in ((short, 1), (short + 1, None), (max(1000, bound + 100), None)):
        lp = random_log_probs(rng, 3, T, V, peaky=True)
        lens = np.array([T, T // 2, 7], np.int32)
        want = cpu.decode(lp, lens, lattice=True)
        got = dec.decode(lp, lens, lattice=True)
        st = dec._gpu.main.mem_stats()
        compare(want, got, f"auto T {T}")
        if runs == 1:
            assert st["lattice_runs"] == 1, (T, st["lattice_runs"])
        else:
            assert st["lattice_runs"] >= -(-(T + 1) // LATTICE_CHUNK_DEFAULT) - 1, (T, st["lattice_runs"])
        monkeypatch.setenv("CUWFST_LATTICE_CHUNK", "32")
        forced = dec.decode(lp, lens, lattice=True)
        assert dec._gpu.main.mem_stats()["lattice_runs"] >= -(-(T + 1) // 32) - 1
        compare(want, forced, f"chunk 32 T {T}")
        monkeypatch.setenv("CUWFST_LATTICE_CHUNK", "0")
        whole = dec.decode(lp, lens, lattice=True)
        assert dec._gpu.main.mem_stats()["lattice_runs"] == 1
        compare(want, whole, f"chunk 0 T {T}")
        monkeypatch.delenv("CUWFST_LATTICE_CHUNK")


def test_gpu_pruning_threaded_numbering_and_row_reuse():
    """NumberPrunedRows (cuwfst/lattice_number.h) on its threaded path (>= 20,000 kept arcs in
    one decode: hardware_concurrency() workers, the lane scatter, rows largest first), whole
    (chunk 0, kToken endpoints) and bounded (chunk 40, kTimeRank), then a smaller batch through
    the same decoder (the kept row arrays and scratch shrink to it: rows of 0 frames, fewer
    lanes), then the large one again: every lattice the CPU's, and the word confidences
    (attach_all on num_threads threads) bit for bit."""
    rng = np.random.default_rng(606)
    V = 10
    graph = random_ctc_graph(rng, 300, V, 4, 0.2)
    opts = DecoderOptions(search_beam=12.0, output_beam=8.0, max_active_states=2000, allow_partial=True)
    cpu = Decoder(graph, opts, num_threads=2)
    dec = Decoder(graph, opts, device="cuda", max_lanes=24, num_threads=3)
    big_lens = np.array([600, 0, 1, 599, 300, 20, 21, 600] * 3, np.int32)
    big = random_log_probs(rng, len(big_lens), 600, V, peaky=False)
    small_lens = np.array([0, 45, 1], np.int32)
    small = random_log_probs(rng, len(small_lens), 45, V, peaky=True)
    want_big = cpu.decode(big, big_lens, lattice=True)
    want_small = cpu.decode(small, small_lens, lattice=True)
    assert sum(h.lattice.num_arcs for h in want_big) >= 20_000  # the threaded numbering
    for chunk in (0, 40):
        for what, lp, lens, want in [("big", big, big_lens, want_big), ("small", small, small_lens, want_small),
                                     ("big again", big, big_lens, want_big)]:
            got, _ = _chunked(dec, chunk, lp, lens)
            assert dec._gpu.lattice_prune_on_gpu(dec._gpu.main)
            compare(want, got, f"chunk {chunk}, {what}")
            for b, (c, g) in enumerate(zip(want, got)):
                if c.words == g.words and c.word_times == g.word_times:
                    assert np.array_equal(np.asarray(c.word_confidences).view(np.int64),
                                          np.asarray(g.word_confidences).view(np.int64)), (chunk, what, b)


# ------------------------------------------------------------ the records' filter
# A whole-batch GPU-pruned decode keeps out of its records the non-admitted arcs that no k2
# window can keep (lattice.cuh LatFilterFor); its guard decodes the batch again without the
# filter when a lane's scores leave the magnitudes the filter's rounding pads cover.
def _filtered(graph, opts, lp, lens, filt, pad=0.0, chunk=0, trim="on", **kw):
    dec = Decoder(graph, opts, device="cuda", **kw)
    dec._gpu.lattice_filter = filt
    dec._gpu.lattice_trim = trim
    dec._gpu._lattice_filter_pad = pad
    dec._gpu.lattice_chunk = chunk  # 0: the whole batch; else bounded runs of `chunk` steps
    out = dec.decode(lp, lens, lattice=True)
    st = dec._gpu.main.mem_stats()
    if dec._gpu._rescue is not None:  # the rescued rows' pruning ran in the rescue instance
        st["rescue"] = dec._gpu._rescue.mem_stats()
    return out, st


def _wide_case(seed, frames=(20, 120)):
    """Wide frontiers against a small output beam: most recorded arcs are far below their
    destination, which is where the filter drops records. The longest row has `frames`[0] to
    `frames`[1] - 1 frames."""
    rng = np.random.default_rng(88000 + seed)
    V = int(rng.integers(4, 20))
    graph = random_ctc_graph(rng, int(rng.choice([200, 800])), V, int(rng.integers(3, 7)), float(rng.uniform(0.05, 0.3)))
    B = int(rng.integers(2, 7))
    T = int(rng.integers(*frames))
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    opts = DecoderOptions(search_beam=float(rng.choice([10.0, 16.0, 20.0])), output_beam=float(rng.choice([0.5, 2.0, 5.0, 8.0])),
                          max_active_states=int(rng.choice([200, 2000, 10000])), allow_partial=bool(seed % 3 != 0))
    return graph, lp, lens, opts


@pytest.mark.parametrize("seed", range(60))
def test_lattice_filter_keeps_every_lattice(seed):
    """Filter on and off give the CPU's lattices bit for bit (recorded_arcs included: the
    filter's drops are counted as k2 counts its recorded arcs), the whole batch in one run or
    in bounded runs of 7, 20 or 64 steps, the filter drops records, and its guard stays quiet
    on ordinary scores."""
    graph, lp, lens, opts = _wide_case(seed)
    chunk = [0, 7, 0, 20, 0, 64][seed % 6]
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    on, st_on = _filtered(graph, opts, lp, lens, "on", chunk=chunk, trim="off", max_lanes=int(lens.size))
    off, st_off = _filtered(graph, opts, lp, lens, "off", chunk=chunk, max_lanes=int(lens.size))
    trim, st_trim = _filtered(graph, opts, lp, lens, "on", chunk=chunk, max_lanes=int(lens.size))
    compare(cpu, on, f"filter on, seed {seed}")
    compare(cpu, off, f"filter off, seed {seed}")
    compare(cpu, trim, f"filter and lattice trim on, seed {seed}")
    assert st_off["lattice_filter_dropped"] == 0 and st_on["lattice_filter_reruns"] == 0
    assert st_trim["lattice_filter_reruns"] == 0
    # the lattice trim (on by default with the filter, on graphs with sorted arcs) leaves the
    # recorded arcs uncounted and walks fewer slots; without it (or without the filter: the
    # trim needs it) every row counts k2's recorded arcs
    assert st_trim["trims_arcs"] == 1
    assert all(h.lattice.recorded_arcs is None for h in trim), f"seed {seed}"
    for name, got in (("filter on, trim off", on), ("filter off", off)):
        assert [h.lattice.recorded_arcs for h in got] == [h.lattice.recorded_arcs for h in cpu], f"{name}, seed {seed}"
    # (the same records either way, so the same record growth and re-runs: the same steps walked)
    assert st_trim["slots"] <= st_on["slots"], (seed, st_trim["slots"], st_on["slots"])
    for k, v in (("trim_slots_on", st_trim["slots"]), ("trim_slots_off", st_on["slots"])):
        TOTALS[k] = TOTALS.get(k, 0) + v
    recorded = sum(h.lattice.recorded_arcs for h in cpu)
    TOTALS.setdefault("filter_recorded", 0)
    TOTALS.setdefault("filter_dropped", 0)
    TOTALS["filter_recorded"] += recorded
    TOTALS["filter_dropped"] += st_on["lattice_filter_dropped"]
    assert 0 <= st_on["lattice_filter_dropped"] < max(recorded, 1)


@pytest.mark.parametrize("entries,lanes", [(None, "rows"), (64, "rows"), (None, 300), (64, 300)])
def test_lattice_candidates_give_the_walks_records(monkeypatch, entries, lanes):
    """Candidate mode (common.cuh LatCandOn: ExpandKernel writes each prefiltered lane-step's
    arcs that reach the prefilter's bound, LatPersistKernel records them first (LatCandRecords)
    and walks only the lane-steps they do not cover) gives the CPU's lattices, as the walk alone
    does (CUWFST_LATTICE_CAND=off, same decoder). With a 64-entry candidate buffer
    (CUWFST_LATTICE_CAND_ENTRIES) many lane-steps overflow it and are walked instead. With 300
    lanes (more than a walker CTA's 256 threads) the lanes' LatLane is loaded by each thread
    that meets it, not once per CTA into shared memory, and the walk always runs (max_active
    200 keeps 300 lanes small). The decoders' counts (lane-steps recorded from candidates;
    lane-steps whose candidates overflowed, walked instead: two disjoint counts) show which
    paths ran. (The in-step stage's: the records after the search have no candidates.)"""
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "step")
    if entries:
        monkeypatch.setenv("CUWFST_LATTICE_CAND_ENTRIES", str(entries))
    steps = over = final = 0
    for seed in range(16 if lanes == "rows" else 8):
        graph, lp, lens, opts = _wide_case(seed)
        if lanes != "rows":
            opts = dataclasses.replace(opts, max_active_states=200)
        cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
        dec = Decoder(graph, opts, device="cuda", max_lanes=int(lens.size) if lanes == "rows" else lanes)
        on = dec.decode(lp, lens, lattice=True)
        st = dec._gpu.main.mem_stats()
        monkeypatch.setenv("CUWFST_LATTICE_CAND", "off")
        try:
            off = dec.decode(lp, lens, lattice=True)
        finally:
            monkeypatch.delenv("CUWFST_LATTICE_CAND")
        st_off = dec._gpu.main.mem_stats()
        compare(cpu, on, f"candidates, seed {seed}")
        compare(cpu, off, f"candidates off, seed {seed}")
        assert (st_off["lattice_cand_steps"], st_off["lattice_cand_over"], st_off["lattice_cand_final_steps"]) == \
            (st["lattice_cand_steps"], st["lattice_cand_over"], st["lattice_cand_final_steps"]), \
            "no candidate lane-steps with it off"
        steps += st["lattice_cand_steps"]
        over += st["lattice_cand_over"]
        final += st["lattice_cand_final_steps"]
    print(f"\nlane-steps recorded from candidates {steps} (and final ones {final}), walked after their candidates "
          f"overflowed {over} (buffer {entries or 'default'}, lanes {lanes})")
    assert steps > 0 and final > 0
    if entries:
        assert over > 0
    else:
        assert over == 0


def test_pruned_rows_are_checked_before_any_is_written():
    """gpu_lattice_pruned_rows (one call for a batch's pruned rows) checks every asked row
    before it copies any: a row whose arrays have the wrong arc count, or a row the last
    decode does not have, is a ValueError, and the other rows' arrays are left as they were;
    with right sizes every row comes back as its Lattice holds it."""
    graph, lp, lens, opts = _wide_case(3)
    dec = Decoder(graph, opts, device="cuda", max_lanes=int(lens.size))
    hyps = dec.decode(lp, lens, lattice=True)  # one sub-batch: its pruned rows stay in the decoder
    inst = dec._gpu.main
    # the sub-batch's rows are the batch's longest first (rescue.batches): native row j is
    # hypothesis order[j]
    order = batches(range(int(lens.size)), lens, int(lens.size))[0]
    rows = [j for j, b in enumerate(order) if hyps[b].lattice is not None and hyps[b].lattice.num_arcs > 0][:2]
    assert len(rows) == 2

    def arrays(j, extra=0):
        lat = hyps[order[j]].lattice
        S, A = lat.num_states, lat.num_arcs + extra
        return [np.full((3, S), -7, np.int32), np.full((4, A), -7, np.int32), np.full((3, A), -7, np.float32)]

    first = arrays(rows[0])
    with pytest.raises(ValueError, match="wrong state or arc count"):
        inst.mod.gpu_lattice_pruned_rows(inst.handle, np.array(rows, np.int32), first + arrays(rows[1], extra=1))
    assert all((x == -7).all() for x in first), "a row was written before the check failed"
    with pytest.raises(ValueError, match="no such row"):
        inst.mod.gpu_lattice_pruned_rows(inst.handle, np.array([rows[0], lens.size], np.int32),
                                         first + arrays(rows[1]))
    assert all((x == -7).all() for x in first)
    second = arrays(rows[1])
    inst.mod.gpu_lattice_pruned_rows(inst.handle, np.array(rows, np.int32), first + second)
    for j, (states, arcs, scores) in zip(rows, (first, second)):
        lat = hyps[order[j]].lattice
        assert np.array_equal(states[0], lat.state_frame) and np.array_equal(arcs[0], lat.src), j
        assert np.array_equal(arcs[1], lat.dst) and np.array_equal(scores[2], lat.score), j
        assert np.array_equal(arcs[2], lat.frame) and np.array_equal(scores[0], lat.acoustic), j


def test_lattice_filter_drops_most_records_of_wide_frontiers():
    """Across the cases of test_lattice_filter_keeps_every_lattice: the filter dropped a
    large share of the recorded arcs (a filter that drops nothing would pass the equality)."""
    for seed in range(8):
        graph, lp, lens, opts = _wide_case(seed)
        # (the lattice trim off: with it the arcs it leaves out are neither walked nor counted)
        on, st = _filtered(graph, opts, lp, lens, "on", trim="off", max_lanes=int(lens.size))
        TOTALS.setdefault("filter_recorded8", 0)
        TOTALS["filter_recorded8"] += sum(h.lattice.recorded_arcs for h in on)
        TOTALS.setdefault("filter_dropped8", 0)
        TOTALS["filter_dropped8"] += st["lattice_filter_dropped"]
    print(f"\nthe records' filter dropped {TOTALS['filter_dropped8']} of {TOTALS['filter_recorded8']} recorded arcs "
          f"({TOTALS['filter_dropped8'] / max(TOTALS['filter_recorded8'], 1):.1%}) on 8 wide cases")
    assert TOTALS["filter_dropped8"] > 0


def test_lattice_filter_with_too_small_a_pad_is_caught():
    """A filter that drops arcs an output-beam window keeps (its pad lowered by 3: arcs within
    output_beam - 2.5 of their destination go) gives lattices that differ from the CPU's: the
    equality above would catch a filter that is not exact."""
    differ = 0
    for seed in range(12):
        graph, lp, lens, opts = _wide_case(seed)
        cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
        bad, _ = _filtered(graph, opts, lp, lens, "on", pad=-3.0, max_lanes=int(lens.size))
        for c, g in zip(cpu, bad):
            try:
                assert_same_gpu_lattice(c.lattice, g.lattice, "")
            except AssertionError:
                differ += 1
    assert differ > 0


@pytest.mark.parametrize("records", ["step", "after"])
@pytest.mark.parametrize("frame,chunk", [(3, 0), (40, 0), (3, 16), (40, 16), (70, 32)])
def test_lattice_filter_guard_decodes_again_without_it(frame, chunk, records, monkeypatch):
    """A frame whose log-probs are all near -20,000 after ordinary ones: the scores leave the
    magnitudes the filter's pads cover within a pruning window of filtered steps, so the guard
    fires and the batch is decoded again without the filter (a bounded decode from its first
    run, whatever it emitted before); the lattices are the CPU's. Under the records after the
    search (whole rows) the re-run's pass reads every arc (no filter bound)."""
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", records)
    rng = np.random.default_rng(4242 + frame)
    V = 10
    graph = random_ctc_graph(rng, 300, V, 5, 0.2)
    B, T = 3, 80
    lp = random_log_probs(rng, B, T, V, peaky=False)
    lp[1, frame] -= 20000.0
    lens = np.array([T, T, T - 5], np.int32)
    opts = DecoderOptions(search_beam=12.0, output_beam=4.0, max_active_states=2000)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    got, st = _filtered(graph, opts, lp, lens, "on", chunk=chunk, max_lanes=B)
    compare(cpu, got, f"guard frame {frame} chunk {chunk}")
    assert st["lattice_filter_reruns"] == 1, st
    assert st["lattice_filter_dropped"] == 0  # counted from the run whose records are read: the re-run's
    assert st["lattice_after_decodes"] == (1 if records == "after" and chunk == 0 else 0), st


def test_report_filter_totals():
    r, d = TOTALS.get("filter_recorded", 0), TOTALS.get("filter_dropped", 0)
    print(f"\nthe records' filter: {d} of {r} recorded arcs dropped ({d / max(r, 1):.1%}), lattices identical")
    on, off = TOTALS.get("trim_slots_on", 0), TOTALS.get("trim_slots_off", 0)
    print(f"the lattice trim: the steps walked {on} of {off} slots ({on / max(off, 1):.1%}), lattices identical")
    # (reported after test_lattice_filter_keeps_every_lattice: its 60 cases must have trimmed)
    if off:
        assert on < off


@pytest.mark.parametrize("seed", range(24))
def test_lattice_trim_on_wide_graphs(seed):
    """States with up to hundreds of sorted arcs (the trim's search runs; ties in the weights):
    the lattice trim walks a fraction of the slots and the lattices are the CPU's, whole and
    in bounded runs."""
    from test_gpu_trim import wide_graph

    rng = np.random.default_rng(7700 + seed)
    V = int(rng.integers(20, 80))
    graph = wide_graph(rng, int(rng.integers(50, 300)), V, int(rng.choice([40, 200, 600])),
                       blanks=int(rng.integers(1, 3)), tie_frac=0.2)
    B, T = int(rng.integers(1, 5)), int(rng.integers(10, 60))
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    opts = DecoderOptions(search_beam=float(rng.choice([6.0, 10.0, 16.0])),
                          output_beam=float(rng.choice([1.0, 3.0, 6.0])),
                          max_active_states=int(rng.choice([50, 500, 10000])), allow_partial=bool(seed % 3))
    chunk = [0, 9][seed % 2]
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    trim, st_t = _filtered(graph, opts, lp, lens, "on", chunk=chunk, max_lanes=B)
    full, st_f = _filtered(graph, opts, lp, lens, "on", chunk=chunk, trim="off", max_lanes=B)
    compare(cpu, trim, f"wide graph, lattice trim, seed {seed}")
    compare(cpu, full, f"wide graph, untrimmed, seed {seed}")
    assert st_t["lattice_filter_reruns"] == 0 and st_t["slots"] <= st_f["slots"]
    for k, v in (("wide_slots_on", st_t["slots"]), ("wide_slots_off", st_f["slots"])):
        TOTALS[k] = TOTALS.get(k, 0) + v


def test_report_lattice_trim_wide_totals():
    on, off = TOTALS.get("wide_slots_on", 0), TOTALS.get("wide_slots_off", 0)
    print(f"\nthe lattice trim on wide graphs: the steps walked {on} of {off} slots ({on / max(off, 1):.1%}), "
          "lattices identical")
    if off:  # (after test_lattice_trim_on_wide_graphs: it must have trimmed)
        assert on < 0.8 * off


@pytest.mark.parametrize("chunk", [0, 16])
def test_lattice_trim_guard_when_a_step_leaves_the_filtered_magnitudes(chunk, monkeypatch):
    """A frame whose log-probs all drop by 10,000: the step's frontier leaves the filter's
    magnitudes (8,192) from a frontier the lattice trim trims at, so the trim may have left
    out arcs the filter will not drop; the guard decodes the batch again without the filter
    (and so without the trim). The filter alone does not need that (its own guard is at
    16,384): with the trim off there is no re-run. Both give the CPU's lattices. (The in-step
    stage's trim; the records after the search, whose search is the 1-best's and whose pass
    reads the arcs by the filter's bound alone, need no re-run either: last lines.)"""
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "step")
    rng = np.random.default_rng(5150)
    V = 10
    graph = random_ctc_graph(rng, 300, V, 5, 0.2)
    B, T = 3, 60
    lp = random_log_probs(rng, B, T, V, peaky=False)
    lp[2, 25] -= 10000.0
    lens = np.array([T, T - 3, T], np.int32)
    opts = DecoderOptions(search_beam=12.0, output_beam=4.0, max_active_states=2000, check_log_probs=False)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    got, st = _filtered(graph, opts, lp, lens, "on", chunk=chunk, max_lanes=B)
    compare(cpu, got, f"lattice trim guard, chunk {chunk}")
    assert st["lattice_filter_reruns"] == 1, st
    assert [h.lattice.recorded_arcs for h in got] == [h.lattice.recorded_arcs for h in cpu]  # the re-run counted
    got, st = _filtered(graph, opts, lp, lens, "on", chunk=chunk, trim="off", max_lanes=B)
    compare(cpu, got, f"filter alone, chunk {chunk}")
    assert st["lattice_filter_reruns"] == 0, st
    monkeypatch.setenv("CUWFST_LATTICE_RECORDS", "after")
    got, st = _filtered(graph, opts, lp, lens, "on", chunk=chunk, max_lanes=B)
    compare(cpu, got, f"records after the search, chunk {chunk}")
    # (whole rows only: bounded runs keep the in-step stage, and its trim's guard)
    assert st["lattice_filter_reruns"] == (0 if chunk == 0 else 1), st
    assert st["lattice_after_decodes"] == (1 if chunk == 0 else 0), st


@pytest.mark.parametrize("env,switch", [("CUWFST_LATTICE_FILTER", "lattice_filter"),
                                        ("CUWFST_LATTICE_TRIM", "lattice_trim")])
def test_lattice_switch_env_vars(env, switch, monkeypatch):
    """The records' filter and the lattice trim: on by default, "off" by the environment
    variable or the backend attribute (which wins), anything else refused."""
    rng = np.random.default_rng(9)
    graph = random_ctc_graph(rng, 100, 8, 4, 0.2)
    dec = Decoder(graph, DecoderOptions(), device="cuda")
    on = getattr(dec._gpu, f"{switch}_on")
    monkeypatch.delenv(env, raising=False)
    assert on() is True
    monkeypatch.setenv(env, "off")
    assert on() is False
    monkeypatch.setenv(env, "on")
    assert on() is True
    setattr(dec._gpu, switch, "off")
    assert on() is False
    setattr(dec._gpu, switch, None)
    monkeypatch.setenv(env, "maybe")
    with pytest.raises(ValueError, match=switch):
        on()


# ------------------------------------------------------------ the pruning's rank sort
# PruneLattice orders each time's tokens (the CPU's token order, which numbers lattice states).
# By default (CUWFST_PRUNE_SORT=lanes) the forward, the ranks and the windows run one CTA a lane
# over all times, one launch each (PrLaneForwardKernel, PrLaneWindowsKernel), whole batches and
# bounded passes alike: the ranks without a sort, by counting each source's children (in shared
# memory or, past 12,288 tokens, in global scratch; "lanes:64" lowers that size to 64 tokens,
# CUWFST_PRUNE_LANE_CAP, so most lane-times rank in the scratch). CUWFST_PRUNE_SORT=block keeps a
# forward launch and a rank launch a time: a block radix sort in shared memory, one CTA a lane
# (PrBlockRankKernel, where every lane of the time holds at most 8,192 tokens; the radix sort for
# the others); "radix" one device-wide radix sort of (lane, key) for every time; "segmented" a
# segmented sort by lane (the path before). The keys' arc part is the arc's place among its
# source state's arcs (PrKeyCode, fewer bits), or the arc id itself (CUWFST_PRUNE_CODE=arc).
PRUNE_SORTS = [("block", "place"), ("block", "arc"), ("radix", "place"), ("radix", "arc"), ("segmented", "place"),
               ("lanes", "place"), ("lanes", "arc"), ("lanes:64", "place"), ("lanes:64", "arc")]


def _set_prune_sort(monkeypatch, sort, code):
    """CUWFST_PRUNE_SORT (and CUWFST_PRUNE_LANE_CAP for "lanes:N") and CUWFST_PRUNE_CODE; returns
    the sort's name."""
    name, _, cap = sort.partition(":")
    monkeypatch.setenv("CUWFST_PRUNE_SORT", name)
    if cap:
        monkeypatch.setenv("CUWFST_PRUNE_LANE_CAP", cap)
    else:
        monkeypatch.delenv("CUWFST_PRUNE_LANE_CAP", raising=False)
    monkeypatch.setenv("CUWFST_PRUNE_CODE", code)
    return name


def _check_rank_paths(sort, st, large):
    """The times each rank path took: the block path ranks every time unless a lane-time
    passes 8,192 tokens (large: a row's frontier did; those times by a sort); radix and
    segmented never use it."""
    both = [st] + ([st["rescue"]] if "rescue" in st else [])  # main and rescue instances
    block = sum(x["prune_block_times"] for x in both)
    sorted_ = sum(x["prune_sort_times"] for x in both)
    laned = sum(x["prune_lane_times"] for x in both)
    if sort == "lanes":
        assert laned > 0 and block == sorted_ == 0, (laned, block, sorted_)
        return
    assert laned == 0, st
    if sort == "block":
        assert block > 0, st
        assert (sorted_ > 0) == large, (block, sorted_)
    else:
        assert block == 0 and sorted_ > 0, (block, sorted_)


def _large_frontier_case(seed, max_active):
    """Flat rows over a 12,000-state graph with a wide beam: lane-times past 8,192 tokens (11,8xx)."""
    rng = np.random.default_rng(seed)
    V = 40
    graph = random_ctc_graph(rng, 12000, V, 8, 0.3)
    lp = random_log_probs(rng, 3, 14, V, peaky=False)
    lens = np.array([14, 9, 3], np.int32)
    opts = DecoderOptions(search_beam=1000.0, output_beam=2.0, min_active_states=1, max_active_states=max_active)
    return graph, lp, lens, opts


@pytest.mark.parametrize("case", range(10))
def test_prune_rank_sort_radix_equals_segmented(case, monkeypatch):
    """Lane-times from a few tokens to past 8,192 and batches of 1 to 6 lanes, rescued rows
    among them in the last cases: the CPU's lattices with every rank path (the block path's
    three sizes and the radix sort's times in the last cases: their times' largest lanes run
    1 ... 6,198 ... 11,855 tokens)."""
    if case < 8:
        graph, lp, lens, opts = _wide_case(100 + case)
    else:
        graph, lp, lens, opts = _large_frontier_case(6300 + case, 400 if case == 8 else 3000)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    if case >= 8:
        assert max(h.max_frontier for h in cpu) > 8192, "a lane-time past 8,192 tokens: the sort path too"
    for sort, code in PRUNE_SORTS:
        name = _set_prune_sort(monkeypatch, sort, code)
        got, st = _filtered(graph, opts, lp, lens, "on", max_lanes=int(lens.size))
        compare(cpu, got, f"rank sort {sort} code {code}, case {case}")
        _check_rank_paths(name, st, max(h.max_frontier for h in cpu) > 8192)


@pytest.mark.parametrize("case", range(6))
def test_prune_bucket_per_warp_equals_per_record(case, monkeypatch):
    """The records' bucketing with one cursor update per warp group (the default) or per record
    (CUWFST_PRUNE_BUCKET=atomic): the CPU's lattices either way, whole batches and bounded runs
    (IncBucketKernel)."""
    graph, lp, lens, opts = _wide_case(300 + case) if case < 4 else _large_frontier_case(6500 + case, 3000)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    for bucket in ("warp", "atomic"):
        monkeypatch.setenv("CUWFST_PRUNE_BUCKET", bucket)
        for chunk in (0, 5 if case % 2 else 20):
            got, _ = _filtered(graph, opts, lp, lens, "on", chunk=chunk, max_lanes=int(lens.size))
            compare(cpu, got, f"bucket {bucket} chunk {chunk}, case {case}")


def _pipelined_case(case):
    """Rows for the pipelined begin's tests: cases 0-2 short rows (a batch's sequence captured
    whole), 3 frontiers past 8,192 tokens, 4-6 rows of 140-259 frames (past kChunkFrom's 128 steps:
    the steps replay chunks and the records pass launches plainly after them), four copies of each
    row in a permuted order."""
    if case < 3:
        graph, lp, lens, opts = _wide_case(320 + case)
    elif case == 3:
        graph, lp, lens, opts = _large_frontier_case(6520 + case, 3000)
    else:
        graph, lp, lens, opts = _wide_case(330 + case, frames=(140, 260))
        lens[1:] = np.maximum(lens[1:], 130)  # (most sub-batches past 128 steps)
    rng = np.random.default_rng(40 + case)
    reps = 4
    lp = np.concatenate([lp] * reps)
    lens = np.concatenate([rng.permutation(lens) for _ in range(reps)]).astype(np.int32)
    return graph, lp, lens, opts


def _pipelined_decode(graph, lp, lens, opts, monkeypatch, **env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("CUWFST_LATTICE_PIPELINE", "on")
    lanes = max(1, int(lens.size) // 5)
    dec = Decoder(graph, opts, device="cuda", max_lanes=lanes)
    dec._gpu.lattice_trace = []  # (a stamp set a pipelined begin)
    got = dec.decode(lp, lens, lattice=True)
    assert len(dec._gpu.lattice_trace) >= 4, "the sub-batches' prunings pipelined"
    return got, lanes


@pytest.mark.parametrize("begin", ["side", "async", "sync"])
@pytest.mark.parametrize("case", range(7))
def test_prune_begin_without_wait_pipelined(case, begin, monkeypatch):
    """The pruning's begin buckets the records on its own stream beside the next decode (side), on
    the decoder's stream without waiting (async, the default) or waiting (sync): with more rows
    than lanes the pruning of each sub-batch is pipelined beside the next one's decode, whose
    records pass overwrites the records the bucketing reads (after it: stream order, or the wait
    for the side stream); the CPU's lattices each way."""
    graph, lp, lens, opts = _pipelined_case(case)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    got, lanes = _pipelined_decode(graph, lp, lens, opts, monkeypatch, CUWFST_PRUNE_BEGIN=begin)
    compare(cpu, got, f"begin {begin}, {lens.size} rows in {lanes} lanes, case {case}")


@pytest.mark.parametrize("case", [0, 1, 4, 5])
def test_prune_side_bucketing_late(case, monkeypatch):
    """A side bucketing held back 60 ms (CUWFST_PRUNE_SIDE_DELAY_US) starts after the next decode's
    search: that decode's records pass waits for it, before a whole captured sequence (short rows)
    or before the pass itself (long rows), so the lattices are still the CPU's. The control: with
    the wait off (CUWFST_PRUNE_SIDE_WAIT=off, a test switch) the records are overwritten first and
    some sub-batch's lattices differ, so the first half can fail."""
    graph, lp, lens, opts = _pipelined_case(case)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    late = dict(CUWFST_PRUNE_BEGIN="side", CUWFST_PRUNE_SIDE_DELAY_US="60000")
    got, lanes = _pipelined_decode(graph, lp, lens, opts, monkeypatch, **late)
    compare(cpu, got, f"late side bucketing, {lens.size} rows in {lanes} lanes, case {case}")
    try:
        bad, _ = _pipelined_decode(graph, lp, lens, opts, monkeypatch, CUWFST_PRUNE_SIDE_WAIT="off", **late)
    except (RuntimeError, IndexError, ValueError):
        return  # (the overwritten records broke a check, e.g. "arc code ... names no graph arc": also a failure shown)
    try:
        compare(cpu, bad, "no wait")
    except AssertionError:
        return
    pytest.fail("with the wait off the late side bucketing still gave the CPU's lattices: the test "
                "above could not fail")


@pytest.mark.parametrize("case", range(6))
def test_prune_rank_sort_bounded_runs(case, monkeypatch):
    """The bounded path's passes (IncPass) take the same sort: runs of 5 to 64 steps, the
    sources of a pass's first time ranked by the pass before; the CPU's lattices with either
    sort."""
    if case < 4:
        graph, lp, lens, opts = _wide_case(200 + case)
        chunk = [7, 20, 33, 64][case]
    else:
        graph, lp, lens, opts = _large_frontier_case(6400 + case, 3000)
        chunk = 5 if case == 4 else 3
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    for sort, code in PRUNE_SORTS:
        name = _set_prune_sort(monkeypatch, sort, code)
        got, st = _filtered(graph, opts, lp, lens, "on", chunk=chunk, max_lanes=int(lens.size))
        compare(cpu, got, f"bounded rank sort {sort} code {code}, case {case}")
        _check_rank_paths(name, st, max(h.max_frontier for h in cpu) > 8192)
        assert st["lattice_runs"] > 1 or int(lens.max()) + 1 <= chunk


def _eps_case(seed, chain_at_least=1):
    """A graph with acyclic epsilon arcs, wide frontiers against a small output beam (where the
    records' filter on epsilon graphs drops records)."""
    from helpers import random_eps_graph_any

    rng = np.random.default_rng(97000 + seed)
    V = int(rng.integers(4, 16))
    while True:
        graph = random_eps_graph_any(rng, int(rng.choice([150, 600])), V, int(rng.integers(2, 6)),
                                     eps_prob=float(rng.choice([0.3, 0.7, 1.0])), cycles=False,
                                     chain=int(rng.choice([2, 5])))
        if graph.max_epsilon_chain >= chain_at_least:
            break
    B = int(rng.integers(2, 6))
    T = int(rng.integers(20, 100))
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    opts = DecoderOptions(search_beam=float(rng.choice([10.0, 16.0])), output_beam=float(rng.choice([0.5, 2.0, 5.0, 8.0])),
                          max_active_states=int(rng.choice([200, 2000])), allow_partial=bool(seed % 3 != 0))
    return graph, lp, lens, opts


def _eps_decode(graph, opts, lp, lens, mode, pad=0.0, **kw):
    """(The records' replay on the host, whose filter these tests are about: an epsilon graph's
    lattices are otherwise pruned on the GPU, tests/test_gpu_eps_prune.py.)"""
    dec = Decoder(graph, opts, device="cuda", max_lanes=int(lens.size), **kw)
    dec._gpu.lattice_prune_eps = "replay"
    dec._gpu.lattice_eps_filter = mode
    dec._gpu._lattice_filter_pad = pad
    return dec, dec.decode(lp, lens, lattice=True)


@pytest.mark.parametrize("seed", range(40))
def test_eps_records_filter_keeps_every_lattice(seed):
    """The records' filter on epsilon graphs (common.cuh LatEpsFilterFor, on by default where
    eps_iterations covers the graph's chain): on and off give the CPU's lattices bit for bit
    (recorded_arcs None on the filtered rows), no row is decoded again, and the filter drops
    records (counted from the instance's own records, the filter on and off on the same rows;
    producer_a is 0 on every final step)."""
    graph, lp, lens, opts = _eps_case(seed)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    dec_on, on = _eps_decode(graph, opts, lp, lens, "on")
    dec_off, off = _eps_decode(graph, opts, lp, lens, "off")
    compare(cpu, on, f"eps filter on, seed {seed}")
    compare(cpu, off, f"eps filter off, seed {seed}")
    assert dec_on._gpu.stats.get("eps_filter_redone_rows", 0) == 0
    assert [h.lattice.recorded_arcs for h in off] == [h.lattice.recorded_arcs for h in cpu]
    be = dec_on._gpu
    lp_dev, stream = be.to_device(lp), be._stream()
    _, rec_on = be.main.decode_lattice(lp_dev, lens, stream, eps_filter=True, output_beam=opts.output_beam)
    _, rec_off = be.main.decode_lattice(lp_dev, lens, stream, eps_filter=False, output_beam=opts.output_beam)
    assert rec_off.producer_a is None and rec_on.producer_a is not None
    assert np.array_equal(rec_on.cutoffs, rec_off.cutoffs) and np.array_equal(rec_on.sizes, rec_off.sizes)
    assert (rec_on.counts <= rec_off.counts).all()
    for b in range(lens.size):
        assert rec_on.producer_a[b, lens[b]] == 0  # (the final step)
    for k, v in (("eps_records_on", len(rec_on.records)), ("eps_records_off", len(rec_off.records))):
        TOTALS[k] = TOTALS.get(k, 0) + v


def test_eps_records_filter_totals():
    """(After the seeds above: the records they kept with the filter on against off.)"""
    on, off = TOTALS.get("eps_records_on", 0), TOTALS.get("eps_records_off", 0)
    print(f"\nthe records' filter on epsilon graphs: {on} of {off} records kept ({on / max(off, 1):.1%})")
    assert off == 0 or on < off


@pytest.mark.parametrize("seed", range(12))
def test_eps_records_filter_guard_sends_rows_back(seed):
    """Forced below the graph's epsilon chain (eps_iterations 1 on chains of 2+: the closure's
    scores need not be the forward's), the host replay's guard sends rows back, they are
    decoded again without the filter, and every lattice is the CPU's."""
    graph, lp, lens, opts = _eps_case(seed, chain_at_least=2)
    opts = dataclasses.replace(opts, eps_iterations=1)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    dec, got = _eps_decode(graph, opts, lp, lens, "force")
    compare(cpu, got, f"eps filter forced, seed {seed}")
    TOTALS["eps_redone"] = TOTALS.get("eps_redone", 0) + dec._gpu.stats.get("eps_filter_redone_rows", 0)
    dec2, got2 = _eps_decode(graph, opts, lp, lens, "on")  # (off below the chain: nothing sent back)
    compare(cpu, got2, f"eps filter on below the chain, seed {seed}")
    assert dec2._gpu.stats.get("eps_filter_redone_rows", 0) == 0


def test_eps_records_filter_guard_fired():
    """(After the seeds above: the guard sent some rows back.)"""
    assert TOTALS.get("eps_redone", 0) > 0


def test_eps_records_filter_that_drops_too_much_is_seen():
    """A negative pad (ws.lat_filter[2]) makes the filter drop arcs the lattice keeps: the
    comparison with the CPU sees it (the guard checks the filter's assumptions, not its offset)."""
    seen = 0
    for seed in range(8):
        graph, lp, lens, opts = _eps_case(seed)
        opts = dataclasses.replace(opts, output_beam=4.0)
        cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
        _, got = _eps_decode(graph, opts, lp, lens, "on", pad=-6.0)
        seen += sum(g.lattice is None or g.lattice.num_arcs != c.lattice.num_arcs for c, g in zip(cpu, got)
                    if c.lattice is not None)
    assert seen > 0
