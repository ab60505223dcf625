"""Shared test helpers: golden loading, path rescoring, random graphs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph

DATA = Path(__file__).resolve().parent / "data"


def load_cases(name: str) -> list[dict]:
    with gzip.open(DATA / name, "rt") as f:
        return json.load(f)


def case_inputs(case: dict):
    graph = Graph.from_k2_text(case["graph"], vocab_size=case["vocab"])
    lp = np.asarray(case["log_probs"], dtype=np.float32)
    lens = np.asarray(case["lens"], dtype=np.int32)
    s, o, mn, mx = case["beams"]
    # the golden cases' scores are arbitrary (k2 takes any scores), not log-probabilities
    opts = DecoderOptions(search_beam=float(s), output_beam=float(o), min_active_states=int(mn),
                          max_active_states=int(mx), allow_partial=bool(case.get("allow_partial", False)),
                          check_log_probs=False)
    return graph, lp, lens, opts


def path_score(graph: Graph, lp_row: np.ndarray, arcs, redirect_arc: int = -1) -> float:
    """Double-precision total score of a path (graph + acoustic), k2's shortest_path sum."""
    g = graph.arrays
    arcs = graph.image_arc_ids(list(arcs)).tolist()
    redirect_arc = int(graph.image_arc_ids(redirect_arc)) if redirect_arc >= 0 else -1
    total, t = 0.0, 0
    for a in arcs:
        il = int(g.ilabel[a])
        total += float(g.weight[a])
        if il >= 0:
            total += float(lp_row[t, il])
            t += 1
    if redirect_arc >= 0:
        total += float(g.weight[redirect_arc])
    return total


def path_scores_f32(graph: Graph, lp_row: np.ndarray, arcs, redirect_arc: int = -1) -> np.ndarray:
    """The float32 score of a path after each of its arcs (and its redirect arc, last, where it
    has one), as our decoders accumulate it, in k2's order: end = score + (log_prob + weight);
    a final or redirect arc adds (0 + weight), an epsilon arc its weight (the closure's order);
    neither reads a frame."""
    g = graph.arrays
    arcs = graph.image_arc_ids(list(arcs)).tolist()
    redirect_arc = int(graph.image_arc_ids(redirect_arc)) if redirect_arc >= 0 else -1
    s, t = np.float32(0.0), 0
    out = []
    for a in list(arcs) + ([redirect_arc] if redirect_arc >= 0 else []):
        il = int(g.ilabel[a]) if a != redirect_arc else -1
        if il >= 0:
            s = np.float32(s + np.float32(lp_row[t, il] + g.weight[a]))
            t += 1
        elif il == -1:
            s = np.float32(s + np.float32(np.float32(0.0) + g.weight[a]))
        else:
            s = np.float32(s + g.weight[a])
        out.append(s)
    return np.array(out, np.float32)


def path_score_f32(graph: Graph, lp_row: np.ndarray, arcs, redirect_arc: int = -1) -> np.float32:
    """The float32 score our decoders give a path: end = score + (log_prob + weight), in order."""
    scores = path_scores_f32(graph, lp_row, arcs, redirect_arc)
    return scores[-1] if len(scores) else np.float32(0.0)


def compare_to_k2(case: dict, decoder_factory=None, device: str = "cpu"):
    """Decode a golden case; returns (matched, ties, list of mismatch messages)."""
    graph, lp, lens, opts = case_inputs(case)
    dec = (decoder_factory or Decoder)(graph, opts, device=device)
    hyps = dec.decode(lp, lens)
    matched, ties, bad = 0, 0, []
    for b, (h, row) in enumerate(zip(hyps, case["rows"])):
        where = f"{case.get('name', '?')} row {b}"
        if row["empty"]:
            if h.empty:
                matched += 1
            else:
                bad.append(f"{where}: k2 found no path, we found {h.words} score {h.score}")
            continue
        if h.empty:
            bad.append(f"{where}: we found no path, k2 found {row['words']} score {row['score']}")
            continue
        ours = path_score(graph, lp[b], h.arcs, h.redirect_arc)
        if abs(ours - h.score) > 1e-5 * abs(ours) + 1e-3:
            bad.append(f"{where}: our float score {h.score} is not our path's sum {ours}")
            continue
        if h.words == row["words"] and abs(ours - row["score"]) <= 1e-6 * abs(ours) + 1e-6:
            matched += 1
        elif abs(ours - row["score"]) <= 1e-4 and (
                "arcs" not in row or path_score_f32(graph, lp[b], row["arcs"]) == np.float32(h.score)):
            # A different path with the same score: with k2's arcs known, the float32 score of
            # k2's path under our arithmetic must equal ours bit for bit (an exact-score tie).
            ties += 1
            exact = "bit-exact float32 tie" if "arcs" in row else "k2 gave no arcs; double scores within 1e-4"
            print(f"TIE ({exact}) {where}: ours {h.words} {ours!r} vs k2 {row['words']} {row['score']!r}")
        else:
            bad.append(f"{where}: ours {h.words} {ours!r} vs k2 {row['words']} {row['score']!r}")
    return matched, ties, bad


