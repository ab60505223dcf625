"""The graph image: round trips, exporters, and refusal of malformed files."""

import os
import struct
import zlib

import numpy as np
import pytest

from cuwfst import CorruptGraphImage, Graph
from cuwfst.graph.image import HEADER_BYTES, _HEADER
from helpers import assert_image_layout, in_layout, load_cases, random_eps_graph

_TINY = os.path.join(os.path.dirname(__file__), "..", "cuwfst", "data", "tiny")

# already in the image layout (label-0 arcs first, then the others by weight, best first;
# finals last), so that the image keeps the text's arc order: no arc_id section, version 1
TEXT = """0 0 0 0 -0.1
0 1 1 0 -0.5
1 2 0 6 -0.2
1 1 2 5 -1.0
1 3 -1 -1 0.0
2 3 -1 -1 -0.3
3
"""
# the same arcs with each state's emitting arcs in another order: the loader sorts them
# (TEXT's image, arc_id = [1, 0, 3, 2, 4, 5])
TEXT_UNSORTED = """0 1 1 0 -0.5
0 0 0 0 -0.1
1 1 2 5 -1.0
1 2 0 6 -0.2
1 3 -1 -1 0.0
2 3 -1 -1 -0.3
3
"""


def _same(a, b):
    x, y = a.arrays, b.arrays
    assert (x.num_states, x.num_arcs, x.vocab_size, x.start_state, x.finals_at_end) == \
           (y.num_states, y.num_arcs, y.vocab_size, y.start_state, y.finals_at_end)
    for k in ("row_splits", "final_count", "dest", "ilabel", "weight", "aux_row_splits", "aux_pool"):
        assert np.array_equal(getattr(x, k), getattr(y, k)), k
    assert (x.eps_count is None) == (y.eps_count is None)
    assert (x.arc_id is None) == (y.arc_id is None)
    assert x.arc_id is None or np.array_equal(x.arc_id, y.arc_id)


def test_k2_text_and_round_trip(tmp_path):
    g = Graph.from_k2_text(TEXT)
    assert (g.num_states, g.num_arcs, g.vocab_size, g.num_final_arcs) == (4, 6, 3, 2)
    assert g.arc_words(3) == [5] and g.arc_words(4) == []  # final arcs' -1 olabel is dropped
    assert not g.reordered
    p = tmp_path / "g.img"
    size = g.save(p)
    assert p.stat().st_size == size
    _same(g, Graph.load(p))
    assert Graph.load(p).arrays.version == 1
    # out of layout: the same image arrays, plus the source ids (version 3), kept by a round trip
    u = Graph.from_k2_text(TEXT_UNSORTED)
    assert u.reordered and u.arrays.arc_id.tolist() == [1, 0, 3, 2, 4, 5]
    for k in ("row_splits", "final_count", "dest", "ilabel", "weight", "aux_row_splits", "aux_pool"):
        assert np.array_equal(getattr(u.arrays, k), getattr(g.arrays, k)), k
    assert u.arc_words(2) == [5] and u.arc_words(3) == [6]  # source ids: TEXT_UNSORTED's lines
    u.save(p)
    _same(u, Graph.load(p))
    assert Graph.load(p).arrays.version == 3


def test_eps_round_trip(tmp_path):
    r = random_eps_graph(np.random.default_rng(0), 12, 4, 3, 0.8)
    for g, version in ((in_layout(r), 2), (r, 3)):  # no reorder: version 2; reordered: 3
        assert g.has_epsilon and g.reordered == (version == 3)
        g.save(tmp_path / "e.img")
        h = Graph.load(tmp_path / "e.img")
        _same(g, h)
        assert h.arrays.version == version and h.num_epsilon_arcs == g.num_epsilon_arcs > 0


def test_k2_text_epsilon_id():
    g = Graph.from_k2_text("0 1 0 3 -1\n0 1 2 0 -2\n1 2 -1 -1 0\n2\n", epsilon_id=0)
    assert g.has_epsilon and g.num_epsilon_arcs == 1 and g.arrays.ilabel[0] == -2


