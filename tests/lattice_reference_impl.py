"""The lattice host code as it was before the vectorised rewrite (cuwfst/decoder/lattice.py at
2ab920e: Lattice._forward/_backward/word_confidences, word_times), kept verbatim as plain
functions so that tests/test_lattice_attach_exact.py can demand bit-identical outputs."""

from __future__ import annotations

import numpy as np


def ref_level_groups(lat):
    lev = lat.state_level[lat.src] if lat.num_arcs else np.zeros(0, np.int64)
    order = np.argsort(lev, kind="stable")
    cuts = np.flatnonzero(np.diff(lev[order])) + 1
    return np.split(order, cuts) if order.size else []


def ref_forward(lat, log_semiring: bool) -> np.ndarray:
    alpha = np.full(lat.num_states, -np.inf)
    if lat.num_states == 0:
        return alpha
    alpha[lat.start] = 0.0
    score = lat.score.astype(np.float64)
    for g in ref_level_groups(lat):
        vals = alpha[lat.src[g]] + score[g]
        if log_semiring:
            np.logaddexp.at(alpha, lat.dst[g], vals)
        else:
            np.maximum.at(alpha, lat.dst[g], vals)
    return alpha


def ref_backward(lat, log_semiring: bool) -> np.ndarray:
    beta = np.full(lat.num_states, -np.inf)
    if lat.num_states == 0:
        return beta
    beta[lat.final] = 0.0
    score = lat.score.astype(np.float64)
    for g in reversed(ref_level_groups(lat)):
        vals = beta[lat.dst[g]] + score[g]
        if log_semiring:
            np.logaddexp.at(beta, lat.src[g], vals)
        else:
            np.maximum.at(beta, lat.src[g], vals)
    return beta


def ref_word_confidences(lat, spans) -> list[float]:
    self = lat
    if self.num_states == 0:
        return [0.0] * len(spans)
    alpha = ref_forward(self, True)
    tot = alpha[self.final]
    if not np.isfinite(tot):
        return [0.0] * len(spans)
    beta = ref_backward(self, True)
    groups = ref_level_groups(self)
    gtime = np.array([int(self.state_frame[self.src[g[0]]]) for g in groups], np.int64)
    times = np.unique(self.state_frame)
    score = self.score.astype(np.float64)
    word_of_arc = np.repeat(np.arange(self.num_arcs), np.diff(self.word_splits))
    out = []
    for word, first, last in spans:
        first, last = int(first), int(last)
        hit = word_of_arc[self.word_ids == word]
        hit = hit[(self.frame[hit] >= first) & (self.frame[hit] <= last)]
        if hit.size == 0:
            out.append(0.0)
            continue
        masked = np.zeros(self.num_arcs, bool)
        masked[hit] = True
        a = np.full(self.num_states, -np.inf)
        if first == 0:
            a[self.start] = 0.0
        i = int(np.searchsorted(times, first))
        before = int(times[i - 1]) if i > 0 else None
        j = int(np.searchsorted(times, last, side="right"))
        after = int(times[j]) if j < times.size else None
        inside = (gtime >= first) & (gtime <= last)
        if before is not None:
            inside |= gtime == before
        for k in np.flatnonzero(inside).tolist():
            g = groups[k]
            if gtime[k] == before:
                g = g[self.state_frame[self.dst[g]] >= first]
                np.logaddexp.at(a, self.dst[g], alpha[self.src[g]] + score[g])
            else:
                g = g[~masked[g]]
                np.logaddexp.at(a, self.dst[g], a[self.src[g]] + score[g])
        leave = self.state_frame == after if after is not None else np.zeros(self.num_states, bool)
        rest = np.logaddexp.reduce(a[leave] + beta[leave]) if leave.any() else -np.inf
        out.append(float(min(1.0, max(0.0, -np.expm1(rest - tot)))))
    return out


