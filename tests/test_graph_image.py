"""The graph image: round trips, exporters, and refusal of malformed files."""

import struct
import zlib

import numpy as np
import pytest

from cuwfst import CorruptGraphImage, Graph
from cuwfst.graph.image import HEADER_BYTES, _HEADER
from helpers import load_cases, random_eps_graph

TEXT = """0 1 1 0 -0.5
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


def test_k2_text_and_round_trip(tmp_path):
    g = Graph.from_k2_text(TEXT)
    assert (g.num_states, g.num_arcs, g.vocab_size, g.num_final_arcs) == (4, 6, 3, 2)
    assert g.arc_words(2) == [5] and g.arc_words(4) == []  # final arcs' -1 olabel is dropped
    p = tmp_path / "g.img"
    size = g.save(p)
    assert p.stat().st_size == size
    _same(g, Graph.load(p))
    assert Graph.load(p).arrays.version == 1


def test_eps_round_trip(tmp_path):
    g = random_eps_graph(np.random.default_rng(0), 12, 4, 3, 0.8)
    assert g.has_epsilon
    g.save(tmp_path / "e.img")
    h = Graph.load(tmp_path / "e.img")
    _same(g, h)
    assert h.arrays.version == 2 and h.num_epsilon_arcs == g.num_epsilon_arcs > 0


def test_k2_text_epsilon_id():
    g = Graph.from_k2_text("0 1 0 3 -1\n0 1 2 0 -2\n1 2 -1 -1 0\n2\n", epsilon_id=0)
    assert g.has_epsilon and g.num_epsilon_arcs == 1 and g.arrays.ilabel[0] == -2


def test_goldens_keep_k2_arc_order():
    """Identity arc order: arc i of the image is line i of the k2 text."""
    for case in load_cases("k2_goldens.json.gz")[:20]:
        g = Graph.from_k2_text(case["graph"])
        lines = [ln.split() for ln in case["graph"].strip().splitlines()[:-1]]
        assert g.num_arcs == len(lines)
        assert np.array_equal(g.arrays.dest, [int(f[1]) for f in lines])
        il = [int(f[2]) for f in lines]
        assert np.array_equal(g.arrays.ilabel, il)


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


def _natural_order_text(g: Graph, rng, eps_label: int) -> tuple[str, list[int]]:
    """k2 text of `g` with each state's arcs in natural order (emitting, finals in the
    middle, then epsilon arcs labelled `eps_label`), each class keeping its own order.
    Returns the text and, per text line, the image arc it came from."""
    a = g.arrays
    lines, image_of_line = [], []
    for s in range(a.num_states):
        arcs = list(range(a.row_splits[s], a.row_splits[s + 1]))
        emit = [x for x in arcs if a.ilabel[x] >= 0]
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
    ones, finals in the middle) loads, and decodes exactly like the same graph in layout
    order, with arc ids that are the text's line numbers."""
    from cuwfst import Decoder, DecoderOptions
    from helpers import random_eps_graph, random_log_probs
    rng = np.random.default_rng(500 + seed)
    V = 5
    base = random_eps_graph(rng, int(rng.integers(3, 30)), V, 3, 0.7)
    text, image_of_line = _natural_order_text(base, rng, eps_label=V)
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
    assert g.reordered and g.arrays.arc_id.tolist() == [0, 2, 1, 3]
    p = tmp_path / "r.img"
    g.save(p)
    d = bytearray(p.read_bytes())
    off = _section_offsets(d)["arc_id"][0]
    d[off : off + 4] = struct.pack("<i", 2)  # arc ids [2, 2, 1, 3]: not a permutation
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
    """An HLG.pt is a dict from Fsa.as_dict(): arcs [A, 4] int32 with float scores as bits."""
    src_g = Graph.from_k2_text(TEXT)
    a = src_g.arrays
    src = np.repeat(np.arange(a.num_states), np.diff(a.row_splits))
    arcs = np.stack([src, a.dest, a.ilabel, a.weight.view(np.int32)], 1).astype(np.int32)
    aux = np.array([0, 0, 5, 6, -1, -1], np.int32)
    g = Graph.from_k2({"arcs": arcs, "aux_labels": aux})
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
@pytest.fixture
def image_bytes(tmp_path):
    g = random_eps_graph(np.random.default_rng(3), 10, 4, 3, 0.7)
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
    ("magic", b"WFSTIMG9", "magic"), ("version", 3, "version"), ("flags", 64, "flag"),
    ("start", 10**5, "start state"), ("vocab", 70000, "vocab_size"), ("n", -5, "num_states"),
    ("a", 10**9, "payload bytes"), ("version", 1, "version-1"),
])
def test_bad_header_fields(tmp_path, image_bytes, field, value, msg):
    d = _rehead(bytearray(image_bytes), **{field: value})
    with pytest.raises(CorruptGraphImage, match=f"^corrupt graph image:.*{msg}"):
        _load(tmp_path, d)


def test_unchecked_load_still_validates_indices(tmp_path, image_bytes):
    d = bytearray(image_bytes)
    off = _section_offsets(d)["arc_dest_ilabel"][0]
    d[off : off + 4] = struct.pack("<i", 12345)
    with pytest.raises(CorruptGraphImage, match="destination"):
        _load(tmp_path, d, verify=False)