def random_eps_graph(rng: np.random.Generator, n: int, vocab: int, degree: int, eps_prob: float) -> Graph:
    """A random graph with epsilon arcs (acyclic: only to higher states) and final arcs."""
    src, dst, il, w, words = [], [], [], [], []
    final = n  # the super-final state
    for s in range(n):
        arcs = []
        if s + 1 < n:
            for _ in range(rng.integers(0, 3)):
                if rng.random() < eps_prob:
                    arcs.append((int(rng.integers(s + 1, n)), -2))
        for _ in range(int(rng.integers(1, degree + 1))):
            arcs.append((int(rng.integers(0, n)), int(rng.integers(0, vocab))))
        arcs.sort(key=lambda x: x[1] != -2)  # epsilon arcs first
        if rng.random() < 0.4 or s == n - 1:
            arcs.append((final, -1))
        for d, lab in arcs:
            src.append(s)
            dst.append(d)
            il.append(lab)
            w.append(float(np.float32(rng.uniform(-3, 0.5))))
            words.append([int(rng.integers(1, 30))] if rng.random() < 0.3 and lab != -1 else [])
    eps = np.array(il) == -2
    return Graph.from_arcs(num_states=n + 1, start_state=0, src=src, dest=dst, ilabel=il, weight=w,
                           words=words, vocab_size=vocab, epsilon=eps)


def in_layout(graph: Graph) -> Graph:
    """The same graph built from its image order, so that its source order is the image
    layout: nothing is reordered (`reordered` False, no arc_id section) and image arc ids
    are source arc ids. For tests about graphs that need no reordering."""
    a = graph.arrays
    src = np.repeat(np.arange(a.num_states), np.diff(a.row_splits))
    g = Graph.from_arcs(num_states=a.num_states, start_state=a.start_state, src=src, dest=a.dest,
                        ilabel=a.ilabel, weight=a.weight, words=(a.aux_row_splits, a.aux_pool),
                        vocab_size=a.vocab_size, epsilon=a.ilabel == -2)
    assert not g.reordered, "a graph built in image order was reordered"
    return g


def assert_image_layout(graph: Graph) -> None:
    """Each state's arc range in the image is [finals if not at end] [epsilon] [emitting:
    label 0 first, then the others by weight, best first] [finals if at end], and arcs that
    the order cannot tell apart (same class and, for labels > 0, the same weight) keep
    their source order (increasing source ids)."""
    a = graph.arrays
    il, w = a.ilabel.astype(np.int64), a.weight.astype(np.float64)
    src = np.repeat(np.arange(a.num_states), np.diff(a.row_splits))
    cls = np.where(il == -1, 4 if a.finals_at_end else 0,
                   np.where(il == -2, 1, np.where(il == 0, 2, 3)))
    ids = graph.source_arc_ids(np.arange(a.num_arcs))
    same = np.diff(src) == 0
    assert (np.diff(cls)[same] >= 0).all(), "arc classes out of order inside a state"
    both3 = same & (cls[:-1] == 3) & (cls[1:] == 3)
    assert (w[1:] <= w[:-1])[both3].all(), "emitting arcs (label > 0) not best first"
    tie = same & (np.diff(cls) == 0) & ((cls[:-1] != 3) | (w[1:] == w[:-1]))  # (-inf ties too)
    assert (np.diff(ids)[tie] > 0).all(), "arcs the layout cannot tell apart left source order"


