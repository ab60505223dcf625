"""Symbol tables in the graph image: round trip, checksum, validation, fit checks at export,
and graph sources opened, exported and cached."""

import os
import struct
import zlib

import numpy as np
import pytest

from conftest_data import TINY
from cuwfst import CorruptGraphImage, Decoder, Graph
from cuwfst.graph import SymbolTable, WrongFileType
from cuwfst.graph.image import _HEADER, FLAG_SYMBOLS, HEADER_BYTES, _payload_layout, validate


@pytest.fixture(scope="module")
def tables():
    return SymbolTable.from_file(TINY / "tokens.txt"), SymbolTable.from_file(TINY / "words.txt")


@pytest.fixture(scope="module")
def hlg(tables):
    return Graph.load(TINY / "HLG.img").with_symbols(*tables)


def test_symbol_table_file_format(tmp_path):
    p = tmp_path / "w.txt"
    p.write_text("<eps> 0\nhello 1\n\nw\u00f6rld 3\n")
    t = SymbolTable.from_file(p)
    assert len(t) == 3 and t[3] == "w\u00f6rld" and t.id_of("hello") == 1 and 2 not in t and t.max_id == 3
    for text, msg in (("a 1\nb 1\n", "twice"), ("a 1\na 2\n", "twice"), ("a b c\n", "symbol id"),
                      ("a x\n", "symbol id"), ("", "empty")):
        p.write_text(text)
        with pytest.raises(ValueError, match=msg):
            SymbolTable.from_file(p)
    with pytest.raises(KeyError, match="id 7 is not in"):
        t[7]


def test_token_width_excludes_disambiguation_symbols(tables):
    tokens, _ = tables
    assert len(tokens) == 503 and tokens.num_tokens == 501 and tokens.is_disambig(501)


def test_round_trip_and_results_carry_words(tmp_path, hlg, tables):
    hlg.save(tmp_path / "g.img")
    g = Graph.load(tmp_path / "g.img")
    # a flag, not a new version: the header's version is the one of the same image without
    # tables (3: the tiny HLG's emitting arcs are sorted, so it carries arc_id)
    plain = Graph.load(TINY / "HLG.img")
    assert not plain.arrays.flags & FLAG_SYMBOLS and plain.arrays.version == 3
    version = _HEADER.unpack((tmp_path / "g.img").read_bytes()[: _HEADER.size])[1]
    assert g.arrays.flags & FLAG_SYMBOLS and g.arrays.version == version == plain.arrays.version
    assert g.arrays.flags & ~FLAG_SYMBOLS == plain.arrays.flags
    assert g.tokens == tables[0] and g.words == tables[1]
    lp = np.load(TINY.parent / "demo" / "tiny_utts.npz")["log_probs_fp16"][:2]
    h = Decoder(g).decode(lp)[0]
    assert h.word_symbols == [tables[1][w] for w in h.words] and h.text == " ".join(h.word_symbols)
    assert Decoder(Graph.load(TINY / "HLG.img")).decode(lp)[0].text is None  # an old image: no table


def test_old_images_still_load():
    for name in ("HLG.img", "TLG.img"):
        g = Graph.load(TINY / name)
        assert g.tokens is None and g.words is None and not g.arrays.flags & FLAG_SYMBOLS


def _symbol_section(data: bytes):
    f = _HEADER.unpack(data[: _HEADER.size])
    (sym_bytes,) = struct.unpack_from("<q", data, _HEADER.size)
    offs, _ = _payload_layout(f[3], f[4], f[7], bool(f[2] & 2), bool(f[2] & 8), sym_bytes)
    return offs["symbols"]


