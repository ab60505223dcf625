"""The output-beam pruning of a lattice decode on a graph with epsilon arcs, as the GPU would do
it, in numpy: the CPU twin written before the GPU's (docs/design.md, "Lattices on the GPU",
epsilon graphs). Its input is what the GPU holds after a lattice decode, with no trace of the
CPU's token order: each time's frontier as a set of graph states, each step's records
({source graph state, image arc | redirect bit, acoustic bits}: every arc whose destination is in
the new frontier) and the graph. The closure's epsilon arcs are not recorded: with the exact
closure (eps_iterations >= the graph's longest epsilon chain) the CPU records exactly the epsilon
arcs of S_t's states that end in S_t, which the GPU can list from the frontier alone.

Everything below is set-based or order-free, as a GPU's kernels can be:
  * a token is (time, graph state); within a time, tokens are numbered by graph state;
  * epsilon layers (the longest epsilon path inside a time) by rounds of layer[d] = max(layer[d],
    layer[s] + 1) over the time's epsilon arcs until nothing changes (at most L + 1 rounds);
  * the forward: the step's arcs (max), then the epsilon arcs by their destination's layer;
  * k2's windows: per time, the step's arcs, then the epsilon arcs by their source's layer,
    highest first; every test is the CPU's float expression;
  * the output: states by (time, layer, graph state), the reference's order on epsilon graphs;
    each state's arcs by source arc id (an epsilon arc before the redirected arc of the same one).
tests/test_eps_prune_twin.py holds it to the CPU decoder's lattices, array for array."""

from __future__ import annotations

import numpy as np

REDIRECT = 1 << 30
F32 = np.float32
NEG_INF = F32(-np.inf)


from k2_lattice_model import windows as prune_windows  # noqa: E402  (k2's windows over times 0..T)


class _Arcs:
    """One time's recorded arcs, as parallel arrays: source and destination token (the
    destination's time is t + 1 for a step's arc, t for an epsilon arc), code, acoustic, score."""

    def __init__(self, src, dst, code, acoustic, score, eps):
        self.src, self.dst, self.code = src, dst, code
        self.acoustic, self.score, self.eps = acoustic, score, eps
        self.kept = np.ones(len(src), bool)