def viterbi(graph: Graph, lp: np.ndarray, length: int):
    """Exhaustive (unpruned) float64 Viterbi with full epsilon closure: (score, source arc ids)."""
    g = graph.arrays
    n = g.num_states
    rs = g.row_splits
    NEG = -np.inf

    def closure(score, back):
        changed = True
        while changed:
            changed = False
            for s in range(n):
                if score[s] == NEG or g.eps_count is None:
                    continue
                b = rs[s] + (0 if g.finals_at_end else g.final_count[s])
                for a in range(b, b + g.eps_count[s]):
                    d = g.dest[a]
                    v = score[s] + float(g.weight[a])
                    if v > score[d] + 1e-12:
                        score[d] = v
                        back[d] = back[s] + [a]
                        changed = True

    score = np.full(n, NEG)
    back = [[] for _ in range(n)]
    score[g.start_state] = 0.0
    closure(score, back)
    for t in range(length + 1):
        new = np.full(n, NEG)
        nb = [[] for _ in range(n)]
        for s in range(n):
            if score[s] == NEG:
                continue
            for a in range(rs[s], rs[s + 1]):
                il = int(g.ilabel[a])
                if t < length and il >= 0:
                    v = score[s] + float(g.weight[a]) + float(lp[t, il])
                elif t == length and il == -1:
                    v = score[s] + float(g.weight[a])
                else:
                    continue
                d = g.dest[a]
                if v > new[d]:
                    new[d] = v
                    nb[d] = back[s] + [a]
        score, back = new, nb
        if t < length:
            closure(score, back)
    f = n - 1
    return score[f], graph.source_arc_ids(np.asarray(back[f], np.int64)).tolist()


def random_ctc_graph(rng: np.random.Generator, n: int, vocab: int, degree: int, final_prob: float) -> Graph:
    """An epsilon-free CTC-like graph: blank self-loops, parallel arcs, some final arcs."""
    src, dst, il, w, words = [], [], [], [], []
    for s in range(n):
        arcs = []
        if rng.random() < 0.8:
            arcs.append((s, 0))
        for _ in range(int(rng.integers(1, degree + 1))):
            arcs.append((int(rng.integers(0, n)), int(rng.integers(0, vocab))))
        if rng.random() < 0.2:  # a parallel arc to an existing destination
            arcs.append((arcs[-1][0], int(rng.integers(0, vocab))))
        if rng.random() < final_prob:
            arcs.append((n, -1))
        for d, lab in arcs:
            src.append(s)
            dst.append(d)
            il.append(lab)
            w.append(float(np.float32(rng.uniform(-4, 0.5))))
            words.append([int(rng.integers(1, 60))] if lab > 0 and rng.random() < 0.4 else [])
    return Graph.from_arcs(num_states=n + 1, start_state=0, src=src, dest=dst, ilabel=il, weight=w,
                           words=words, vocab_size=vocab)


def random_log_probs(rng: np.random.Generator, B: int, T: int, V: int, peaky: bool) -> np.ndarray:
    logits = rng.normal(size=(B, T, V)).astype(np.float32) * (1.0 if peaky else float(rng.uniform(1, 4)))
    if peaky:
        blank = rng.random((B, T)) < 0.7
        logits[..., 0] += np.where(blank, 5.0, 0.0)
        tok = rng.integers(0, V, size=(B, T))
        np.put_along_axis(logits, tok[..., None],
                          np.take_along_axis(logits, tok[..., None], 2) + np.where(blank, 0, 5.0)[..., None], 2)
    m = logits.max(-1, keepdims=True)
    return (logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))).astype(np.float32)


