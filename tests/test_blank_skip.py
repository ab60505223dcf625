"""Blank-frame skipping (DecoderOptions.blank_skip, cuwfst/decoder/blank_skip.py): the rule
on hand-made rows in every array path, decode(blank_skip) against a decode of the frames
compacted by hand, the remap of every frame index, decode_all, lattices, the CLI, and the
option's checks and refusals."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest_data import TINY, demo_arrays, make_dataset
from cuwfst import Decoder, DecoderOptions, Graph, StreamingDecoder
from cuwfst.decoder.blank_skip import blank_threshold, skip_blank_frames
from cuwfst.io.writers import collapse
from test_gpu_host import fake_gpu  # noqa: F401  (a fixture: the GPU path on a CPU-backed fake)

P = 0.95
THR = blank_threshold(P)
BLANK, SOUND = math.log(0.99), math.log(0.1)  # blank column of a blank / a sounding frame


def reference_kept(blank_col, length: int, p: float) -> list[int]:
    """The rule, frame by frame: a blank frame right after a blank frame is dropped."""
    thr = np.float32(math.log(p))
    kept, prev = [], False
    for t in range(length):
        v = np.float32(blank_col[t])
        blank = bool(v >= thr) and v != np.inf
        if not (blank and prev):
            kept.append(t)
        prev = blank
    return kept


def rows_of(patterns: list[str], T: int, V: int = 4) -> np.ndarray:
    """[B, T, V] float32: 'b' a blank frame, 'n' a sounding one, beyond the pattern padding
    whose blank column is NaN (padding must never be looked at)."""
    x = np.zeros((len(patterns), T, V), np.float32)
    # distinct values (the gather is checked), all below log(P)
    x[:, :, 1:] = -np.arange(1, V, dtype=np.float32) - np.arange(T, dtype=np.float32)[:, None] / 8
    for b, pat in enumerate(patterns):
        x[b, :, 0] = np.nan
        for t, c in enumerate(pat):
            x[b, t, 0] = BLANK if c == "b" else SOUND
    return x


# pattern, frames kept
HAND = [("nbbbnbnb", [0, 1, 4, 5, 6, 7]),  # runs in the middle and at the end
        ("bbbn", [0, 3]),                   # a run at the start
        ("nbbb", [0, 1]),                   # a run at the end
        ("bbbbbbbb", [0]),                  # the whole row blank
        ("nnnn", [0, 1, 2, 3]),             # no blank frame
        ("", []),                           # a row of length 0
        ("nbb", [0, 1])]                    # shorter than T: the padding is NaN


def _kinds():
    kinds = ["numpy", "xp"]
    try:
        import torch  # noqa: F401
        kinds.append("torch")
    except ImportError:
        pass
    return kinds


def _as_kind(kind, x):
    if kind == "torch":
        import torch
        return torch.from_numpy(x)
    return x  # "xp": numpy through its array-API namespace, the path cupy and JAX take


def _host(a):
    return a.numpy() if hasattr(a, "numpy") else np.asarray(a)


@pytest.mark.parametrize("kind", _kinds())
def test_rule_on_hand_made_rows(kind):
    T = 8
    x = rows_of([p for p, _ in HAND], T)
    lens = np.array([len(p) for p, _ in HAND], np.int32)
    out, new_lens, skipped = skip_blank_frames(kind, _as_kind(kind, x), lens, 0, P)
    out = _host(out)
    assert new_lens.tolist() == [len(k) for _, k in HAND]
    assert out.shape == (len(HAND), 6, 4) and out.dtype == np.float32
    assert skipped.lengths.tolist() == lens.tolist()
    for b, (pat, kept) in enumerate(HAND):
        assert kept == reference_kept(x[b, :, 0], len(pat), P), pat
        assert skipped.frames[b, : len(kept)].tolist() == kept, (kind, pat)
        assert (skipped.frames[b, len(kept):] == -1).all(), (kind, pat)
        # the kept frames' values, bit for bit
        assert np.array_equal(out[b, : len(kept)].view(np.int32), x[b, kept].view(np.int32)), (kind, pat)


@pytest.mark.parametrize("kind", _kinds())
def test_threshold_edge_inf_and_float16(kind):
    """>= exactly at float32(log p); one ulp below is sounding; +inf is never a blank frame;
    float16 rows are tested in float32 and stay float16."""
    at = np.float32(THR)
    below = np.nextafter(at, np.float32(-np.inf))
    x = np.full((1, 6, 3), -5.0, np.float32)
    x[0, :, 0] = [at, at, below, below, np.inf, np.inf]
    out, new_lens, skipped = skip_blank_frames(kind, _as_kind(kind, x), np.array([6]), 0, P)
    assert skipped.frames[0].tolist() == [0, 2, 3, 4, 5] and new_lens.tolist() == [5]
    h = np.full((1, 5, 3), -3.0, np.float16)
    h[0, :, 0] = np.float16(-0.01)  # all blank in float16 too
    out, new_lens, skipped = skip_blank_frames(kind, _as_kind(kind, h), np.array([5]), 0, P)
    assert new_lens.tolist() == [1] and _host(out).dtype == np.float16


@pytest.mark.parametrize("kind", _kinds())
def test_blank_id_column(kind):
    x = rows_of(["nbbn"], 4)
    x = x[:, :, ::-1].copy()  # the blank is the last column now
    out, _, skipped = skip_blank_frames(kind, _as_kind(kind, x), np.array([4]), 3, P)
    assert skipped.frames[0].tolist() == [0, 1, 3]
    _, _, skipped = skip_blank_frames(kind, _as_kind(kind, x), np.array([4]), 0, P)
    assert skipped.frames[0].tolist() == [0, 1, 2, 3]  # column 0 is never a blank there


# ---------------------------------------------------------------------- decoding
@pytest.fixture(scope="module")
def demo():
    lp, lens, _ = demo_arrays()
    return lp.astype(np.float32), lens


def compacted_by_hand(lp, lens, p):
    kept = [reference_kept(lp[b, :, 0], int(lens[b]), p) for b in range(len(lens))]
    Tn = max(1, max(len(k) for k in kept))
    out = np.zeros((len(lens), Tn, lp.shape[2]), np.float32)
    for b, k in enumerate(kept):
        out[b, : len(k)] = lp[b, k]
    return out, np.array([len(k) for k in kept], np.int32), kept


def assert_remapped(skip, plain, kept, length):
    """skip (decoded with blank_skip) against plain (the hand-compacted frames decoded)."""
    assert skip.words == plain.words and skip.arcs == plain.arcs and skip.redirect_arc == plain.redirect_arc
    assert np.float32(skip.score) == np.float32(plain.score) and skip.reached_final == plain.reached_final
    assert (skip.max_frontier, skip.frontier_total, skip.closure_added) == \
        (plain.max_frontier, plain.frontier_total, plain.closure_added)
    ext = kept + [length]
    assert skip.timestamps == [ext[t] for t in plain.timestamps]
    assert skip.frames_decoded == len(kept) and plain.frames_decoded == len(kept)
    if plain.empty:
        return
    assert len(skip.tokens) == length and len(plain.tokens) == len(kept)
    assert [skip.tokens[t] for t in kept] == plain.tokens
    dropped = sorted(set(range(length)) - set(kept))
    assert all(skip.tokens[t] == skip.tokens[t - 1] for t in dropped)  # a dropped frame repeats
    assert collapse(skip.tokens, 0) == collapse(plain.tokens, 0)


@pytest.mark.parametrize("graph_name", ["HLG.img", "TLG.img"])
@pytest.mark.parametrize("p", [0.5, 0.95, 0.999])
def test_decode_equals_decode_of_compacted_frames(demo, graph_name, p):
    lp, lens = demo
    g = Graph.load(TINY / graph_name)
    skip = Decoder(g, DecoderOptions(blank_skip=p)).decode(lp, lens)
    packed, new_lens, kept = compacted_by_hand(lp, lens, p)
    assert new_lens.sum() < lens.sum()  # frames were dropped: the comparison means something
    plain = Decoder(g).decode(packed, new_lens)
    for b in range(len(lens)):
        assert_remapped(skip[b], plain[b], kept[b], int(lens[b]))


def test_keeping_a_run_start_separates_repeated_tokens():
    """a <b> <b> a on a CTC graph of one word per 'a': two words, at frames 0 and 3."""
    # state 0: blank loop, 'a' -> 1 (word 7); state 1: 'a' loop, blank -> 0, 'a' needs a blank first
    g = Graph.from_arcs(num_states=3, start_state=0, src=[0, 0, 1, 1, 0, 1], dest=[0, 1, 1, 0, 2, 2],
                        ilabel=[0, 1, 1, 0, -1, -1], weight=[0.0] * 6, words=[[], [7], [], [], [], []],
                        vocab_size=2)
    a, b = [math.log(0.02), math.log(0.98)], [math.log(0.99), math.log(0.01)]
    lp = np.array([[a, b, b, b, a, b, b]], np.float32)
    h = Decoder(g, DecoderOptions(blank_skip=P)).decode(lp)[0]
    assert h.words == [7, 7] and h.timestamps == [0, 4] and h.frames_decoded == 4
    assert h.tokens == [1, 0, 0, 0, 1, 0, 0]
    assert Decoder(g).decode(lp)[0].words == [7, 7]


def test_threshold_applies_before_scale_and_penalty_after_normalize(demo):
    lp, lens = demo
    g = Graph.load(TINY / "HLG.img")
    base = [h.frames_decoded for h in Decoder(g, DecoderOptions(blank_skip=P)).decode(lp, lens)]
    assert sum(base) < lens.sum()
    # a penalty and a scale would move the blank column below log(P) if they came first
    moved = Decoder(g, DecoderOptions(blank_skip=P, blank_penalty=5.0, acoustic_scale=3.0)).decode(lp, lens)
    assert [h.frames_decoded for h in moved] == base
    # ...and both still apply to the frames kept
    packed, new_lens, kept = compacted_by_hand(lp, lens, P)
    plain = Decoder(g, DecoderOptions(blank_penalty=5.0, acoustic_scale=3.0)).decode(packed, new_lens)
    for b in range(len(lens)):
        assert_remapped(moved[b], plain[b], kept[b], int(lens[b]))
    logits = lp + np.float32(7.0)  # log_softmax brings the rows back
    norm = Decoder(g, DecoderOptions(blank_skip=P, normalize=True)).decode(logits, lens)
    assert [h.frames_decoded for h in norm] == base


def test_zero_is_the_option_absent(demo):
    lp, lens = demo
    g = Graph.load(TINY / "TLG.img")
    absent = Decoder(g).decode(lp, lens)
    zero = Decoder(g, DecoderOptions(blank_skip=0.0)).decode(lp, lens)
    assert zero == absent
    assert [h.frames_decoded for h in zero] == lens.tolist()
    on = Decoder(g, DecoderOptions(blank_skip=P)).decode(lp, lens)
    assert [h.frames_decoded for h in on] != lens.tolist()


def test_torch_cpu_equals_numpy(demo):
    torch = pytest.importorskip("torch")
    lp, lens = demo
    g = Graph.load(TINY / "TLG.img")
    dec = Decoder(g, DecoderOptions(blank_skip=P))
    want = dec.decode(lp, lens)
    assert dec.decode(torch.from_numpy(lp), torch.from_numpy(lens)) == want
    half = dec.decode(torch.from_numpy(lp).half(), lens)
    assert half == dec.decode(lp.astype(np.float16), lens)
    assert [h.frames_decoded for h in want] != lens.tolist()


def test_decode_all_equals_decode(demo):
    lp, lens = demo
    g = Graph.load(TINY / "HLG.img")
    dec = Decoder(g, DecoderOptions(blank_skip=P))
    want = dec.decode(lp, lens)
    utts = [lp[b, : lens[b]] for b in range(len(lens))]
    assert list(dec.decode_all(utts, progress=False, chunk=3)) == want
    assert [h.frames_decoded for h in want] != lens.tolist()


def test_snapshots_step_over_the_kept_frames(demo):
    lp, lens = demo
    g = Graph.load(TINY / "HLG.img")
    dec = Decoder(g, DecoderOptions(blank_skip=P))
    n = dec.decode(lp[2], [lens[2]])[0].frames_decoded
    assert n < lens[2]
    assert len(dec.decode_snapshots(lp[2], int(lens[2]))) == n + 2


def check_lattice_row(s, c, kept: list[int], L: int) -> int:
    """s (decoded with blank_skip, lattice=True) against c (the compacted frames): the same
    lattice with frames remapped, the same confidences, word times in original frames.
    Returns how many word ends moved past their kept frame (a sounding run start)."""
    assert_remapped(s, c, kept, L)
    ext = np.array(kept + [L, L + 1])
    ls, lc = s.lattice, c.lattice
    for name in ("src", "dst", "graph_arc", "token", "score", "word_ids", "state_graph"):
        assert np.array_equal(getattr(ls, name), getattr(lc, name)), name
    assert np.array_equal(ls.frame, ext[lc.frame]) and np.array_equal(ls.state_frame, ext[lc.state_frame])
    assert ls.num_frames == L and lc.num_frames == len(kept)
    assert [t for t, _ in s.word_times] == s.timestamps
    assert s.word_confidences == c.word_confidences
    # the confidences again, asked of the remapped lattice in original frames
    again = ls.word_confidences([(w, f, e) for w, (f, e) in zip(s.words, s.word_times)])
    assert again == pytest.approx(c.word_confidences, abs=1e-12)
    moved, kept_set = 0, set(kept)
    for (f, e), (fc, ec) in zip(s.word_times, c.word_times):
        assert f == ext[fc]
        if ec < len(kept) and c.tokens[ec] != 0:  # ends where its token's run ends
            assert s.tokens[e] == c.tokens[ec] and (e + 1 == L or e + 1 in kept_set), (e, ec)
            moved += e > ext[ec]
        else:
            assert e == ext[ec], (e, ec)
    return moved


def test_lattice_frames_and_word_times_remapped(demo):
    lp, lens = demo
    lp, lens = lp[:3], lens[:3]
    g = Graph.load(TINY / "TLG.img")
    skip = Decoder(g, DecoderOptions(blank_skip=P)).decode(lp, lens, lattice=True)
    packed, new_lens, kept = compacted_by_hand(lp, lens, P)
    plain = Decoder(g).decode(packed, new_lens, lattice=True)
    for b in range(3):
        check_lattice_row(skip[b], plain[b], kept[b], int(lens[b]))


def test_lattice_on_random_graphs_any_span():
    """Uncertain lattices (random CTC graphs, wide beams): every word span in original frames,
    also spans that start or end on a dropped frame, has the confidence of the decoded
    frames it covers."""
    from helpers import random_ctc_graph, random_log_probs

    rng = np.random.default_rng(11)
    wide = dict(search_beam=1000.0, output_beam=6.0, min_active_states=0, max_active_states=10**9)
    moved = uncertain = spans = 0
    for case in range(40):
        g = random_ctc_graph(rng, int(rng.integers(3, 7)), 4, 3, final_prob=0.5)
        L = int(rng.integers(4, 14))
        lp = random_log_probs(rng, 1, L, 4, peaky=True)
        s = Decoder(g, DecoderOptions(blank_skip=0.5, **wide)).decode(lp, lattice=True)[0]
        packed, new_lens, kept = compacted_by_hand(lp, np.array([L]), 0.5)
        c = Decoder(g, DecoderOptions(**wide)).decode(packed, new_lens, lattice=True)[0]
        moved += check_lattice_row(s, c, kept[0], L)
        uncertain += sum(0.01 < x < 0.99 for x in c.word_confidences)
        ext = kept[0] + [L]
        for word in set(c.lattice.word_ids.tolist()):
            for first in range(L + 1):
                for last in range(first, L + 1):
                    inside = [j for j, f in enumerate(ext) if first <= f <= last]
                    want = c.lattice.word_confidence(word, inside[0], inside[-1]) if inside else 0.0
                    assert s.lattice.word_confidence(word, first, last) == pytest.approx(want, abs=1e-12), \
                        (case, word, first, last)
                    spans += 1
    print(f"{moved} word ends moved, {uncertain} uncertain words, {spans} spans")
    assert moved > 0 and uncertain > 0 and spans > 1000, (moved, uncertain, spans)


# ---------------------------------------------------------------------- options, streams, CLI
@pytest.mark.parametrize("v", [-0.1, 1.0, 1.5, float("nan"), float("inf"), True, "0.5", None])
def test_option_checked(v):
    with pytest.raises(ValueError, match="blank_skip must be 0"):
        DecoderOptions(blank_skip=v)


def test_option_accepted_and_blank_id_checked(demo):
    assert DecoderOptions(blank_skip=0).blank_skip == 0 and DecoderOptions(blank_skip=0.5).blank_skip == 0.5
    lp, lens = demo
    g = Graph.load(TINY / "HLG.img")
    with pytest.raises(ValueError, match="blank_id 600 is not a column"):
        Decoder(g, DecoderOptions(blank_skip=P, blank_id=600)).decode(lp, lens)


def test_streaming_refuses_it():
    g = Graph.load(TINY / "HLG.img")
    with pytest.raises(ValueError, match="blank_skip is offline-only"):
        StreamingDecoder(g, DecoderOptions(blank_skip=P))
    with pytest.raises(ValueError, match="blank_skip is offline-only"):
        StreamingDecoder(g, blank_skip=P)
    StreamingDecoder(g, DecoderOptions(blank_skip=0.0))


def test_cli_blank_skip(tmp_path, capsys):
    from cuwfst.cli import main

    ds = make_dataset(tmp_path / "ds", kaldi=False)
    args = ["decode", str(tmp_path / "ds" / "HLG.img"), str(ds["root"] / "utts.npz"), "--format", "jsonl",
            "--device", "cpu"]
    assert main(args + ["--blank-skip", "0.95"]) == 0
    out, err = capsys.readouterr()
    recs = [json.loads(ln) for ln in out.strip().splitlines()]
    hyps = Decoder(Graph.load(tmp_path / "ds" / "HLG.img"), DecoderOptions(blank_skip=0.95)).decode(
        ds["lp"], ds["lens"])
    assert [r["word_ids"] for r in recs] == [h.words for h in hyps]
    assert [r["num_frames"] for r in recs] == ds["lens"].tolist()
    decoded = sum(h.frames_decoded for h in hyps)
    assert f"{decoded} of {int(ds['lens'].sum())} frames decoded" in err and decoded < ds["lens"].sum()
    assert main(args + ["--blank-skip", "1.5"]) == 2
    assert "blank_skip must be 0" in capsys.readouterr().err


def test_gpu_frontend_decodes_the_compacted_rows(fake_gpu, demo):
    """The GPU path's Python side (HostGpuBackend over a CPU-backed fake of the native
    module, tests/test_gpu_host.py): the kernels are handed the compacted rows and lengths,
    and decode and decode_all return the CPU decoder's hypotheses, frame indices included."""
    lp, lens = demo
    g = Graph.load(TINY / "HLG.img")
    opts = DecoderOptions(blank_skip=P)
    want = Decoder(g, opts).decode(lp, lens)
    dec = Decoder(g, opts, device="cuda", max_lanes=8)
    assert dec.decode(lp, lens) == want
    packed, new_lens, _ = compacted_by_hand(lp, lens, P)
    (_, x, got_lens), = fake_gpu.calls
    assert got_lens.tolist() == new_lens.tolist() and x.shape[1] == packed.shape[1]
    for b, n in enumerate(new_lens):
        assert np.array_equal(x[b, :n], packed[b, :n]), b
    utts = [lp[b, : lens[b]] for b in range(len(lens))]
    assert list(dec.decode_all(utts, progress=False, chunk=8)) == want
    assert sum(h.frames_decoded for h in want) < lens.sum()


