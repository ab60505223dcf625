"""The CTC topology over `num_tokens` tokens (blank = 0), in OpenFst labels (token + 1).

State k is "the last token read was k" (state 0: blank, or nothing yet). From every state s,
token t goes to state t; it outputs t unless t is blank or repeats s (t == s, the self-loop),
which output epsilon. Every state is final. This is k2's `ctc_topo` (standard, not modified)
and the topology of Riva's `ctc_token_fst.py` (the default `ctc` topology with self-loops).

For TLG the disambiguation symbols of LG must pass through T: each `#k` gets an `eps:#k`
self-loop. Riva puts these loops on the token states only; we put them on state 0 too (as
EESEN does), since otherwise a path cannot back off in G before its first token.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .fstio import FstArrays


def ctc_topology(num_tokens: int, disambig_olabels: Sequence[int] = ()) -> FstArrays:
    """H (no disambig_olabels) or T (with the OpenFst labels of #0, #1, ... as olabels)."""
    if num_tokens < 2:
        raise ValueError(f"num_tokens must be >= 2 (blank and one token), got {num_tokens}")
    V = num_tokens
    s = np.repeat(np.arange(V), V)
    t = np.tile(np.arange(V), V)
    olabel = np.where((t == 0) | (t == s), 0, t + 1)
    src, ilabel, dest = s, t + 1, t
    d = np.asarray(disambig_olabels, np.int64)
    if d.size:
        if (d <= V).any():
            raise ValueError("disambiguation labels must come after the tokens' labels")
        ds = np.repeat(np.arange(V), d.size)
        src = np.concatenate([src, ds])
        ilabel = np.concatenate([ilabel, np.zeros(ds.size, np.int64)])
        olabel = np.concatenate([olabel, np.tile(d, V)])
        dest = np.concatenate([dest, ds])
    return FstArrays.from_arcs(num_states=V, start=0, final=np.zeros(V, np.float32), src=src,
                               ilabel=ilabel, olabel=olabel, weight=np.zeros(src.size, np.float32),
                               nextstate=dest)