def random_eps_graph_any(rng: np.random.Generator, n: int, vocab: int, degree: int, eps_prob: float,
                         *, cycles: bool, chain: int = 0) -> Graph:
    """A random graph with epsilon arcs written as a user would: each state's arcs in random
    order (epsilon arcs after or between emitting ones, final arcs in the middle), so the
    loader must reorder them. `cycles` adds epsilon arcs back to lower states (epsilon
    cycles); `chain` > 0 adds an epsilon chain of that many hops out of the start state.
    Epsilon arcs also go to states with final arcs, between them, and into the final state."""
    final = n
    has_final = rng.random(n) < 0.4
    has_final[n - 1] = True
    out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for s in range(n):
        for _ in range(int(rng.integers(1, degree + 1))):
            out[s].append((int(rng.integers(0, n)), int(rng.integers(0, vocab))))
        for _ in range(int(rng.integers(0, 3))):
            if rng.random() < eps_prob:
                lo = 0 if cycles else s + 1
                if lo < n:
                    out[s].append((int(rng.integers(lo, n)), -2))
        if rng.random() < 0.15 and has_final.any():  # between states with final arcs
            out[s].append((int(rng.choice(np.flatnonzero(has_final))), -2))
        if rng.random() < 0.05:  # into the super-final state itself (a dead end before T)
            out[s].append((final, -2))
        if has_final[s]:
            out[s].append((final, -1))
    for k in range(min(chain, n - 1)):  # 0 -> 1 -> ... by epsilon arcs
        out[k].append((k + 1, -2))
    src, dst, il, w, words = [], [], [], [], []
    for s in range(n):
        for j in rng.permutation(len(out[s])):
            d, lab = out[s][j]
            src.append(s)
            dst.append(d)
            il.append(lab)
            w.append(float(np.float32(rng.uniform(-3, 0.3))))
            words.append([int(rng.integers(1, 30))] if rng.random() < 0.3 and lab != -1 else [])
    eps = np.array(il) == -2
    return Graph.from_arcs(num_states=n + 1, start_state=0, src=src, dest=dst, ilabel=il, weight=w,
                           words=words, vocab_size=vocab, epsilon=eps)


def graph_packs(graph) -> bool:
    """Whether GpuGraphUpload packs the graph's arcs (DeviceGraph::arc_packed, CUWFST_GRAPH_PACK
    on): label bits for the largest ordinary ilabel and two special codes above it, and every
    state number in the bits left."""
    a = graph.arrays
    il = np.asarray(a.ilabel)
    most = int(il[il >= 0].max()) if np.any(il >= 0) else 0
    bits = 1
    while (1 << bits) < most + 3:
        bits += 1
    return bits < 32 and a.num_states <= 1 << (32 - bits)


def graph_upload_bytes(graph, packed: bool | None = None) -> int:
    """What GpuGraphUpload allocates: row_splits, final counts (a byte a state), the arcs'
    destinations and labels (one uint32 an arc where they pack, `packed` None: as the default
    upload does; else an int32 and a uint16), weights, per-state max weights; with epsilon arcs
    the epsilon counts (a byte a state) and per-state max epsilon weights; the big-count table
    (3 int32 a state with 255 or more final or epsilon arcs; 2 on an epsilon-free graph); the
    blank counts (a byte a state, graph_blank_counts). Not the label bound's tables (graphs with
    more than 8 distinct labels a state; the tests that call this have none)."""
    a = graph.arrays
    n, A = a.num_states, a.num_arcs
    if packed is None:
        packed = graph_packs(graph)
    eps = a.eps_count if a.has_eps else np.zeros(n, np.int32)
    big = int(np.count_nonzero((np.asarray(a.final_count) >= 255) | (np.asarray(eps) >= 255)))
    return (4 * (n + 1) + n + (n + 4 * n if a.has_eps else 0) + (4 * A if packed else 6 * A) + 4 * A + 4 * n
            + big * 4 * (3 if a.has_eps else 2) + (n if graph_blank_counts(graph) is not None else 0)
            + (2 * A if graph_source_places(graph) is not None else 0))


def graph_source_places(graph) -> np.ndarray | None:
    """Each image arc's place among its state's arcs in the source order, as the upload keeps them
    (DeviceGraph::arc_src_place, a uint16 an arc): where the image moved an arc within its state and
    no state has 32,768 arcs or more; else None."""
    a = graph.arrays
    if a.arc_id is None:
        return None
    rs = np.asarray(a.row_splits, np.int64)
    deg = np.diff(rs)
    if deg.max(initial=0) >= 32768:
        return None
    src = np.repeat(np.arange(a.num_states), deg)
    order = np.lexsort((np.asarray(a.arc_id, np.int64), src))  # each state's arcs by source id
    place = np.empty(a.num_arcs, np.int64)
    place[order] = np.arange(a.num_arcs) - np.repeat(rs[:-1], deg)
    image_place = np.arange(a.num_arcs) - np.repeat(rs[:-1], deg)
    return None if np.array_equal(place, image_place) else place.astype(np.uint16)