def test_goldens_keep_k2_arc_ids():
    """Source arc i is line i of the k2 text (through arc_id where the image sorted the
    arcs), and the image is in the layout."""
    for case in load_cases("k2_goldens.json.gz")[:20]:
        g = Graph.from_k2_text(case["graph"])
        lines = [ln.split() for ln in case["graph"].strip().splitlines()[:-1]]
        assert g.num_arcs == len(lines)
        img = g.image_arc_ids(np.arange(g.num_arcs))
        assert np.array_equal(np.sort(img), np.arange(g.num_arcs))
        src = np.repeat(np.arange(g.num_states), np.diff(g.arrays.row_splits))
        assert np.array_equal(src[img], [int(f[0]) for f in lines])
        assert np.array_equal(g.arrays.dest[img], [int(f[1]) for f in lines])
        assert np.array_equal(g.arrays.ilabel[img], [int(f[2]) for f in lines])
        assert np.array_equal(g.arrays.weight[img], np.array([float(f[4]) for f in lines], np.float32))
        assert_image_layout(g)


def test_final_arcs_in_the_middle_are_reordered_keeping_k2_arc_ids(tmp_path):
    text = "0 2 -1 -1 -0.5\n0 1 1 4 -0.25\n0 2 -1 -1 -2\n1 2 -1 -1 0\n2\n"
    g = Graph.from_k2_text(text)
    assert g.reordered and g.arrays.version == 3
    # the image groups state 0's arcs as [emitting][finals]; ids map back to text lines
    assert g.arrays.ilabel.tolist() == [1, -1, -1, -1]
    assert g.arrays.arc_id.tolist() == [1, 0, 2, 3]
    assert g.arc_words(1) == [4] and g.arc_words(0) == []
    assert g.image_arc_ids([1, 0, 2]).tolist() == [0, 1, 2]
    h = Graph.load(tmp_path / "r.img") if g.save(tmp_path / "r.img") else None
    assert h.reordered and np.array_equal(h.arrays.arc_id, g.arrays.arc_id)
    # the best path of one frame: line 1 (token 1) then line 3 (state 1's final arc)
    from cuwfst import Decoder
    lp = np.log(np.array([[0.25, 0.75]], np.float32))
    hyp = Decoder(g).decode(lp)[0]
    assert hyp.arcs == [1, 3] and hyp.words == [4]
    assert hyp.score == np.float32(np.float32(-0.25) + lp[0, 1]) + np.float32(0.0)


def _natural_order_text(g: Graph, rng, eps_label: int, shuffle) -> tuple[str, list[int]]:
    """k2 text of `g` with each state's arcs in natural order (emitting, finals in the
    middle, then epsilon arcs labelled `eps_label`), the emitting arcs shuffled except that
    label-0 arcs keep their order among themselves (the layout cannot tell them apart),
    finals and epsilon arcs each keeping their own order. `shuffle` (a generator of its
    own) shuffles, `rng` cuts.
    Returns the text and, per text line, the image arc it came from."""
    a = g.arrays
    lines, image_of_line = [], []
    for s in range(a.num_states):
        arcs = list(range(a.row_splits[s], a.row_splits[s + 1]))
        emit = [x for x in arcs if a.ilabel[x] >= 0]
        emit = [emit[i] for i in shuffle.permutation(len(emit))]
        blanks = iter(sorted(x for x in emit if a.ilabel[x] == 0))
        emit = [next(blanks) if a.ilabel[x] == 0 else x for x in emit]
        fin = [x for x in arcs if a.ilabel[x] == -1]
        eps = [x for x in arcs if a.ilabel[x] == -2]
        cut = int(rng.integers(0, len(emit) + 1))
        for x in emit[:cut] + fin + emit[cut:] + eps:
            il = int(a.ilabel[x])
            words = a.aux_pool[a.aux_row_splits[x]:a.aux_row_splits[x + 1]].tolist()
            olabel = words[0] if words else (-1 if il == -1 else 0)
            lines.append(f"{s} {int(a.dest[x])} {eps_label if il == -2 else il} {olabel} {float(a.weight[x])!r}")
            image_of_line.append(x)
    lines.append(str(a.num_states - 1))
    return "\n".join(lines) + "\n", image_of_line


