"""lattices_from_arrays / lattice_from_arrays (the native batch lookups, views of the rows'
arrays) against the per-row numpy form they replaced (tests/lattice_reference_impl.py:
ref_lattice_from_arrays): the same arrays (dtype, shape, bytes) and attributes, on the rows
that the CPU lattice decode hands over and on synthetic rows (redirected arcs, multi-word
arcs, empty rows, any graph arc)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from cuwfst.decoder import lattice as L
from helpers import random_ctc_graph, random_log_probs, small_lattice_graph
from lattice_reference_impl import lattice_difference, ref_lattice_from_arrays

TINY = os.path.join(os.path.dirname(__file__), "..", "cuwfst", "data", "tiny")


def _multiword_graph(rng, n=10, vocab=6):
    """A CTC-like graph whose arcs carry 0..3 words, arcs given out of source order (so the
    image reorders them and keeps arc_id)."""
    src, dst, il, w, words = [], [], [], [], []
    for s in range(n):
        for d, lab in [(s, 0)] + [(int(rng.integers(0, n)), int(rng.integers(0, vocab))) for _ in range(3)] + \
                ([(n, -1)] if rng.random() < 0.4 else []):
            src.append(s)
            dst.append(d)
            il.append(lab)
            w.append(float(np.float32(rng.uniform(-4, 0.5))))
            words.append([int(x) for x in rng.integers(1, 50, int(rng.integers(0, 4)))] if lab != -1 else [])
    perm = rng.permutation(len(src))
    take = lambda xs: [xs[i] for i in perm]
    return Graph.from_arcs(num_states=n + 1, start_state=0, src=take(src), dest=take(dst), ilabel=take(il),
                           weight=take(w), words=take(words), vocab_size=vocab)


def _decoded_rows(graph, lp, lens, opts):
    """The (states, arcs, scores, recorded_arcs) rows decode_cpu hands to lattices_from_arrays."""
    rows = []
    orig = L.lattices_from_arrays

    def spy(g, rs, num_threads=1):
        rs = [tuple(r) for r in rs]
        rows.extend((s.copy(), a.copy(), c.copy(), n) for s, a, c, n in rs)
        return orig(g, rs, num_threads)

    L.lattices_from_arrays = spy
    try:
        hyps = Decoder(graph, opts).decode(lp, lens, lattice=True)
    finally:
        L.lattices_from_arrays = orig
    assert len(rows) == len(hyps)
    return rows, hyps


def _synthetic_rows(graph, rng, n_rows):
    """Rows of random arcs over every image arc, some redirected, some rows empty."""
    E = graph.arrays.num_arcs
    rows = []
    for _ in range(n_rows):
        A = int(rng.choice([0, 1, 2, int(rng.integers(3, 60))]))
        S = int(rng.integers(0 if A == 0 else 1, 30))
        codes = rng.integers(0, E, A).astype(np.int32)
        codes[rng.random(A) < 0.2] |= L.REDIRECT_ARC_BIT
        arcs = np.stack([rng.integers(0, max(S, 1), A), rng.integers(0, max(S, 1), A),
                         rng.integers(0, 20, A), codes]).astype(np.int32)
        scores = rng.normal(size=(3, A)).astype(np.float32)
        states = rng.integers(-1, 40, (3, S)).astype(np.int32)
        rows.append((states, arcs, scores, int(rng.integers(0, 100))))
    return rows


def _check(graph, rows, threads=(1, 2, 3)):
    want = [ref_lattice_from_arrays(graph, *r) for r in rows]
    for x, r in zip(want, rows):
        diff = lattice_difference(x, L.lattice_from_arrays(graph, *r))
        assert diff is None, diff
        diff = lattice_difference(x, L.lattice_from_arrays(graph, r[0], r[1], r[2]) if r[3] == 0 else x)
        assert diff is None, diff
    for t in threads:
        got = L.lattices_from_arrays(graph, rows, t)
        assert len(got) == len(rows)
        for i, (x, y) in enumerate(zip(want, got)):
            diff = lattice_difference(x, y)
            assert diff is None, f"row {i}, {t} threads: {diff}"
    return sum(x.num_arcs for x in want)


@pytest.mark.parametrize("kind", ["ctc", "eps", "multiword"])
@pytest.mark.parametrize("allow_partial", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_decoded_lattices_identical(kind, allow_partial, seed):
    rng = np.random.default_rng(2000 * seed + 11)
    V = 6
    graph = _multiword_graph(rng) if kind == "multiword" else small_lattice_graph(rng, kind, seed % 3, V)
    lp = random_log_probs(rng, 5, 16, V, peaky=bool(seed % 2))
    lens = np.array([16, 11, 6, 1, 0], np.int32)
    opts = DecoderOptions(search_beam=12.0, output_beam=6.0, allow_partial=allow_partial)
    rows, hyps = _decoded_rows(graph, lp, lens, opts)
    _check(graph, rows)
    # the decode's own lattices are those of the reference form too
    for h, r in zip(hyps, rows):
        assert lattice_difference(ref_lattice_from_arrays(graph, *r), h.lattice) is None


@pytest.mark.parametrize("seed", range(6))
def test_synthetic_rows_identical(seed):
    rng = np.random.default_rng(seed)
    graph = _multiword_graph(rng) if seed % 2 else random_ctc_graph(rng, 9, 5, 3, 0.3)
    assert _check(graph, _synthetic_rows(graph, rng, 12)) >= 0


def test_other_dtypes_and_layouts():
    """Rows given as int64 / float64 or non-contiguous arrays: copies, the same values."""
    rng = np.random.default_rng(3)
    graph = _multiword_graph(rng)
    rows = _synthetic_rows(graph, rng, 6)
    odd = [(s.astype(np.int64), np.asfortranarray(a.astype(np.int64)), c.astype(np.float64), n) for s, a, c, n in rows]
    _check(graph, odd)


def test_views_and_empty_batch():
    rng = np.random.default_rng(4)
    graph = random_ctc_graph(rng, 9, 5, 3, 0.3)
    rows = [r for r in _synthetic_rows(graph, rng, 8) if r[1].shape[1] > 0]
    lats = L.lattices_from_arrays(graph, rows)
    for (states, arcs, scores, _), lat in zip(rows, lats):
        assert np.shares_memory(lat.src, arcs) and np.shares_memory(lat.score, scores)
        assert np.shares_memory(lat.state_level, states)
    assert L.lattices_from_arrays(graph, []) == []


def test_bad_arc_code_raises():
    rng = np.random.default_rng(5)
    graph = random_ctc_graph(rng, 9, 5, 3, 0.3)
    states, arcs, scores, _ = _synthetic_rows(graph, rng, 1)[0]
    arcs = np.zeros((4, 3), np.int32)
    arcs[3, 1] = graph.arrays.num_arcs
    with pytest.raises(IndexError):
        L.lattice_from_arrays(graph, np.zeros((3, 2), np.int32), arcs, np.zeros((3, 3), np.float32))


@pytest.mark.parametrize("name", ["HLG", "TLG"])
def test_tiny_graphs_identical(name):
    graph = Graph.load(os.path.join(TINY, f"{name}.img"))  # a memory-mapped, read-only image
    rng = np.random.default_rng(6)
    lp = random_log_probs(rng, 3, 40, graph.arrays.vocab_size, peaky=True)
    lens = np.array([40, 25, 12], np.int32)
    rows, _ = _decoded_rows(graph, lp, lens, DecoderOptions(output_beam=8.0))
    assert _check(graph, rows) > 0
    assert _check(graph, _synthetic_rows(graph, rng, 10)) >= 0


def test_read_only_rows():
    """Rows whose arrays are read-only (np.load(mmap_mode="r"), frozen arrays): the lattices are
    read-only views, the single-row form and word_confidences still work (DLPack cannot hand
    over a read-only array: native_array gives the native calls a writable alias or a copy)."""
    from lattice_reference_impl import ref_word_confidences

    rng = np.random.default_rng(7)
    graph = _multiword_graph(rng)
    lp = random_log_probs(rng, 3, 16, 6, peaky=True)
    rows, hyps = _decoded_rows(graph, lp, np.array([16, 9, 0], np.int32), DecoderOptions(output_beam=6.0))
    for r in rows:
        for x in r[:3]:
            x.flags.writeable = False
    _check(graph, rows, threads=(1, 2))
    for r, h in zip(rows, hyps):
        lat = L.lattice_from_arrays(graph, *r)
        spans = [(w, s, e) for w, (s, e) in zip(h.words, h.word_times)] + [(int(w), 0, 20) for w in lat.word_ids[:4]]
        want = ref_word_confidences(lat, spans)
        assert np.array_equal(np.asarray(lat.word_confidences(spans)).view(np.int64),
                              np.asarray(want, np.float64).view(np.int64))
