"""Symbol tables (words.txt, tokens.txt) and the image section that stores them.

The text format is k2's and Kaldi's: one `symbol id` pair per line. A graph image may
carry two tables (FLAG_SYMBOLS, see image.py):

- tokens: one symbol per log-prob column (icefall's tokens.txt: `<blk> 0`, ...). The
  disambiguation symbols `#0`, `#1`, ... may be listed (icefall lists them after the real
  tokens); they never label an emitting arc. An OpenFst input-symbol table (Kaldi/WeNet
  style, `<eps> 0` first, ids = ilabels) is turned into columns at export by subtracting
  the token offset.
- words: the word of each word id on the graph's arcs (words.txt: `<eps> 0`, ...).

Section layout (little-endian, inside the image's `symbols` section), tokens then words:

    u64 count, u64 text_bytes, i32 ids[count] (padded to 8 bytes),
    u8 text[text_bytes] (the symbols in id order joined by "\\n", padded to 8 bytes)

count 0 means the table is absent. Symbols hold no whitespace (the text format could not
represent it), so "\\n" separates them unambiguously.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Iterable

import numpy as np

_DISAMBIG = re.compile(r"#\d+$")
BLANK_SYMBOLS = ("<blk>", "<blank>", "<b>")
SENTENCEPIECE_SPACE = "\u2581"
_COUNTS = struct.Struct("<QQ")


def _align8(n: int) -> int:
    return (n + 7) & ~7


class SymbolTable:
    """An id <-> symbol table (k2.SymbolTable's file format). `table[id]` gives the symbol."""

    def __init__(self, pairs: Iterable[tuple[str, int]], *, name: str = "symbol table"):
        self.name = name
        by_id: dict[int, str] = {}
        by_sym: dict[str, int] = {}
        for sym, i in pairs:
            if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or i < 0 or i > 2**31 - 1:
                raise ValueError(f"{name}: id {i!r} of {sym!r} is not an integer in [0, 2^31)")
            if not isinstance(sym, str) or not sym or any(c.isspace() for c in sym):
                raise ValueError(f"{name}: symbol {sym!r} (id {i}) is empty or holds whitespace")
            if i in by_id:
                raise ValueError(f"{name}: id {i} is given twice ({by_id[i]!r} and {sym!r})")
            if sym in by_sym:
                raise ValueError(f"{name}: symbol {sym!r} is given twice (ids {by_sym[sym]} and {i})")
            by_id[int(i)] = sym
            by_sym[sym] = int(i)
        self._by_id = dict(sorted(by_id.items()))
        self._by_sym = by_sym

    @classmethod
    def from_file(cls, path: str | os.PathLike, *, name: str | None = None) -> "SymbolTable":
        """Read `symbol id` lines (words.txt, tokens.txt); a malformed line is an error."""
        path = Path(path)
        name = name or str(path)
        if not path.is_file():
            raise FileNotFoundError(f"symbol table not found: {path}")
        pairs = []
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) != 2 or not re.fullmatch(r"-?\d+", parts[1]):
                    raise ValueError(f"{name} line {n}: expected 'symbol id', got {line.strip()!r} "
                                     "(is this a words.txt / tokens.txt?)")
                pairs.append((parts[0], int(parts[1])))
        if not pairs:
            raise ValueError(f"{name}: the file is empty")
        return cls(pairs, name=name)

    # ------------------------------------------------------------------ lookups
    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, i) -> bool:
        return int(i) in self._by_id

    def __getitem__(self, i: int) -> str:
        try:
            return self._by_id[int(i)]
        except KeyError:
            raise KeyError(f"id {i} is not in {self.name}") from None

    def __eq__(self, other) -> bool:
        return isinstance(other, SymbolTable) and self._by_id == other._by_id

    def get(self, i: int, default: str | None = None) -> str | None:
        return self._by_id.get(int(i), default)

    def id_of(self, symbol: str) -> int:
        return self._by_sym[symbol]

    def items(self):
        """(id, symbol) pairs in id order."""
        return self._by_id.items()

    @property
    def ids(self) -> np.ndarray:
        return np.fromiter(self._by_id, np.int64, count=len(self._by_id))

    @property
    def max_id(self) -> int:
        return max(self._by_id) if self._by_id else -1

    def symbols(self, ids: Iterable[int]) -> list[str]:
        """Symbols of many ids; an unknown id is an error naming the table."""
        return [self[i] for i in ids]

    def is_disambig(self, i: int) -> bool:
        return bool(_DISAMBIG.match(self._by_id.get(int(i), "")))

    @property
    def num_tokens(self) -> int:
        """The log-prob width this table implies: the largest id of a symbol that is not a
        disambiguation symbol (#0, #1, ...), plus 1 (icefall's `max_token_id + 1`)."""
        real = [i for i, s in self._by_id.items() if not _DISAMBIG.match(s)]
        return max(real) + 1 if real else 0

    def shifted(self, offset: int) -> "SymbolTable":
        """A table with every id minus `offset`; ids that would go below 0 are dropped
        (an OpenFst input-symbol table's `<eps> 0` becomes nothing, `<blank> 1` becomes 0)."""
        return SymbolTable(((s, i - offset) for i, s in self._by_id.items() if i - offset >= 0),
                           name=self.name)

    def to_text(self) -> str:
        return "".join(f"{s} {i}\n" for i, s in self._by_id.items())

    def __repr__(self) -> str:
        return f"SymbolTable({self.name!r}, {len(self)} symbols, ids 0..{self.max_id})"