def emitting_ranges(g: Graph):
    """Each state's emitting arcs [b, e) in image order (after its finals-at-start and epsilon arcs)."""
    a = g.arrays
    rs = np.asarray(a.row_splits, np.int64)
    fc = np.asarray(a.final_count, np.int64)
    ec = np.asarray(a.eps_count, np.int64) if a.has_eps else np.zeros(a.num_states, np.int64)
    b = (rs[:-1] if a.finals_at_end else rs[:-1] + fc) + ec
    e = rs[1:] - fc if a.finals_at_end else rs[1:]
    return b, e


def graph_blank_counts(graph) -> np.ndarray | None:
    """Each state's label-0 arcs at the front of its emitting arcs, as the upload keeps them
    (DeviceGraph::emit_blank): where every state's emitting arcs are sorted (label 0 first, then
    the others by weight, non-increasing, none NaN) and every count is below 255; else None."""
    a = graph.arrays
    il, w = np.asarray(a.ilabel), np.asarray(a.weight)
    counts = np.zeros(a.num_states, np.int64)
    for s, (b, e) in enumerate(zip(*emitting_ranges(graph))):
        k = b
        while k < e and il[k] == 0:
            k += 1
        rest = w[k:e]
        if (il[k:e] == 0).any() or np.isnan(rest).any() or (rest[1:] > rest[:-1]).any():
            return None
        counts[s] = k - b
    return counts if (counts < 255).all() else None


def assert_same_hypotheses(graph: Graph, lp: np.ndarray, cpu, gpu, where: str = "") -> None:
    """GPU hypotheses equal the CPU reference's: no overflow, the same emptiness, bit-identical
    float32 scores, and the same words, or on an exact-score tie another path whose float32
    score under our arithmetic is the same bits."""
    assert len(cpu) == len(gpu), where
    for b, (c, g) in enumerate(zip(cpu, gpu)):
        assert g.overflow == 0, f"{where} row {b}: overflow {g.overflow}"
        assert c.empty == g.empty, f"{where} row {b}: cpu empty {c.empty}, gpu empty {g.empty}"
        if c.empty:
            continue
        assert np.float32(c.score) == np.float32(g.score), f"{where} row {b}: {c.score!r} vs {g.score!r}"
        if (c.arcs, c.redirect_arc) != (g.arcs, g.redirect_arc):
            assert path_score_f32(graph, lp[b], g.arcs, g.redirect_arc) == np.float32(c.score), where
        else:
            assert c.words == g.words, f"{where} row {b}"


def assert_same_snapshots(cpu, gpu, steps: int, where="") -> None:
    """GPU step snapshots (decode_snapshots) equal to the CPU's, step by step: `steps` of each
    (T + 2), each step's phase, beam, cutoff and frontier size before its closure, and the
    frontier's states and float32 scores (the arcs may differ on an exact-score tie)."""
    assert len(cpu) == len(gpu) == steps, (where, len(cpu), len(gpu), steps)
    for k, (c, g) in enumerate(zip(cpu, gpu)):
        assert (c["phase"], c["beam"], c["cutoff"], c["before_closure"]) == \
               (g["phase"], g["beam"], g["cutoff"], g["before_closure"]), (where, k)
        assert set(c["tokens"]) == set(g["tokens"]), f"{where} step {k}: frontier states differ"
        for st, (score, _) in c["tokens"].items():
            assert np.float32(score) == np.float32(g["tokens"][st][0]), f"{where} step {k} state {st}"


