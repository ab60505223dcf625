"""Lattice goldens for cuwfst from REAL k2 (``intersect_dense_pruned``'s lattice).

Generate mode (default) writes a gzip JSON list of random cases: graphs and beams as
make_k2_goldens.py makes them (epsilon-free CTC-like transducers, k2 arc order), here with
beam settings aimed at lattices (output_beam from 0.25 to 20, tight max_active, wide and
narrow search beams) and rows up to 400 frames, so that k2's periodic pruning (windows of
30 frames every 20) runs many times. Every case is answered by k2 and, per row, records
k2's pruned lattice. Rerun (deterministic, fixed seed) with::

    /opt/k2-venv/bin/python tests/goldens/make_k2_lattice_goldens.py --out tests/data/k2_lattice_goldens.json.gz

Answer mode recomputes the ``rows`` of a fixture in this format with the installed k2::

    /opt/k2-venv/bin/python tests/goldens/make_k2_lattice_goldens.py --answer IN.json.gz --out OUT.json.gz

Case format: ``name``, ``graph`` (k2 text, arc-sorted: text arc i == k2 arc i), ``vocab``,
``lens``, ``lp_q`` (per row, the row's n x vocab log-probs flattened, each value -q/64:
the log-probs are a log-softmax rounded to 1/64 so the fixture stays small; they are
exact float32 values), ``beams`` [search_beam, output_beam, min_active_states,
max_active_states]. ``rows``, per row: ``num_states`` (the lattice's states),
``frame_counts`` (arcs per frame 0..n) and ``arcs`` (the arcs' graph arc ids, k2's
arc_map_a, sorted by frame then id) of the lattice, with frames from k2's
``frame_idx_name``; ``tot`` [tropical, log] = ``get_tot_scores(use_double_scores=True)``
(null for -inf); ``words``, ``score`` and ``best`` (graph arc ids) of
``shortest_path(use_double_scores=True)``; ``score_bits`` (base64 of the lattice's
float32 arc scores, in the order of ``arcs``) on rows of under 400 arcs.
"""
import argparse
import base64
import gzip
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

import k2

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_k2_goldens as base  # noqa: E402  (graph generator shared with the 1-best goldens)

SEED = 20261201
Q = 64.0  # log-probs are stored as round(-lp * Q)
# (search_beam, output_beam, min_active_states, max_active_states); k2 needs max > min.
BEAMS = [
    (20.0, 8.0, 30, 10000),  # icefall's defaults
    (20.0, 20.0, 30, 10000),  # output beam as wide as the search beam
    (12.0, 0.25, 1, 10000),  # tiny output beam: near the best path only
    (10.0, 2.0, 5, 200),
    (8.0, 5.0, 1, 4),  # max_active tiny: the dynamic beam shrinks every frame
    (15.0, 8.0, 2, 6),
    (30.0, 12.0, 1, 2),  # max_active 2
    (4.0, 6.0, 1, 10000),  # output beam wider than the search beam
    (2.0, 2.0, 100, 1000),  # min_active large: the beam widens
    (6.0, 1.0, 10, 20),
    (25.0, 4.0, 0, 50),
    (1.0, 3.0, 1, 10000),  # very tight search beam
]
SIZE_CLASSES = [(4, 8), (9, 30), (31, 120), (121, 300)]
REPS = 20  # cases = REPS * len(BEAMS)
SCORE_BITS_MAX_ARCS = 400


def quantized_log_probs(rng, lens, vocab):
    style = "peaky" if rng.random() < 0.5 else "random"
    lp = base.make_log_probs(rng, lens, vocab, style)
    q = np.clip(np.round(-lp.astype(np.float64) * Q), 0, 32000).astype(np.int64)
    return style, [q[r, :n].reshape(-1).tolist() for r, n in enumerate(lens)]


def log_probs_of(case):
    """[B, max_len, vocab] float32 from the case's lp_q (padding rows hold 0)."""
    lens, V = case["lens"], case["vocab"]
    lp = np.zeros((len(lens), max(lens), V), np.float32)
    for r, (n, q) in enumerate(zip(lens, case["lp_q"])):
        lp[r, :n] = (-np.asarray(q, np.float64) / Q).astype(np.float32).reshape(n, V)
    return lp


