"""Kernel variants on the GPU (cuwfst.decoder.gpu.KERNEL_VARIANTS: the split scan, the closure
lists and the wider Finalize grid, each alone and all together, the old kernels, "fused":
all three plus the step's max found by the expansion itself, no MaxKernel, and "untrimmed":
"new" without the trimmed slots of sorted arcs), every one against
the CPU reference: identical float32 scores, words (or an exact-score tie re-scored bit for
bit) and search statistics.
Each test runs once per variant; CUWFST_KERNELS selects the variant for decoders built inside
the test (streams and continuous batching included), so every path goes through the same
switch a user has. The frontiers of the "large" tests span many scan rounds, so the split
scan's look-back and its chunks of several rounds run; the epsilon graphs have up to 2 + 2
epsilon arcs a state, so the lists' slot stride is above 1.

Skipped where there is no CUDA GPU. scripts/device_speed_ab.sh runs this file on the H200.
"""

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions
from cuwfst.decoder.gpu import chain_closure_ok
from helpers import (POOLED_LANES, assert_outgrows_first_pieces, assert_pools_grew, assert_same_row,
                     assert_same_snapshots, check_continuous_and_streams, outgrowing_pooled_batch, random_ctc_graph, random_eps_graph_any, random_log_probs)

pytestmark = pytest.mark.gpu
VARIANTS = ["old", "new", "split", "lists", "wide", "fused", "untrimmed", "new_lists", "new_nopdl", "new_fused",
            "new_lane", "new_chunks", "new_noload"]
CHAINS = ("new", "new_nopdl", "new_fused", "new_lane", "new_chunks", "new_noload")  # by chains where the graph allows
NEW_SCAN = ("split", "fused", "untrimmed", "new_lists") + CHAINS  # the variants with the split scan
NEW_LISTS = ("lists", "fused", "untrimmed", "new_lists") + CHAINS
NEW_FINALIZE = ("wide", "fused", "untrimmed", "new_lists") + CHAINS
TRIMMED = ("fused", "new_lists") + CHAINS  # the variants whose scans trim each token's sorted arcs
FUSED = ("fused", "new_fused")
PDL = ("new", "new_fused", "new_lane", "new_chunks", "new_noload")  # programmatic dependent launch (the H200 has it)
PERSIST = ("new", "new_nopdl", "new_fused", "new_noload")  # the persistent scan with 512-token granules
TOTALS = {"rows": 0, "ties": 0}
STATS = ("max_frontier", "frontier_total", "closure_added")


@pytest.fixture(params=VARIANTS)
def variant(request, monkeypatch):
    monkeypatch.setenv("CUWFST_KERNELS", request.param)
    return request.param


def expect_variant(dec, variant, eps: bool):
    """The decoder runs the variant's kernels (a silent fallback would test nothing). "new"
    closes by epsilon chains where chain_closure_ok allows it (closure_lists 2; a lattice
    decode runs the lists all the same, epsilon.cuh), else by lists."""
    st = dec._gpu.main.mem_stats()
    lanes = dec._gpu.main.max_lanes
    assert (st["scan_split"] > 1) == (variant in NEW_SCAN) or lanes >= 512, (variant, st)
    want = 1 if eps and variant in NEW_LISTS else 0
    if want and variant in CHAINS and chain_closure_ok(dec.graph, dec.eps_iterations):
        want = 2
    assert st["closure_lists"] == want, (variant, st)
    assert (st["finalize_split"] > 8) == (variant in NEW_FINALIZE) or lanes >= 128, (variant, st)
    assert st["fused_max"] == (variant in FUSED), (variant, st)
    assert st["pdl"] == (variant in PDL), (variant, st)
    # the split scan's tickets: chunk-major, or persistent (chunk-major where it cannot be: one
    # scan CTA a lane, or more than 512 lanes)
    persistent = st["scan_split"] > 1 and lanes <= 512
    order = 1 if variant == "new_chunks" else (2 if persistent else 1) if variant in PERSIST else 0
    assert st["scan_order"] == order, (variant, st)
    assert st["scan_round"] == (512 if variant in PERSIST else 2048), (variant, st)
    assert st["trims_arcs"] == (variant in TRIMMED), (variant, st)  # (every graph these tests build is sorted)