# ---------------------------------------------------------------------- GPU (skipped without one)
@pytest.mark.gpu
@pytest.mark.parametrize("graph_name", ["HLG.img", "TLG.img"])
def test_gpu_equals_cpu(demo, graph_name):
    """Both decoders read the same compacted rows: numpy in, torch CUDA tensors in (compacted
    on the device), and decode_all of CUDA rows all give the CPU's hypotheses, frame indices
    included."""
    torch = pytest.importorskip("torch")
    lp, lens = demo
    g = Graph.load(TINY / graph_name)
    opts = DecoderOptions(blank_skip=P)
    cpu = Decoder(g, opts).decode(lp, lens)
    gpu = Decoder(g, opts, device="cuda", max_lanes=4)  # 8 rows: sub-batches and continuous batching
    on_device = torch.from_numpy(lp).cuda()
    out, _, _ = skip_blank_frames("torch", on_device, lens, 0, P)
    assert out.device == on_device.device  # compacted where the rows are
    for where, hyps in (("numpy", gpu.decode(lp, lens)), ("cuda", gpu.decode(on_device, lens)),
                        ("decode_all", list(gpu.decode_all([on_device[b, : lens[b]] for b in range(len(lens))],
                                                          progress=False)))):
        for b, (c, h) in enumerate(zip(cpu, hyps)):
            assert h.overflow == 0 and np.float32(h.score) == np.float32(c.score), (where, b)
            assert (h.words, h.arcs, h.timestamps, h.tokens, h.frames_decoded) == \
                (c.words, c.arcs, c.timestamps, c.tokens, c.frames_decoded), (where, b)
    assert sum(h.frames_decoded for h in cpu) < lens.sum()
