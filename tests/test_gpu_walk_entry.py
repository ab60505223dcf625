"""The warp walker's lane entry (expand.cuh WarpLaneOf and the hint-only first token) on the GPU.

The default walker ("warp") finds the lane of a warp's first slot with ballots over the lanes'
slot offsets (one round up to 32 lanes, two up to 1,024, the binary search beyond) and starts
its token rounds at the slot hint; "warp_search" enters lanes by the binary searches it used
before; "warp_coop" runs Max and Expand as one cooperative kernel (CoopWalkKernel). All of
them, and the CPU reference, must give the same rows, and the lattice walk (which enters lanes
the same way) the same lattices. The lane counts straddle each branch of
WarpLaneOf (1, 31, 32, 33, 64, 100, 1,024, 1,025 lanes), and rows of length 0 and idle lanes
between busy ones give lanes without slots: runs of equal offsets the ballots must count
through.

Skipped where there is no CUDA GPU. scripts/device_walk.sh runs this file on the H200.
"""

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions
from helpers import assert_same_row, random_ctc_graph, random_eps_graph_any, random_log_probs
from test_lattice_records import assert_same_lattice

pytestmark = pytest.mark.gpu
TOTALS = {"rows": 0, "ties": 0, "lattices": 0}
STATS = ("max_frontier", "frontier_total", "closure_added")
LANES = [1, 31, 32, 33, 64, 100, 1024, 1025]


def _case(seed: int, lanes: int, eps: bool):
    rng = np.random.default_rng(47000 + 97 * seed + lanes)
    V = int(rng.integers(3, 24))
    if eps:
        graph = random_eps_graph_any(rng, int(rng.choice([40, 300])), V, 4, 0.6, cycles=bool(seed % 2), chain=2)
    else:
        graph = random_ctc_graph(rng, int(rng.choice([50, 400, 2000])), V, int(rng.integers(2, 12)), 0.2)
    # at most the lanes, and at most 160 rows: the many-lane decoders keep lanes idle
    B = int(min(lanes, rng.choice([lanes, 7, 160])))
    T = int(rng.integers(1, 25))
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    lens[rng.random(B) < 0.25] = 0  # lanes without slots between busy ones
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    opts = DecoderOptions(search_beam=float(rng.choice([6.0, 14.0])), max_active_states=int(rng.choice([50, 10000])),
                          allow_partial=bool(seed % 3 != 0), eps_iterations=2 if eps else None)
    return graph, lp, lens, opts


@pytest.mark.parametrize("lanes", LANES)
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("eps", [False, True], ids=["noeps", "eps"])
def test_lane_entry_equals_search_and_cpu(eps, seed, lanes):
    graph, lp, lens, opts = _case(seed, lanes, eps)
    cpu = Decoder(graph, opts).decode(lp, lens)
    for walker in ("warp", "warp_search", "warp_coop", "warp_coop_pdl"):
        gpu = Decoder(graph, opts, device="cuda", max_lanes=lanes, walker=walker).decode(lp, lens)
        for b in range(len(lens)):
            assert_same_row(graph, lp[b], cpu[b], gpu[b], f"{walker} lanes {lanes} seed {seed} row {b}", TOTALS, STATS)


@pytest.mark.parametrize("lanes", [32, 33, 100, 1025])
def test_lattice_walk_entry(lanes):
    """The lattice walk (LatPersistKernel) enters lanes by the same code: the same lattices
    with either entry, and the CPU's."""
    graph, lp, lens, opts = _case(7, lanes, False)
    opts = DecoderOptions(search_beam=opts.search_beam, output_beam=5.0, max_active_states=opts.max_active_states,
                          allow_partial=opts.allow_partial)
    cpu = Decoder(graph, opts).decode(lp, lens, lattice=True)
    for walker in ("warp", "warp_search", "warp_coop", "warp_coop_pdl"):
        dec = Decoder(graph, opts, device="cuda", max_lanes=lanes, walker=walker)
        dec._gpu.lattice_trim = "off"  # recorded_arcs counted, so every field compares
        gpu = dec.decode(lp, lens, lattice=True)
        for b in range(len(lens)):
            assert_same_lattice(cpu[b].lattice, gpu[b].lattice, f"{walker} lanes {lanes} row {b}")
            TOTALS["lattices"] += 1


