"""Open any graph file a user has: a cuwfst image, an icefall `HLG.pt`, an OpenFst
`TLG.fst`/`HLG.fst` or k2 text. Sources are exported once and the image is cached beside
the source (or under the cache dir when the source's directory is read-only), keyed by
the source's size and mtime and the export options, so a changed source or other options
export again. A file of the wrong kind is named, with the command that converts it.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zipfile
from pathlib import Path

from .image import MAGIC

_FST_MAGIC = struct.pack("<i", 2125659606)
# what changes the bytes an export writes; bump when an exporter's output changes
# (2: each state's emitting arcs sorted, label 0 first then by weight, which the GPU trims by;
# an export cached by an older version would decode exactly but untrimmed)
_EXPORT_FORMAT = "cuwfst-export-2"


class WrongFileType(ValueError):
    """A file of another kind where a graph (image) was expected; the message says what it is."""


def sniff(path: str | os.PathLike) -> str:
    """What a file is: 'image', 'openfst', 'torch', 'npz', 'npy', 'symbols', 'k2-text',
    'arpa', 'gzip', 'directory', 'missing' or 'unknown' (from its first bytes, never its name)."""
    p = Path(path)
    if not p.exists():
        return "missing"
    if p.is_dir():
        return "directory"
    with open(p, "rb") as f:
        head = f.read(4096)
    if head.startswith(MAGIC):
        return "image"
    if head.startswith(_FST_MAGIC):
        return "openfst"
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(p) as z:
                names = z.namelist()
        except zipfile.BadZipFile:
            return "unknown"
        if any(n.endswith("data.pkl") for n in names):
            return "torch"
        if names and all(n.endswith(".npy") for n in names):
            return "npz"
        return "unknown"
    if head.startswith(b"\x80") and b"torch" in head[:200]:
        return "torch"  # torch's legacy (non-zip) pickle format
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "unknown"
    if text.lstrip().startswith("\\data\\"):
        return "arpa"
    lines = [ln.split() for ln in text.splitlines()[:-1] if ln.strip()] or [text.split()]
    if lines and all(len(f) == 2 and f[1].lstrip("-").isdigit() for f in lines):
        return "symbols"
    if lines and all(1 <= len(f) <= 5 and all(_is_number(x) for x in f) for f in lines):
        return "k2-text"
    return "unknown"


def _is_number(x: str) -> bool:
    try:
        float(x)
        return True
    except ValueError:
        return False


_KIND_NAMES = {
    "image": "a cuwfst graph image",
    "openfst": "an OpenFst graph",
    "torch": "a torch file",
    "k2-text": "a graph in k2's text format",
    "npz": "an .npz archive",
    "npy": "an .npy array",
    "symbols": "a symbol table (words.txt or tokens.txt)",
    "arpa": "an ARPA language model",
    "gzip": "a gzip-compressed file",
    "directory": "a directory",
    "missing": "missing (no such file)",
}


def describe(path: str | os.PathLike) -> str:
    """A short phrase naming what a file is ("an OpenFst graph", ...)."""
    kind = sniff(path)
    if kind == "unknown":
        with open(path, "rb") as f:
            return f"a file of unknown type (it starts with {f.read(8)!r})"
    return _KIND_NAMES[kind]


def wrong_kind(path: str | os.PathLike, wanted: str) -> WrongFileType:
    """`path is not <wanted>: it is <what it is>`, plus the command for what it is."""
    path = os.fspath(path)
    kind = sniff(path)
    hint = ""
    if kind == "image":
        hint = ": it is already exported; use it as it is (cuwfst decode, cuwfst info, Graph.load)"
    elif kind in ("openfst", "torch", "k2-text"):
        flag = {"openfst": "--openfst", "torch": "--k2", "k2-text": "--k2-text"}[kind]
        hint = f": export it with `cuwfst export {flag} {path} --out graph.img`"
    return WrongFileType(f"{path} is not {wanted}; it is {describe(path)}{hint}")


_CONVERT = {
    "openfst": "an OpenFst graph (a Kaldi/WeNet/sherpa TLG.fst or HLG.fst)",
    "torch": "a torch file (an icefall HLG.pt?)",
    "k2-text": "a graph in k2's text format",
}


def not_an_image(path: str | os.PathLike) -> WrongFileType:
    """The error for a file that is not a cuwfst image: what it is, and what to do."""
    path = os.fspath(path)
    kind = sniff(path)
    stem = Path(path).name.split(".")[0] or "graph"
    flag = {"openfst": "--openfst", "torch": "--k2", "k2-text": "--k2-text"}.get(kind)
    if flag:
        return WrongFileType(
            f"{path} is {_CONVERT[kind]}, not a cuwfst graph image: give it to `cuwfst decode` or "
            f"`cuwfst.Decoder` as it is (it is exported and cached on first use), or convert it once "
            f"with `cuwfst export {flag} {path} --out {stem}.img` (add --lang-dir DIR for its symbol tables)")
    what = {
        "npz": "an .npz archive (log-probs?), not a graph: the graph comes first, `cuwfst decode GRAPH INPUT...`",
        "npy": "an .npy array (log-probs?), not a graph: the graph comes first, `cuwfst decode GRAPH INPUT...`",
        "symbols": "a symbol table (words.txt or tokens.txt), not a graph: pass it with --words or --tokens",
        "arpa": "an ARPA language model, not a decoding graph: build an HLG/TLG from it first (icefall's "
                "compile_hlg.py, or benchmarks/corpus in this repository)",
        "gzip": "gzip-compressed: decompress it first (gunzip)",
        "directory": "a directory, not a graph file",
        "missing": "missing: no such file",
    }.get(kind)
    if what:
        return WrongFileType(f"{path} is {what}")
    with open(path, "rb") as f:
        head = f.read(8)
    return WrongFileType(f"{path} is not a cuwfst graph image (it starts with {head!r}, images start with "
                         f"{MAGIC!r}) nor a graph cuwfst can export (HLG.pt, OpenFst .fst, k2 text)")


def _tables_for(path: Path, tokens, words, lang_dir):
    """Explicit tables win; else an icefall lang dir; else tokens.txt / words.txt beside
    the source graph (icefall keeps HLG.pt in its lang dir)."""
    from .symbols import read_lang_dir

    if lang_dir is not None and lang_dir is not False:
        lt, lw = read_lang_dir(lang_dir)
        tokens = tokens if tokens is not None else lt
        words = words if words is not None else lw
    elif lang_dir is None:
        beside = path.parent
        if tokens is None and (beside / "tokens.txt").is_file():
            tokens = beside / "tokens.txt"
        if words is None and (beside / "words.txt").is_file():
            words = beside / "words.txt"
    return tokens, words


def _table_digest(table) -> str:
    from .symbols import SymbolTable

    if table is None:
        return "-"
    if isinstance(table, SymbolTable):
        return hashlib.sha256(table.to_text().encode()).hexdigest()
    if isinstance(table, (str, os.PathLike)):
        return hashlib.sha256(Path(table).read_bytes()).hexdigest()
    return hashlib.sha256(repr(sorted(dict(table).items())).encode()).hexdigest()


def cached_image_path(path: Path, key: str) -> Path:
    """Beside the source when its directory is writable, else under the cache dir."""
    beside = path.parent / f"{path.name}.{key[:12]}.img"
    if os.access(path.parent, os.W_OK):
        return beside
    from ..jit.core import cache_root

    return cache_root() / "graphs" / f"{path.name}.{key[:16]}.img"


def open_graph(path, *, token_offset: int = 1, vocab_size: int | None = None,
               epsilon_id: int | None = None, tokens=None, words=None, lang_dir=None,
               log=None):
    """A `Graph` from an image, an icefall HLG.pt, an OpenFst .fst or k2 text.

    tokens / words: SymbolTables or paths; lang_dir: an icefall lang dir holding both.
    Without them, a source graph picks up tokens.txt and words.txt beside it (pass
    lang_dir=False to prevent that). token_offset (OpenFst: ilabel = token + offset),
    vocab_size and epsilon_id (k2 text) are the exporters' options. log: a callable told
    about exports and cache hits (the CLI prints them to stderr)."""
    from .graph import Graph

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"a graph path must be a str or PathLike, got {type(path).__name__}")
    p = Path(path)
    kind = sniff(p)
    if kind == "image":
        g = Graph.load(p)
        if tokens is not None or words is not None or lang_dir not in (None, False):
            tokens, words = _tables_for(p, tokens, words, lang_dir or False)
            g2 = g.with_symbols(tokens, words, resize_vocab=False)
            g2.path = g.path
            return g2
        return g
    if kind not in _CONVERT:
        raise not_an_image(p)
    tokens, words = _tables_for(p, tokens, words, lang_dir)
    st = p.stat()
    key = hashlib.sha256(repr((
        _EXPORT_FORMAT, kind, str(p.resolve()), st.st_size, st.st_mtime_ns, token_offset, vocab_size,
        epsilon_id, _table_digest(tokens), _table_digest(words))).encode()).hexdigest()
    out = cached_image_path(p, key)
    if out.is_file():
        try:
            g = Graph.load(out)
            if log:
                log(f"using {out} (the cached export of {p})")
            return g
        except ValueError:
            pass  # a damaged cache entry: export again
    if kind == "openfst":
        g = Graph.from_openfst(p, token_offset=token_offset, vocab_size=vocab_size)
    elif kind == "torch":
        g = Graph.from_k2(p, vocab_size=vocab_size)
    else:
        g = Graph.from_k2_text(p.read_text(), epsilon_id=epsilon_id, vocab_size=vocab_size)
    if tokens is not None or words is not None:
        g = g.with_symbols(tokens, words, token_offset=token_offset if kind == "openfst" else None,
                           resize_vocab=vocab_size is None)
    out.parent.mkdir(parents=True, exist_ok=True)
    g.save(out)
    if log:
        log(f"exported {p} to {out} ({g.num_states} states, {g.num_arcs} arcs, vocab {g.vocab_size}); "
            "later runs reuse it")
    g = Graph.load(out)
    return g
