"""The graph image (`hlg.img`): layout, writer, memory-mapped reader and validator.

Layout (little-endian; every section starts on an 8-byte boundary, in this order):

    header               256 B  see `_HEADER` below
    row_splits           i32[N+1]   CSR arc offsets per state (arcs grouped by source state)
    final_count          i32[N]     arcs with ilabel -1 at one end of each state's range
    arc_dest_ilabel      i32[2A]    interleaved {dest, ilabel} per arc
    arc_weight           f32[A]     graph score (log domain, larger is better)
    aux_row_splits       i32[A+1]   CSR of word ids per arc
    aux_pool             i32[P]     the word ids (> 0)
    eps_count            i32[N]     version >= 2 with has-eps only: epsilon arcs per state
    arc_id               i32[A]     version 3 with arcs-reordered only: the source graph's id
                                    of each arc (a permutation of 0..A-1)
    symbols              u8[S]      with FLAG_SYMBOLS only: the token and word tables
                                    (format in symbols.py); S is the header's symbols_bytes

Inside one state's arc range the arcs sit as

    [final arcs, if not finals-at-end] [epsilon arcs] [emitting arcs] [final arcs, if finals-at-end]

and the emitting arcs as [label-0 arcs] [the other emitting arcs by weight, best (largest)
first] (the GPU step trims each token's arcs to the prefix that can pass); arcs this order
cannot tell apart (finals, epsilon arcs, label-0 arcs, equal weights) keep their source
order. Loaders reorder a source graph into this layout and keep each arc's source id in
`arc_id` (below); as few graphs come with their emitting arcs sorted so, almost every
image carries that section. The validator does not require the emitting-arc order (images
written before it still load); the GPU checks it at upload and trims only sorted graphs.

ilabel values: 0..vocab_size-1 for emitting arcs (the column of log_probs they read),
-1 for final arcs (they enter the final state, the last state), -2 for epsilon arcs.
Everything the decoders follow without a bounds check is validated in `validate()`.

Symbol tables: FLAG_SYMBOLS needs no new version: a reader that predates it refuses the
image for its unknown flag bit instead of misreading it, and every other section keeps its
place. The section's byte count sits in the header's reserved bytes right after the
fixed fields (`_HEADER_EXT`), which the header CRC covers; images without the flag have
zeros there. The validator checks that the tables fit the graph (symbols.fit_problem).

Source arc ids: a loader that had to reorder a state's arcs into this layout (group them,
move finals to one end, epsilon arcs before emitting ones, sort the emitting ones) stores each
arc's id in the source graph (k2's arc index; for OpenFst, the k2-style enumeration: a
state's arcs in file order, then its final-weight arc) in `arc_id`; everything a user
sees (Hypothesis.arcs, redirect_arc) speaks source ids. Without the section, ids are the
image's own (identity).
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass

import numpy as np

MAGIC = b"WFSTIMG1"
HEADER_BYTES = 256
FLAG_FINALS_AT_END = 1
FLAG_HAS_EPS = 2
FLAG_EPS_FIRST = 4
FLAG_ARC_IDS = 8  # version 3: the arc_id section follows
FLAG_SYMBOLS = 16  # the symbols section follows (any version; see the module notes)
KNOWN_FLAGS = FLAG_FINALS_AT_END | FLAG_HAS_EPS | FLAG_EPS_FIRST | FLAG_ARC_IDS | FLAG_SYMBOLS
FINAL_ILABEL = -1
EPS_ILABEL = -2
MAX_VOCAB = 65535  # the GPU stores ilabels as u16 with 0xFFFF/0xFFFE reserved
INT32_MAX = 2**31 - 1

# magic, version, flags, num_states, num_arcs, vocab_size, start_state, aux_pool_size,
# num_eps_arcs, payload_bytes, payload_crc32, header_crc32
_HEADER = struct.Struct("<8sII qqqqqqq II")
# symbols_bytes: in the reserved bytes right after _HEADER (zero without FLAG_SYMBOLS)
_HEADER_EXT = struct.Struct("<q")


class CorruptGraphImage(ValueError):
    """A graph image that cannot be decoded safely. The message starts `corrupt graph image:`."""

    def __init__(self, what: str):
        super().__init__(f"corrupt graph image: {what}")


@dataclass
class ImageArrays:
    """The sections of an image as numpy arrays (read-only once validated: see `freeze`)."""

    num_states: int
    num_arcs: int
    vocab_size: int
    start_state: int
    finals_at_end: bool
    row_splits: np.ndarray  # i32[N+1]
    final_count: np.ndarray  # i32[N]
    dest: np.ndarray  # i32[A] (a strided view of arc_dest_ilabel)
    ilabel: np.ndarray  # i32[A]
    weight: np.ndarray  # f32[A]
    aux_row_splits: np.ndarray  # i32[A+1]
    aux_pool: np.ndarray  # i32[P]
    eps_count: np.ndarray | None  # i32[N], None on graphs without epsilon arcs
    arc_id: np.ndarray | None = None  # i32[A] source arc id per image arc; None = identity
    symbols: np.ndarray | None = None  # u8[S] the encoded token/word tables; None = none

    @property
    def has_eps(self) -> bool:
        return self.eps_count is not None

    @property
    def version(self) -> int:
        return 3 if self.arc_id is not None else 2 if self.has_eps else 1

    @property
    def flags(self) -> int:
        f = FLAG_FINALS_AT_END if self.finals_at_end else 0
        if self.has_eps:
            f |= FLAG_HAS_EPS | FLAG_EPS_FIRST
        if self.arc_id is not None:
            f |= FLAG_ARC_IDS
        if self.symbols is not None:
            f |= FLAG_SYMBOLS
        return f


def _align8(n: int) -> int:
    return (n + 7) & ~7


def _section_sizes(n: int, a: int, p: int, has_eps: bool, has_ids: bool = False,
                   symbols_bytes: int = 0) -> list[tuple[str, int, np.dtype]]:
    sec = [
        ("row_splits", n + 1, np.dtype("<i4")),
        ("final_count", n, np.dtype("<i4")),
        ("arc_dest_ilabel", 2 * a, np.dtype("<i4")),
        ("arc_weight", a, np.dtype("<f4")),
        ("aux_row_splits", a + 1, np.dtype("<i4")),
        ("aux_pool", p, np.dtype("<i4")),
    ]
    if has_eps:
        sec.append(("eps_count", n, np.dtype("<i4")))
    if has_ids:
        sec.append(("arc_id", a, np.dtype("<i4")))
    if symbols_bytes:
        sec.append(("symbols", symbols_bytes, np.dtype("u1")))
    return sec


def _payload_layout(n: int, a: int, p: int, has_eps: bool, has_ids: bool = False, symbols_bytes: int = 0):
    offsets = {}
    pos = HEADER_BYTES
    for name, count, dt in _section_sizes(n, a, p, has_eps, has_ids, symbols_bytes):
        offsets[name] = (pos, count, dt)
        pos = _align8(pos + count * dt.itemsize)
    return offsets, pos


def write_image(path: str | os.PathLike, g: ImageArrays) -> int:
    """Write `g` to `path` atomically (temp file + rename). Returns the file size."""
    validate(g)
    n, a, p = g.num_states, g.num_arcs, int(g.aux_pool.shape[0])
    sym_bytes = 0 if g.symbols is None else int(g.symbols.shape[0])
    offsets, total = _payload_layout(n, a, p, g.has_eps, g.arc_id is not None, sym_bytes)
    inter = np.empty(2 * a, dtype="<i4")
    inter[0::2] = g.dest
    inter[1::2] = g.ilabel
    data = {
        "row_splits": g.row_splits,
        "final_count": g.final_count,
        "arc_dest_ilabel": inter,
        "arc_weight": g.weight,
        "aux_row_splits": g.aux_row_splits,
        "aux_pool": g.aux_pool,
    }
    if g.has_eps:
        data["eps_count"] = g.eps_count
    if g.arc_id is not None:
        data["arc_id"] = g.arc_id
    if sym_bytes:
        data["symbols"] = g.symbols
    buf = bytearray(total)
    for name, (off, count, dt) in offsets.items():
        arr = np.ascontiguousarray(data[name], dtype=dt)
        assert arr.shape == (count,), name
        buf[off : off + count * dt.itemsize] = arr.tobytes()
    payload_crc = zlib.crc32(memoryview(buf)[HEADER_BYTES:])
    num_eps = int(g.eps_count.sum()) if g.has_eps else 0
    fields = [MAGIC, g.version, g.flags, n, a, g.vocab_size, g.start_state, p, num_eps,
              total - HEADER_BYTES, payload_crc, 0]
    buf[: _HEADER.size] = _HEADER.pack(*fields)
    _HEADER_EXT.pack_into(buf, _HEADER.size, sym_bytes)
    fields[-1] = zlib.crc32(memoryview(buf)[:HEADER_BYTES])  # the whole header, reserved bytes too
    buf[: _HEADER.size] = _HEADER.pack(*fields)
    path = os.fspath(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(buf)
    os.replace(tmp, path)
    return total


def read_image(path: str | os.PathLike, *, verify_checksum: bool = True) -> ImageArrays:
    """Memory-map and validate an image. Raises CorruptGraphImage on anything malformed."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        magic = f.read(len(MAGIC))
    if magic != MAGIC:
        from .sources import not_an_image, sniff
        if sniff(path) != "unknown":  # another kind of file: say which, and how to convert it
            raise not_an_image(path)
    if size < HEADER_BYTES:
        raise CorruptGraphImage(f"{path}: file is {size} bytes, shorter than the {HEADER_BYTES}-byte header")
    # copy-on-write: the pages stay shared with the file, yet the memory is writable, which
    # DLPack needs to hand the arrays to the native modules without a copy (the arrays
    # themselves are marked read-only after validation; see `native_array`)
    mm = np.memmap(path, dtype=np.uint8, mode="c")
    return parse_image(mm, name=path, verify_checksum=verify_checksum)


