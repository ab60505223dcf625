"""Graphs with epsilon arcs have no k2 oracle: exhaustive Viterbi with wide beams instead."""

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions
from helpers import path_score, random_eps_graph, viterbi

WIDE = DecoderOptions(search_beam=1e4, output_beam=8.0, min_active_states=0,
                      max_active_states=10**8, allow_partial=False)


@pytest.mark.parametrize("seed", range(40))
def test_eps_graph_matches_viterbi(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(3, 14))
    vocab = int(rng.integers(2, 7))
    graph = random_eps_graph(rng, n, vocab, degree=3, eps_prob=0.6)
    while not graph.has_epsilon:
        graph = random_eps_graph(rng, n, vocab, degree=3, eps_prob=0.6)
    assert graph.max_epsilon_chain >= 1
    T = int(rng.integers(0, 9))
    lp = rng.normal(size=(max(T, 1), vocab)).astype(np.float32) * 2
    lp = (lp - np.log(np.exp(lp).sum(1, keepdims=True))).astype(np.float32)
    dec = Decoder(graph, WIDE)
    assert dec.eps_iterations == graph.max_epsilon_chain
    h = dec.decode(lp, [T])[0]
    best, arcs = viterbi(graph, lp, T)
    if best == -np.inf:
        assert h.empty and not h.reached_final
        return
    assert h.reached_final
    assert abs(h.score - best) <= 1e-4 * abs(best) + 1e-4
    ours = path_score(graph, lp, h.arcs)
    assert abs(ours - best) <= 1e-4 * abs(best) + 1e-4
    if h.arcs != arcs:  # only a different path of the same score is acceptable
        assert abs(path_score(graph, lp, arcs) - ours) <= 1e-4
    # the path is a real chain from the start to the final state
    g = graph.arrays
    arcs = graph.image_arc_ids(h.arcs)
    src = np.searchsorted(g.row_splits, arcs, side="right") - 1
    assert src[0] == g.start_state if len(arcs) else True
    for a, b_src in zip(arcs[:-1], src[1:]):
        assert g.dest[a] == b_src


def test_too_few_eps_iterations_is_not_exact():
    """The closure depth matters: with 0 passes the epsilon arcs are never taken."""
    found = False
    for seed in range(200):
        rng = np.random.default_rng(seed)
        graph = random_eps_graph(rng, 8, 3, degree=2, eps_prob=0.9)
        lp = np.log(np.full((4, 3), 1 / 3, np.float32))
        full = Decoder(graph, WIDE).decode(lp)[0]
        none = Decoder(graph, DecoderOptions(**{**WIDE.__dict__, "eps_iterations": 0})).decode(lp)[0]
        if any(graph.arrays.ilabel[a] == -2 for a in graph.image_arc_ids(full.arcs)):
            assert none.score < full.score or none.empty
            found = True
            break
    assert found


@pytest.mark.parametrize("seed", range(10))
def test_search_statistics_agree_with_snapshots(seed):
    """frontier_total and closure_added (reported on every Hypothesis) are the sums the
    step-by-step snapshots show."""
    from helpers import random_eps_graph_any, random_log_probs
    rng = np.random.default_rng(77 + seed)
    graph = random_eps_graph_any(rng, 40, 5, 3, 0.8, cycles=bool(seed % 2), chain=3)
    T = int(rng.integers(1, 15))
    lp = random_log_probs(rng, 1, T, 5, peaky=True)[0]
    opts = DecoderOptions(search_beam=8.0, max_active_states=30, min_active_states=2)
    dec = Decoder(graph, opts)
    h = dec.decode(lp)[0]
    snaps = dec.decode_snapshots(lp)
    sizes = [len(s["tokens"]) for s in snaps]
    assert h.frontier_total == sum(sizes[:-1])  # the frontiers steps 0..T expanded
    assert h.max_frontier == max(sizes[:-1])
    added = sum(len(s["tokens"]) - s["before_closure"] for s in snaps)
    assert h.closure_added == added and added > 0
