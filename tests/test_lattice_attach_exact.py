"""The vectorised lattice host code (cuwfst/decoder/lattice.py: forward/backward scores,
word_confidences, word_times) against the plain form it replaced
(tests/lattice_reference_impl.py), bit for bit: float64 arrays compared as int64 views."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from helpers import random_log_probs, small_lattice_graph
from lattice_reference_impl import ref_backward, ref_forward, ref_word_confidences, ref_word_times

TINY = os.path.join(os.path.dirname(__file__), "..", "cuwfst", "data", "tiny")


def _bits(x):
    return np.asarray(x, np.float64).view(np.int64)


def _check(graph, hyps, rng):
    n_words = 0
    for h in hyps:
        lat = h.lattice
        assert h.word_times == ref_word_times(graph, h)
        want = ref_word_confidences(lat, [(w, s, e) for w, (s, e) in zip(h.words, h.word_times)])
        assert np.array_equal(_bits(h.word_confidences), _bits(want)) and len(want) == len(h.words)
        for log in (False, True):
            assert np.array_equal(_bits(lat.forward_scores(log)), _bits(ref_forward(lat, log)))
            assert np.array_equal(_bits(lat.backward_scores(log)), _bits(ref_backward(lat, log)))
        # arbitrary spans too (overlapping, skipped, words that are not there)
        T = lat.num_frames + 2
        wids = lat.word_ids.tolist() or [1]
        spans = []
        for _ in range(12):
            f = int(rng.integers(0, T))
            spans.append((int(rng.choice(wids)) if rng.random() < 0.8 else 10 ** 6, f, f + int(rng.integers(0, 6))))
        fresh = type(lat)(**{k: v for k, v in lat.__dict__.items() if not k.startswith("_")})
        want = ref_word_confidences(lat, spans)
        assert np.array_equal(_bits(fresh.word_confidences(spans)), _bits(want))
        # the numpy form the native passes (csrc/reference/lattice_posteriors.cc) replaced
        fresh = type(lat)(**{k: v for k, v in lat.__dict__.items() if not k.startswith("_")})
        assert np.array_equal(_bits(fresh._word_confidences_numpy(spans)), _bits(want))
        # the native passes reading cached scores give the same
        assert np.array_equal(_bits(fresh.word_confidences(spans)), _bits(want))
        n_words += len(h.words)
    return n_words


@pytest.mark.parametrize("kind", ["ctc", "eps"])
@pytest.mark.parametrize("allow_partial", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_bit_identical(kind, allow_partial, seed):
    rng = np.random.default_rng(1000 * seed + 7)
    V = 6
    graph = small_lattice_graph(rng, kind, seed % 3, V)
    lp = random_log_probs(rng, 4, 14, V, peaky=bool(seed % 2))
    lens = np.array([14, 9, 5, 1], np.int32)
    opts = DecoderOptions(search_beam=12.0, output_beam=6.0, allow_partial=allow_partial)
    hyps = Decoder(graph, opts).decode(lp, lens, lattice=True)
    _check(graph, hyps, rng)


@pytest.mark.parametrize("name", ["HLG", "TLG"])
def test_tiny_graphs_bit_identical(name):
    graph = Graph.load(os.path.join(TINY, f"{name}.img"))
    rng = np.random.default_rng(5)
    V = graph.vocab_size if hasattr(graph, "vocab_size") else int(graph.arrays.ilabel.max()) + 1
    lp = random_log_probs(rng, 3, 40, V, peaky=True)
    lens = np.array([40, 25, 12], np.int32)
    hyps = Decoder(graph, DecoderOptions(output_beam=8.0)).decode(lp, lens, lattice=True)
    assert _check(graph, hyps, rng) > 0


def test_native_logaddexp_matches_numpy():
    """lattice_posteriors.cc's NpyLogAddExp against np.logaddexp.at of the numpy in use, on the
    forward/backward scores of lattices of parallel arcs whose float32 scores are adversarial
    for it: ties, -0.0, +-inf, NaN, differences around the 750 shortcut and exp's underflow
    (745), subnormal results, large magnitudes. Run it on every host whose numpy or CPU differ
    (numpy's float64 logaddexp calls libm's exp and log1p; a SIMD loop in a later numpy would
    show here first)."""
    from cuwfst.decoder.lattice import Lattice

    rng = np.random.default_rng(11)
    special = np.array([0.0, -0.0, 1.0, -1.0, -744.4, -745.1, -745.2, -749.9, -750.0, -750.1, -760.0, -708.4, -709.8,
                        -1e-30, -1e30, 1e30, -3.4e38, np.inf, -np.inf, np.nan, 1e-45, -1e-45], np.float32)
    for trial in range(300):
        k = int(rng.integers(1, 40))
        mode = trial % 3
        if mode == 0:
            sc = rng.choice(special, 2 * k)
        elif mode == 1:
            base = np.float32(rng.normal(0, 50))
            sc = (base - rng.choice([0.0, 1e-3, 700.0, 745.0, 745.5, 749.99, 750.0, 750.01, 800.0], 2 * k)).astype(np.float32)
        else:
            sc = (rng.normal(0, 1, 2 * k) * 10.0 ** rng.integers(-3, 4, 2 * k)).astype(np.float32)
        src = np.repeat(np.array([0, 1], np.int32), k)
        dst = np.repeat(np.array([1, 2], np.int32), k)
        A = 2 * k
        lat = Lattice(num_states=3, src=src, dst=dst, frame=src.copy(), graph_arc=np.zeros(A, np.int32),
                      redirect_arc=np.full(A, -1, np.int32), token=np.zeros(A, np.int32), acoustic=sc.copy(),
                      graph_score=np.zeros(A, np.float32), score=sc.astype(np.float32),
                      word_splits=np.arange(A + 1, dtype=np.int32), word_ids=np.ones(A, np.int32),
                      state_frame=np.array([0, 1, 2], np.int32), state_graph=np.zeros(3, np.int32),
                      state_level=np.array([0, 1, 2], np.int32))
        with np.errstate(all="ignore"):
            want_c = ref_word_confidences(lat, [(1, 0, 0), (1, 1, 1), (1, 0, 1), (2, 0, 1)])
            got_c = lat.word_confidences([(1, 0, 0), (1, 1, 1), (1, 0, 1), (2, 0, 1)])  # the native passes
            for log in (True,):
                assert np.array_equal(_bits(lat.forward_scores(log)), _bits(ref_forward(lat, log))), (trial, sc)
                assert np.array_equal(_bits(lat.backward_scores(log)), _bits(ref_backward(lat, log))), (trial, sc)
        assert np.array_equal(_bits(got_c), _bits(want_c)), (trial, sc)


def _small_lattices(rng, rows, frames):
    """Hypotheses with lattices of `rows` random rows of `frames` frames on a small random CTC graph."""
    V = 6
    graph = small_lattice_graph(rng, "ctc", 1, V)
    lp = random_log_probs(rng, rows, frames, V, peaky=False)
    return Decoder(graph, DecoderOptions(search_beam=12.0, output_beam=6.0)).decode(lp, lattice=True)


def test_states_out_of_time_order_bit_identical():
    """lattice_posteriors.cc takes shortcuts where the states are in time order (the lattices the
    decoders build): a time's states as one run, no sort of the state times. With the interior
    states renumbered at random (start 0 and final S - 1 kept; arcs, levels and frames carried
    along) the general paths run, and the confidences are the same bits as the plain reference's
    on that lattice."""
    rng = np.random.default_rng(77)
    hyps = _small_lattices(rng, 3, 14)
    checked = 0
    for h in hyps:
        lat = h.lattice
        S = lat.num_states
        if S < 4:
            continue
        m = np.arange(S)
        m[1:-1] = 1 + rng.permutation(S - 2)
        fields = {k: v for k, v in lat.__dict__.items() if not k.startswith("_")}
        fields["src"], fields["dst"] = m[lat.src].astype(lat.src.dtype), m[lat.dst].astype(lat.dst.dtype)
        for name in ("state_frame", "state_graph", "state_level"):
            v = np.empty_like(getattr(lat, name))
            v[m] = getattr(lat, name)
            fields[name] = v
        shuffled = type(lat)(**fields)
        assert not np.all(np.diff(shuffled.state_frame) >= 0)  # (the general paths do run)
        T = lat.num_frames + 2
        wids = lat.word_ids.tolist() or [1]
        spans = [(w, int(s), int(e)) for w, (s, e) in zip(h.words, h.word_times)]
        for _ in range(12):
            f = int(rng.integers(0, T))
            spans.append((int(rng.choice(wids)) if rng.random() < 0.8 else 10 ** 6, f, f + int(rng.integers(0, 6))))
        # (against the reference on the renumbered lattice: a time's states are summed in state
        # order, so the renumbering may move the last bits)
        want = ref_word_confidences(shuffled, spans)
        assert np.array_equal(_bits(shuffled.word_confidences(spans)), _bits(want))
        checked += 1
    assert checked > 0


def test_arcs_out_of_level_order_bit_identical():
    """The decoders' lattices have their arcs in level order, and lattice_posteriors.cc then reads
    them in place; with the arcs permuted at random (their words carried along) the general path
    (a stable sort by level) runs. Many spans (up to ~70 distinct words, some on no arc, some
    negative or past int32) fill the native code's word table to its collisions. Same bits as the
    plain reference on the permuted lattice, which sums each level's arcs in the same order."""
    rng = np.random.default_rng(78)
    hyps = _small_lattices(rng, 4, 16)
    checked = 0
    for h in hyps:
        lat = h.lattice
        A = lat.num_arcs
        lev = lat.state_level[lat.src]
        if A < 4 or len(np.unique(lev)) < 2:
            continue
        p = rng.permutation(A)
        if np.all(np.diff(lev[p]) >= 0):
            continue
        fields = {k: v for k, v in lat.__dict__.items() if not k.startswith("_")}
        for name in ("src", "dst", "frame", "graph_arc", "redirect_arc", "token", "acoustic", "graph_score", "score"):
            fields[name] = np.ascontiguousarray(getattr(lat, name)[p])
        words = [lat.word_ids[lat.word_splits[i]: lat.word_splits[i + 1]] for i in range(A)]
        fields["word_ids"] = np.concatenate([words[i] for i in p] + [np.zeros(0, np.int32)]).astype(np.int32)
        fields["word_splits"] = np.concatenate([[0], np.cumsum([len(words[i]) for i in p])]).astype(np.int32)
        permuted = type(lat)(**fields)
        T = lat.num_frames + 2
        wids = sorted(set(lat.word_ids.tolist())) or [1]
        spans = [(w, int(s), int(e)) for w, (s, e) in zip(h.words, h.word_times)]
        for _ in range(80):
            f = int(rng.integers(0, T))
            r = rng.random()
            w = int(rng.choice(wids)) if r < 0.6 else int(rng.integers(-5, 200)) if r < 0.9 else 2 ** 40
            spans.append((w, f, f + int(rng.integers(0, 8))))
        with np.errstate(all="ignore"):
            want = ref_word_confidences(permuted, spans)
        assert np.array_equal(_bits(permuted.word_confidences(spans)), _bits(want))
        for log in (False, True):
            assert np.array_equal(_bits(permuted.forward_scores(log)), _bits(ref_forward(permuted, log)))
            assert np.array_equal(_bits(permuted.backward_scores(log)), _bits(ref_backward(permuted, log)))
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("id_range", [10 ** 6, 2 ** 31 - 2, -1])
def test_many_distinct_span_words_bit_identical(id_range):
    """A lattice of two frames whose 2 x 150 parallel arcs each carry a distinct word (ids drawn
    from a range), asked about every one of them and about 100 absent words. Ids below 2**22
    (id_range 10**6) take the native code's direct word table; larger ones (2**31 - 2) and
    negative ones (-1: ids from -2**30 to 2**30) its hashed table of 400 words, where words
    share slots and must be found past the first probe. Same bits as the plain reference."""
    from cuwfst.decoder.lattice import Lattice

    rng = np.random.default_rng(79)
    k = 150
    if id_range > 0:
        ids = rng.choice(id_range, size=2 * k + 100, replace=False).astype(np.int32) + 1
    else:
        ids = (rng.choice(2 ** 31, size=2 * k + 100, replace=False) - 2 ** 30).astype(np.int32)
    on_arcs, absent = ids[: 2 * k], ids[2 * k:]
    src = np.repeat(np.array([0, 1], np.int32), k)
    dst = np.repeat(np.array([1, 2], np.int32), k)
    sc = (-rng.uniform(0, 6, 2 * k)).astype(np.float32)
    A = 2 * k
    lat = Lattice(num_states=3, src=src, dst=dst, frame=src.copy(), graph_arc=np.zeros(A, np.int32),
                  redirect_arc=np.full(A, -1, np.int32), token=np.zeros(A, np.int32), acoustic=sc.copy(),
                  graph_score=np.zeros(A, np.float32), score=sc,
                  word_splits=np.arange(A + 1, dtype=np.int32), word_ids=on_arcs.copy(),
                  state_frame=np.array([0, 1, 2], np.int32), state_graph=np.zeros(3, np.int32),
                  state_level=np.array([0, 1, 2], np.int32))
    spans = [(int(w), i // k, i // k) for i, w in enumerate(on_arcs)] + [(int(w), 0, 1) for w in absent]
    spans = [spans[i] for i in rng.permutation(len(spans))]
    want = ref_word_confidences(lat, spans)
    got = lat.word_confidences(spans)
    assert np.array_equal(_bits(got), _bits(want))
    assert sum(1 for x in got if x > 0) == 2 * k  # every word on an arc found


def test_batch_word_rests_checks_its_arrays():
    """ref_lattices_word_rests (attach_all's native call) takes each lattice's own arrays and
    refuses a wrong count, dtype or size, and states or word splits out of range, with a clear
    error instead of reading past an array."""
    from cuwfst.decoder.lattice import _reference_module

    graph = Graph.load(os.path.join(TINY, "HLG.img"))
    rng = np.random.default_rng(3)
    lp = random_log_probs(rng, 2, 20, graph.vocab_size, peaky=True)
    lats = [h.lattice for h in Decoder(graph, DecoderOptions(output_beam=8.0)).decode(lp, lattice=True)]
    mod = _reference_module()

    def arrays_of(lat):
        return [np.ascontiguousarray(x) for x in (lat.src, lat.dst, lat.score, lat.frame, lat.word_splits,
                                                  lat.word_ids, lat.state_frame, lat.state_level)]

    def call(arrays, states=None, spans=None):
        states = [x.num_states for x in lats] if states is None else states
        so = np.concatenate([[0], np.cumsum(states)]).astype(np.int64)
        sp = np.zeros((0, 3), np.int64) if spans is None else spans
        po = np.zeros(len(lats) + 1, np.int64)
        po[1:] = len(sp)
        mod.ref_lattices_word_rests(arrays, so, po, np.empty(int(so[-1])), np.empty(int(so[-1])), sp,
                                    np.empty(len(sp)), np.empty(len(sp), np.int32), 1)

    good = arrays_of(lats[0]) + arrays_of(lats[1])
    call(good)  # accepted
    with pytest.raises(ValueError, match="8 arrays a lattice"):
        call(good[:-1])
    bad = list(good)
    bad[2] = bad[2].astype(np.float64)  # score
    with pytest.raises(TypeError, match="score"):
        call(bad)
    bad = list(good)
    bad[1] = bad[1][:-1].copy()  # dst shorter than src
    with pytest.raises(ValueError, match="dst"):
        call(bad)
    bad = list(good)
    bad[0] = bad[0].copy()
    bad[0][0] = lats[0].num_states  # a state past the lattice's
    with pytest.raises(ValueError, match="a state outside"):
        call(bad)
    # the arcs' values are checked on the worker threads: the first bad lattice by index is named
    bad = list(good)
    for l in (0, 1):
        bad[8 * l] = bad[8 * l].copy()
        bad[8 * l][-1] = -1
    for threads in (1, 2):
        with pytest.raises(ValueError, match="lattice 0: arc .*a state outside"):
            mod.ref_lattices_word_rests(bad, np.concatenate([[0], np.cumsum([x.num_states for x in lats])]).astype(
                np.int64), np.zeros(3, np.int64), np.empty(sum(x.num_states for x in lats)),
                np.empty(sum(x.num_states for x in lats)), np.zeros((0, 3), np.int64), np.empty(0),
                np.empty(0, np.int32), threads)
    call(good)  # and a good call after the refused ones
    with pytest.raises(ValueError, match="state_frame"):  # the state offsets disagree with the arrays
        call(good, states=[lats[0].num_states + 1, lats[1].num_states - 1])


@pytest.mark.parametrize("name", ["HLG", "TLG"])
def test_word_times_of_many_hypotheses_at_once(name):
    """word_times_many (one numpy pass over a sub-batch's arcs, as attach_all calls it) against the
    per-hypothesis reference, whatever the order of the hypotheses, with empty ones among them
    (no arcs; arcs None) and another blank id: a word's last sounding arc looked up across
    hypotheses must never come from the one before."""
    import types

    from cuwfst.decoder.lattice import word_times_many

    graph = Graph.load(os.path.join(TINY, f"{name}.img"))
    rng = np.random.default_rng(11)
    V = graph.vocab_size
    lp = random_log_probs(rng, 6, 40, V, peaky=True)
    lens = np.array([40, 0, 25, 12, 1, 33], np.int32)
    hyps = list(Decoder(graph, DecoderOptions(output_beam=8.0)).decode(lp, lens, lattice=True))
    assert sum(len(h.word_times) for h in hyps) > 0
    hyps += [types.SimpleNamespace(arcs=[]), types.SimpleNamespace(arcs=None)]
    for order in (list(range(len(hyps))), [int(x) for x in rng.permutation(len(hyps))]):
        hs = [hyps[i] for i in order]
        for blank in (0, 1):
            got = word_times_many(graph, hs, blank)
            want = [ref_word_times(graph, h, blank) if h.arcs else [] for h in hs]
            assert got == want, (order, blank)
    assert word_times_many(graph, []) == []
