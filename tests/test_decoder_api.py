"""The Python API: options as k2 checks them, bad tensors refused, batching, snapshots."""

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from helpers import case_inputs, load_cases


@pytest.fixture(scope="module")
def case():
    return load_cases("k2_goldens.json.gz")[5]


@pytest.fixture(scope="module")
def dec(case):
    graph, lp, lens, opts = case_inputs(case)
    return Decoder(graph, opts)


@pytest.mark.parametrize("kw,msg", [
    (dict(max_active_states=30, min_active_states=30), "greater than min_active_states"),
    (dict(search_beam=0.0), "search_beam"), (dict(output_beam=-1.0), "output_beam"),
    (dict(search_beam=float("nan")), "search_beam"), (dict(min_active_states=-1), "min_active_states"),
    (dict(max_active_states=2.5), "max_active_states"), (dict(allow_partial=1), "allow_partial"),
    (dict(eps_iterations=-1), "eps_iterations"),
])
def test_options_checked(kw, msg):
    with pytest.raises(ValueError, match=msg):
        DecoderOptions(**kw)


def test_bad_tensors(dec, case):
    V = dec.graph.vocab_size
    lp = np.zeros((2, 5, V), np.float32) - 1
    with pytest.raises(TypeError, match="float32"):
        dec.decode(lp.astype(np.int32))
    with pytest.raises(ValueError, match=r"\[B, T, V\]"):
        dec.decode(lp[0, 0])
    with pytest.raises(ValueError, match=r"\[B, T, V\]"):
        dec.decode(lp[None])
    with pytest.raises(ValueError, match="vocab_size"):
        dec.decode(lp[:, :, : V - 1])
    with pytest.raises(ValueError, match="outside"):
        dec.decode(lp, [5, 6])
    with pytest.raises(ValueError, match="outside"):
        dec.decode(lp, [-1, 2])
    with pytest.raises(ValueError, match="one entry per batch row"):
        dec.decode(lp, [1, 2, 3])
    with pytest.raises(TypeError, match="integers"):
        dec.decode(lp, np.array([1.5, 2.0]))
    bad = lp.copy()
    bad[1, 3, 0] = np.nan
    with pytest.raises(ValueError, match=r"log_probs\[1, 3, 0\] is nan"):
        dec.decode(bad)
    dec.decode(bad, [5, 3])  # NaN past a row's length is padding: ignored
    bad[1, 3, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        dec.decode(bad)
    with pytest.raises(TypeError, match="numpy array"):
        dec.decode([[0.0] * V])


def test_torch_cpu_and_fp16(dec, case):
    torch = pytest.importorskip("torch")
    _, lp, lens, _ = case_inputs(case)
    a = dec.decode(lp, lens)
    b = dec.decode(torch.from_numpy(lp), torch.from_numpy(lens))
    assert [h.words for h in a] == [h.words for h in b] and [h.score for h in a] == [h.score for h in b]


def test_fp16_is_widened_exactly(dec, case):
    _, lp, lens, _ = case_inputs(case)
    half = lp.astype(np.float16)
    a = dec.decode(half, lens)
    b = dec.decode(half.astype(np.float32), lens)
    assert [(h.words, h.score) for h in a] == [(h.words, h.score) for h in b]


def test_batch_equals_rows_and_is_deterministic():
    for case in load_cases("k2_goldens.json.gz")[::7]:
        graph, lp, lens, opts = case_inputs(case)
        d = Decoder(graph, opts)
        batch = d.decode(lp, lens)
        again = d.decode(lp, lens)
        for b in range(lp.shape[0]):
            one = d.decode(lp[b : b + 1, : lens[b]])[0]
            assert (one.words, one.score, one.arcs) == (batch[b].words, batch[b].score, batch[b].arcs)
            assert (again[b].arcs, again[b].score) == (batch[b].arcs, batch[b].score)


def test_zero_length_row():
    g = Graph.from_k2_text("0 0 0 0 -1\n0 1 -1 -1 -0.5\n1\n")
    h = Decoder(g).decode(np.zeros((1, 3, 1), np.float32), [0])[0]
    assert h.reached_final and h.arcs == [1] and h.score == np.float32(-0.5) and h.words == []


def test_allow_partial_redirect_keeps_weight_and_drops_word():
    # state 1 has no final arc; the final arc is reachable only from state 0
    g = Graph.from_k2_text("0 1 1 9 -0.25\n0 2 -1 -1 0\n1 1 1 0 -0.5\n1 1 2 4 -0.05\n2\n")
    lp = np.log(np.array([[0.1, 0.8, 0.1]] * 2, np.float32))
    for partial, expect in ((True, True), (False, False)):
        h = Decoder(g, allow_partial=partial).decode(lp)[0]
        assert h.empty != expect
    h = Decoder(g, allow_partial=True).decode(lp)[0]
    assert not h.reached_final and h.redirect_arc == 3 and h.words == [9]
    expected = np.float32(np.float32(np.float32(np.float32(-0.25 + lp[0, 1]) - 0.5) + lp[1, 1]) - 0.05)
    assert h.score == expected


def test_snapshots_match_decode(case):
    graph, lp, lens, opts = case_inputs(case)
    d = Decoder(graph, opts)
    snaps = d.decode_snapshots(lp[0], int(lens[0]))
    assert len(snaps) == lens[0] + 2 and snaps[0]["tokens"] == {graph.start_state: (0.0, -1)}
    h = d.decode(lp[:1], lens[:1])[0]
    final = snaps[-1]["tokens"]
    if h.empty:
        assert not final
    else:
        assert list(final) == [graph.num_states - 1] and final[graph.num_states - 1][0] == h.score
    # the beam of the final step is 1e10, earlier steps follow k2's update
    assert snaps[-1]["beam"] == np.float32(1e10)


def test_timestamps_and_tokens(case):
    graph, lp, lens, opts = case_inputs(case)
    h = Decoder(graph, opts).decode(lp[:1], lens[:1])[0]
    if not h.empty:
        assert len(h.tokens) == lens[0] and len(h.timestamps) == len(h.words)
        assert all(0 <= t <= lens[0] for t in h.timestamps)


def test_decoder_on_a_loaded_image(tmp_path, case):
    """A memory-mapped image feeds the native decoder directly (and decodes the same)."""
    graph, lp, lens, opts = case_inputs(case)
    graph.save(tmp_path / "g.img")
    before = (tmp_path / "g.img").read_bytes()
    loaded = Graph.load(tmp_path / "g.img")
    a = Decoder(graph, opts).decode(lp, lens)
    b = Decoder(loaded, opts).decode(lp, lens)
    assert [(h.words, h.score) for h in a] == [(h.words, h.score) for h in b]
    assert (tmp_path / "g.img").read_bytes() == before  # copy-on-write: the file is untouched


def test_hypotheses_of_many_rows_equal_one_at_a_time():
    """make_hypotheses (one numpy pass over every row's arcs, what the GPU's batches use) gives
    each row what make_hypothesis gives it alone: words, frames, tokens, source arc ids (TLG.img
    reorders arcs), redirects; empty rows included."""
    from pathlib import Path

    tiny = Path(__file__).resolve().parent.parent / "cuwfst" / "data" / "tiny"
    for name in ("HLG.img", "TLG.img"):
        g = Graph.load(tiny / name)
        d = Decoder(g)
        rng = np.random.default_rng(7)
        na = g.arrays.ilabel.shape[0]
        rows = [rng.integers(0, na, int(rng.integers(0, 60))).astype(np.int32) for _ in range(40)]
        rows[0], rows[17] = rows[0][:0], rows[17][:0]
        redirect = [int(rng.integers(0, na)) if i % 3 == 0 else -1 for i in range(40)]
        many = d.make_hypotheses(rows, [float(-i) for i in range(40)], [i % 2 == 0 for i in range(40)], redirect,
                                 [i % 4 for i in range(40)], list(range(40)), list(range(40, 80)), [3] * 40)
        one = [d.make_hypothesis(r, float(-i), i % 2 == 0, redirect[i], i % 4, i, frontier_total=40 + i,
                                 closure_added=3) for i, r in enumerate(rows)]
        assert many == one, name
        assert sum(len(h.words) for h in many) > 0 and any(h.redirect_arc >= 0 for h in many)
