"""The warp walker's lane entry (expand.cuh WarpLaneOf and the hint-only first token) on the GPU.

The default walker ("warp") finds the lane of a warp's first slot with ballots over the lanes'
slot offsets (one round up to 32 lanes, two up to 1,024, the binary search beyond) and starts
its token rounds at the slot hint; "warp_search" enters lanes by the binary searches it used
before. Both, and the CPU reference, must give the same rows, and the lattice walk (which
enters lanes the same way) the same lattices. The lane counts straddle each branch of
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
    for walker in ("warp", "warp_search"):
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
    for walker in ("warp", "warp_search"):
        dec = Decoder(graph, opts, device="cuda", max_lanes=lanes, walker=walker)
        dec._gpu.lattice_trim = "off"  # recorded_arcs counted, so every field compares
        gpu = dec.decode(lp, lens, lattice=True)
        for b in range(len(lens)):
            assert_same_lattice(cpu[b].lattice, gpu[b].lattice, f"{walker} lanes {lanes} row {b}")
            TOTALS["lattices"] += 1


def test_walker_names():
    graph, lp, lens, opts = _case(0, 4, False)
    with pytest.raises(ValueError, match="walker must be one of"):
        Decoder(graph, opts, device="cuda", max_lanes=4, walker="warp_binary")


def test_report():
    print(f"\nwalk entry: {TOTALS['rows']} rows vs the CPU ({TOTALS['ties']} exact-score ties), "
          f"{TOTALS['lattices']} lattices, 0 mismatches")