def same(graph, lp_row, c, g, where, stats=True):
    assert_same_row(graph, lp_row, c, g, where, TOTALS, STATS if stats else ())


BEAMS = [(20.0, 30, 10000), (8.0, 5, 200), (3.0, 1, 50), (15.0, 1, 4), (2.0, 100, 1000), (10.0, 0, 3)]


def _case(seed, eps):
    rng = np.random.default_rng(31000 + seed)
    V = int(rng.integers(2, 30))
    n = int(rng.choice([3, 8, 40, 200, 900]))
    if eps:
        graph = random_eps_graph_any(rng, n, V, degree=int(rng.integers(1, 6)), eps_prob=float(rng.choice([0.3, 0.7, 1.0])),
                                     cycles=bool(seed % 3 == 0), chain=int(rng.choice([1, 2, 5])))
    else:
        graph = random_ctc_graph(rng, n, V, degree=int(rng.integers(1, 9)), final_prob=float(rng.choice([0.02, 0.2, 0.8])))
    B = int(rng.integers(1, 8))
    T = int(rng.integers(1, 50))
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    if B > 2:
        lens[1], lens[2] = 1, 0
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    s, mn, mx = BEAMS[seed % len(BEAMS)]
    eps_it = None if seed % 5 else int(rng.integers(1, 4))
    opts = DecoderOptions(search_beam=s, min_active_states=mn, max_active_states=mx, allow_partial=bool(seed % 4 != 0),
                          eps_iterations=eps_it if eps else None)
    return rng, graph, lp, lens, opts


@pytest.mark.parametrize("seed", range(24))
@pytest.mark.parametrize("eps", [True, False], ids=["eps", "noeps"])
def test_random_graphs(variant, eps, seed):
    rng, graph, lp, lens, opts = _case(seed, eps)
    cpu = Decoder(graph, opts).decode(lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=int(rng.choice([1, 4, 32])),
                  use_cuda_graphs=bool(seed % 7 != 3))
    expect_variant(dec, variant, eps)
    gpu = dec.decode(lp, lens)
    for b in range(len(lens)):
        same(graph, lp[b], cpu[b], gpu[b], f"{variant} seed {seed} row {b}")


def _large_frontier_case(seed, eps):
    """A graph (9,000 states with epsilon cycles and chains, or 12,000 epsilon-free) and three
    rows whose frontiers span several 2,048-token scan rounds at beam 1,000; the CPU's rows."""
    rng = np.random.default_rng(seed)
    V = 40
    if eps:
        graph = random_eps_graph_any(rng, 9000, V, 6, 1.0, cycles=True, chain=3)
    else:
        graph = random_ctc_graph(rng, 12000, V, 8, 0.3)
    lp = random_log_probs(rng, 3, 24, V, peaky=False)
    lens = np.array([24, 17, 1], np.int32)
    opts = DecoderOptions(search_beam=1000.0, min_active_states=1, max_active_states=400)
    cpu = Decoder(graph, opts).decode(lp, lens)
    assert max(h.max_frontier for h in cpu) > 3 * 2048, "the frontier should span several scan rounds"
    return graph, lp, lens, opts, cpu