def check_continuous_and_streams(rng: np.random.Generator, graph: Graph, V: int, opts: DecoderOptions, seed: int,
                                  same, where: str, expect=None, device: str = "cuda") -> None:
    """Lanes that live across launch sequences, against the CPU: 5-19 rows of up to 39 frames
    (row 0 the longest) continuously batched through 3 lanes in segments of 1 or 5 steps (start
    closures of new rows between segments), then three of them as streams fed in two chunks and
    opened one after another (each open runs a start closure while the others are live), equal
    to the CPU's online decode. same(graph, lp_row, cpu, gpu, where) compares a row;
    expect(decoder, streaming decoder) checks which kernels they run."""
    from cuwfst import StreamingDecoder

    N = int(rng.integers(5, 20))
    T = int(rng.integers(4, 40))
    lens = rng.integers(0, T + 1, size=N).astype(np.int32)
    lens[0] = T
    lp = random_log_probs(rng, N, T, V, peaky=bool(seed % 2))
    cpu = Decoder(graph, opts).decode(lp, lens)
    dec = Decoder(graph, opts, device=device, max_lanes=3, batching="continuous", segment=int(rng.choice([1, 5])),
                  arena_entries=4096)
    gpu = dec.decode(lp, lens)
    for b in range(N):
        same(graph, lp[b], cpu[b], gpu[b], f"{where} continuous seed {seed} row {b}")
    S = 3
    sl = np.maximum(lens[:S], 2)
    want = Decoder(graph, opts).decode(lp[:S], sl, online=True)
    sd = StreamingDecoder(graph, opts, device=device, max_streams=4)
    if expect is not None:
        expect(dec, sd)
    streams = []
    for i in range(S):
        streams.append(sd.open_stream())
        sd.advance([streams[i]], [lp[i, : sl[i] // 2]])
    sd.advance(streams, [lp[i, sl[i] // 2 : sl[i]] for i in range(S)])
    for i in range(S):
        same(graph, lp[i], want[i], sd.finalize(streams[i]), f"{where} stream seed {seed} {i}")


def small_lattice_graph(rng: np.random.Generator, kind: str, chain: int, vocab: int = 6) -> Graph:
    """The lattice tests' small random graph: "ctc" (12 states, 3 arcs a state) or "eps" (the
    same with acyclic epsilon arcs and a start chain of `chain` hops); skips the test when the
    epsilon arcs still form a cycle (through the final state's arcs: no lattices there)."""
    import pytest

    if kind == "ctc":
        graph = random_ctc_graph(rng, 12, vocab, 3, 0.3)
    else:
        graph = random_eps_graph_any(rng, 12, vocab, 3, 0.3, cycles=False, chain=chain)
    if graph.has_epsilon and graph.max_epsilon_chain < 0:
        pytest.skip("cyclic epsilon arcs: no lattices")
    return graph


def assert_same_row(graph: Graph, lp_row: np.ndarray, c, g, where: str, totals: dict | None = None,
                    stats: tuple = ("max_frontier", "frontier_total", "closure_added"), finals: bool = True) -> None:
    """One GPU hypothesis `g` against the CPU's `c`: no overflow, the same emptiness and search
    statistics (`stats`, also for empty rows), bit-identical float32 scores, with `finals` the
    same reached_final and redirect, and the same arcs and words, or on an exact-score tie
    another path whose float32 score under our arithmetic is the same bits. `totals` counts
    rows and ties ({"rows", "ties"})."""
    if totals is not None:
        totals["rows"] += 1
    assert g.overflow == 0, f"{where}: overflow {g.overflow}"
    assert c.empty == g.empty, where
    if stats:
        assert tuple(getattr(c, k) for k in stats) == tuple(getattr(g, k) for k in stats), \
            f"{where}: search statistics"
    if c.empty:
        return
    assert np.float32(c.score) == np.float32(g.score), f"{where}: {c.score!r} vs {g.score!r}"
    if finals:
        assert (c.reached_final, c.redirect_arc >= 0) == (g.reached_final, g.redirect_arc >= 0), where
    if (c.arcs, c.redirect_arc) != (g.arcs, g.redirect_arc):
        assert path_score_f32(graph, lp_row, g.arcs, g.redirect_arc) == np.float32(c.score), where
        if totals is not None:
            totals["ties"] += 1
    else:
        assert c.words == g.words, where


def feed_interleaved(rng, sd, streams, lps, plans, where: str = "") -> list[list[int]]:
    """Feeds every stream its chunks (plans[i]: chunk lengths of lps[i]), a random subset of
    the streams advancing together each time, and checks each partial result after its
    advance: the frame count, final_words in range, and no committed word ever retracted.
    Returns each stream's committed words at the end."""
    S = len(streams)
    pos, step = [0] * S, [0] * S
    committed = [[] for _ in range(S)]
    while any(step[i] < len(plans[i]) for i in range(S)):
        todo = [i for i in range(S) if step[i] < len(plans[i]) and rng.random() < 0.7] or \
               [next(i for i in range(S) if step[i] < len(plans[i]))]
        chunks = []
        for i in todo:
            c = plans[i][step[i]]
            chunks.append(lps[i][pos[i] : pos[i] + c])
            pos[i] += c
            step[i] += 1
        sd.advance([streams[i] for i in todo], chunks)
        for i in todo:
            p = streams[i].partial()
            assert streams[i].frames == pos[i]
            if p.empty:
                continue
            k = p.final_words
            assert 0 <= k <= len(p.words)
            old = committed[i]
            assert p.words[: len(old)] == old, f"{where} stream {i}: committed {old} retracted by {p.words}"
            committed[i] = p.words[:k] if k >= len(old) else old
    return committed


# The pooled lane layout's sizing rules (csrc/gpu_decoder.cu Allocate and CommitPools;
# csrc/include/cuwfst/types.cuh PooledAskOf), for tests whose first batch must outgrow the
# pools' first pieces: the pools hold what their first VMM pieces hold, capped by the static
# layout's worst case, so a small decoder's pools may be whole from the start and never grow.
POOL_ALIGN = 32  # kPoolAlign
POOLS = ("tokens", "claims", "hash")  # memory_stats()["pools"]["lanes"]'s keys, kPool* order


def pooled_first_capacities(max_lanes: int, main_q: int, claims_cap: int, hash_cap: int,
                            granularity: int = 2 << 20) -> tuple[dict, dict]:
    """(most, first) entries of each pool on an epsilon-free graph: the static worst case
    (pool_max_) and what the construction's first commit gives (every array of a pool rounded
    up to whole pieces, within its reservation; a pool holds what its tightest array holds)."""
    L = max_lanes
    most = {"tokens": L * (main_q + 1 + POOL_ALIGN), "claims": L * (claims_cap + 16), "hash": L * hash_cap}
    hint_cap = min(4 * main_q + 1, (2**31 - 1) // 64)
    # (pool, bytes an entry, entries a pool entry, the array's static entries)
    arrays = [("tokens", 4, 1, most["tokens"])] * 9  # tok_state/score/winner x 2, begin, ub, arc_offsets
    arrays += [("tokens", 4, 4, max(L * hint_cap, 4 * most["tokens"])),  # tok_hint: 4 entries a token
               ("claims", 8, 1, most["claims"]), ("hash", 4, 1, most["hash"]), ("hash", 8, 1, most["hash"])]
    want = {"tokens": POOL_ALIGN * L, "claims": min(most["claims"], 1 << 12), "hash": min(most["hash"], 1 << 13)}

    def up(x):
        return (x + granularity - 1) // granularity * granularity

    first = dict(most)
    for pool, elem, per, static in arrays:
        committed = min(up(min(want[pool], most[pool]) * per * elem), up(max(static * elem, 1)))
        first[pool] = min(first[pool], committed // elem // per)
    return most, first


def pooled_step_asks(graph: Graph, options: DecoderOptions, lp: np.ndarray, lens, main_q: int, claims_cap: int,
                     hash_cap: int, steps: int | None = None) -> dict:
    """The most one step of a pooled batch of these rows asks of each pool (the sum over its
    lanes of PooledAskOf), from the CPU's frontiers: a lane's claims list and table by its real
    step's slots (exact); its next frontier by the slots too, or under the claims bounds
    ($CUWFST_POOL_BOUND claims / claims-finalize / claims-finalize-ahead, the default) by the
    claims its expansion made, of which the CPU's next frontier (the claims that survived) is a
    lower bound; a row's final step is counted as its token region alone (POOL_ALIGN). So this
    is a lower bound of what the GPU's steps ask (memory_stats' high_water_entries). steps: the
    first `steps` only."""
    from cuwfst.decoder.memory import pool_bound_mode

    by_claims = pool_bound_mode().startswith("claims")
    a = graph.arrays
    emitting = np.diff(a.row_splits) - a.final_count
    lens = [int(n) for n in lens]
    T = max(lens) + 1 if steps is None else min(max(lens) + 1, steps)
    slots, kept = [], []
    for b, n in enumerate(lens):
        m = min(n, T)
        snaps = Decoder(graph, options).decode_snapshots(lp[b], m) if m else []
        slots.append([int(emitting[list(snaps[t]["tokens"])].sum()) for t in range(m)])
        kept.append([len(snaps[t + 1]["tokens"]) for t in range(m)])
    need = dict.fromkeys(POOLS, 0)
    for t in range(T):
        step = dict.fromkeys(POOLS, 0)
        for b, n in enumerate(lens):
            if t < n:  # a real step: its claims bound is its slots (at most claims_cap)
                bound = min(slots[b][t], claims_cap)
                hash_size = 0
                if bound > 0:
                    hash_size = POOL_ALIGN
                    while hash_size < 2 * bound:
                        hash_size *= 2
                step["claims"] += (bound + 15) // 16 * 16
                step["hash"] += min(hash_size, hash_cap)
                frontier = min(kept[b][t], bound) if by_claims else bound
                step["tokens"] += (min(frontier, main_q) + 1 + POOL_ALIGN - 1) // POOL_ALIGN * POOL_ALIGN
            elif t == n:  # the final step: at least its frontier's region
                step["tokens"] += POOL_ALIGN
        for k in POOLS:
            need[k] = max(need[k], step[k])
    return need


POOLED_LANES = 16  # the lanes of outgrowing_pooled_batch's decoders


def outgrowing_pooled_batch(seed: int, T: int, lens, **options):
    """A batch for POOLED_LANES pooled lanes whose first decode outgrows the pools' first
    pieces (so it pauses, the pools grow, and it resumes). The 12,000-state CTC graph under a
    beam of 1,000 keeps nearly every state: a row's frontier reaches ~11,900 tokens and ~65,000
    slots by its sixth step, so each real step from there asks a 32,768-slot table (the lane's
    hash_cap) and a 12,032-token region (main_q + 1, aligned). Twelve such rows at once ask
    393,216 slots and 144,384 tokens, past the 262,144 and 131,072 of the first 2 MiB pieces
    (pooled_first_capacities; four lanes' pools would be whole in their first pieces and never
    grow). tests/test_memory.py checks this on the CPU; the GPU tests check it again on the
    decoder they build (assert_outgrows_first_pieces)."""
    rng = np.random.default_rng(seed)
    V = 40
    graph = random_ctc_graph(rng, 12000, V, 8, 0.3)
    lens = np.asarray(lens, np.int32)
    lp = random_log_probs(rng, len(lens), T, V, peaky=False)
    opts = DecoderOptions(search_beam=1000.0, min_active_states=1, max_active_states=400, **options)
    return graph, lp, lens, opts


def assert_outgrows_first_pieces(dec, graph: Graph, options: DecoderOptions, lp: np.ndarray, lens) -> dict:
    """Before the first decode of a pooled GPU decoder: its pools hold what the sizing rules
    say the first pieces hold, and this batch's steps ask more of at least one pool (so the
    decode must pause and grow). Returns the asks (lower bounds of the high-water marks)."""
    inst = dec._gpu.main
    st = dec.memory_stats()
    lanes, piece = st["pools"]["lanes"], st["pools"]["winners"]["granularity"]
    assert lanes["pooled"] and piece > 0 and lanes["grows"] == 0, st
    # (the pooled lane caps, GpuInstance.pool_caps: the pools' most and a lane's caps)
    most, first = pooled_first_capacities(inst.max_lanes, *inst.pool_caps, piece)
    assert lanes["capacity_entries"] == first, ("the pools' first capacities are not the sizing rules'", lanes, first)
    need = pooled_step_asks(graph, options, lp, lens, *inst.pool_caps)
    assert any(need[k] > first[k] for k in POOLS), ("the batch fits the first pieces: nothing would grow", need, first)
    return need


def assert_pools_grew(dec, need: dict) -> dict:
    """After that decode: the pools grew, their high-water marks reach the batch's asks, and
    every pool holds its high-water mark."""
    lanes = dec.memory_stats()["pools"]["lanes"]
    hw, cap = lanes["high_water_entries"], lanes["capacity_entries"]
    assert lanes["pooled"] and lanes["grows"] >= 1, lanes
    assert all(cap[k] >= hw[k] >= need[k] for k in POOLS), (lanes, need)
    return lanes


def early_rescue_case():
    """The early-rescue GPU tests' rows: nine rows (peaky and flat log-probs, lengths 12-40) over a
    3,000-state random CTC graph of 30 tokens; at search_beam 30 and max_active 100 most rows'
    frontiers pass the 1,024 tokens of a main instance made with main_q_factor 1. (graph, lp, lens)."""
    rng = np.random.default_rng(5)
    graph = random_ctc_graph(rng, 3000, 30, 8, 0.1)
    flat = random_log_probs(rng, 4, 40, 30, peaky=False)
    peaky = random_log_probs(rng, 5, 40, 30, peaky=True)
    lp = np.ascontiguousarray(np.concatenate([peaky[:2], flat[:2], peaky[2:], flat[2:]]))
    return graph, lp, np.array([40, 33, 40, 27, 38, 12, 40, 31, 40], np.int32)
