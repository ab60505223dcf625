"""Which lattice rules real k2 follows: runs k2 (a k2 environment, as make_k2_lattice_goldens.py)
on random cases and compares its lattices' (frame, arc) sets with three variants of the
model in tests/k2_lattice_model.py: k2's rules as read in the source (every arc into a
surviving state; 30/20 pruning windows), the same keeping admitted arcs only, and the same
with one exact pruning pass. The counts are quoted in docs/k2-lattice-facts.md.

    PYTHONPATH=. /opt/k2-venv/bin/python tests/goldens/k2_lattice_probe.py [--cases 100]
"""
import argparse
import sys
from pathlib import Path

import numpy as np
import torch

import k2

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import make_k2_goldens as base  # noqa: E402
from k2_lattice_model import k2_lattice  # noqa: E402

from cuwfst import Graph  # noqa: E402


def k2_set(text, lp, n, beams):
    g = k2.Fsa.from_str(text, acceptor=False)
    g.arc_id = torch.arange(1, g.num_arcs + 1, dtype=torch.int32)
    dense = k2.DenseFsaVec(torch.from_numpy(lp[None, :n].copy()), torch.tensor([[0, 0, n]], dtype=torch.int32))
    lat = k2.intersect_dense_pruned(g, dense, *map(float, beams[:2]), *map(int, beams[2:]), frame_idx_name="frame")
    return sorted(zip(lat.frame.tolist(), (lat.arc_id - 1).tolist())), int(lat.arcs.shape().tot_size(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    same = {"k2 rules": 0, "admitted arcs only": 0, "one exact pass": 0, "state count": 0}
    for c in range(args.cases):
        beams = base.BEAMS[c % len(base.BEAMS)]
        V = int(rng.integers(3, 20))
        text, _ = base.sorted_graph(base.make_graph_text(rng, int(rng.integers(4, 60)),
                                                         int(rng.choice([2, 4, 8])), V, 20))
        n = int(rng.integers(1, 120))
        lp = base.make_log_probs(rng, [n], V, "peaky" if rng.random() < 0.5 else "random")[0]
        want, states = k2_set(text, lp, n, beams)
        graph = Graph.from_k2_text(text, vocab_size=V)
        for name, kw in (("k2 rules", {}), ("admitted arcs only", {"admitted_only": True}),
                         ("one exact pass", {"one_pass": True})):
            arcs, num_states = k2_lattice(graph, lp, n, *beams, **kw)
            got = sorted(zip([t for t, _, _, _ in arcs], graph.source_arc_ids([a for _, a, _, _ in arcs]).tolist()))
            same[name] += got == want
            if name == "k2 rules":
                same["state count"] += num_states == states
    print(f"{args.cases} random cases (seed {args.seed}); lattices equal to k2's: {same}")


if __name__ == "__main__":
    main()
