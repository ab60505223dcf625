"""`cuwfst.Lattice`: the pruned lattice of one row, as k2's intersect_dense_pruned returns it.

A lattice is flat per-arc arrays plus maps back to the graph (k2 keeps lattices the same
way: arcs, `arc_map_a`, frames). States are numbered by time (frames consumed), then in
epsilon-topological order inside a time, so every arc goes from a lower to a higher state
id; state 0 is the start, the last state the final state (k2's convention, with k2's extra
arc-less final state when no path survived). Which arcs a lattice holds is k2's rule,
reproduced exactly by the CPU reference (cuwfst/csrc/reference/reference_lattice.h,
docs/k2-lattice-facts.md).

Scores are float32 per arc (`score = acoustic + graph_score`, k2's order); totals, n-best
and posteriors are computed in float64 from them, as k2's `use_double_scores=True` does.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np

from ..graph.image import native_array

REDIRECT_ARC_BIT = 1 << 30
EPSILON_TOKEN = -2  # `token` of an epsilon arc (it consumes no frame)
FINAL_TOKEN = -1  # `token` of a final arc and of allow_partial's redirected arcs


class NBest(NamedTuple):
    words: list[int]
    score: float  # the best path's total score among the paths with these words (float64)


class WordPosterior(NamedTuple):
    word: int
    frame: int
    posterior: float  # expected number of arcs carrying `word` at `frame` on a path


_REF_MODULE = None


def _reference_module():
    """The CPU reference module, looked up once (jit.load hashes the sources on every call)."""
    global _REF_MODULE
    if _REF_MODULE is None:
        from ..jit.reference import module

        _REF_MODULE = module()
    return _REF_MODULE


@dataclass(eq=False)
class Lattice:
    """The pruned lattice of one row.

    Per arc (all of length num_arcs): src, dst (lattice states); frame (the time of the
    arc's source state: the log-prob row an emitting arc consumes, n for the final arcs);
    graph_arc (the source graph's arc id, k2's arc_map_a; -1 on allow_partial's redirected
    arcs, whose graph arc is in redirect_arc); token (the token consumed, -1 on final and
    redirected arcs, -2 on epsilon arcs); acoustic, graph_score and score = acoustic +
    graph_score (float32); the words of arc i are word_ids[word_splits[i]:word_splits[i+1]]
    (the graph's aux labels; none on redirected arcs).
    Per state: state_frame (its time), state_graph (its graph state; -1 for k2's extra
    final state), state_level (a topological level: every arc goes up in level).
    """

    num_states: int
    src: np.ndarray
    dst: np.ndarray
    frame: np.ndarray
    graph_arc: np.ndarray
    redirect_arc: np.ndarray
    token: np.ndarray
    acoustic: np.ndarray
    graph_score: np.ndarray
    score: np.ndarray
    word_splits: np.ndarray
    word_ids: np.ndarray
    state_frame: np.ndarray
    state_graph: np.ndarray
    state_level: np.ndarray
    # arcs the forward pass kept before output-beam pruning (k2's count); None where the GPU's
    # lattice trim left some of them unwalked (GpuBackend.lattice_trim_on) or, on a graph with
    # epsilon arcs, its records' filter left some out (GpuBackend.lattice_eps_filter_on)
    recorded_arcs: int | None = 0

    start = 0

    @property
    def final(self) -> int:
        return self.num_states - 1

    @property
    def num_arcs(self) -> int:
        return int(self.src.shape[0])

    @property
    def num_frames(self) -> int:
        """Frames of the row (the final arcs sit at this frame)."""
        return int(self.state_frame[-1]) - 1 if self.num_states else 0

    def words(self, arc: int) -> list[int]:
        return self.word_ids[self.word_splits[arc]: self.word_splits[arc + 1]].tolist()

    def __repr__(self) -> str:
        return f"Lattice(states={self.num_states}, arcs={self.num_arcs}, frames={self.num_frames})"

    # ------------------------------------------------------------------ scores
    @property
    def _cache(self) -> dict:
        # derived data (level groups, forward/backward scores); the arrays are not meant to
        # change after construction
        c = self.__dict__.get("_derived")
        if c is None:
            c = self.__dict__["_derived"] = {}
        return c

    def _level_groups(self):
        """Arc indices grouped by their source state's level, ascending."""
        if "groups" not in self._cache:
            lay = self._layout()
            cuts = lay["bounds"][1:-1]
            self._cache["groups"] = np.split(lay["order"], cuts) if lay["order"].size else []
        return self._cache["groups"]

    def _layout(self) -> dict:
        """The arcs in level-group order (a stable sort by the source state's level), gathered
        once: src, dst and float64 score per position; group k holds positions
        bounds[k]:bounds[k+1]. The passes below walk these slices in exactly the order (and
        with exactly the additions) of a walk over _level_groups(). Nothing here depends on
        the frames (blank_skip remaps `frame` and `state_frame` after decoding): the times
        are read afresh by each word_confidences call."""
        c = self._cache
        if "layout" not in c:
            if self.num_arcs:
                lev = self.state_level[self.src]
                if lev.size < 2 or bool(np.all(lev[1:] >= lev[:-1])):
                    order = np.arange(lev.size)  # already grouped (the stable sort's identity)
                else:
                    order = np.argsort(lev, kind="stable")
                cuts = np.flatnonzero(np.diff(lev[order])) + 1
            else:
                order, cuts = np.zeros(0, np.int64), np.zeros(0, np.int64)
            bounds = np.concatenate([[0], cuts, [order.size]]).astype(np.int64) if order.size \
                else np.zeros(1, np.int64)
            src, dst = self.src[order].astype(np.int64), self.dst[order].astype(np.int64)
            c["layout"] = dict(order=order, bounds=bounds, bl=bounds.tolist(), src=src, dst=dst,
                               score=self.score.astype(np.float64)[order])
        return c["layout"]

    def _scores(self, key) -> np.ndarray:
        """The cached forward/backward array itself (callers must not write to it)."""
        if key not in self._cache:
            fwd, log = key[0] == "fwd", key[1]
            self._cache[key] = self._forward(log) if fwd else self._backward(log)
        return self._cache[key]

    def forward_scores(self, log_semiring: bool = False) -> np.ndarray:
        """float64 [num_states]: best (or log-summed) score from the start to each state."""
        return self._scores(("fwd", bool(log_semiring))).copy()

    def _forward(self, log_semiring: bool) -> np.ndarray:
        alpha = np.full(self.num_states, -np.inf)
        if self.num_states == 0:
            return alpha
        alpha[self.start] = 0.0
        lay = self._layout()
        src, dst, score, bl = lay["src"], lay["dst"], lay["score"], lay["bl"]
        at = np.logaddexp.at if log_semiring else np.maximum.at
        for k in range(len(bl) - 1):
            a, b = bl[k], bl[k + 1]
            at(alpha, dst[a:b], alpha[src[a:b]] + score[a:b])
        return alpha

    def backward_scores(self, log_semiring: bool = False) -> np.ndarray:
        """float64 [num_states]: best (or log-summed) score from each state to the final state."""
        return self._scores(("bwd", bool(log_semiring))).copy()

    def _backward(self, log_semiring: bool) -> np.ndarray:
        beta = np.full(self.num_states, -np.inf)
        if self.num_states == 0:
            return beta
        beta[self.final] = 0.0
        lay = self._layout()
        src, dst, score, bl = lay["src"], lay["dst"], lay["score"], lay["bl"]
        at = np.logaddexp.at if log_semiring else np.maximum.at
        for k in range(len(bl) - 2, -1, -1):
            a, b = bl[k], bl[k + 1]
            at(beta, src[a:b], beta[dst[a:b]] + score[a:b])
        return beta

    def tot_score(self, log_semiring: bool = False) -> float:
        """k2's get_tot_scores(use_double_scores=True): -inf when no path reaches the final state."""
        if self.num_states == 0:
            return float("-inf")
        return float(self.forward_scores(log_semiring)[self.final])

    def arc_posteriors(self) -> np.ndarray:
        """float64 [num_arcs]: the posterior probability of each arc (log-semiring
        forward-backward); 0 everywhere when the lattice has no complete path."""
        alpha = self.forward_scores(True)
        beta = self.backward_scores(True)
        tot = alpha[self.final] if self.num_states else -np.inf
        if not np.isfinite(tot):
            return np.zeros(self.num_arcs)
        with np.errstate(invalid="ignore"):
            lp = alpha[self.src] + self.score.astype(np.float64) + beta[self.dst] - tot
        return np.where(np.isfinite(lp), np.exp(np.minimum(lp, 0.0)), 0.0)

    def best_path(self) -> tuple[np.ndarray, float]:
        """The Viterbi path (arc indices into this lattice) and its float64 score;
        (empty, -inf) when no path reaches the final state. On an exact tie the arc with
        the lowest index wins."""
        alpha = self.forward_scores(False)
        if self.num_states == 0 or not np.isfinite(alpha[self.final]):
            return np.zeros(0, np.int64), float("-inf")
        score = self.score.astype(np.float64)
        # the best incoming arc of every state, the first one on a tie
        end = alpha[self.src] + score
        order = np.lexsort((np.arange(self.num_arcs), -end, self.dst))
        first = np.ones(order.size, bool)
        first[1:] = self.dst[order][1:] != self.dst[order][:-1]
        best_in = np.full(self.num_states, -1, np.int64)
        best_in[self.dst[order[first]]] = order[first]
        path, s = [], self.final
        while s != self.start:
            a = int(best_in[s])
            path.append(a)
            s = int(self.src[a])
        return np.asarray(path[::-1], np.int64), float(alpha[self.final])

    def path_words(self, arcs: Sequence[int]) -> list[int]:
        return [w for a in arcs for w in self.words(int(a))]

    # ------------------------------------------------------------------ n-best
    def nbest(self, n: int) -> list[NBest]:
        """The n best distinct word sequences, best first, each with the score of its best
        path (float64, the tropical semiring); fewer when the lattice holds fewer.

        Exact: an A* search over word prefixes. A prefix carries, for every lattice
        position reachable by emitting exactly its words, the best such path score; its
        priority adds the exact best completion from there (the backward Viterbi score), so
        complete sequences come off the heap in exact score order, each once. The search runs
        in the reference module (csrc/reference/lattice_posteriors.cc `LatticeNBest`), step for
        step as _nbest_python (its exactness reference): the same sequences, scores and order."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be an int >= 1, got {n!r}")
        beta = self.backward_scores(False)
        if self.num_states == 0 or not np.isfinite(beta[self.start]):
            return []
        i32 = lambda x: native_array(x, np.int32)  # noqa: E731
        args = (i32(self.src), i32(self.dst), native_array(self.score, np.float32), i32(self.word_splits),
                i32(self.word_ids), beta, n)
        # room for min(n, 64) sequences of up to a word a frame; where the search finds more, it
        # runs again with the room it asked for (out_need)
        m = min(n, 64)
        cap, need = m * max(64, self.num_frames + 1), np.zeros(2, np.int64)
        while True:
            scores, splits, words = np.empty(m), np.empty(m + 1, np.int64), np.empty(cap, np.int32)
            k = _reference_module().ref_lattice_nbest(*args, scores, splits, words, need)
            if k >= 0:
                break
            m, cap = int(need[0]), int(need[1])
        sp = splits.tolist()
        return [NBest(words[sp[i]: sp[i + 1]].tolist(), float(scores[i])) for i in range(k)]

    def _nbest_python(self, n: int) -> list[NBest]:
        """nbest(n) in Python: the form before LatticeNBest, kept as its exactness reference."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n must be an int >= 1, got {n!r}")
        beta = self.backward_scores(False)
        if self.num_states == 0 or not np.isfinite(beta[self.start]):
            return []
        score = self.score.astype(np.float64).tolist()
        dst = self.dst.tolist()
        splits = self.word_splits.tolist()
        wids = self.word_ids.tolist()
        # arcs leaving each state (arcs are grouped by source state in increasing order)
        out_begin = np.searchsorted(self.src, np.arange(self.num_states + 1)).tolist()
        beta_l = beta.tolist()

        def pos_beta(pos):
            return beta_l[pos] if isinstance(pos, int) else beta_l[dst[pos[0]]]

        def priority(d):
            return max(v + pos_beta(p) for p, v in d.items())

        def expand(d):
            """Closure over word-less arcs from the positions in `d`: returns the complete
            score (paths reaching the final state without another word) and, per next word,
            the positions right after emitting it."""
            emit: dict[int, dict] = {}
            complete = float("-inf")

            def offer(word, pos, val):
                if not np.isfinite(pos_beta(pos)):
                    return  # a dead end: no path to the final state
                e = emit.setdefault(word, {})
                if val > e.get(pos, float("-inf")):
                    e[pos] = val

            best = {}
            heap = []
            for p, v in d.items():
                if isinstance(p, int):
                    if v > best.get(p, float("-inf")):
                        if p not in best:
                            heapq.heappush(heap, p)
                        best[p] = v
                else:  # inside a multi-word arc: its next word is fixed
                    a, k = p
                    nxt = (a, k + 1) if splits[a] + k + 1 < splits[a + 1] else dst[a]
                    offer(wids[splits[a] + k], nxt, v)
            # states in increasing id are in topological order: each is final when popped
            while heap:
                s = heapq.heappop(heap)
                v = best[s]
                if s == self.final:
                    complete = max(complete, v)
                for a in range(out_begin[s], out_begin[s + 1]):
                    nv = v + score[a]
                    if splits[a] == splits[a + 1]:
                        t = dst[a]
                        if not np.isfinite(beta_l[t]):
                            continue
                        if nv > best.get(t, float("-inf")):
                            if t not in best:
                                heapq.heappush(heap, t)
                            best[t] = nv
                    else:
                        nxt = (a, 1) if splits[a] + 1 < splits[a + 1] else dst[a]
                        offer(wids[splits[a]], nxt, nv)
            return complete, emit

        out: list[NBest] = []
        # heap entries: (-priority, kind, words, positions); kind 0 = complete sequence
        heap = [(-float(beta[self.start]), 1, (), {self.start: 0.0})]
        while heap and len(out) < n:
            negf, kind, words, d = heapq.heappop(heap)
            if kind == 0:
                out.append(NBest(list(words), -negf))
                continue
            complete, emit = expand(d)
            if np.isfinite(complete):
                heapq.heappush(heap, (-complete, 0, words, None))
            for w, nd in emit.items():
                heapq.heappush(heap, (-priority(nd), 1, words + (w,), nd))
        return out

    # ------------------------------------------------------------------ posteriors
    def word_posteriors(self) -> list[WordPosterior]:
        """Per (word, frame): the summed posterior of the arcs carrying the word at that
        frame, i.e. the expected number of such arcs on a path (a probability on
        epsilon-free lattices, where a path crosses each frame on one arc); sorted by frame,
        then word."""
        post = self.arc_posteriors()
        n_words = np.diff(self.word_splits)
        arcs = np.repeat(np.arange(self.num_arcs), n_words)
        if arcs.size == 0:
            return []
        keys = np.stack([self.frame[arcs].astype(np.int64), self.word_ids.astype(np.int64)], 1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        sums = np.bincount(inv.reshape(-1), weights=post[arcs], minlength=len(uniq))
        return [WordPosterior(int(w), int(f), float(p)) for (f, w), p in zip(uniq.tolist(), sums.tolist())]

    def word_confidence(self, word: int, first_frame: int, last_frame: int) -> float:
        """The posterior probability that a path carries `word` on an arc whose frame lies
        in [first_frame, last_frame]: 1 - Z(lattice without those arcs) / Z, in the log
        semiring. In [0, 1]; 0 when the lattice has no complete path."""
        return self.word_confidences([(word, first_frame, last_frame)])[0]

    def word_confidences(self, spans: Sequence[tuple[int, int, int]]) -> list[float]:
        """word_confidence for each (word, first_frame, last_frame) of `spans`.

        The passes run in the reference module (csrc/reference/lattice_posteriors.cc: the
        same float64 additions in the same order as _word_confidences_numpy, numpy's
        logaddexp, bit-identical); the clamp of -expm1(rest - tot) stays numpy's."""
        sp = np.array([(int(w), int(f), int(l)) for w, f, l in spans], np.int64).reshape(-1, 3)
        if self.num_states == 0:
            return [0.0] * len(sp)
        c = self._cache
        have = ("fwd", True) in c and ("bwd", True) in c
        alpha = c[("fwd", True)] if have else np.empty(self.num_states)
        beta = c[("bwd", True)] if have else np.empty(self.num_states)
        rest = np.empty(len(sp))
        hit = np.empty(len(sp), np.int32)
        # native_array: DLPack cannot hand over read-only arrays (a lattice's arrays may be
        # read-only views of its rows: lattices_from_arrays), so a writable alias or a copy
        i32 = lambda x: native_array(x, np.int32)  # noqa: E731
        _reference_module().ref_lattice_word_rests(i32(self.src), i32(self.dst), native_array(self.score, np.float32),
                                        i32(self.frame), i32(self.word_splits), i32(self.word_ids),
                                        i32(self.state_frame), i32(self.state_level), have, alpha, beta, sp, rest,
                                        hit)
        if not have:
            c[("fwd", True)], c[("bwd", True)] = alpha, beta
        return _confidences(alpha[self.final], rest, hit)

    def _word_confidences_numpy(self, spans: Sequence[tuple[int, int, int]]) -> list[float]:
        """word_confidences in numpy (the form before lattice_posteriors.cc; kept as its
        exactness reference and for benchmarks/lattice_host.py).

        Z without the span's arcs needs no pass over the whole lattice: every complete path
        enters time first_frame through an arc of the time before, and leaves time
        last_frame through an arc to the time after, so the full forward scores up to
        first_frame, a masked forward over the span's times and the full backward scores
        from the time after last_frame give it exactly. "The time before / after" is the
        nearest state time, so a lattice whose frames skip some (blank_skip's, in original
        frames) gives what its decoded frames give."""
        if self.num_states == 0:
            return [0.0] * len(spans)
        alpha = self._scores(("fwd", True))
        tot = alpha[self.final]
        if not np.isfinite(tot):
            return [0.0] * len(spans)
        beta = self._scores(("bwd", True))
        # Exactly the additions, in exactly the order, of the plain form (one np.logaddexp.at
        # per level group of `before` and of the span, over a full -inf array; see
        # tests/lattice_reference_impl.py): only the bookkeeping around them is vectorised
        # (arcs per word from one sort, group and state ranges from searchsorted).
        lay = self._layout()
        src, dst, score, bl, bounds = (lay[k] for k in ("src", "dst", "score", "bl", "bounds"))
        c = self._cache
        if "conf" not in c:
            word_of_arc = np.repeat(np.arange(self.num_arcs), np.diff(self.word_splits))
            by_word = np.argsort(self.word_ids, kind="stable")
            pos = np.empty(self.num_arcs, np.int64)  # an arc's position in the layout
            pos[lay["order"]] = np.arange(self.num_arcs)
            c["conf"] = dict(words=self.word_ids[by_word], arcs=word_of_arc[by_word], pos=pos)
        cc = c["conf"]
        wsorted, warcs, pos = cc["words"], cc["arcs"], cc["pos"]
        # the times, read now: the frames may have been remapped since the layout was cached
        sf = self.state_frame
        dtime = sf[dst]
        gtime = sf[src[bounds[:-1]]].astype(np.int64) if src.size else np.zeros(0, np.int64)
        gtl = gtime.tolist()
        times = np.unique(sf)
        cc = dict(states_sorted=bool(np.all(sf[1:] >= sf[:-1])), gtime_sorted=bool(np.all(gtime[1:] >= gtime[:-1])))
        mk = np.zeros(self.num_arcs, bool)  # the word's arcs, by layout position
        frame = self.frame
        S = self.num_states
        out = []
        if not len(spans):
            return out
        sp = np.array([(int(w), int(f), int(l)) for w, f, l in spans], np.int64).reshape(-1, 3)
        firsts, lasts = sp[:, 1], sp[:, 2]
        # every searchsorted of the plain form, for all spans at once
        w_lo = np.searchsorted(wsorted, sp[:, 0], side="left").tolist()
        w_hi = np.searchsorted(wsorted, sp[:, 0], side="right").tolist()
        ii = np.searchsorted(times, firsts)
        jj = np.searchsorted(times, lasts, side="right")
        befores = np.where(ii > 0, times[np.maximum(ii - 1, 0)] if times.size else 0, -1)
        afters = np.where(jj < times.size, times[np.minimum(jj, times.size - 1)] if times.size else 0, -1)
        if cc["gtime_sorted"]:
            k0s = np.searchsorted(gtime, np.where(ii > 0, befores, firsts), side="left").tolist()
            k1s = np.searchsorted(gtime, lasts, side="right").tolist()
        if cc["states_sorted"]:
            s0s = np.searchsorted(sf, afters, side="left").tolist()
            s1s = np.searchsorted(sf, afters, side="right").tolist()
        ii, jj, befores, afters = ii.tolist(), jj.tolist(), befores.tolist(), afters.tolist()
        for n, (first, last) in enumerate(zip(firsts.tolist(), lasts.tolist())):
            hit = warcs[w_lo[n]:w_hi[n]]
            hit = hit[(frame[hit] >= first) & (frame[hit] <= last)]
            if hit.size == 0:
                out.append(0.0)
                continue
            a = np.full(S, -np.inf)
            if first == 0:
                a[self.start] = 0.0
            before = befores[n] if ii[n] > 0 else None  # first - 1 where no frame was skipped
            after = afters[n] if jj[n] < times.size else None  # last + 1 likewise
            if cc["gtime_sorted"]:
                ks = range(k0s[n], k1s[n])
            else:
                inside = (gtime >= first) & (gtime <= last)
                if before is not None:
                    inside |= gtime == before
                ks = np.flatnonzero(inside).tolist()
            hpos = pos[hit]
            hit_groups = set((np.searchsorted(bounds, hpos, side="right") - 1).tolist())
            mk[hpos] = True
            for k in ks:
                ga, gb = bl[k], bl[k + 1]
                if gtl[k] == before:  # the arcs that enter the span (never equal when before is None)
                    keep = dtime[ga:gb] >= first
                    np.logaddexp.at(a, dst[ga:gb][keep], alpha[src[ga:gb][keep]] + score[ga:gb][keep])
                elif k in hit_groups:  # without the word's arcs
                    keep = ~mk[ga:gb]
                    np.logaddexp.at(a, dst[ga:gb][keep], a[src[ga:gb][keep]] + score[ga:gb][keep])
                else:
                    np.logaddexp.at(a, dst[ga:gb], a[src[ga:gb]] + score[ga:gb])
            mk[hpos] = False
            if after is None:
                rest = -np.inf
            elif cc["states_sorted"]:
                s0, s1 = s0s[n], s1s[n]
                rest = np.logaddexp.reduce(a[s0:s1] + beta[s0:s1]) if s1 > s0 else -np.inf
            else:
                leave = sf == after
                rest = np.logaddexp.reduce(a[leave] + beta[leave]) if leave.any() else -np.inf
            out.append(float(min(1.0, max(0.0, -np.expm1(rest - tot)))))
        return out

    # ------------------------------------------------------------------ k2
    def to_k2(self, *, lm_scores: bool = True, frame_idx_name: str | None = None):
        """A k2 FsaVec holding this lattice, as k2.intersect_dense_pruned returns one row:
        labels = tokens (-1 on final and redirected arcs, 0 on epsilon arcs: k2's epsilon),
        scores, aux_labels = words (a tensor, -1 on final arcs and 0 where an arc has no
        word; a k2.RaggedTensor when an arc carries more than one word), and, with
        lm_scores, `lm_scores` = the graph scores (what icefall's rescoring reads when its
        HLG carries lm_scores). Needs k2 (and torch)."""
        return lattices_to_k2([self], lm_scores=lm_scores, frame_idx_name=frame_idx_name)


def lattices_to_k2(lattices: Sequence[Lattice], *, lm_scores: bool = True, frame_idx_name: str | None = None):
    """Several lattices as one k2 FsaVec (one FSA per lattice, in order); see Lattice.to_k2."""
    try:
        import _k2
        import k2
        import torch
    except ImportError as e:
        raise ImportError(f"to_k2 needs k2 and torch ({e})") from None
    lattices = list(lattices)
    if not lattices or not all(isinstance(x, Lattice) for x in lattices):
        raise TypeError("lattices_to_k2 takes a non-empty sequence of cuwfst.Lattice")
    ragged = any((np.diff(x.word_splits) > 1).any() for x in lattices)
    fsas = []
    for lat in lattices:
        row_splits = np.searchsorted(lat.src, np.arange(lat.num_states + 1)).astype(np.int32)
        shape = k2.ragged.create_ragged_shape2(row_splits=torch.from_numpy(row_splits),
                                                cached_tot_size=lat.num_arcs)
        label = np.where(lat.token == EPSILON_TOKEN, 0, lat.token).astype(np.int32)
        arcs = np.stack([lat.src, lat.dst, label, lat.score.astype(np.float32).view(np.int32)], 1)
        fsa = k2.Fsa(_k2.RaggedArc(shape, torch.from_numpy(np.ascontiguousarray(arcs, np.int32))))
        is_final = lat.token == FINAL_TOKEN
        n_words = np.diff(lat.word_splits)
        if ragged:
            # k2's ragged aux labels: final arcs carry [-1]
            per_arc = [[-1] if is_final[i] and lat.graph_arc[i] >= 0 else lat.words(i) for i in range(lat.num_arcs)]
            fsa.aux_labels = k2.RaggedTensor(per_arc, dtype=torch.int32)
        else:
            aux = np.zeros(lat.num_arcs, np.int32)
            aux[n_words == 1] = lat.word_ids
            # final arcs carry word -1 (k2's final-arc label); redirected arcs 0, as k2 gives
            aux[is_final & (lat.graph_arc >= 0)] = -1
            fsa.aux_labels = torch.from_numpy(aux)
        if lm_scores:
            fsa.lm_scores = torch.from_numpy(lat.graph_score.astype(np.float32))
        if frame_idx_name is not None:
            setattr(fsa, frame_idx_name, torch.from_numpy(lat.frame.astype(np.int32)))
        fsas.append(fsa)
    return k2.create_fsa_vec(fsas)


# ---------------------------------------------------------------------- assembly
def lattice_from_arrays(graph, states: np.ndarray, arcs: np.ndarray, scores: np.ndarray,
                        recorded_arcs: int = 0) -> Lattice:
    """A Lattice from the reference module's row arrays: states [3, S] = {time, graph state,
    level}, arcs [4, A] = {src, dst, frame, image arc id | redirect bit}, scores [3, A] =
    {acoustic, graph, score}. Image arc ids become the source graph's. See
    lattices_from_arrays (this is it for one row)."""
    return lattices_from_arrays(graph, [(states, arcs, scores, recorded_arcs)])[0]


def lattices_from_arrays(graph, rows: Sequence, num_threads: int = 1) -> list[Lattice]:
    """lattice_from_arrays(graph, *row) for every row (states, arcs, scores[, recorded_arcs]),
    the graph lookups of all rows' arcs (tokens, source arc ids, word ids through the aux
    labels) in two native calls on num_threads threads (ref_lattices_arcs,
    ref_lattices_word_ids). The lattices' src, dst, frame, scores and state arrays are views
    of the rows' int32 / float32 arrays (copies only where a row has another dtype or
    layout); the looked-up arrays are views of one buffer per batch. Same arrays (dtype,
    values, order) as the per-row numpy form (tests/lattice_reference_impl.py)."""
    rows = [tuple(r) for r in rows]
    if not rows:
        return []
    st, ar, sc, rec = [], [], [], []
    for r in rows:
        st.append(np.ascontiguousarray(r[0], np.int32))
        ar.append(np.ascontiguousarray(r[1], np.int32))
        sc.append(np.ascontiguousarray(r[2], np.float32))
        rec.append((None if r[3] is None else int(r[3])) if len(r) > 3 else 0)
    L = len(rows)
    arc_off = np.zeros(L + 1, np.int64)
    np.cumsum([a.shape[1] for a in ar], out=arc_off[1:])
    A = int(arc_off[-1])
    # a single row's codes are a view of its arcs, read-only where the caller's are: DLPack
    # needs a writable alias or a copy (native_array)
    codes = np.concatenate([a[3] for a in ar]) if L > 1 else native_array(ar[0][3], np.int32)
    out = np.empty((4, A), np.int32)  # graph_arc, redirect_arc, token, lo
    word_splits = np.empty(A + L, np.int32)
    word_count = np.empty(L, np.int64)
    ilabel, row_splits, pool, arc_id = _lookup_arrays(graph)
    mod = _reference_module()
    mod.ref_lattices_arcs(arc_off, codes, ilabel, row_splits, arc_id, out[0], out[1], out[2], out[3],
                          word_splits, word_count, int(num_threads))
    word_off = np.zeros(L + 1, np.int64)
    np.cumsum(word_count, out=word_off[1:])
    word_ids = np.empty(int(word_off[-1]), np.int32)
    if word_ids.size:
        mod.ref_lattices_word_ids(arc_off, word_off, out[3], word_splits, pool, word_ids,
                                  int(num_threads))
    lats = []
    ao, wo = arc_off.tolist(), word_off.tolist()
    for l in range(L):
        a, b = ao[l], ao[l + 1]
        states, arcs, scores = st[l], ar[l], sc[l]
        lats.append(Lattice(
            num_states=int(states.shape[1]), src=arcs[0], dst=arcs[1], frame=arcs[2],
            graph_arc=out[0, a:b], redirect_arc=out[1, a:b], token=out[2, a:b],
            acoustic=scores[0], graph_score=scores[1], score=scores[2],
            word_splits=word_splits[a + l: b + l + 1], word_ids=word_ids[wo[l]: wo[l + 1]],
            state_frame=states[0], state_graph=states[1], state_level=states[2], recorded_arcs=rec[l]))
    return lats


def _lookup_arrays(graph):
    """The graph arrays ref_lattices_arcs reads (ilabel, aux_row_splits, aux_pool, arc_id or an
    empty one), as DLPack can hand them over (image arrays are read-only: writable aliases of
    the same memory, as image.native_array gives, but ilabel keeps its stride, no copy of it);
    made once per graph."""
    got = graph.__dict__.get("_lattice_lookup")
    if got is None:
        a = graph.arrays
        il = a.ilabel
        if il.dtype != np.int32 or il.ndim != 1 or (il.size > 1 and (il.strides[0] <= 0 or il.strides[0] % 4)):
            il = np.ascontiguousarray(il, np.int32)
        if not il.flags.writeable:
            alias = il.view()
            try:
                alias.flags.writeable = True
                il = alias
            except ValueError:
                il = il.copy()
        arc_id = graph._a.arc_id
        got = (il, native_array(a.aux_row_splits, np.int32), native_array(a.aux_pool, np.int32),
               np.zeros(0, np.int32) if arc_id is None else native_array(arc_id, np.int32))
        graph.__dict__["_lattice_lookup"] = got
    return got


def word_times(graph, hyp, blank: int = 0) -> list[tuple[int, int]]:
    """(first, last) frame of each word of a 1-best path: a word starts at the frame of the
    arc carrying it; it ends at the last frame, before the next word's arc (or the path's
    end), whose token is not `blank`, or at its start when all are blank (word_times_many's, for
    one hypothesis)."""
    return word_times_many(graph, [hyp], blank)[0]


def word_times_many(graph, hyps: Sequence, blank: int = 0) -> list[list[tuple[int, int]]]:
    """word_times(graph, h, blank) for every h, in one pass of numpy over all their arcs (a
    sub-batch's host work calls this once). A word starts at the frame of the arc carrying it (the
    hypothesis's emitting arcs before it) and ends at the last frame, before the next word's arc of
    its hypothesis (or the hypothesis's end), whose token is not `blank`, or at its start when all
    are blank; a last sounding arc found before the word's own arc (an earlier hypothesis's) counts
    as none."""
    out = [[] for _ in hyps]
    lens = [len(h.arcs) if h.arcs is not None else 0 for h in hyps]
    total = sum(lens)
    if total == 0:
        return out
    g = graph.arrays
    arcs = graph.image_arc_ids(np.concatenate([np.asarray(h.arcs, np.int64) for h, n in zip(hyps, lens) if n]))
    il = g.ilabel[arcs].astype(np.int64)
    emitting = il >= 0
    off = np.zeros(len(hyps) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    hyp_of = np.repeat(np.arange(len(hyps)), lens)
    cum = np.cumsum(emitting)
    before = np.concatenate([np.zeros(1, cum.dtype), cum])[off[:-1]]  # emitting arcs before each hypothesis
    frame = cum - emitting - before[hyp_of]
    rs = g.aux_row_splits
    n_words = (rs[arcs + 1] - rs[arcs]).astype(np.int64)
    carriers = np.flatnonzero(n_words > 0)
    if carriers.size == 0:
        return out
    idx = np.arange(total)
    last_sound = np.maximum.accumulate(np.where(emitting & (il != blank), idx, -1))
    # a carrier's segment runs to the next carrier of its hypothesis, else to its hypothesis's end
    hc = hyp_of[carriers]
    same = np.append(hc[1:] == hc[:-1], False)
    stops = np.where(same, np.append(carriers[1:], total), off[1:][hc]) - 1
    sl = last_sound[stops]
    start = frame[carriers]
    end = np.maximum(start, np.where(sl >= carriers, frame[np.maximum(sl, 0)], start))
    reps = n_words[carriers]
    starts, ends = np.repeat(start, reps).tolist(), np.repeat(end, reps).tolist()
    at = 0
    for i, c in enumerate(np.bincount(np.repeat(hc, reps), minlength=len(hyps)).tolist()):
        out[i] = list(zip(starts[at: at + c], ends[at: at + c]))
        at += c
    return out


def decode_cpu(decoder, lp: np.ndarray, lens: np.ndarray, online: bool):
    """Decoder.decode(lattice=True) on the CPU: the 1-best of every row (as ref_decode
    gives it) with its lattice, word times and word confidences."""
    graph = decoder.graph
    if graph.has_epsilon and graph.max_epsilon_chain < 0:
        raise ValueError("lattices need a graph whose epsilon arcs are acyclic; this graph's "
                         "epsilon arcs form a cycle")
    B, T, _ = lp.shape
    cap = decoder.path_capacity(T)
    out_arcs = np.zeros((B, cap), np.int32)
    out_len = np.zeros(B, np.int32)
    out_score = np.zeros(B, np.float32)
    out_meta = np.zeros((B, 4), np.int32)
    out_stats = np.zeros((B, 2), np.int64)
    out_size = np.zeros((B, 3), np.int64)
    o = decoder.options
    ref = decoder._ref
    handle = ref.mod.ref_decode_lattice(ref.handle, lp, lens, o.search_beam, o.output_beam,
                                        o.min_active_states, o.max_active_states, o.allow_partial,
                                        decoder.eps_iterations, online, decoder.num_threads,
                                        out_arcs, out_len, out_score, out_meta, out_stats, out_size)
    try:
        hyps, rows = [], []
        for b in range(B):
            S, A = int(out_size[b, 0]), int(out_size[b, 1])
            states = np.zeros((3, S), np.int32)
            arcs = np.zeros((4, A), np.int32)
            scores = np.zeros((3, A), np.float32)
            ref.mod.ref_lattice_row(handle, b, states, arcs, scores)
            rows.append((states, arcs, scores, int(out_size[b, 2])))
            h = decoder.make_hypothesis(out_arcs[b, : out_len[b]], float(out_score[b]), bool(out_meta[b, 0]),
                                        int(out_meta[b, 2]), 0, int(out_meta[b, 3]),
                                        frontier_total=int(out_stats[b, 0]), closure_added=int(out_stats[b, 1]))
            hyps.append(h)
        attach_all(graph, hyps, lattices_from_arrays(graph, rows, decoder.num_threads), decoder.num_threads)
        return hyps
    finally:
        ref.mod.ref_lattice_free(handle)


def attach(graph, hyp, lat: Lattice) -> None:
    """Gives a Hypothesis its lattice, word times and word confidences."""
    hyp.lattice = lat
    times = word_times(graph, hyp)
    hyp.word_times = times
    hyp.word_confidences = lat.word_confidences([(w, s, e) for w, (s, e) in zip(hyp.words, times)])


def attach_all(graph, hyps: Sequence, lats: Sequence[Lattice], num_threads: int = 1, times=None) -> None:
    """attach(graph, hyps[i], lats[i]) for every i, the lattices' passes in one native call on
    num_threads threads (ref_lattices_word_rests); the same values as attach, bit for bit.
    times: word_times_many(graph, hyps) made already (one list a hypothesis), or None."""
    hyps, lats = list(hyps), list(lats)
    if times is None:
        times = word_times_many(graph, hyps)
    elif len(times) != len(hyps):
        raise ValueError(f"attach_all: {len(times)} word-time lists for {len(hyps)} hypotheses")
    spans, todo = [], []
    for h, lat, wt in zip(hyps, lats, times):
        h.lattice = lat
        h.word_times = wt
        if lat.num_states == 0 or ("fwd", True) in lat._cache:
            h.word_confidences = lat.word_confidences([(w, s, e) for w, (s, e) in zip(h.words, wt)])
            continue
        todo.append((h, lat))
        spans.append([(int(w), s, e) for w, (s, e) in zip(h.words, wt)])
    if not todo:
        return
    ls = [lat for _, lat in todo]

    def offsets(sizes):
        o = np.zeros(len(sizes) + 1, np.int64)
        np.cumsum(sizes, out=o[1:])
        return o

    # each lattice's own arrays, not concatenated (no copy where they are C-contiguous and of
    # the dtype; native_array: a writable alias where they are read-only views of the rows)
    arrays = []
    for x in ls:
        arrays += [native_array(x.src, np.int32), native_array(x.dst, np.int32), native_array(x.score, np.float32),
                   native_array(x.frame, np.int32), native_array(x.word_splits, np.int32),
                   native_array(x.word_ids, np.int32), native_array(x.state_frame, np.int32),
                   native_array(x.state_level, np.int32)]
    so = offsets([x.num_states for x in ls])
    rest_n = offsets([len(s) for s in spans])
    alpha, beta = np.empty(int(so[-1])), np.empty(int(so[-1]))
    rest, hit = np.empty(int(rest_n[-1])), np.empty(int(rest_n[-1]), np.int32)
    all_spans = np.array([x for s in spans for x in s], np.int64).reshape(-1, 3)
    _reference_module().ref_lattices_word_rests(arrays, so, rest_n, alpha, beta, all_spans, rest, hit,
                                                int(num_threads))
    for i, (h, lat) in enumerate(todo):
        a, b = int(so[i]), int(so[i + 1])
        c = lat._cache
        # views of the batch's scores (the cache is only read: forward_scores and
        # backward_scores hand out copies)
        c[("fwd", True)], c[("bwd", True)] = alpha[a:b], beta[a:b]
        r0, r1 = int(rest_n[i]), int(rest_n[i + 1])
        h.word_confidences = _confidences(alpha[b - 1], rest[r0:r1], hit[r0:r1])


def _confidences(tot, rest: np.ndarray, hit: np.ndarray) -> list[float]:
    """word_confidences' last step: max(0, min(1, -expm1(rest - tot))) in numpy's float64 (0
    where no arc carries the word, or no path reaches the final state)."""
    if not np.isfinite(tot) or not len(rest):
        return [0.0] * len(rest)
    conf = -np.expm1(rest - tot)
    return [float(min(1.0, max(0.0, x))) if h else 0.0 for x, h in zip(conf, hit.tolist())]