@pytest.mark.parametrize("scan_split", [2, 3, 16])
@pytest.mark.parametrize("eps", [True, False], ids=["eps", "noeps"])
def test_large_frontiers(variant, eps, scan_split):
    """Frontiers of thousands of tokens (several 2,048-token scan rounds), split over 2, 3 and
    16 CTAs per lane (variants without the split scan ignore scan_split here: one CTA)."""
    if variant not in NEW_SCAN and scan_split != 2:
        pytest.skip("this variant has one scan CTA per lane: one run is enough")
    graph, lp, lens, opts, cpu = _large_frontier_case(4000 + scan_split + 10 * eps, eps)
    kw = {"scan_split": scan_split} if variant in NEW_SCAN else {}  # the rest from CUWFST_KERNELS
    dec = Decoder(graph, opts, device="cuda", max_lanes=4, **kw)
    expect_variant(dec, variant, eps)
    if kw:
        assert dec._gpu.main.mem_stats()["scan_split"] == scan_split
    gpu = dec.decode(lp, lens)
    for b in range(3):
        same(graph, lp[b], cpu[b], gpu[b], f"{variant} split {scan_split} row {b}")


@pytest.mark.parametrize("scan_round", [32, 96, 512, 1000])
@pytest.mark.parametrize("eps", [True, False], ids=["eps", "noeps"])
def test_scan_granules(eps, scan_round):
    """The split scan's chunks in granules below the block's round (scan_round): chunks of one
    partial round (the one-round path with threads past the chunk idle), of several granules
    that are not whole rounds (the two-pass path ending in a partial round), a granule that is
    not a multiple of a warp (96 is, 1,000 is not), frontiers of thousands of tokens over 3
    and 16 CTAs a lane, the tickets lane-major, chunk-major and persistent (four lanes' items
    over min(4 x split, multiprocessors) CTAs); every row equal to the CPU's."""
    graph, lp, lens, opts, cpu = _large_frontier_case(4500 + scan_round + eps, eps)
    for scan_split, order in ((3, "lane"), (16, "lane"), (16, "chunk"), (3, "persistent"), (16, "persistent")):
        dec = Decoder(graph, opts, device="cuda", max_lanes=4, scan_split=scan_split, scan_round=scan_round,
                      scan_order=order)
        st = dec._gpu.main.mem_stats()
        assert st["scan_round"] == scan_round and st["scan_split"] == scan_split, st
        assert st["scan_order"] == ("lane", "chunk", "persistent").index(order), st
        gpu = dec.decode(lp, lens)
        for b in range(3):
            same(graph, lp[b], cpu[b], gpu[b], f"scan_round {scan_round} split {scan_split} {order}-major row {b}")
    # "new" has 512-token granules; 0 asks for the native default, the block's round
    assert Decoder(graph, opts, device="cuda", max_lanes=4)._gpu.main.mem_stats()["scan_round"] == 512
    assert Decoder(graph, opts, device="cuda", max_lanes=4, scan_round=0)._gpu.main.mem_stats()["scan_round"] == 2048


@pytest.mark.parametrize("scan_split", [3, 16])
def test_pooled_layout(variant, scan_split, monkeypatch):
    """The pooled lane layout (offline batches on epsilon-free graphs with memory="pooled";
    forced on, as the automatic choice keeps so small a decoder static) under the variant:
    frontiers of several scan rounds cut into chunks inside the lanes' pooled regions, and a
    first batch that outgrows the pools' first pieces (helpers.outgrowing_pooled_batch: twelve
    rows of ~12,000-token frontiers at once; rows that end before, at and after the pause), so
    it pauses, the pools grow and it resumes; every row equal to the CPU's, search statistics
    included, then again on the grown pools (no pause)."""
    if variant not in NEW_SCAN and scan_split != 3:
        pytest.skip("this variant has one scan CTA per lane: one run is enough")
    monkeypatch.setenv("CUWFST_LANE_POOL", "on")
    lens = [20, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 1, 0]
    graph, lp, lens, opts = outgrowing_pooled_batch(4100 + scan_split, 20, lens)
    cpu = Decoder(graph, opts).decode(lp, lens)
    assert max(h.max_frontier for h in cpu) > 3 * 2048, "the frontier should span several scan rounds"
    kw = {"scan_split": scan_split} if variant in NEW_SCAN else {}
    dec = Decoder(graph, opts, device="cuda", max_lanes=POOLED_LANES, memory="lazy", **kw)
    expect_variant(dec, variant, False)
    need = assert_outgrows_first_pieces(dec, graph, opts, lp, lens)
    gpu = dec.decode(lp, lens)
    for b in range(len(lens)):
        same(graph, lp[b], cpu[b], gpu[b], f"{variant} pooled split {scan_split} row {b}")
    lanes = assert_pools_grew(dec, need)
    again = dec.decode(lp, lens)  # grown pools: one run, the same results
    assert dec.memory_stats()["pools"]["lanes"]["grows"] == lanes["grows"]
    for b in range(len(lens)):
        same(graph, lp[b], cpu[b], again[b], f"{variant} pooled split {scan_split} row {b}, again")


