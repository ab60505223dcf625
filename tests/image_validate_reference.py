"""The graph image validator's plain form (cuwfst/graph/image.py `validate` before it marked the
states' final and epsilon ranges instead of gathering int64 copies per arc), kept as the reference
its faster form must agree with, message for message (tests/test_graph_image.py)."""

import numpy as np

from cuwfst.graph.image import EPS_ILABEL, FINAL_ILABEL, MAX_VOCAB, CorruptGraphImage


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def ref_validate(g, *, name: str = "graph") -> None:
    """cuwfst.graph.image.validate as it was before 2026-12-05 (int64 copies of every per-arc
    quantity; 4.5-12.5 s on the full HLG), without the symbols check (unchanged there)."""
    n, a, vocab = g.num_states, g.num_arcs, g.vocab_size
    if n < 1:
        raise CorruptGraphImage(f"{name}: a graph needs at least one state")
    if not 1 <= vocab < MAX_VOCAB:
        raise CorruptGraphImage(f"{name}: vocab_size {vocab} out of range [1, {MAX_VOCAB - 1}]")
    if not 0 <= g.start_state < n:
        raise CorruptGraphImage(f"{name}: start state {g.start_state} out of range [0, {n})")
    rs = np.asarray(g.row_splits)
    if rs.shape != (n + 1,):
        raise CorruptGraphImage(f"{name}: row_splits has shape {rs.shape}, expected ({n + 1},)")
    if rs[0] != 0 or rs[-1] != a:
        raise CorruptGraphImage(f"{name}: row_splits must run from 0 to num_arcs={a}, got {rs[0]}..{rs[-1]}")
    deg = np.diff(rs.astype(np.int64))
    if (deg < 0).any():
        s = _first_bad(deg < 0)
        raise CorruptGraphImage(f"{name}: row_splits decreases at state {s}")
    fc = np.asarray(g.final_count).astype(np.int64)
    if fc.shape != (n,) or (fc < 0).any() or (fc > deg).any():
        s = _first_bad((fc < 0) | (fc > deg)) if fc.shape == (n,) else -1
        raise CorruptGraphImage(f"{name}: final_count of state {s} outside [0, out-degree]")
    ec = np.zeros(n, np.int64) if g.eps_count is None else np.asarray(g.eps_count).astype(np.int64)
    if ec.shape != (n,) or (ec < 0).any() or (ec + fc > deg).any():
        s = _first_bad((ec < 0) | (ec + fc > deg)) if ec.shape == (n,) else -1
        raise CorruptGraphImage(f"{name}: eps_count of state {s} outside [0, out-degree - final_count]")
    for what, arr, dt in (("dest", g.dest, np.int32), ("ilabel", g.ilabel, np.int32),
                          ("weight", g.weight, np.float32)):
        if np.asarray(arr).shape != (a,) or np.asarray(arr).dtype != dt:
            raise CorruptGraphImage(f"{name}: {what} must be {np.dtype(dt).name}[{a}]")
    dest = np.asarray(g.dest)
    if a and ((dest < 0) | (dest >= n)).any():
        i = _first_bad((dest < 0) | (dest >= n))
        raise CorruptGraphImage(f"{name}: arc {i} has destination {int(dest[i])} outside [0, {n})")
    # Expected ilabel class per arc from its position in its state's range.
    if a:
        src = np.repeat(np.arange(n, dtype=np.int64), deg)
        pos = np.arange(a, dtype=np.int64) - rs[:-1].astype(np.int64)[src]
        d, f, e = deg[src], fc[src], ec[src]
        if g.finals_at_end:
            is_final = pos >= d - f
            is_eps = pos < e
        else:
            is_final = pos < f
            is_eps = (pos >= f) & (pos < f + e)
        il = np.asarray(g.ilabel)
        bad = np.where(is_final, il != FINAL_ILABEL,
                       np.where(is_eps, il != EPS_ILABEL, (il < 0) | (il >= vocab)))
        if bad.any():
            i = _first_bad(bad)
            kind = "final" if is_final[i] else "epsilon" if is_eps[i] else "emitting"
            want = {"final": "-1", "epsilon": "-2", "emitting": f"in [0, {vocab})"}[kind]
            raise CorruptGraphImage(
                f"{name}: arc {i} of state {int(src[i])} sits in the {kind} range but has ilabel "
                f"{int(il[i])} (expected {want})")
        if fc.any():
            final_state = n - 1
            if (dest[is_final] != final_state).any():
                i = _first_bad(is_final & (dest != final_state))
                raise CorruptGraphImage(f"{name}: final arc {i} does not enter the final state {final_state}")
            if deg[final_state] != 0:
                raise CorruptGraphImage(f"{name}: the final state {final_state} has out-arcs")
        w = np.asarray(g.weight)
        badw = np.isnan(w) | (w == np.inf)
        if badw.any():
            raise CorruptGraphImage(f"{name}: arc {_first_bad(badw)} has weight {w[_first_bad(badw)]}")
    ars = np.asarray(g.aux_row_splits)
    p = int(np.asarray(g.aux_pool).shape[0])
    if ars.shape != (a + 1,) or ars[0] != 0 or ars[-1] != p:
        raise CorruptGraphImage(f"{name}: aux_row_splits must have {a + 1} entries running from 0 to {p}")
    if (np.diff(ars.astype(np.int64)) < 0).any():
        raise CorruptGraphImage(f"{name}: aux_row_splits decreases at arc {_first_bad(np.diff(ars.astype(np.int64)) < 0)}")
    if g.arc_id is not None:
        ids = np.asarray(g.arc_id)
        if ids.shape != (a,):
            raise CorruptGraphImage(f"{name}: arc_id must have {a} entries")
        if a and (((ids < 0) | (ids >= a)).any() or (np.bincount(ids.clip(0, a - 1), minlength=a) != 1).any()):
            raise CorruptGraphImage(f"{name}: arc_id is not a permutation of the arc ids 0..{a - 1}")
    pool = np.asarray(g.aux_pool)
    if p and (pool <= 0).any():
        raise CorruptGraphImage(f"{name}: word id {int(pool[_first_bad(pool <= 0)])} in aux_pool is not > 0")
