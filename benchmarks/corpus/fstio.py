"""OpenFst VectorFst<StdArc> binary files <-> numpy arrays.

The full-tier graphs have tens of millions of arcs; kaldifst offers no bulk access to arcs,
so graphs cross between kaldifst (composition, determinization, minimization) and numpy
(relabelling, epsilon removal, statistics) through the binary file format. Reading reuses
cuwfst's OpenFst reader; writing is here.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np

from cuwfst.graph.exporters import _FST_MAGIC, _read_vector_fst_binary, _read_with_kaldifst


@dataclass
class FstArrays:
    """A tropical OpenFst graph as CSR arrays. Arcs are grouped by source state;
    `final[s]` is the final cost of state s (+inf when not final)."""

    start: int
    final: np.ndarray  # float32 [num_states]
    row_splits: np.ndarray  # int64 [num_states + 1]
    ilabel: np.ndarray  # int32 [num_arcs]
    olabel: np.ndarray  # int32 [num_arcs]
    weight: np.ndarray  # float32 [num_arcs], a cost
    nextstate: np.ndarray  # int32 [num_arcs]

    @property
    def num_states(self) -> int:
        return int(self.final.shape[0])

    @property
    def num_arcs(self) -> int:
        return int(self.ilabel.shape[0])

    @property
    def src(self) -> np.ndarray:
        return np.repeat(np.arange(self.num_states, dtype=np.int32), np.diff(self.row_splits))

    @classmethod
    def from_arcs(cls, *, num_states: int, start: int, final, src, ilabel, olabel, weight, nextstate,
                  sort_by_ilabel: bool = True) -> "FstArrays":
        """From unordered arcs: sorts them by source state (then ilabel, olabel, dest)."""
        src = np.asarray(src, np.int64)
        keys = (np.asarray(nextstate), np.asarray(olabel), np.asarray(ilabel), src) if sort_by_ilabel else (src,)
        order = np.lexsort(keys)
        counts = np.bincount(src, minlength=num_states)
        return cls(start=int(start), final=np.asarray(final, np.float32),
                   row_splits=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                   ilabel=np.asarray(ilabel, np.int32)[order], olabel=np.asarray(olabel, np.int32)[order],
                   weight=np.asarray(weight, np.float32)[order],
                   nextstate=np.asarray(nextstate, np.int32)[order])


def read_fst(fst_or_path) -> FstArrays:
    """A binary VectorFst file, or a kaldifst FST object (slow: arc by arc)."""
    parsed = None
    if isinstance(fst_or_path, (str, os.PathLike)):
        parsed = _read_vector_fst_binary(os.fspath(fst_or_path))
    if parsed is None:
        parsed = _read_with_kaldifst(fst_or_path)
    start, finals, row_splits, il, ol, w, ns = parsed
    return FstArrays(start=int(start), final=np.asarray(finals, np.float32),
                     row_splits=np.asarray(row_splits, np.int64), ilabel=np.asarray(il, np.int32),
                     olabel=np.asarray(ol, np.int32), weight=np.asarray(w, np.float32),
                     nextstate=np.asarray(ns, np.int32))


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<i", len(b)) + b


def write_fst(fst: FstArrays, path: str | os.PathLike) -> int:
    """Write OpenFst's binary VectorFst<StdArc> (version 2, no symbol tables); returns bytes written.

    The properties word is left 0 (all unknown), so OpenFst computes what it needs."""
    n, a = fst.num_states, fst.num_arcs
    if n >= 2**31 or a >= 2**31:
        raise ValueError("graph too large for int32 state ids")
    counts = np.diff(fst.row_splits).astype(np.int64)
    src = np.repeat(np.arange(n, dtype=np.int64), counts)
    # per state: final f32 and narcs i64 (3 int32 words), then its arcs (4 int32 words each)
    body = np.zeros(3 * n + 4 * a, np.int32)
    off = 3 * np.arange(n, dtype=np.int64) + 4 * fst.row_splits[:-1]
    body[off] = fst.final.astype(np.float32).view(np.int32)
    body[off + 1] = counts.astype(np.int32)  # the high half stays 0: counts < 2**31
    arc_at = 3 * src + 4 * np.arange(a, dtype=np.int64) + 3
    body[arc_at] = fst.ilabel
    body[arc_at + 1] = fst.olabel
    body[arc_at + 2] = fst.weight.astype(np.float32).view(np.int32)
    body[arc_at + 3] = fst.nextstate
    header = (struct.pack("<i", _FST_MAGIC) + _string("vector") + _string("standard")
              + struct.pack("<iiQqqq", 2, 0, 0, fst.start, n, a))
    with open(path, "wb") as f:
        f.write(header)
        f.write(body.astype("<i4", copy=False).tobytes())
    return len(header) + 4 * body.size


def to_kaldifst(fst: FstArrays, path: str | os.PathLike):
    """Write `fst` to `path` and read it back as a kaldifst.StdVectorFst."""
    import kaldifst

    write_fst(fst, path)
    return kaldifst.StdVectorFst.read(os.fspath(path))