@pytest.mark.parametrize("seed", range(30))
def test_natural_order_epsilon_graphs_decode_like_sorted_ones(seed):
    """Every random epsilon graph written in natural order (epsilon arcs after emitting
    ones, finals in the middle, emitting arcs shuffled) loads into the same image, and
    decodes exactly like the same graph in layout order, with arc ids that are the text's
    line numbers."""
    from cuwfst import Decoder, DecoderOptions
    from helpers import random_eps_graph, random_log_probs
    rng = np.random.default_rng(500 + seed)
    V = 5
    base = in_layout(random_eps_graph(rng, int(rng.integers(3, 30)), V, 3, 0.7))  # image ids = source ids
    text, image_of_line = _natural_order_text(base, rng, eps_label=V,
                                              shuffle=np.random.default_rng(900 + seed))
    g = Graph.from_k2_text(text, epsilon_id=V, vocab_size=V)
    # the same image as the base graph (one word per arc at most in both), other arc ids
    for k in ("row_splits", "final_count", "dest", "ilabel", "weight"):
        assert np.array_equal(getattr(g.arrays, k), getattr(base.arrays, k)), k
    assert [image_of_line[i] for i in g.source_arc_ids(np.arange(g.num_arcs))] == list(range(g.num_arcs))
    lp = random_log_probs(rng, 3, 12, V, peaky=True)
    lens = np.array([12, 5, 0], np.int32)
    opts = DecoderOptions(search_beam=12.0, max_active_states=40, min_active_states=2)
    for hb, hg in zip(Decoder(base, opts).decode(lp, lens), Decoder(g, opts).decode(lp, lens)):
        assert np.float32(hb.score) == np.float32(hg.score)
        assert [image_of_line[i] for i in hg.arcs] == hb.arcs
        assert hg.words == hb.words


def test_reordered_image_with_bad_arc_ids_is_refused(tmp_path):
    g = Graph.from_k2_text("0 1 1 4 -0.25\n0 2 -1 -1 -0.5\n0 1 2 0 0\n1 2 -1 -1 0\n2\n")
    # emitting arcs best first (line 2 before line 0), the final arc of the middle last
    assert g.reordered and g.arrays.arc_id.tolist() == [2, 0, 1, 3]
    p = tmp_path / "r.img"
    g.save(p)
    d = bytearray(p.read_bytes())
    off = _section_offsets(d)["arc_id"][0]
    d[off : off + 4] = struct.pack("<i", 0)  # arc ids [0, 0, 1, 3]: not a permutation
    _recrc(d)
    with pytest.raises(CorruptGraphImage, match="permutation"):
        _load(tmp_path, d)


def test_from_k2_dict_with_finals_in_the_middle():
    arcs = np.array([[0, 2, -1, 0], [0, 1, 1, 0], [0, 2, -1, 0], [1, 2, -1, 0]], np.int32)
    arcs[:, 3] = np.array([-0.5, -0.25, -2.0, 0.0], np.float32).view(np.int32)
    g = Graph.from_k2({"arcs": arcs, "aux_labels": np.array([-1, 9, -1, -1], np.int32)})
    assert g.reordered and g.arc_words(1) == [9]
    assert g.source_arc_ids(np.arange(4)).tolist() == [1, 0, 2, 3]


def test_from_k2_dict():
    """An HLG.pt is a dict from Fsa.as_dict(): arcs [A, 4] int32 with float scores as bits.
    The arcs in the text's order: the same graph as the text, arc ids included (TEXT is in
    the layout, TEXT_UNSORTED is reordered)."""
    for text in (TEXT, TEXT_UNSORTED):
        src_g = Graph.from_k2_text(text)
        f = [ln.split() for ln in text.strip().splitlines()[:-1]]
        w = np.array([float(x[4]) for x in f], np.float32)
        arcs = np.array([[int(x[0]), int(x[1]), int(x[2]), 0] for x in f], np.int32)
        arcs[:, 3] = w.view(np.int32)
        aux = np.array([int(x[3]) for x in f], np.int32)
        g = Graph.from_k2({"arcs": arcs, "aux_labels": aux})
        assert g.reordered == (text is TEXT_UNSORTED)
        _same(g, src_g)


def test_from_openfst(tmp_path):
    kaldifst = pytest.importorskip("kaldifst")
    fst = kaldifst.StdVectorFst()
    for _ in range(3):
        fst.add_state()
    fst.start = 0
    fst.add_arc(0, kaldifst.StdArc(0, 0, 0.5, 1))     # epsilon
    fst.add_arc(0, kaldifst.StdArc(2, 7, 1.0, 0))     # token 1, word 7
    fst.add_arc(1, kaldifst.StdArc(1, 0, 0.25, 2))    # token 0 (blank)
    fst.set_final(2, kaldifst.TropicalWeight(0.75))
    fst.set_final(0, kaldifst.TropicalWeight(2.0))
    path = tmp_path / "t.fst"
    fst.write(str(path))
    for g in (Graph.from_openfst(str(path)), Graph.from_openfst(fst)):
        a = g.arrays
        assert g.num_states == 4 and g.num_arcs == 5 and g.has_epsilon
        assert a.ilabel.tolist() == [-2, 1, -1, 0, -1]
        assert a.weight.tolist() == [-0.5, -1.0, -2.0, -0.25, -0.75]
        assert a.dest.tolist() == [1, 0, 3, 2, 3]
        assert g.arc_words(1) == [7]


