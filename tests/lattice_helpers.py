"""Helpers for the lattice tests: k2 lattice goldens, and brute-force enumerations."""

from __future__ import annotations

import base64
import math

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph

Q = 64.0  # make_k2_lattice_goldens.py stores log-probs as round(-lp * Q)


def lattice_case_inputs(case: dict):
    graph = Graph.from_k2_text(case["graph"], vocab_size=case["vocab"])
    lens, V = case["lens"], case["vocab"]
    lp = np.zeros((len(lens), max(lens), V), np.float32)
    for r, (n, q) in enumerate(zip(lens, case["lp_q"])):
        lp[r, :n] = (-np.asarray(q, np.float64) / Q).astype(np.float32).reshape(n, V)
    s, o, mn, mx = case["beams"]
    opts = DecoderOptions(search_beam=float(s), output_beam=float(o), min_active_states=int(mn),
                          max_active_states=int(mx), allow_partial=False)
    return graph, lp, np.asarray(lens, np.int32), opts


def compare_lattices_to_k2(case: dict, decoder_factory=None, device: str = "cpu", hyps=None) -> dict:
    """Decodes a golden case with lattice=True (or takes its `hyps`) and compares every row
    with k2's lattice. Returns counts and a list of mismatch messages under "bad"."""
    graph, lp, lens, opts = lattice_case_inputs(case)
    if hyps is None:
        dec = (decoder_factory or Decoder)(graph, opts, device=device)
        hyps = dec.decode(lp, lens, lattice=True)
    out = {"rows": 0, "arcs": 0, "score_rows": 0, "bad": []}
    for r, (h, row) in enumerate(zip(hyps, case["rows"])):
        where = f"{case['name']} row {r}"
        lat = h.lattice
        out["rows"] += 1
        out["arcs"] += len(row["arcs"])
        frames = np.repeat(np.arange(len(row["frame_counts"])), row["frame_counts"])
        theirs = list(zip(frames.tolist(), row["arcs"]))
        order = np.lexsort((lat.graph_arc, lat.frame))
        ours = list(zip(lat.frame[order].tolist(), lat.graph_arc[order].tolist()))
        if ours != theirs:
            diff = sorted(set(ours) ^ set(theirs))[:8]
            out["bad"].append(f"{where}: {len(ours)} arcs vs k2's {len(theirs)}; (frame, arc) differing: {diff}")
            continue
        if lat.num_states != row["num_states"]:
            out["bad"].append(f"{where}: {lat.num_states} states vs k2's {row['num_states']}")
        for k, log in enumerate((False, True)):
            want, got = row["tot"][k], lat.tot_score(log)
            if want is None:
                ok = got == float("-inf")
            else:
                ok = math.isfinite(got) and abs(got - want) <= 1e-4 * abs(want)
            if not ok:
                out["bad"].append(f"{where}: tot_score(log={log}) {got!r} vs k2's {want!r}")
        if "score_bits" in row:
            out["score_rows"] += 1
            k2_bits = np.frombuffer(base64.b64decode(row["score_bits"]), "<f4").view(np.int32)
            if not np.array_equal(k2_bits, lat.score[order].view(np.int32)):
                out["bad"].append(f"{where}: arc scores differ from k2's in the last bits")
        path, score = lat.best_path()
        if row["score"] is None:
            if path.size or not h.empty:
                out["bad"].append(f"{where}: k2 has no path; our lattice has {lat.path_words(path)}")
        elif lat.path_words(path) != row["words"] or abs(score - row["score"]) > 1e-9 * abs(row["score"]):
            out["bad"].append(f"{where}: lattice best path {lat.path_words(path)} {score!r} vs k2's "
                              f"{row['words']} {row['score']!r}")
    return out


# ---------------------------------------------------------------------- brute force
def graph_paths(graph: Graph, lp: np.ndarray, n: int, allow_partial: bool = False):
    """Every complete path of the graph over n frames, exhaustively (no pruning), as
    (image arcs, frames, redirected, score): emitting arcs consume frames 0..n-1, epsilon
    arcs sit at the frame reached, then a final arc (frame n); with allow_partial and no
    path ending in a final arc, every path of n frames ends in one redirected arc instead
    (any arc of the state reached, acoustic 0). Scores in float64."""
    g = graph.arrays
    rs, il, dest, w = g.row_splits, g.ilabel, g.dest, g.weight

    def walk(s, t, arcs, frames, score, out):
        for a in range(rs[s], rs[s + 1]):
            lab = int(il[a])
            if lab == -2:
                walk(int(dest[a]), t, arcs + [a], frames + [t], score + float(w[a]), out)
            elif lab >= 0 and t < n:
                walk(int(dest[a]), t + 1, arcs + [a], frames + [t], score + float(w[a]) + float(lp[t, lab]), out)
        if t == n:
            out.append((s, arcs, frames, score))

    ends = []
    walk(g.start_state, 0, [], [], 0.0, ends)
    paths = []
    for s, arcs, frames, score in ends:
        for a in range(rs[s], rs[s + 1]):
            if int(il[a]) == -1:
                paths.append((arcs + [a], frames + [n], False, score + float(w[a])))
    if allow_partial and not paths:
        for s, arcs, frames, score in ends:
            for a in range(rs[s], rs[s + 1]):
                paths.append((arcs + [a], frames + [n], True, score + float(w[a])))
    return paths


def lattice_paths(lat):
    """Every complete path of a lattice, as (arc indices, float64 score)."""
    out_arcs = [[] for _ in range(lat.num_states)]
    for i in range(lat.num_arcs):
        out_arcs[int(lat.src[i])].append(i)
    paths = []

    def walk(s, arcs, score):
        if s == lat.final:
            paths.append((arcs, score))
        for i in out_arcs[s]:
            walk(int(lat.dst[i]), arcs + [i], score + float(lat.score[i]))

    walk(lat.start, [], 0.0)
    return paths


def logsumexp(xs) -> float:
    xs = np.asarray(list(xs), np.float64)
    if xs.size == 0:
        return float("-inf")
    m = xs.max()
    return float(m + np.log(np.exp(xs - m).sum()))
