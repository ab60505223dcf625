"""Device debug: GPU lattices (trimmed, untrimmed) vs the CPU on the epsilon graphs of
tests/test_gpu_trim.py::test_trim_with_epsilon_graphs_and_lattices."""
import sys
import numpy as np
sys.path.insert(0, "tests")
from cuwfst import Decoder, DecoderOptions
from helpers import random_eps_graph_any, random_log_probs
from test_lattice_records import assert_same_lattice

for seed in range(4):
    for max_a in (8, 1000):
        rng = np.random.default_rng(53000 + seed)
        V = int(rng.integers(3, 20))
        graph = None
        while graph is None or graph.max_epsilon_chain < 0:
            graph = random_eps_graph_any(rng, int(rng.choice([20, 200])), V, degree=int(rng.integers(4, 30)),
                                         eps_prob=0.5, cycles=False, chain=2)
        _ = int(rng.choice([8, 1000]))
        opts = DecoderOptions(search_beam=10.0, output_beam=6.0, min_active_states=1, max_active_states=max_a)
        B, T = 4, int(rng.integers(5, 30))
        lens = np.full(B, T, np.int32)
        lp = random_log_probs(rng, B, T, V, peaky=True)
        res = {}
        res["cpu"] = Decoder(graph, opts).decode(lp, lens, lattice=True)
        res["trim"] = Decoder(graph, opts, device="cuda", max_lanes=8).decode(lp, lens, lattice=True)
        res["full"] = Decoder(graph, opts, device="cuda", max_lanes=8, trim_arcs=False).decode(lp, lens, lattice=True)
        res["old"] = Decoder(graph, opts, device="cuda", max_lanes=8, scan_split=1, closure="scan", finalize_split=8,
                             trim_arcs=False).decode(lp, lens, lattice=True)
        for i in range(B):
            line = [f"seed {seed} max_a {max_a} row {i}"]
            for k, h in res.items():
                line.append(f"{k}: rec {h[i].lattice.recorded_arcs} arcs {h[i].lattice.num_arcs} score {h[i].score:.4f}")
            for k in ("trim", "full", "old"):
                try:
                    assert_same_lattice(res["cpu"][i].lattice, res[k][i].lattice, k)
                    line.append(f"{k}==cpu")
                except AssertionError as e:
                    line.append(f"{k}!=cpu ({str(e).splitlines()[0][:80]})")
            print(" | ".join(line), flush=True)
