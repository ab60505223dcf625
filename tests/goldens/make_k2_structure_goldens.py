"""k2's lattices arc for arc, for the state numbering and the arc order (k2 1.23.4, CPU).

The lattice goldens (make_k2_lattice_goldens.py) keep each row's arcs as a set of (frame, graph
arc): they prove which arcs a lattice holds, not how its states are numbered or its arcs ordered.
This fixture keeps, for the first cases of that fixture whose rows are short (at most MAX_LEN
frames; the inputs are that fixture's, so nothing new is random), each row's lattice exactly as k2's
FsaVec holds it: ``num_states`` and, per arc in k2's order, ``src``, ``dst``, ``frame`` and ``arc``
(the graph arc, k2's arc_map_a; -1 for none). Run in the k2 environment::

    /opt/k2-venv/bin/python tests/goldens/make_k2_structure_goldens.py \\
        --cases tests/data/k2_lattice_goldens.json.gz --out tests/data/k2_structure_goldens.json.gz
"""
import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import torch

import k2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_k2_lattice_goldens import log_probs_of  # noqa: E402

MAX_LEN = 80
MAX_CASES = 60


def structure_rows(case):
    g = k2.Fsa.from_str(case["graph"], acceptor=False)
    g.arc_id = torch.arange(1, g.num_arcs + 1, dtype=torch.int32)  # 0 = no graph arc
    g = k2.arc_sort(g)
    lens = case["lens"]
    segs = torch.tensor([[i, 0, n] for i, n in enumerate(lens)], dtype=torch.int32)
    dense = k2.DenseFsaVec(torch.from_numpy(np.ascontiguousarray(log_probs_of(case))), segs)
    s, o, mn, mx = case["beams"]
    lat = k2.intersect_dense_pruned(g, dense, float(s), float(o), int(mn), int(mx), frame_idx_name="frame")
    rows = []
    for r in range(len(lens)):
        fsa = lat[r]
        a = fsa.arcs.values()[:, :2].numpy().astype(np.int64)
        rows.append({"num_states": int(fsa.shape[0]), "src": a[:, 0].tolist(), "dst": a[:, 1].tolist(),
                     "frame": fsa.frame.numpy().astype(np.int64).tolist(),
                     "arc": (fsa.arc_id.numpy().astype(np.int64) - 1).tolist()})
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="tests/data/k2_lattice_goldens.json.gz")
    p.add_argument("--out", default="tests/data/k2_structure_goldens.json.gz")
    a = p.parse_args()
    with gzip.open(a.cases, "rt") as f:
        cases = json.load(f)
    out = []
    for c in cases:
        if max(c["lens"]) > MAX_LEN:
            continue
        keep = {k: c[k] for k in ("name", "graph", "vocab", "lens", "lp_q", "beams")}
        keep["rows"] = structure_rows(c)
        out.append(keep)
        if len(out) == MAX_CASES:
            break
    with gzip.open(a.out, "wt") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"{len(out)} cases, {sum(len(c['lens']) for c in out)} rows, "
          f"{sum(len(r['arc']) for c in out for r in c['rows'])} arcs -> {a.out}")


if __name__ == "__main__":
    main()