def read_lang_dir(lang_dir: str | os.PathLike) -> tuple[SymbolTable | None, SymbolTable | None]:
    """(tokens, words) of an icefall lang dir (tokens.txt, words.txt; either may be missing)."""
    d = Path(lang_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"lang dir not found: {d} (expected a directory holding tokens.txt "
                                "and words.txt, as icefall's data/lang_bpe_500)")
    tokens = SymbolTable.from_file(d / "tokens.txt") if (d / "tokens.txt").is_file() else None
    words = SymbolTable.from_file(d / "words.txt") if (d / "words.txt").is_file() else None
    if tokens is None and words is None:
        raise FileNotFoundError(f"{d} holds neither tokens.txt nor words.txt")
    return tokens, words


def as_table(table, name: str) -> SymbolTable | None:
    """A SymbolTable, a path to one, a {id: symbol} dict or None."""
    if table is None or isinstance(table, SymbolTable):
        return table
    if isinstance(table, (str, os.PathLike)):
        return SymbolTable.from_file(table)
    if isinstance(table, dict):
        return SymbolTable(((s, i) for i, s in table.items()), name=name)
    raise TypeError(f"{name} must be a SymbolTable, a path to a '{name}.txt' or a dict, "
                    f"got {type(table).__name__}")


# ---------------------------------------------------------------------- the image section
def encode_section(tokens: SymbolTable | None, words: SymbolTable | None) -> np.ndarray:
    """Both tables as the bytes of an image's `symbols` section (u8)."""
    out = bytearray()
    for table in (tokens, words):
        if table is None:
            out += _COUNTS.pack(0, 0)
            continue
        ids = np.fromiter((i for i, _ in table.items()), "<i4", count=len(table))
        text = "\n".join(s for _, s in table.items()).encode("utf-8")
        out += _COUNTS.pack(len(table), len(text))
        out += ids.tobytes() + bytes(_align8(ids.nbytes) - ids.nbytes)
        out += text + bytes(_align8(len(text)) - len(text))
    return np.frombuffer(bytes(out), np.uint8)


def decode_section(buf, *, name: str = "graph") -> tuple[SymbolTable | None, SymbolTable | None]:
    """Parse a `symbols` section; raises CorruptGraphImage on anything malformed."""
    from .image import CorruptGraphImage

    data = memoryview(np.ascontiguousarray(buf, np.uint8)).cast("B")
    pos, tables = 0, []
    for kind in ("tokens", "words"):
        if pos + _COUNTS.size > len(data):
            raise CorruptGraphImage(f"{name}: the symbols section ends inside the {kind} table's header")
        count, nbytes = _COUNTS.unpack_from(data, pos)
        pos += _COUNTS.size
        if count == 0:
            if nbytes:
                raise CorruptGraphImage(f"{name}: an empty {kind} table with {nbytes} text bytes")
            tables.append(None)
            continue
        ids_end = pos + _align8(4 * count)
        text_end = ids_end + _align8(nbytes)
        if count > 2**31 or text_end > len(data):
            raise CorruptGraphImage(f"{name}: the {kind} table ({count} symbols, {nbytes} bytes) "
                                    "runs past the symbols section")
        ids = np.frombuffer(data[pos : pos + 4 * count], "<i4")
        if (ids < 0).any() or (np.diff(ids.astype(np.int64)) <= 0).any():
            raise CorruptGraphImage(f"{name}: the {kind} table's ids are not increasing ids >= 0")
        try:
            syms = bytes(data[ids_end : ids_end + nbytes]).decode("utf-8").split("\n")
        except UnicodeDecodeError:
            raise CorruptGraphImage(f"{name}: the {kind} table's text is not UTF-8") from None
        if len(syms) != count or any(not s or any(c.isspace() for c in s) for s in syms):
            raise CorruptGraphImage(f"{name}: the {kind} table's text does not hold {count} symbols")
        tables.append(SymbolTable(zip(syms, ids.tolist()), name=f"{name} ({kind} table)"))
        pos = text_end
    if pos != len(data):
        raise CorruptGraphImage(f"{name}: the symbols section has {len(data) - pos} bytes past its tables")
    return tables[0], tables[1]


