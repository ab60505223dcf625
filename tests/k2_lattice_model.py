"""A small, slow, independent Python model of k2's intersect_dense_pruned lattice (one row,
offline), written from k2's source (docs/k2-lattice-facts.md): k2's arithmetic
(score + (log_prob + weight) in float32), k2's dynamic beam, the state order of k2 on the
CPU, every arc into a surviving state, the 30/20 pruning windows, and k2 >= 1.24's
allow_partial redirect, which k2 1.23.4 cannot answer. tests/test_lattice.py checks the
model against the k2 goldens, then the C++ reference against the model where k2 1.23.4 has
no answer (allow_partial).
"""

from __future__ import annotations

import numpy as np

f32 = np.float32
NEG = f32(-np.inf)


def _update_beam(beam, active, t, final_t, search_beam, min_active, max_active):
    # k2's lambda_set_beam_and_cutoffs: float variables, double constants
    beam, default, mx, mn = f32(beam), f32(search_beam), f32(max_active), f32(min_active)
    cur_min = max(mn, f32(mx / 2)) if t + 5 >= final_t else mn
    if active <= mx:
        if active >= cur_min or active == 0:
            beam = f32(0.8 * float(beam) + 0.2 * float(default))
        else:
            beam = f32(float(max(beam, default)) * 1.25)
    elif t + 5 < final_t:
        beam = f32(float(min(beam, default)) * 0.8)
    if t == final_t - 1:
        beam = f32(1e10)
    return beam


def windows(T: int):
    out, b = [], -10
    while True:
        end = b + 30
        last = end >= T
        out.append((max(0, b), T if last else end))
        if last:
            return out
        b += 20


def k2_lattice(graph, lp: np.ndarray, n: int, search_beam, output_beam, min_active, max_active,
               allow_partial=False, *, admitted_only=False, one_pass=False):
    """Returns (arcs, num_states): arcs as a list of (frame, image arc, redirected, score) of
    the pruned lattice, in k2's output order (by state, then arc). The two switches are
    the rules k2 does NOT follow, for tests/goldens/k2_lattice_probe.py: admitted_only keeps
    only arcs that passed the cutoff; one_pass prunes with one exact window [0, n + 1)."""
    g = graph.arrays
    rs, dest, il, w = g.row_splits, g.dest, g.ilabel, g.weight
    final_state = g.num_states - 1
    final_t = n + 1
    states, fwd, arcs_t = [[g.start_state]], [np.zeros(1, np.float32)], []
    beam = f32(search_beam)
    for t in range(n + 1):
        redirect = (t == n and allow_partial and
                    not any((il[rs[s]:rs[s + 1]] == -1).any() for s in states[t]))
        cand = []  # (src index, arc, dest, arc score, end)
        for i, s in enumerate(states[t]):
            for a in range(rs[s], rs[s + 1]):
                lab = int(il[a])
                if redirect:
                    ac, d = f32(0.0), final_state
                elif t < n:
                    ac, d = (NEG if lab < 0 else lp[t, lab]), int(dest[a])
                else:
                    ac, d = (f32(0.0) if lab == -1 else NEG), int(dest[a])
                score = f32(ac + w[a])
                cand.append((i, a, d, score, f32(fwd[t][i] + score)))
        best = max((c[4] for c in cand), default=NEG)
        beam = _update_beam(beam, len(states[t]), t, final_t, search_beam, min_active, max_active)
        cutoff = f32(best - beam)
        nxt, idx = [], {}
        for c in cand:
            if c[4] > cutoff and c[2] not in idx:
                idx[c[2]] = len(nxt)
                nxt.append(c[2])
        nf = np.full(len(nxt), NEG, np.float32)
        kept = []
        for i, a, d, score, end in cand:
            if d in idx and (end > cutoff or not admitted_only):  # every arc into a surviving state
                nf[idx[d]] = max(nf[idx[d]], end)
                kept.append((i, a, idx[d], score, redirect))
        arcs_t.append(kept)
        states.append(nxt)
        fwd.append(nf)
    # the windows, each on what the previous kept
    T = n + 1
    alive_arcs = [list(range(len(x))) for x in arcs_t]
    alive = [set(range(len(s))) for s in states]
    neg_beam = -f32(output_beam)
    for B, E in ([(0, T)] if one_pass else windows(T)):
        bwd = {E: {j: -fwd[E][j] for j in alive[E]}}
        for t in range(E - 1, B - 1, -1):
            sb = {i: NEG for i in alive[t]}
            keep = []
            for k in alive_arcs[t]:
                i, a, j, score, _ = arcs_t[t][k]
                if j not in bwd[t + 1]:
                    continue
                ab = f32(score + bwd[t + 1][j])
                if f32(ab + fwd[t][i]) >= neg_beam:
                    keep.append(k)
                    sb[i] = max(sb[i], ab)
            alive_arcs[t] = keep
            if t != B:
                alive[t] = {i for i in sb if sb[i] != NEG}
            bwd[t] = {i: sb[i] for i in alive[t]}
    num_states = sum(len(a) for a in alive) + (0 if states[T] else 1)
    out = []
    for t in range(T):
        for k in sorted(alive_arcs[t], key=lambda k: (arcs_t[t][k][0], arcs_t[t][k][1])):
            i, a, j, score, red = arcs_t[t][k]
            out.append((t, a, red, score))
    return out, num_states