def lattice_rows(graph_text, lens, lp, beams):
    g = k2.Fsa.from_str(graph_text, acceptor=False)
    g.arc_id = torch.arange(1, g.num_arcs + 1, dtype=torch.int32)  # 0 = no graph arc
    g = k2.arc_sort(g)
    segs = torch.tensor([[i, 0, n] for i, n in enumerate(lens)], dtype=torch.int32)
    dense = k2.DenseFsaVec(torch.from_numpy(np.ascontiguousarray(lp)), segs)
    s, o, mn, mx = beams
    lat = k2.intersect_dense_pruned(g, dense, float(s), float(o), int(mn), int(mx), frame_idx_name="frame")
    trop = lat.get_tot_scores(use_double_scores=True, log_semiring=False).tolist()
    logs = lat.get_tot_scores(use_double_scores=True, log_semiring=True).tolist()
    best = k2.shortest_path(lat, use_double_scores=True)
    best_tot = best.get_tot_scores(use_double_scores=True, log_semiring=False).tolist()
    rows = []
    for r, n in enumerate(lens):
        fsa = lat[r]
        frame = fsa.frame.numpy().astype(np.int64)
        arc = fsa.arc_id.numpy().astype(np.int64) - 1
        scores = fsa.scores.numpy().astype(np.float32)
        order = np.lexsort((arc, frame))
        assert frame.min(initial=0) >= 0 and frame.max(initial=0) <= n
        b = best[r]
        path = (b.arc_id - 1).tolist()
        row = {
            "num_states": int(fsa.shape[0]),
            "frame_counts": np.bincount(frame, minlength=n + 1).tolist(),
            "arcs": arc[order].tolist(),
            "tot": [None if not math.isfinite(x) else x for x in (trop[r], logs[r])],
            "words": [x for x in b.aux_labels.tolist() if x > 0],
            "score": best_tot[r] if math.isfinite(best_tot[r]) else None,
            "best": path,
        }
        if len(arc) < SCORE_BITS_MAX_ARCS:
            row["score_bits"] = base64.b64encode(scores[order].astype("<f4").tobytes()).decode()
        rows.append(row)
    return rows


def random_lens(rng, cls):
    b = int(rng.integers(1, 5))
    out = []
    for _ in range(b):
        r = rng.random()
        if r < 0.15:
            out.append(int(rng.integers(1, 4)))
        elif r < 0.55 or cls == 3:
            out.append(int(rng.integers(4, 60)))
        elif r < 0.85:
            out.append(int(rng.integers(60, 160)))
        else:
            out.append(int(rng.integers(160, 401)))
    return out


def generate(out_path):
    rng = np.random.default_rng(SEED)
    cases = []
    for rep in range(REPS):
        for bi, beams in enumerate(BEAMS):
            cls = (rep + bi) % len(SIZE_CLASSES)
            n_states = int(rng.integers(SIZE_CLASSES[cls][0], SIZE_CLASSES[cls][1] + 1))
            max_deg = int(rng.choice([1, 2, 3, 4, 6, 8]))
            vocab = int(rng.integers(3, 33))
            n_words = int(rng.integers(1, 51))
            text, _ = base.sorted_graph(base.make_graph_text(rng, n_states, max_deg, vocab, n_words))
            lens = random_lens(rng, cls)
            style, lp_q = quantized_log_probs(rng, lens, vocab)
            case = {"name": f"L{len(cases):03d}_s{n_states}_d{max_deg}_v{vocab}_{style}_b{bi}",
                    "graph": text, "vocab": vocab, "lens": lens, "lp_q": lp_q, "beams": list(beams)}
            case["rows"] = lattice_rows(text, lens, log_probs_of(case), beams)
            if rep % 5 == 0 and len(lens) > 1:  # batching must not change a row's lattice
                lp = log_probs_of(case)
                for r, n in enumerate(lens):
                    alone = lattice_rows(text, [n], lp[r:r + 1, :n], beams)[0]
                    assert alone == case["rows"][r], (case["name"], r)
            cases.append(case)
    write(out_path, cases)
    rows = [r for c in cases for r in c["rows"]]
    print(f"{len(cases)} cases, {len(rows)} rows ({sum(r['tot'][0] is None for r in rows)} without a path), "
          f"{sum(len(r['arcs']) for r in rows)} lattice arcs, frames {sum(c['lens'][i] for c in cases for i in range(len(c['lens'])))}, "
          f"longest row {max(max(c['lens']) for c in cases)}")


def answer(in_path, out_path):
    with gzip.open(in_path, "rt") as f:
        cases = json.load(f)
    for case in cases:
        case["rows"] = lattice_rows(case["graph"], case["lens"], log_probs_of(case), case["beams"])
    write(out_path, cases)
    print(f"answered {len(cases)} cases")


def write(path, cases):
    with gzip.open(path, "wt", compresslevel=9) as f:
        json.dump(cases, f, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--answer", metavar="IN", help="recompute rows of this fixture file")
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    answer(args.answer, args.out) if args.answer else generate(args.out)
    print(f"wrote {args.out} in {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