# ---------------------------------------------------------------- malformed images
@pytest.fixture(params=["in_layout", "reordered"])
def image_bytes(tmp_path, request):
    """An epsilon graph's image: version 2 (in layout) or version 3 (with arc_id)."""
    g = random_eps_graph(np.random.default_rng(3), 10, 4, 3, 0.7)
    g = in_layout(g) if request.param == "in_layout" else g
    assert g.arrays.version == (2 if request.param == "in_layout" else 3)
    p = tmp_path / "g.img"
    g.save(p)
    return bytearray(p.read_bytes())


def _load(tmp_path, data, verify=True):
    p = tmp_path / "bad.img"
    p.write_bytes(bytes(data))
    return Graph.load(p, verify_checksum=verify)


def _rehead(data, **changes):
    fields = list(_HEADER.unpack(bytes(data[: _HEADER.size])))
    names = ["magic", "version", "flags", "n", "a", "vocab", "start", "p", "eps", "payload", "pcrc", "hcrc"]
    for k, v in changes.items():
        fields[names.index(k)] = v
    fields[-1] = 0
    data[: _HEADER.size] = _HEADER.pack(*fields)
    fields[-1] = zlib.crc32(bytes(data[:HEADER_BYTES]))
    data[: _HEADER.size] = _HEADER.pack(*fields)
    return data


def _recrc(data):
    return _rehead(data, pcrc=zlib.crc32(bytes(data[HEADER_BYTES:])))


@pytest.mark.parametrize("cut", [0, 10, 255, 256, 300, -4, -1])
def test_truncated(tmp_path, image_bytes, cut):
    with pytest.raises(CorruptGraphImage, match="^corrupt graph image:"):
        _load(tmp_path, image_bytes[:cut])


def test_flipped_bytes_everywhere(tmp_path, image_bytes):
    rng = np.random.default_rng(0)
    for pos in list(range(0, HEADER_BYTES, 3)) + list(rng.integers(HEADER_BYTES, len(image_bytes), 60)):
        d = bytearray(image_bytes)
        d[pos] ^= 1 << int(rng.integers(0, 8))
        with pytest.raises(CorruptGraphImage, match="^corrupt graph image:"):
            _load(tmp_path, d)


def _section_offsets(data):
    from cuwfst.graph.image import _payload_layout
    f = _HEADER.unpack(bytes(data[: _HEADER.size]))
    offs, _ = _payload_layout(f[3], f[4], f[7], bool(f[2] & 2), bool(f[2] & 8))
    return offs


@pytest.mark.parametrize("what,value,msg", [
    ("dest", 10**6, "destination"), ("dest", -1, "destination"),
    ("ilabel", 4, "ilabel"), ("ilabel", -7, "ilabel"),
    ("row_splits", 10**6, "row_splits"), ("final_count", 99, "final_count"),
    ("eps_count", 99, "eps_count"), ("aux_pool", 0, "word id"), ("weight", np.nan, "weight"),
])
def test_out_of_range_fields_with_valid_checksums(tmp_path, image_bytes, what, value, msg):
    """Fields rewritten with a recomputed checksum: the validator itself must catch them."""
    d = bytearray(image_bytes)
    offs = _section_offsets(d)
    if what in ("dest", "ilabel"):
        off = offs["arc_dest_ilabel"][0] + (0 if what == "dest" else 4) + 8 * 3
        d[off : off + 4] = struct.pack("<i", value)
    elif what == "weight":
        off = offs["arc_weight"][0]
        d[off : off + 4] = struct.pack("<f", value)
    elif what == "aux_pool":
        if offs["aux_pool"][1] == 0:
            pytest.skip("no words")
        off = offs["aux_pool"][0]
        d[off : off + 4] = struct.pack("<i", value)
    else:
        off = offs[what][0] + 4 * 2
        d[off : off + 4] = struct.pack("<i", value)
    _recrc(d)
    with pytest.raises(CorruptGraphImage, match=f"^corrupt graph image:.*{msg}"):
        _load(tmp_path, d)