@pytest.mark.parametrize("seed", range(8))
def test_step_by_step_frontier_equals_cpu_snapshots(variant, seed):
    rng = np.random.default_rng(5100 + seed)
    graph = random_eps_graph_any(rng, int(rng.choice([5, 20, 80])), 6, 3, 0.8, cycles=bool(seed % 2),
                                 chain=int(rng.choice([0, 3])))
    T = int(rng.integers(0, 20))
    lp = random_log_probs(rng, 1, max(T, 1), 6, peaky=bool(seed % 2))[0]
    s, mn, mx = BEAMS[seed % len(BEAMS)]
    opts = DecoderOptions(search_beam=s, min_active_states=mn, max_active_states=mx, allow_partial=True)
    cpu = Decoder(graph, opts).decode_snapshots(lp, T)
    gdec = Decoder(graph, opts, device="cuda", max_lanes=2)
    gpu = gdec.decode_snapshots(lp, T)
    expect_variant(gdec, variant, graph.num_epsilon_arcs > 0)  # a silent fallback would test nothing
    assert_same_snapshots(cpu, gpu, T + 2, variant)


@pytest.mark.parametrize("seed", range(6))
def test_continuous_batching_and_streams(variant, seed):
    """Lanes that live across launch sequences (start closures of new rows between segments,
    streams opened while others run) on the variant's kernels (helpers.check_continuous_and_streams)."""
    rng = np.random.default_rng(5200 + seed)
    V = int(rng.integers(2, 20))
    graph = random_eps_graph_any(rng, int(rng.choice([60, 400])), V, 4, 0.7, cycles=bool(seed % 2), chain=2)
    opts = DecoderOptions(search_beam=float(rng.choice([5.0, 12.0])), max_active_states=int(rng.choice([100, 10000])),
                          allow_partial=bool(seed % 3))
    check_continuous_and_streams(rng, graph, V, opts, seed, same, variant,
                                 expect=lambda dec, sd: expect_variant(dec, variant, True))


@pytest.mark.parametrize("walker", ["warp", "thread"])
@pytest.mark.parametrize("eps", [True, False], ids=["eps", "noeps"])
def test_fused_max_with_every_scan_and_walker(eps, walker):
    """The fused max beside the one-CTA ScanKernel (its lower bound from a block reduction) and
    the split scan (from the chunks' meeting word), with both walkers; wide beams keep many
    arcs between the lower bound and the max, narrow ones (and max_active 4) make the
    dynamic beam move; 32 lanes > the rows, so idle lanes sit between them."""
    rng = np.random.default_rng(6100 + 2 * eps + (walker == "thread"))
    V = 25
    graph = (random_eps_graph_any(rng, 3000, V, 5, 0.8, cycles=True, chain=3) if eps
             else random_ctc_graph(rng, 5000, V, 8, 0.3))
    lp = random_log_probs(rng, 5, 30, V, peaky=False)
    lens = np.array([30, 29, 1, 0, 12], np.int32)
    for s, mn, mx in [(1000.0, 1, 300), (6.0, 1, 4), (12.0, 30, 10000)]:
        opts = DecoderOptions(search_beam=s, min_active_states=mn, max_active_states=mx, allow_partial=True)
        cpu = Decoder(graph, opts).decode(lp, lens)
        for scan_split in (1, 3):
            dec = Decoder(graph, opts, device="cuda", max_lanes=32, walker=walker, scan_split=scan_split,
                          fused_max=True)
            st = dec._gpu.main.mem_stats()
            assert st["fused_max"] == 1 and st["scan_split"] == scan_split, st
            gpu = dec.decode(lp, lens)
            for b in range(len(lens)):
                same(graph, lp[b], cpu[b], gpu[b], f"fused {walker} scan {scan_split} beam {s} row {b}")


