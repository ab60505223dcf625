"""The vectorised lattice host code (cuwfst/decoder/lattice.py: forward/backward scores,
word_confidences, word_times) against the plain form it replaced
(tests/lattice_reference_impl.py), bit for bit: float64 arrays compared as int64 views."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from helpers import random_ctc_graph, random_eps_graph_any, random_log_probs
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
    if kind == "ctc":
        graph = random_ctc_graph(rng, 12, V, 3, 0.3)
    else:
        graph = random_eps_graph_any(rng, 12, V, 3, 0.3, cycles=False, chain=seed % 3)
    if graph.has_epsilon and graph.max_epsilon_chain < 0:
        pytest.skip("cyclic epsilon arcs: no lattices")
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