def fit_problem(arrays, tokens: SymbolTable | None, words: SymbolTable | None) -> str | None:
    """Why the tables do not fit the graph, or None. The checks every image with tables
    must pass: every word id on an arc is in the word table, every token an arc reads is a
    real token of the token table, and the token table's width equals vocab_size."""
    if words is not None and arrays.aux_pool.size:
        used = np.unique(np.asarray(arrays.aux_pool))
        missing = used[~np.isin(used, words.ids)]
        if missing.size:
            return (f"word id {int(missing[0])} on the graph's arcs is not in the word table "
                    f"({len(words)} entries, ids up to {words.max_id}; {missing.size} word ids are missing): "
                    "the words.txt does not belong to this graph")
    if tokens is not None:
        il = np.asarray(arrays.ilabel)
        used = np.unique(il[il >= 0])
        width = tokens.num_tokens
        if used.size and int(used[-1]) >= width:
            t = int(used[-1])
            sym = tokens.get(t)
            what = f" ({sym!r}, a disambiguation symbol)" if sym and tokens.is_disambig(t) else ""
            return (f"an arc reads token {t}{what} but the token table has {width} tokens (0..{width - 1}); "
                    "the tokens.txt does not belong to this graph, or the graph's input labels are "
                    "shifted (for an OpenFst graph: check --token-offset; Kaldi/WeNet/sherpa TLGs use 1)")
        bad = [int(t) for t in used if t not in tokens or tokens.is_disambig(int(t))]
        if bad:
            return f"an arc reads token {bad[0]}, which the token table has no (real) symbol for"
        if arrays.vocab_size != width:
            return (f"the graph's vocab_size is {arrays.vocab_size} but the token table has {width} tokens: "
                    "they must be equal (export with --tokens and without --vocab-size, or fix --vocab-size)")
    return None


def export_problem(arrays, tokens: SymbolTable | None, words: SymbolTable | None) -> str | None:
    """Mistakes only an exporter can catch (heuristics, not image invariants): a token
    table given as the word table, and a CTC graph whose blank no arc reads."""
    if words is not None:
        zero = words.get(0)
        pieces = sum(s.startswith(SENTENCEPIECE_SPACE) for _, s in words.items())
        if zero in BLANK_SYMBOLS or pieces > len(words) // 2:
            why = f"its id 0 is {zero!r}" if zero in BLANK_SYMBOLS else "most symbols are word pieces (\u2581...)"
            return (f"{words.name} looks like a token table ({why}): --words wants words.txt, "
                    "whose id 0 is <eps>; pass the token table as --tokens")
    if tokens is not None and words is not None and tokens == words:
        return "the token table and the word table are the same table: pass tokens.txt as --tokens and words.txt as --words"
    if tokens is not None:
        il = np.asarray(arrays.ilabel)
        blank = tokens.get(0)
        if blank in BLANK_SYMBOLS and (il >= 0).any() and not (il == 0).any():
            return (f"no arc reads token 0 ({blank}, the CTC blank) although the token table names it: the "
                    "graph's input labels look shifted; for an OpenFst graph check --token-offset "
                    "(ilabel = token + offset; Kaldi/WeNet/sherpa TLGs use 1)")
    return None


def prepare_tables(tokens, words, *, token_offset: int | None = None):
    """Normalise user tables for export: paths/dicts to SymbolTables, and an OpenFst
    input-symbol table (`<eps> 0` first) shifted into log-prob columns."""
    tokens, words = as_table(tokens, "tokens"), as_table(words, "words")
    if tokens is not None and tokens.get(0) == "<eps>":
        if not token_offset:
            raise ValueError(f"{tokens.name} starts with '<eps> 0': that is an OpenFst input-symbol table "
                             "(ids = input labels) or a words.txt, not a token table whose ids are "
                             "log-prob columns (icefall's tokens.txt starts with '<blk> 0')")
        tokens = tokens.shifted(token_offset)
    return tokens, words


def symbol_tables(arrays, *, name: str = "graph") -> tuple[SymbolTable | None, SymbolTable | None]:
    """(tokens, words) of an image's arrays, decoded once and kept on the arrays object."""
    if arrays.symbols is None:
        return None, None
    cached = getattr(arrays, "_symbol_tables", None)
    if cached is None or cached[0] is not arrays.symbols:
        cached = (arrays.symbols, decode_section(arrays.symbols, name=name))
        arrays._symbol_tables = cached
    return cached[1]