@pytest.mark.parametrize("walker", ["warp_coop", "warp_coop_pdl"])
@pytest.mark.parametrize("lanes", [4, 32, 300])
def test_coop_walk_runs_the_cooperative_kernel(lanes, walker, monkeypatch):
    """walker="warp_coop" (and "warp_coop_pdl", the same launched with programmatic dependent
    launch) launches CoopWalkKernel (profiled as expand, no MaxKernel time) on
    the static layout, MaxKernel and ExpandKernel under the pooled layout (its hand-out sits
    between them), and both give the CPU's rows, captured in CUDA graphs or not."""
    graph, lp, lens, opts = _case(11, lanes, False)
    cpu = Decoder(graph, opts).decode(lp, lens)
    monkeypatch.setenv("CUWFST_LANE_POOL", "on")  # (the pooled layout itself, not the automatic choice)
    for memory, coop in (("eager", True), ("pooled", False)):  # (eager: the static layout whatever the variable)
        for graphs in (True, False):
            dec = Decoder(graph, opts, device="cuda", max_lanes=lanes, walker=walker, memory=memory,
                          use_cuda_graphs=graphs)
            inst = dec._gpu.main
            before = inst.profile(True)
            gpu = dec.decode(lp, lens)
            after = inst.profile(False)
            ran = {k: after[k] - before[k] for k in ("max", "expand")}
            if lens.max() > 0:
                assert (ran["max"] == 0 and ran["expand"] > 0) if coop else ran["max"] > 0, (memory, ran)
            gpu = dec.decode(lp, lens) if graphs else gpu  # (profiling runs launch by launch: replay too)
            for b in range(len(lens)):
                assert_same_row(graph, lp[b], cpu[b], gpu[b], f"{walker} {memory} graphs {graphs} row {b}", TOTALS, STATS)


def test_walker_names():
    graph, lp, lens, opts = _case(0, 4, False)
    with pytest.raises(ValueError, match="walker must be 'auto' or one of"):
        Decoder(graph, opts, device="cuda", max_lanes=4, walker="warp_binary")


@pytest.mark.parametrize("eps", [False, True], ids=["noeps", "eps"])
def test_auto_walker(eps):
    """The default walker: the cooperative kernel (with PDL) on epsilon graphs, and it runs
    there (no MaxKernel time); the warp walker on epsilon-free graphs; both equal the CPU."""
    graph, lp, lens, opts = _case(1, 32, eps)
    assert graph.has_epsilon == eps
    cpu = Decoder(graph, opts).decode(lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=32, memory="eager")
    assert dec._gpu.walker == ("warp_coop_pdl" if eps else "warp")
    inst = dec._gpu.main
    before = inst.profile(True)
    gpu = dec.decode(lp, lens)
    after = inst.profile(False)
    if lens.max() > 0:
        assert (after["max"] == before["max"]) == eps, (before, after)
    for b in range(len(lens)):
        assert_same_row(graph, lp[b], cpu[b], gpu[b], f"auto eps {eps} row {b}", TOTALS, STATS)
    gpu = dec.decode(lp, lens)  # graphs replayed: the launch with PDL
    for b in range(len(lens)):
        assert_same_row(graph, lp[b], cpu[b], gpu[b], f"auto replay eps {eps} row {b}", TOTALS, STATS)


def test_report():
    print(f"\nwalk entry: {TOTALS['rows']} rows vs the CPU ({TOTALS['ties']} exact-score ties), "
          f"{TOTALS['lattices']} lattices, 0 mismatches")