def parse_image(buf: np.ndarray, *, name: str = "<buffer>", verify_checksum: bool = True) -> ImageArrays:
    """Parse and validate an image held in a uint8 array (a memmap or bytes)."""
    buf = np.asarray(buf, dtype=np.uint8)
    size = int(buf.shape[0])
    if size < HEADER_BYTES:
        raise CorruptGraphImage(f"{name}: {size} bytes, shorter than the {HEADER_BYTES}-byte header")
    head = bytes(buf[: _HEADER.size])
    (magic, version, flags, n, a, vocab, start, p, num_eps, payload_bytes, payload_crc,
     header_crc) = _HEADER.unpack(head)
    if magic != MAGIC:
        raise CorruptGraphImage(f"{name}: bad magic {magic!r}, expected {MAGIC!r}")
    zeroed = _HEADER.pack(magic, version, flags, n, a, vocab, start, p, num_eps, payload_bytes,
                          payload_crc, 0) + bytes(buf[_HEADER.size : HEADER_BYTES])
    if zlib.crc32(zeroed) != header_crc:
        raise CorruptGraphImage(f"{name}: header checksum mismatch (the header was modified or damaged)")
    if version not in (1, 2, 3):
        raise CorruptGraphImage(f"{name}: unsupported version {version} (this reader knows 1 to 3)")
    if flags & ~KNOWN_FLAGS:
        raise CorruptGraphImage(f"{name}: unknown flag bits {flags & ~KNOWN_FLAGS:#x}")
    has_eps = bool(flags & FLAG_HAS_EPS)
    if has_eps and version < 2:
        raise CorruptGraphImage(f"{name}: has-eps flag set on a version-1 image")
    has_ids = bool(flags & FLAG_ARC_IDS)
    if has_ids != (version >= 3):
        raise CorruptGraphImage(f"{name}: the arc-ids flag and version {version} disagree")
    (sym_bytes,) = _HEADER_EXT.unpack_from(bytes(buf[_HEADER.size : _HEADER.size + _HEADER_EXT.size]))
    if bool(flags & FLAG_SYMBOLS) != (sym_bytes > 0) or not 0 <= sym_bytes <= INT32_MAX:
        raise CorruptGraphImage(f"{name}: the symbols flag and the symbols section size {sym_bytes} disagree")
    if has_eps and not flags & FLAG_EPS_FIRST:
        raise CorruptGraphImage(f"{name}: has-eps without eps-first is not a layout this reader knows")
    for what, v, hi in (("num_states", n, INT32_MAX - 1), ("num_arcs", a, INT32_MAX - 1),
                        ("aux_pool_size", p, INT32_MAX - 1), ("vocab_size", vocab, MAX_VOCAB - 1)):
        if not 0 <= v <= hi:
            raise CorruptGraphImage(f"{name}: {what} = {v} out of range [0, {hi}]")
    if n < 1:
        raise CorruptGraphImage(f"{name}: a graph needs at least one state")
    offsets, total = _payload_layout(n, a, p, has_eps, has_ids, sym_bytes)
    if payload_bytes != total - HEADER_BYTES:
        raise CorruptGraphImage(
            f"{name}: header says {payload_bytes} payload bytes, the counts imply {total - HEADER_BYTES}")
    if size != total:
        raise CorruptGraphImage(f"{name}: file is {size} bytes, expected {total} (truncated or padded)")
    if verify_checksum and zlib.crc32(memoryview(buf[HEADER_BYTES:])) != payload_crc:
        raise CorruptGraphImage(f"{name}: payload checksum mismatch (the file was modified or damaged)")

    def sec(key):
        off, count, dt = offsets[key]
        return buf[off : off + count * dt.itemsize].view(dt)

    inter = sec("arc_dest_ilabel")
    g = ImageArrays(
        num_states=n, num_arcs=a, vocab_size=vocab, start_state=start,
        finals_at_end=bool(flags & FLAG_FINALS_AT_END),
        row_splits=sec("row_splits"), final_count=sec("final_count"),
        dest=inter[0::2], ilabel=inter[1::2], weight=sec("arc_weight"),
        aux_row_splits=sec("aux_row_splits"), aux_pool=sec("aux_pool"),
        eps_count=sec("eps_count") if has_eps else None,
        arc_id=sec("arc_id") if has_ids else None,
        symbols=sec("symbols") if sym_bytes else None,
    )
    validate(g, name=name)
    if has_eps and int(g.eps_count.sum()) != num_eps:
        raise CorruptGraphImage(f"{name}: header says {num_eps} epsilon arcs, eps_count sums to {int(g.eps_count.sum())}")
    return freeze(g)