def _fused_f16_case():
    """test_fused_max_float16_rows_many_lanes_and_exact_cutoffs' inputs: an epsilon graph
    with cycles (1,501 states), 300 float16 rows of 12 frames (lp: the same values as float32)."""
    rng = np.random.default_rng(6300)
    V = 20
    graph = random_eps_graph_any(rng, 1500, V, 4, 0.7, cycles=True, chain=2)
    B, T = 300, 12
    lp16 = random_log_probs(rng, B, T, V, peaky=False).astype(np.float16)
    lp = lp16.astype(np.float32)  # the same values, exactly
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    return graph, lp16, lp, lens


def test_fused_max_float16_rows_many_lanes_and_exact_cutoffs():
    """The fused max where the tests above do not take it: float16 rows (the scan's L and the
    walkers widen the same halves), more lanes than kMaxSharedLanes (256: FusedExpandKernel
    flushes each thread's max with global atomics, no shared per-lane max), both scans; and
    per-step snapshots with the one-CTA and the split scan, whose cutoff (max_ord - beam) shows
    that max_ord ends each step at the exact max (an L above it would stay there).
    The snapshots' decoders hold the whole graph (main_q_factor 64: main_q = 1,501 states):
    with beam 1000 the CPU's frontier reaches 1,260 tokens at step 3 (1,453 later), past the
    default main_q of 1,024, and a cut frontier is what the rescue is for, not the fused max
    (test_snapshots_of_a_cut_frontier_are_flagged_and_rescued)."""
    graph, lp16, lp, lens = _fused_f16_case()
    B, T = lp.shape[0], lp.shape[1]
    opts = DecoderOptions(search_beam=8.0, min_active_states=1, max_active_states=60, allow_partial=True)
    cpu = Decoder(graph, opts).decode(lp, lens)
    for scan_split in (1, 2):
        dec = Decoder(graph, opts, device="cuda", max_lanes=B, scan_split=scan_split, fused_max=True)
        st = dec._gpu.main.mem_stats()
        assert st["fused_max"] == 1 and st["scan_split"] == scan_split and dec._gpu.main.max_lanes > 256, st
        gpu = dec.decode(lp16, lens)
        for b in range(B):
            same(graph, lp[b], cpu[b], gpu[b], f"fused float16 {B} lanes scan {scan_split} row {b}")
    for s in (4.0, 1000.0):
        o = DecoderOptions(search_beam=s, min_active_states=1, max_active_states=30, allow_partial=True)
        want = Decoder(graph, o).decode_snapshots(lp[0], T)
        if s == 1000.0:  # frontiers past the default main_q (1,024), held whole here
            assert max(len(c["tokens"]) for c in want) > 1024
        for scan_split in (1, 2):
            dec = Decoder(graph, o, device="cuda", max_lanes=2, scan_split=scan_split, fused_max=True,
                          main_q_factor=64)
            assert dec._gpu.main.main_q == graph.num_states, dec._gpu.main.main_q
            got = dec.decode_snapshots(lp[0], T)
            assert dec._gpu._rescue is None  # the main instance's own snapshots, none cut
            assert [g["overflow"] for g in got] == [0] * len(got), (s, scan_split)
            assert_same_snapshots(want, got, T + 2, (s, scan_split))