def prune_row(arrays, frontiers: list[np.ndarray], step_records: list[np.ndarray],
              output_beam: float, eps_iterations: int):
    """One row: frontiers[t] the graph states of S_t (t = 0..n+1, any order), step_records[t]
    the [k, 3] int32 records of step t (t = 0..n). Returns (states [3, S], arcs [4, A],
    scores [3, A], recorded arcs) as ref_lattice_row gives them."""
    il, dest, weight, rs = arrays.ilabel, arrays.dest, arrays.weight, arrays.row_splits
    assert arrays.eps_count is not None, "the twin is for graphs with epsilon arcs"
    assert eps_iterations >= 0
    final_state = arrays.num_states - 1
    T = len(frontiers) - 1  # = n + 1
    states = [np.unique(np.asarray(f, np.int64)) for f in frontiers]  # token i of time t: states[t][i]
    for t, f in enumerate(frontiers):
        assert len(states[t]) == len(f), f"time {t}: a state twice in the frontier"

    def tok(t, s):
        i = np.searchsorted(states[t], s)
        ok = (i < len(states[t])) & (states[t][np.minimum(i, len(states[t]) - 1)] == s) if len(states[t]) else \
            np.zeros(len(s), bool)
        assert ok.all(), f"time {t}: a record's state is not in the frontier"
        return i.astype(np.int64)

    source_arc = (lambda a: arrays.arc_id[a]) if arrays.arc_id is not None else (lambda a: a)
    # each time's arcs: the step's (t = 0..n, into S_{t+1}), then the closure's epsilon arcs of
    # S_t's states that end in S_t (t = 0..n; S_{n+1} has no closure)
    times = []
    recorded = 0
    for t in range(T + 1):
        parts = []
        if t < T:
            r = np.asarray(step_records[t], np.int32).reshape(-1, 3)
            code = r[:, 1].astype(np.int64)
            a = code & ~REDIRECT
            red = (code & REDIRECT) != 0
            d_state = np.where(red, final_state, dest[a])
            ac = r[:, 2].copy().view(F32)
            parts.append((tok(t, r[:, 0]), tok(t + 1, d_state), code, ac, ac + weight[a], np.zeros(len(r), bool)))
        if t < T and len(states[t]):
            s_all = states[t]
            src_l, arc_l = [], []
            for i, s in enumerate(s_all.tolist()):
                a = np.arange(rs[s], rs[s + 1])
                a = a[il[a] == -2]
                src_l += [i] * len(a)
                arc_l += a.tolist()
            a = np.asarray(arc_l, np.int64)
            d_state = dest[a]
            j = np.searchsorted(s_all, d_state)
            inside = (j < len(s_all)) & (s_all[np.minimum(j, len(s_all) - 1)] == d_state) if len(a) else \
                np.zeros(0, bool)
            a, j = a[inside], j[inside]
            src = np.asarray(src_l, np.int64)[inside]
            zero = np.zeros(len(a), F32)
            parts.append((src, j.astype(np.int64), a, zero, F32(0) + weight[a], np.ones(len(a), bool)))
        cat = [np.concatenate([p[k] for p in parts]) if parts else np.zeros(0) for k in range(6)]
        arcs = _Arcs(cat[0].astype(np.int64), cat[1].astype(np.int64), cat[2].astype(np.int64),
                     cat[3].astype(F32), cat[4].astype(F32), cat[5].astype(bool))
        recorded += len(arcs.src)
        times.append(arcs)

    # epsilon layers by rounds
    layer = []
    for t in range(T + 1):
        n_t = len(states[t])
        lay = np.zeros(n_t, np.int64)
        e = times[t].eps
        s, d = times[t].src[e], times[t].dst[e]
        for _ in range(n_t + 1):
            new = lay.copy()
            if len(s):
                np.maximum.at(new, d, lay[s] + 1)
            if (new == lay).all():
                break
            lay = new
        else:
            raise ValueError(f"time {t}: an epsilon cycle")
        layer.append(lay)

    # the forward
    fwd = []
    for t in range(T + 1):
        f = np.full(len(states[t]), NEG_INF, F32)
        if t == 0:
            f[tok(0, np.array([arrays.start_state]))] = F32(0)
        else:
            p = times[t - 1]
            m = ~p.eps
            np.maximum.at(f, p.dst[m], fwd[t - 1][p.src[m]] + p.score[m])
        c = times[t]
        e = np.flatnonzero(c.eps)
        for k in range(1, int(layer[t].max(initial=0)) + 1):
            g = e[layer[t][c.dst[e]] == k]
            np.maximum.at(f, c.dst[g], f[c.src[g]] + c.score[g])
        fwd.append(f)

    # k2's windows, each on what the earlier ones kept
    alive = [np.ones(len(states[t]), bool) for t in range(T + 1)]
    neg_beam = F32(-output_beam)
    for begin, end in prune_windows(T):
        bwd = {end: np.where(alive[end], -fwd[end], NEG_INF).astype(F32)}
        for t in range(end - 1, begin - 1, -1):
            c = times[t]
            b = np.full(len(states[t]), NEG_INF, F32)

            def visit(idx, dst_bwd):
                idx = idx[alive[t][c.src[idx]] & c.kept[idx]]
                arc_bwd = c.score[idx] + dst_bwd[c.dst[idx]]
                keep = arc_bwd + fwd[t][c.src[idx]] >= neg_beam
                c.kept[idx[~keep]] = False
                np.maximum.at(b, c.src[idx[keep]], arc_bwd[keep])

            visit(np.flatnonzero(~c.eps), bwd[t + 1])
            e = np.flatnonzero(c.eps)
            for k in range(int(layer[t].max(initial=0)), -1, -1):
                visit(e[layer[t][c.src[e]] == k], b)
            if t != begin:
                alive[t] &= b != NEG_INF
            bwd[t] = b

    # the output: states by (time, layer, graph state), each state's kept arcs by source arc id
    ids, st_rows, level = [], [], 0
    n_states = 0
    for t in range(T + 1):
        idx = np.flatnonzero(alive[t])
        idx = idx[np.lexsort((states[t][idx], layer[t][idx]))]
        num = np.full(len(states[t]), -1, np.int64)
        num[idx] = np.arange(n_states, n_states + len(idx))
        n_states += len(idx)
        ids.append(num)
        st_rows.append(np.stack([np.full(len(idx), t), states[t][idx], level + layer[t][idx]]))
        level += int(layer[t][idx].max(initial=0)) + 1
    if len(states[T]) == 0:
        st_rows.append(np.array([[T], [-1], [level]]))
        n_states += 1
    arc_rows, sc_rows = [], []
    for t in range(T + 1):
        c = times[t]
        k = np.flatnonzero(c.kept & alive[t][c.src])
        a = c.code[k] & ~REDIRECT
        # (ties: allow_partial's redirected arc of a state's epsilon arc sorts after that arc)
        k = k[np.lexsort((~c.eps[k], source_arc(a), ids[t][c.src[k]]))]
        dst = np.empty(len(k), np.int64)
        e = c.eps[k]
        dst[e] = ids[t][c.dst[k[e]]]
        dst[~e] = ids[t + 1][c.dst[k[~e]]] if t < T else -1
        assert (dst >= 0).all(), "a kept arc enters a pruned state"
        a = c.code[k] & ~REDIRECT
        arc_rows.append(np.stack([ids[t][c.src[k]], dst, np.full(len(k), t), c.code[k]]))
        sc_rows.append(np.stack([c.acoustic[k], weight[a].astype(F32), c.score[k]]))
    st = np.concatenate(st_rows, axis=1).astype(np.int32)
    ar = np.concatenate(arc_rows, axis=1).astype(np.int32)
    sc = np.concatenate(sc_rows, axis=1).astype(F32)
    return st, ar, sc, recorded


def prune_rows(graph, rec, lens: np.ndarray, output_beam: float, eps_iterations: int):
    """prune_row for every row of cpu_records(..., frontiers=True)'s records."""
    out = []
    at_rec, at_front = 0, 0
    for b, n in enumerate(np.asarray(lens).tolist()):
        counts = rec.counts[b, : n + 1]
        sizes = [int(rec.start_sizes[b])] + rec.sizes[b, : n + 1].tolist()
        fronts = []
        for k in sizes:
            fronts.append(rec.frontiers[at_front: at_front + k])
            at_front += k
        steps = []
        for k in counts.tolist():
            steps.append(rec.records[at_rec: at_rec + k])
            at_rec += k
        out.append(prune_row(graph.arrays, fronts, steps, output_beam, eps_iterations))
    return out