def ref_word_times(graph, hyp, blank: int = 0) -> list[tuple[int, int]]:
    g = graph.arrays
    arcs = graph.image_arc_ids(hyp.arcs) if hyp.arcs else np.zeros(0, np.int64)
    il = g.ilabel[arcs].astype(np.int64) if arcs.size else np.zeros(0, np.int64)
    emitting = il >= 0
    frame = np.cumsum(emitting) - emitting
    rs = g.aux_row_splits
    n_words = (rs[arcs + 1] - rs[arcs]) if arcs.size else np.zeros(0, np.int64)
    carriers = np.flatnonzero(n_words > 0)
    out = []
    for j, i in enumerate(carriers.tolist()):
        stop = carriers[j + 1] if j + 1 < len(carriers) else arcs.size
        seg = np.arange(i, stop)
        sounding = seg[emitting[seg] & (il[seg] != blank)]
        start = int(frame[i])
        end = int(frame[sounding[-1]]) if sounding.size else start
        out.extend([(start, max(start, end))] * int(n_words[i]))
    return out


def ref_lattice_from_arrays(graph, states, arcs, scores, recorded_arcs: int = 0):
    """lattice_from_arrays as it was at 8bbab4a (per row, numpy), verbatim but for the names."""
    from cuwfst.decoder.lattice import FINAL_TOKEN, REDIRECT_ARC_BIT, Lattice

    g = graph.arrays
    code = arcs[3].astype(np.int64)
    redirect = (code & REDIRECT_ARC_BIT) != 0
    image = code & ~REDIRECT_ARC_BIT
    source = graph.source_arc_ids(image).astype(np.int64) if image.size else image
    ilabel = g.ilabel[image].astype(np.int32) if image.size else np.zeros(0, np.int32)
    rs = g.aux_row_splits
    lo = rs[image].astype(np.int64) if image.size else np.zeros(0, np.int64)
    hi = rs[image + 1].astype(np.int64) if image.size else np.zeros(0, np.int64)
    n_words = np.where(redirect, 0, hi - lo) if image.size else np.zeros(0, np.int64)
    word_splits = np.zeros(image.size + 1, np.int64)
    np.cumsum(n_words, out=word_splits[1:])
    starts = np.repeat(lo, n_words) if image.size else np.zeros(0, np.int64)
    offs = np.arange(int(word_splits[-1])) - np.repeat(word_splits[:-1], n_words)
    word_ids = g.aux_pool[starts + offs].astype(np.int32) if starts.size else np.zeros(0, np.int32)
    return Lattice(
        num_states=int(states.shape[1]),
        src=arcs[0].astype(np.int32), dst=arcs[1].astype(np.int32), frame=arcs[2].astype(np.int32),
        graph_arc=np.where(redirect, -1, source).astype(np.int32),
        redirect_arc=np.where(redirect, source, -1).astype(np.int32),
        token=np.where(redirect, FINAL_TOKEN, ilabel).astype(np.int32),
        acoustic=scores[0].astype(np.float32), graph_score=scores[1].astype(np.float32),
        score=scores[2].astype(np.float32),
        word_splits=word_splits.astype(np.int32), word_ids=word_ids,
        state_frame=states[0].astype(np.int32), state_graph=states[1].astype(np.int32),
        state_level=states[2].astype(np.int32), recorded_arcs=int(recorded_arcs))


LATTICE_ARRAYS = ("src", "dst", "frame", "graph_arc", "redirect_arc", "token", "acoustic", "graph_score", "score",
                  "word_splits", "word_ids", "state_frame", "state_graph", "state_level")


def lattice_difference(x, y) -> str | None:
    """None when two Lattices hold the same arrays (dtype, shape, bits) and attributes."""
    if type(x) is not type(y):
        return f"types {type(x).__name__} vs {type(y).__name__}"
    for k in ("num_states", "recorded_arcs"):
        if getattr(x, k) != getattr(y, k) or type(getattr(x, k)) is not type(getattr(y, k)):
            return f"{k}: {getattr(x, k)!r} vs {getattr(y, k)!r}"
    for k in LATTICE_ARRAYS:
        a, b = getattr(x, k), getattr(y, k)
        if not isinstance(b, np.ndarray) or a.dtype != b.dtype or a.shape != b.shape or a.ndim != 1:
            return f"{k}: {a.dtype}{a.shape} vs {getattr(b, 'dtype', type(b))}{getattr(b, 'shape', '')}"
        if a.tobytes() != b.tobytes():
            return f"{k}: values differ"
    if sorted(k for k in vars(x) if not k.startswith("_")) != sorted(k for k in vars(y) if not k.startswith("_")):
        return "attributes differ"
    return None