_ARRAY_FIELDS = ("row_splits", "final_count", "dest", "ilabel", "weight", "aux_row_splits", "aux_pool",
                 "eps_count", "arc_id")


def freeze(g: ImageArrays) -> ImageArrays:
    """Replace the arrays of validated `g` by read-only views and return `g`: the decoders
    follow their indices without a check, so nothing may change them after validation.
    Views, not the arrays themselves, are marked, so that the memory underneath stays
    writable for `native_array` to alias."""
    for name in _ARRAY_FIELDS:
        arr = getattr(g, name, None)
        if isinstance(arr, np.ndarray) and arr.flags.writeable:
            view = arr.view()
            view.flags.writeable = False
            setattr(g, name, view)
    return g


def native_array(arr: np.ndarray, dtype) -> np.ndarray:
    """`arr` as a C-contiguous `dtype` array that DLPack can hand to a native module.

    Image arrays are read-only after validation, but DLPack before version 1.0 cannot say
    "read-only", so numpy refuses to export them. The native modules only read graph
    arrays, so they get a writable alias of the same memory where the memory itself is
    writable (a copy-on-write memmap, or an array `freeze` marked); memory that is truly
    read-only (an image parsed from `bytes`) is copied.
    """
    a = np.ascontiguousarray(arr, dtype=dtype)
    if a.flags.writeable:
        return a
    alias = a.view()
    try:
        alias.flags.writeable = True
    except ValueError:
        return a.copy()
    return alias


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _in_ranges(size: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """bool[size]: which positions lie in one of the ranges [lo[k], hi[k]) (disjoint, inside
    [0, size]; empty ones are ignored), by +1 / -1 marks at their ends and a running sum."""
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    up = np.zeros(size + 1, np.int8)
    up[lo] = 1  # (disjoint non-empty ranges: distinct starts, distinct ends)
    down = np.zeros(size + 1, np.int8)
    down[hi] = 1
    np.subtract(up, down, out=up)
    return np.cumsum(up[:size], dtype=np.int8).view(np.bool_)


def validate(g: ImageArrays, *, name: str = "graph") -> None:
    """Check every index a decoder follows without a bounds check. Raises CorruptGraphImage."""
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
    # Expected ilabel class per arc from its position in its state's range: each state's final
    # and epsilon ranges (checked above to lie inside its arcs) marked by their ends, so the
    # per-arc pass reads one byte an arc, not int64 copies of the state's degree and counts
    if a:
        starts = rs[:-1].astype(np.int64)
        if g.finals_at_end:
            f_lo, f_hi = starts + deg - fc, starts + deg
            e_lo, e_hi = starts, starts + ec
        else:
            f_lo, f_hi = starts, starts + fc
            e_lo, e_hi = starts + fc, starts + fc + ec
        is_final, is_eps = _in_ranges(a, f_lo, f_hi), _in_ranges(a, e_lo, e_hi)
        il = np.asarray(g.ilabel)
        bad = np.where(is_final, il != FINAL_ILABEL,
                       np.where(is_eps, il != EPS_ILABEL, (il < 0) | (il >= vocab)))
        if bad.any():
            i = _first_bad(bad)
            kind = "final" if is_final[i] else "epsilon" if is_eps[i] else "emitting"
            want = {"final": "-1", "epsilon": "-2", "emitting": f"in [0, {vocab})"}[kind]
            state = int(np.searchsorted(rs, i, side="right")) - 1  # (the state whose range holds arc i)
            raise CorruptGraphImage(
                f"{name}: arc {i} of state {state} sits in the {kind} range but has ilabel "
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
    down = ars[1:] < ars[:-1]  # (compared as stored: no int64 copy, no int32 difference to wrap)
    if down.any():
        raise CorruptGraphImage(f"{name}: aux_row_splits decreases at arc {_first_bad(down)}")
    if g.arc_id is not None:
        ids = np.asarray(g.arc_id)
        if ids.shape != (a,):
            raise CorruptGraphImage(f"{name}: arc_id must have {a} entries")
        if a:
            # a ids all in [0, a) are a permutation exactly when every id is hit
            ok = not ((ids < 0) | (ids >= a)).any()
            if ok:
                seen = np.zeros(a, bool)
                seen[ids] = True
                ok = bool(seen.all())
            if not ok:
                raise CorruptGraphImage(f"{name}: arc_id is not a permutation of the arc ids 0..{a - 1}")
    pool = np.asarray(g.aux_pool)
    if p and (pool <= 0).any():
        raise CorruptGraphImage(f"{name}: word id {int(pool[_first_bad(pool <= 0)])} in aux_pool is not > 0")
    if g.symbols is not None:
        from .symbols import fit_problem, symbol_tables
        if np.asarray(g.symbols).dtype != np.uint8 or np.asarray(g.symbols).ndim != 1 or not g.symbols.size:
            raise CorruptGraphImage(f"{name}: the symbols section must be non-empty u8 bytes")
        problem = fit_problem(g, *symbol_tables(g, name=name))
        if problem:
            raise CorruptGraphImage(f"{name}: {problem}")