@pytest.mark.parametrize("field,value,msg", [
    ("magic", b"WFSTIMG9", "magic"), ("version", "other", "version"), ("flags", 64, "flag"),
    ("start", 10**5, "start state"), ("vocab", 70000, "vocab_size"), ("n", -5, "num_states"),
    ("a", 10**9, "payload bytes"), ("version", 1, "version-1"),
])
def test_bad_header_fields(tmp_path, image_bytes, field, value, msg):
    if value == "other":  # the other of versions 2 and 3: it disagrees with the arc-ids flag
        value = 5 - _HEADER.unpack(bytes(image_bytes[: _HEADER.size]))[1]
    d = _rehead(bytearray(image_bytes), **{field: value})
    with pytest.raises(CorruptGraphImage, match=f"^corrupt graph image:.*{msg}"):
        _load(tmp_path, d)


def test_unchecked_load_still_validates_indices(tmp_path, image_bytes):
    d = bytearray(image_bytes)
    off = _section_offsets(d)["arc_dest_ilabel"][0]
    d[off : off + 4] = struct.pack("<i", 12345)
    with pytest.raises(CorruptGraphImage, match="destination"):
        _load(tmp_path, d, verify=False)


def _corrupted(rng, arrays):
    """A copy of `arrays` with one random field broken in one random place (or none: kind 0)."""
    import copy

    g = copy.copy(arrays)
    for f in ("row_splits", "final_count", "dest", "ilabel", "weight", "aux_row_splits", "aux_pool", "eps_count",
              "arc_id"):
        if getattr(g, f) is not None:
            setattr(g, f, np.array(getattr(g, f), copy=True))
    n, a = g.num_states, g.num_arcs
    kind = int(rng.integers(0, 11))
    if kind == 1 and a:
        g.ilabel[rng.integers(a)] = rng.choice([-1, -2, -7, g.vocab_size, 0, g.vocab_size - 1])
    elif kind == 2 and a:
        g.dest[rng.integers(a)] = rng.choice([-1, n, n - 1, 0, int(rng.integers(n))])
    elif kind == 3:
        s = int(rng.integers(n))
        g.final_count[s] = g.final_count[s] + rng.choice([-1, 1, 2])
    elif kind == 4 and g.eps_count is not None:
        s = int(rng.integers(n))
        g.eps_count[s] = g.eps_count[s] + rng.choice([-1, 1, 2])
    elif kind == 5:
        s = int(rng.integers(1, n))
        g.row_splits[s] = g.row_splits[s] + rng.choice([-2, -1, 1, 2])
    elif kind == 6 and a:
        i = int(rng.integers(1, a + 1))
        g.aux_row_splits[i] = g.aux_row_splits[i] + rng.choice([-1, 1])
    elif kind == 7 and g.arc_id is not None and a > 1:
        i, j = rng.choice(a, 2, replace=False)
        g.arc_id[i] = g.arc_id[j] if rng.random() < 0.5 else rng.choice([-1, a])
    elif kind == 8 and a:
        g.weight[rng.integers(a)] = rng.choice([np.nan, np.inf, -np.inf, 1.5])
    elif kind == 9 and len(g.aux_pool):
        g.aux_pool[rng.integers(len(g.aux_pool))] = rng.choice([0, -3, 7])
    elif kind == 10:
        g.finals_at_end = not g.finals_at_end
    return g


@pytest.mark.parametrize("seed", range(4))
def test_validate_agrees_with_its_plain_form(seed):
    """validate (which marks each state's final and epsilon ranges in one byte an arc) against
    its plain form (tests/image_validate_reference.py: int64 copies of every per-arc quantity)
    on random graphs with and without epsilon arcs and arc ids, each broken in one random field
    and place: the same outcome every time, the same message when it raises."""
    from cuwfst.graph.image import CorruptGraphImage, validate
    from helpers import random_ctc_graph
    from image_validate_reference import ref_validate

    rng = np.random.default_rng(100 + seed)
    graphs = [random_ctc_graph(rng, 40, 8, 3, 0.3), random_eps_graph(rng, 30, 6, 3, 0.3),
              Graph.load(os.path.join(_TINY, "HLG.img")), Graph.load(os.path.join(_TINY, "TLG.img"))]
    assert any(g.arrays.arc_id is not None for g in graphs) and any(g.arrays.eps_count is not None for g in graphs)
    raised = 0
    for graph in graphs:
        for _ in range(150):
            g = _corrupted(rng, graph.arrays)
            outcome = []
            for check in (validate, ref_validate):
                try:
                    check(g)
                    outcome.append(None)
                except CorruptGraphImage as e:
                    outcome.append(str(e))
            assert outcome[0] == outcome[1], outcome
            raised += outcome[0] is not None
    assert raised > 200  # most corruptions are caught (some, like a weight of 1.5, are legal)
