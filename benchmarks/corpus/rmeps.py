"""Input-epsilon removal for LG, with word labels, as k2.remove_epsilon does it (numpy).

OpenFst's RmEpsilon removes only arcs whose input AND output are epsilon, but once the `#k`
of LG are relabelled to epsilon, many such arcs output a word (determinization delays a
word until its spelling is unambiguous, which for a word that is a prefix of another is the
`#k` arc). So the removal is done here, following the algorithm k2 documents in
`k2/csrc/rm_epsilon.h`:

1. C = the epsilon closure: one arc a -> c per pair of states joined by an epsilon path,
   with the best (lowest) cost and the words of that best path.
2. Each closure arc is combined either with the non-epsilon arcs that follow it (C_f: new
   arcs a -> d for each arc c -> d, and a's final cost) or with those that precede it (C_p:
   arcs x -> c for each arc x -> a, including arcs made in the first case). k2's rule:
   following when a is the start state or c has fewer non-epsilon arcs leaving it than a has
   entering it. Our one change: a closure arc that outputs a word is always combined with the
   preceding arc. OpenFst arcs carry one output label and final weights none, and the arc
   before a word-bearing `#k` (the last piece of that word) has no output of its own, so this
   keeps every arc at one word at most; the function checks that it did.
"""

from __future__ import annotations

import numpy as np

from .fstio import FstArrays


def _expand(owner_key: np.ndarray, row_splits: np.ndarray):
    """For each row i, the indices [row_splits[k], row_splits[k+1]) with k = owner_key[i]:
    returns (row index per output, element index per output)."""
    cnt = (row_splits[owner_key + 1] - row_splits[owner_key]).astype(np.int64)
    total = int(cnt.sum())
    rows = np.repeat(np.arange(owner_key.size), cnt)
    within = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    return rows, row_splits[owner_key][rows] + within


def _group(keys: np.ndarray, num_states: int):
    """A stable order grouping `keys` and the row splits of the groups."""
    order = np.argsort(keys, kind="stable")
    rs = np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=num_states))])
    return order, rs


def _best_per_pair(src, dst, cost, word, num_states):
    key = src.astype(np.int64) * num_states + dst
    order = np.lexsort((cost, key))
    first = np.ones(order.size, bool)
    first[1:] = key[order][1:] != key[order][:-1]
    keep = order[first]
    return src[keep], dst[keep], cost[keep], word[keep]


def _join_words(a: np.ndarray, b: np.ndarray, what: str) -> np.ndarray:
    both = (a != 0) & (b != 0)
    if both.any():
        raise ValueError(f"{int(both.sum())} {what} would carry two words; an OpenFst arc holds one")
    return a + b


def epsilon_closure(src, dst, cost, word, num_states: int, max_depth: int = 64):
    """All epsilon paths, best per (from, to) pair; raises on cycles of epsilons."""
    order, rs = _group(src, num_states)
    e_dst, e_cost, e_word = dst[order], cost[order], word[order]
    layer = _best_per_pair(src, dst, cost, word, num_states)
    layers = [layer]
    for _ in range(max_depth):
        l_src, l_dst, l_cost, l_word = layer
        rows, e = _expand(l_dst.astype(np.int64), rs)
        if rows.size == 0:
            break
        layer = _best_per_pair(l_src[rows], e_dst[e], l_cost[rows] + e_cost[e],
                               _join_words(l_word[rows], e_word[e], "epsilon paths"), num_states)
        if (layer[0] == layer[1]).any():
            raise ValueError("the graph has a cycle of epsilon arcs")
        layers.append(layer)
    else:
        raise ValueError(f"epsilon paths longer than {max_depth} arcs")
    cat = [np.concatenate(parts) for parts in zip(*layers)]
    return _best_per_pair(*cat, num_states)


def remove_input_epsilons(fst: FstArrays) -> FstArrays:
    """An equivalent graph (tropical, with the same best-path words) without ilabel-0 arcs.

    States keep their numbers; some become unreachable (trim them with connect)."""
    S = fst.num_states
    src = fst.src.astype(np.int64)
    dst = fst.nextstate.astype(np.int64)
    eps = fst.ilabel == 0
    loops = eps & (src == dst)
    if (fst.weight[loops] < 0).any():
        raise ValueError("an epsilon self-loop has negative cost (infinite score)")
    e = eps & ~loops
    c_src, c_dst, c_cost, c_word = epsilon_closure(src[e], dst[e], fst.weight[e].astype(np.float64),
                                                   fst.olabel[e].astype(np.int64), S)
    n = ~eps
    n_src, n_dst, n_il = src[n], dst[n], fst.ilabel[n].astype(np.int64)
    n_word, n_cost = fst.olabel[n].astype(np.int64), fst.weight[n].astype(np.float64)
    final = fst.final.astype(np.float64)
    n_out = np.bincount(n_src, minlength=S) + np.isfinite(final)
    n_in = np.bincount(n_dst, minlength=S)

    following = (c_src == fst.start) | (n_out[c_dst] < n_in[c_src])
    if ((c_word != 0) & (c_src == fst.start)).any():
        raise ValueError("an epsilon path from the start state outputs a word")
    following &= c_word == 0
    f_idx, p_idx = np.flatnonzero(following), np.flatnonzero(~following)

    # F: closure arc a -> c, then a non-epsilon arc c -> d; and final costs through c
    by_src, rs_src = _group(n_src, S)
    rows, k = _expand(c_dst[f_idx], rs_src)
    k = by_src[k]
    ci = f_idx[rows]
    F = (c_src[ci], n_dst[k], n_il[k], n_word[k], c_cost[ci] + n_cost[k])
    new_final = final.copy()
    np.minimum.at(new_final, c_src[f_idx], c_cost[f_idx] + final[c_dst[f_idx]])

    # P: non-epsilon arc x -> a, then closure arc a -> c
    by_dst, rs_dst = _group(n_dst, S)
    rows, k = _expand(c_src[p_idx], rs_dst)
    k = by_dst[k]
    ci = p_idx[rows]
    P = (n_src[k], c_dst[ci], n_il[k], _join_words(n_word[k], c_word[ci], "arcs"), n_cost[k] + c_cost[ci])

    # Q: an F arc x -> a, then closure arc a -> c (a in C_p)
    f_by_dst, rs_f = _group(F[1], S)
    rows, k = _expand(c_src[p_idx], rs_f)
    k = f_by_dst[k]
    ci = p_idx[rows]
    Q = (F[0][k], c_dst[ci], F[2][k], _join_words(F[3][k], c_word[ci], "arcs"), F[4][k] + c_cost[ci])

    a_src, a_dst, a_il, a_word, a_cost = (np.concatenate(x) for x in zip(
        (n_src, n_dst, n_il, n_word, n_cost), F, P, Q))
    # identical arcs (same ends and labels) keep the cheapest copy
    key_order = np.lexsort((a_cost, a_word, a_il, a_dst, a_src))
    s, d, i, w = a_src[key_order], a_dst[key_order], a_il[key_order], a_word[key_order]
    first = np.ones(key_order.size, bool)
    first[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1]) | (i[1:] != i[:-1]) | (w[1:] != w[:-1])
    keep = key_order[first]
    return FstArrays.from_arcs(num_states=S, start=fst.start, final=new_final.astype(np.float32),
                               src=a_src[keep], ilabel=a_il[keep], olabel=a_word[keep],
                               weight=a_cost[keep].astype(np.float32), nextstate=a_dst[keep])