def test_checksum_covers_the_tables(tmp_path, hlg):
    hlg.save(tmp_path / "g.img")
    data = bytearray((tmp_path / "g.img").read_bytes())
    off, count, _ = _symbol_section(bytes(data))
    for pos in (off, off + count // 2, off + count - 9):
        d = bytearray(data)
        d[pos] ^= 0x20
        (tmp_path / "bad.img").write_bytes(bytes(d))
        with pytest.raises(CorruptGraphImage, match="checksum"):
            Graph.load(tmp_path / "bad.img")


def _rewrite(data: bytearray, *, flags=None, sym_bytes=None) -> bytearray:
    fields = list(_HEADER.unpack(bytes(data[: _HEADER.size])))
    if flags is not None:
        fields[2] = flags
    if sym_bytes is not None:
        struct.pack_into("<q", data, _HEADER.size, sym_bytes)
    fields[-1] = 0
    data[: _HEADER.size] = _HEADER.pack(*fields)
    fields[-1] = zlib.crc32(bytes(data[:HEADER_BYTES]))
    data[: _HEADER.size] = _HEADER.pack(*fields)
    return data


def test_flag_and_size_must_agree(tmp_path, hlg):
    hlg.save(tmp_path / "g.img")
    data = bytearray((tmp_path / "g.img").read_bytes())
    flags = _HEADER.unpack(bytes(data[: _HEADER.size]))[2]
    for d in (_rewrite(bytearray(data), flags=flags & ~FLAG_SYMBOLS), _rewrite(bytearray(data), sym_bytes=0)):
        (tmp_path / "bad.img").write_bytes(bytes(d))
        with pytest.raises(CorruptGraphImage, match="symbols"):
            Graph.load(tmp_path / "bad.img")


def test_validator_checks_the_fit(hlg, tables):
    """Tables that do not fit the graph are refused at load, even with valid checksums."""
    import dataclasses
    from cuwfst.graph.symbols import encode_section
    tokens, words = tables
    short_words = SymbolTable([(s, i) for i, s in words.items() if i < 100])
    for tok, wd, msg in ((tokens, short_words, "not in the word table"),
                         (SymbolTable([(s, i) for i, s in tokens.items() if i < 300]), words, "token table has")):
        bad = dataclasses.replace(hlg.arrays, symbols=encode_section(tok, wd))
        with pytest.raises(CorruptGraphImage, match=msg):
            validate(bad)
    garbage = dataclasses.replace(hlg.arrays, symbols=np.frombuffer(b"\x05" + bytes(23), np.uint8))
    with pytest.raises(CorruptGraphImage, match="symbols section|tokens table"):
        validate(garbage)


def test_export_fit_errors(tables, tmp_path):
    tokens, words = tables
    g = Graph.load(TINY / "HLG.img")
    with pytest.raises(ValueError, match="looks like a token table"):
        g.with_symbols(words=TINY / "tokens.txt")
    with pytest.raises(ValueError, match="OpenFst input-symbol table"):
        g.with_symbols(tokens=TINY / "words.txt")
    narrow = SymbolTable([(s, i) for i, s in tokens.items() if i < 499])  # covers every token used
    with pytest.raises(ValueError, match="vocab_size is 501 but the token table has 499"):
        g.with_symbols(tokens=narrow, resize_vocab=False)
    with pytest.raises(ValueError, match="token table has 300 tokens"):
        g.with_symbols(tokens=SymbolTable([(s, i) for i, s in tokens.items() if i < 300]))
    # an OpenFst input-symbol table (<eps> 0, <blk> 1, ...) is shifted into columns
    kaldi_style = SymbolTable([("<eps>", 0)] + [(s, i + 1) for i, s in tokens.items()])
    f = Graph.from_openfst(TINY / "HLG.fst").with_symbols(kaldi_style, words, token_offset=1)
    assert f.tokens == tokens and f.vocab_size == 501


def test_reexported_tlg_gets_the_models_width():
    """Issue 12: re-exporting TLG.fst gave vocab 498 (its largest token + 1) where the model has 501."""
    bare = Graph.from_openfst(TINY / "TLG.fst")
    assert bare.vocab_size == 498
    assert bare.with_symbols(TINY / "tokens.txt", TINY / "words.txt").vocab_size == 501


def test_open_graph_exports_once_and_caches(tmp_path, monkeypatch):
    import shutil
    for name in ("HLG.fst", "tokens.txt", "words.txt"):
        shutil.copy(TINY / name, tmp_path / name)
    msgs = []
    g = Graph.open(tmp_path / "HLG.fst", log=msgs.append)
    assert g.words is not None and g.vocab_size == 501 and "exported" in msgs[-1]
    cached = [p for p in os.listdir(tmp_path) if p.endswith(".img")]
    assert len(cached) == 1
    Graph.open(tmp_path / "HLG.fst", log=msgs.append)
    assert msgs[-1].startswith("using")
    os.utime(tmp_path / "HLG.fst", ns=(1, 1))  # a changed source exports again
    Graph.open(tmp_path / "HLG.fst", log=msgs.append)
    assert "exported" in msgs[-1]
    Graph.open(tmp_path / "HLG.fst", token_offset=1, lang_dir=False, log=msgs.append)  # other options: other key
    assert "exported" in msgs[-1]
    # a read-only source directory: the image goes to the cache dir
    monkeypatch.setenv("CUWFST_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "access", lambda p, mode: False)
    Graph.open(tmp_path / "HLG.fst", log=msgs.append)
    assert str(tmp_path / "cache" / "graphs") in msgs[-1]


def test_decoder_takes_a_source_graph(tmp_path):
    import shutil
    for name in ("TLG.fst", "tokens.txt", "words.txt"):
        shutil.copy(TINY / name, tmp_path / name)
    lp = np.load(TINY.parent / "demo" / "tiny_utts.npz")["log_probs_fp16"][:1, :120]
    h = Decoder(str(tmp_path / "TLG.fst")).decode(lp)[0]
    assert h.text is not None and h.word_symbols


def test_wrong_kinds_are_named(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros(3))
    for path, msg in ((TINY / "HLG.fst", "OpenFst graph"), (TINY / "words.txt", "symbol table"),
                      (tmp_path / "x.npy", ".npy array"), (TINY / "lm.arpa.gz", "gzip")):
        with pytest.raises(WrongFileType, match=msg):
            Graph.load(path)
        with pytest.raises(ValueError):
            Graph.open(path) if path.suffix != ".fst" else (_ for _ in ()).throw(ValueError())