def test_snapshots_of_a_cut_frontier_are_flagged_and_rescued(variant):
    """The H200's failure of test_fused_max_float16_rows_many_lanes_and_exact_cutoffs (beam
    1000, max_active 30, step 3), pinned on every variant: the CPU's frontier after step 2's
    closure holds 1,260 tokens (1,003 before the closure), the default main_q 1,024, so the
    closure's appends past 1,024 are dropped (kOverflowKept, bit 16) and the snapshot held
    exactly 1,024 tokens, a strict subset of the CPU's, with the step's phase, beam, cutoff and
    before_closure still equal. That is a capacity cut, which decode rescues (the row is
    flagged and decoded again), not an exactness bug of any kernel; DecodeSnapshots did not
    report it. Now each snapshot carries the lane's overflow bits, and decode_snapshots
    decodes a flagged row again on the rescue instance, which then equals the CPU."""
    graph, _, lp, _ = _fused_f16_case()
    T = lp.shape[1]
    o = DecoderOptions(search_beam=1000.0, min_active_states=1, max_active_states=30, allow_partial=True)
    want = Decoder(graph, o).decode_snapshots(lp[0], T)
    assert [len(c["tokens"]) for c in want[:5]] == [11, 138, 677, 1260, 1424]
    assert want[3]["before_closure"] == 1003 and all(c["overflow"] == 0 for c in want)
    dec = Decoder(graph, o, device="cuda", max_lanes=2)
    expect_variant(dec, variant, eps=True)
    gpu = dec._gpu
    assert gpu.main.main_q == 1024, gpu.main.main_q
    with gpu.lock:  # the main instance alone, no rescue
        raw = gpu.snapshots_on(gpu.main, gpu.to_device(lp[0]), T, gpu._stream())
    assert [g["overflow"] for g in raw[:3]] == [0, 0, 0]
    assert raw[3]["overflow"] & 16, raw[3]["overflow"]
    c, g = want[3], raw[3]
    assert (c["phase"], c["beam"], c["cutoff"], c["before_closure"]) == \
           (g["phase"], g["beam"], g["cutoff"], g["before_closure"])
    assert len(g["tokens"]) == 1024 and set(g["tokens"]) < set(c["tokens"])
    for k in range(3):  # the steps before the cut are exact
        assert set(want[k]["tokens"]) == set(raw[k]["tokens"]), k
    got = dec.decode_snapshots(lp[0], T)
    assert gpu._rescue is not None and gpu._rescue.main_q == graph.num_states
    assert [g["overflow"] for g in got] == [0] * len(got), variant
    assert_same_snapshots(want, got, T + 2, variant)


def test_variants_agree_with_each_other():
    """One batch through every variant in one process: the same scores, statistics and
    (up to exact-score ties) paths as the old kernels."""
    rng = np.random.default_rng(77)
    graph = random_eps_graph_any(rng, 2000, 30, 5, 0.8, cycles=False, chain=3)
    lp = random_log_probs(rng, 6, 40, 30, peaky=True)
    opts = DecoderOptions(search_beam=14.0, max_active_states=2000)
    from cuwfst.decoder.gpu import KERNEL_VARIANTS
    runs = {v: Decoder(graph, opts, device="cuda", max_lanes=8, **KERNEL_VARIANTS[v]).decode(lp) for v in VARIANTS}
    for v in VARIANTS[1:]:
        for b in range(6):
            same(graph, lp[b], runs["old"][b], runs[v][b], f"{v} vs old row {b}")


def test_report_totals():
    print(f"\nkernel variants vs CPU: {TOTALS['rows']} rows compared, {TOTALS['ties']} exact-score ties, 0 mismatches")
