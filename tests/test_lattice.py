"""Lattices (cuwfst.Lattice, Decoder.decode(lattice=True)) against brute force on small cases:
paths, n-best, posteriors, allow_partial, epsilon graphs; and the API's checks."""

from __future__ import annotations

import itertools
import math
import types

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph, Lattice
from helpers import path_score, random_ctc_graph, random_eps_graph, random_eps_graph_any, random_log_probs
from lattice_helpers import graph_paths, lattice_paths, logsumexp

WIDE = dict(search_beam=1000.0, min_active_states=0, max_active_states=10**9)


def _arc_keys(lat: Lattice):
    """(frame, graph arc) per lattice arc; a redirected arc as (frame, ("r", its graph arc))."""
    return [(int(f), int(a) if a >= 0 else ("r", int(r))) for f, a, r in zip(lat.frame, lat.graph_arc, lat.redirect_arc)]


def _brute_keys(graph, path):
    arcs, frames, redirected, _ = path
    src = graph.source_arc_ids(arcs).tolist()
    keys = [(f, a) for f, a in zip(frames, src)]
    if redirected:
        keys[-1] = (frames[-1], ("r", src[-1]))
    return keys


def _graph_with_multiword_arcs(rng, n, vocab):
    """A CTC-like graph where some arcs carry two words and many carry none."""
    src, dst, il, w, words = [], [], [], [], []
    for s in range(n):
        for _ in range(int(rng.integers(1, 4))):
            src.append(s)
            dst.append(int(rng.integers(0, n)))
            il.append(int(rng.integers(0, vocab)))
            w.append(float(np.float32(rng.uniform(-2, 0))))
            r = rng.random()
            words.append([] if r < 0.5 else [int(rng.integers(1, 5))] if r < 0.8 else
                         [int(rng.integers(1, 5)), int(rng.integers(1, 5))])
        if rng.random() < 0.5 or s == n - 1:
            src.append(s)
            dst.append(n)
            il.append(-1)
            w.append(float(np.float32(rng.uniform(-1, 0))))
            words.append([])
    return Graph.from_arcs(num_states=n + 1, start_state=0, src=src, dest=dst, ilabel=il, weight=w,
                           words=words, vocab_size=vocab)


# ---------------------------------------------------------------------- 1-best
@pytest.mark.parametrize("allow_partial", [False, True])
@pytest.mark.parametrize("online", [False, True])
def test_lattice_best_path_is_the_one_best(allow_partial, online):
    rng = np.random.default_rng(11 + allow_partial + 2 * online)
    checked = ties = redirected = 0
    for case in range(40):
        g = random_ctc_graph(rng, int(rng.integers(3, 40)), 6, 4, final_prob=0.15)
        lp = random_log_probs(rng, 3, int(rng.integers(1, 70)), 6, peaky=bool(case % 2))
        lens = rng.integers(0, lp.shape[1] + 1, size=3).astype(np.int32)
        beams = [(20.0, 8.0, 30, 10000), (6.0, 2.0, 1, 8), (12.0, 0.5, 2, 4)][case % 3]
        opts = DecoderOptions(search_beam=beams[0], output_beam=beams[1], min_active_states=beams[2],
                              max_active_states=beams[3], allow_partial=allow_partial)
        dec = Decoder(g, opts)
        hyps = dec.decode(lp, lens, online=online, lattice=True)
        plain = dec.decode(lp, lens, online=online)
        assert [(h.arcs, h.score, h.redirect_arc, h.frontier_total) for h in hyps] == \
            [(h.arcs, h.score, h.redirect_arc, h.frontier_total) for h in plain]  # same search
        for b, h in enumerate(hyps):
            lat = h.lattice
            path, score = lat.best_path()
            if h.empty:
                assert path.size == 0 and lat.tot_score() == -math.inf and lat.tot_score(True) == -math.inf
                continue
            ours = path_score(g, lp[b], h.arcs, h.redirect_arc)
            assert abs(score - ours) <= 1e-5 * abs(ours) + 1e-4, (case, b, score, ours)
            assert lat.tot_score() == score
            # the 1-best's arcs form a path of the lattice, at the 1-best's frames
            keys = set(zip(lat.frame.tolist(), lat.graph_arc.tolist()))
            il = g.arrays.ilabel[g.image_arc_ids(h.arcs)] if h.arcs else np.zeros(0)
            frames = np.cumsum(il >= 0) - (il >= 0)
            assert all((int(f), a) in keys for f, a in zip(frames, h.arcs)), (case, b)
            if lat.path_words(path) == h.words:
                checked += 1
            else:  # an exact tie between two paths in float32
                assert abs(score - ours) <= 1e-5 * abs(ours), (case, b, lat.path_words(path), h.words)
                ties += 1
            if h.redirect_arc >= 0:
                redirected += 1
                assert lat.redirect_arc[path[-1]] >= 0 and lat.graph_arc[path[-1]] == -1
                assert lat.token[path[-1]] == -1 and lat.acoustic[path[-1]] == 0.0
            assert h.word_times is not None and len(h.word_times) == len(h.words)
            assert [s for s, _ in h.word_times] == h.timestamps
            assert all(0.0 <= c <= 1.0 for c in h.word_confidences)
    assert checked > 60 and ties <= checked // 10
    if allow_partial:
        assert redirected >= 3


# ---------------------------------------------------------------------- brute force
def _check_against_graph_paths(g, lp, n, opts, eps_iterations=None):
    """With no forward pruning and one pruning window (n + 1 <= 20), a lattice holds exactly
    the arcs of the graph's complete paths within output_beam of the best one."""
    dec = Decoder(g, opts)
    h = dec.decode(lp[None, :n], np.array([n], np.int32), lattice=True)[0]
    lat = h.lattice
    paths = graph_paths(g, lp, n, allow_partial=opts.allow_partial)
    if not paths:
        assert lat.tot_score() == -math.inf
        return 0
    best = max(p[3] for p in paths)
    through = {}
    for p in paths:
        for k in _brute_keys(g, p):
            through[k] = max(through.get(k, -math.inf), p[3])
    cut = best - opts.output_beam
    must = {k for k, v in through.items() if v >= cut + 1e-3}
    maybe = {k for k, v in through.items() if abs(v - cut) < 1e-3}
    ours = _arc_keys(lat)
    assert len(set(ours)) == len(ours), "an arc appears twice at one frame"
    assert must <= set(ours) <= must | maybe, (sorted(must - set(ours))[:5], sorted(set(ours) - must - maybe)[:5])
    assert abs(lat.tot_score() - best) <= 1e-5 * abs(best) + 1e-5
    if opts.output_beam > 1e3:  # nothing pruned: the lattice's paths are all the graph's paths
        assert abs(lat.tot_score(True) - logsumexp(p[3] for p in paths)) <= 1e-5 * abs(best) + 1e-5
        assert len(lattice_paths(lat)) == len(paths)
    return len(ours)


@pytest.mark.parametrize("output_beam", [2000.0, 3.0, 0.7])
def test_epsilon_free_lattices_match_brute_force(output_beam):
    rng = np.random.default_rng(5)
    arcs = 0
    for case in range(60):
        g = random_ctc_graph(rng, int(rng.integers(2, 6)), 4, 3, final_prob=0.5)
        n = int(rng.integers(1, 6))
        lp = random_log_probs(rng, 1, n, 4, peaky=False)[0]
        arcs += _check_against_graph_paths(g, lp, n, DecoderOptions(output_beam=output_beam, allow_partial=False,
                                                                    **WIDE))
    assert arcs > 120


@pytest.mark.parametrize("output_beam", [2000.0, 2.5])
def test_allow_partial_lattices_match_brute_force(output_beam):
    """Graphs with no final arcs at all: every path ends in a redirected arc (any arc of the
    state reached, acoustic 0, its graph weight, no words, graph_arc -1 as k2's arc_map)."""
    rng = np.random.default_rng(6)
    redirected = 0
    for case in range(30):
        n_states, vocab = int(rng.integers(2, 6)), 3
        src, dst, il, w, words = [], [], [], [], []
        for s in range(n_states):
            for _ in range(int(rng.integers(1, 4))):
                src.append(s)
                dst.append(int(rng.integers(0, n_states)))
                il.append(int(rng.integers(0, vocab)))
                w.append(float(np.float32(rng.uniform(-2, 0))))
                words.append([int(rng.integers(1, 9))] if rng.random() < 0.5 else [])
        g = Graph.from_arcs(num_states=n_states + 1, start_state=0, src=src, dest=dst, ilabel=il, weight=w,
                            words=words, vocab_size=vocab)
        n = int(rng.integers(1, 5))
        lp = random_log_probs(rng, 1, n, vocab, peaky=False)[0]
        opts = DecoderOptions(output_beam=output_beam, allow_partial=True, **WIDE)
        _check_against_graph_paths(g, lp, n, opts)
        lat = Decoder(g, opts).decode(lp[None, :n], np.array([n], np.int32), lattice=True)[0].lattice
        red = lat.redirect_arc >= 0
        redirected += int(red.sum())
        assert (lat.frame[red] == n).all() and (lat.token[red] == -1).all() and (lat.acoustic[red] == 0).all()
        assert (lat.graph_score[red] == g.arrays.weight[g.image_arc_ids(lat.redirect_arc[red])]).all()
        assert (np.diff(lat.word_splits)[red] == 0).all() and (lat.dst[red] == lat.final).all()
    assert redirected > 30


def _acyclic_eps_graph(rng, case, n_states, vocab, degree):
    """Epsilon graphs of both generators (random_eps_graph_any's arcs between states with
    final arcs can close an epsilon cycle: those are drawn again)."""
    while True:
        g = (random_eps_graph(rng, n_states, vocab, degree, eps_prob=0.6) if case % 2 else
             random_eps_graph_any(rng, n_states, vocab, degree, eps_prob=0.6, cycles=False, chain=2))
        if g.max_epsilon_chain >= 0:
            return g


@pytest.mark.parametrize("output_beam", [2000.0, 2.0])
def test_epsilon_lattices_match_brute_force(output_beam):
    """Epsilon arcs are arcs inside a time (frame = the frames consumed before them); with the
    exact closure and no forward pruning the lattice holds every path of the graph."""
    rng = np.random.default_rng(7)
    eps_arcs = 0
    for case in range(30):
        g = _acyclic_eps_graph(rng, case, int(rng.integers(2, 6)), 3, 2)
        n = int(rng.integers(0, 4))
        lp = random_log_probs(rng, 1, max(n, 1), 3, peaky=False)[0]
        _check_against_graph_paths(g, lp, n, DecoderOptions(output_beam=output_beam, allow_partial=False, **WIDE))
        lat = Decoder(g, DecoderOptions(output_beam=output_beam, **WIDE)).decode(
            lp[None, :max(n, 1)], np.array([n], np.int32), lattice=True)[0].lattice
        eps = lat.token == -2
        eps_arcs += int(eps.sum())
        # states are numbered topologically: every arc goes up in id and in level
        assert (lat.src < lat.dst).all() and (lat.state_level[lat.src] < lat.state_level[lat.dst]).all()
        assert (lat.state_frame[lat.src[eps]] == lat.state_frame[lat.dst[eps]]).all()
        assert (lat.acoustic[eps] == 0).all()
    assert eps_arcs > 20


def test_epsilon_lattice_best_path_is_the_one_best():
    rng = np.random.default_rng(8)
    same = 0
    for case in range(30):
        g = _acyclic_eps_graph(rng, case, int(rng.integers(4, 30)), 5, 3)
        lp = random_log_probs(rng, 2, int(rng.integers(1, 50)), 5, peaky=bool(case % 2))
        opts = DecoderOptions(search_beam=8.0, output_beam=3.0, max_active_states=20, min_active_states=2)
        for b, h in enumerate(Decoder(g, opts).decode(lp, lattice=True)):
            path, score = h.lattice.best_path()
            if h.empty:
                assert path.size == 0
                continue
            ours = path_score(g, lp[b], h.arcs, h.redirect_arc)
            assert abs(score - ours) <= 1e-5 * abs(ours) + 1e-4
            same += h.lattice.path_words(path) == h.words
    assert same > 20


def test_cyclic_epsilon_graph_is_refused():
    rng = np.random.default_rng(9)
    for _ in range(50):
        g = random_eps_graph_any(rng, 6, 3, 2, eps_prob=0.9, cycles=True)
        if g.max_epsilon_chain < 0:
            break
    assert g.max_epsilon_chain < 0
    with pytest.raises(ValueError, match="epsilon arcs form a cycle"):
        Decoder(g).decode(random_log_probs(rng, 1, 4, 3, peaky=False), lattice=True)


# ---------------------------------------------------------------------- n-best
def _brute_nbest(lat):
    best = {}
    for arcs, score in lattice_paths(lat):
        key = tuple(lat.path_words(arcs))
        best[key] = max(best.get(key, -math.inf), score)
    return sorted(best.items(), key=lambda kv: -kv[1])


def test_nbest_matches_brute_force_enumeration():
    rng = np.random.default_rng(12)
    compared = multi = 0
    for case in range(60):
        g = (_graph_with_multiword_arcs(rng, int(rng.integers(2, 5)), 3) if case % 2 else
             random_ctc_graph(rng, int(rng.integers(2, 6)), 3, 3, final_prob=0.5))
        n = int(rng.integers(1, 7))
        lp = random_log_probs(rng, 1, n, 3, peaky=False)
        opts = DecoderOptions(output_beam=float(rng.choice([1.0, 4.0, 50.0, 50.0])), allow_partial=False, **WIDE)
        lat = Decoder(g, opts).decode(lp, lattice=True)[0].lattice
        want = _brute_nbest(lat)
        multi += len(want) > 3
        for k in (1, 2, 5, len(want) + 3):
            got = lat.nbest(k)
            assert len(got) == min(k, len(want)), (case, k, len(got), len(want))
            # scores exactly; words too, up to the order of equal scores
            assert [s for _, s in got] == pytest.approx([s for _, s in want[:k]], abs=1e-9)
            for (words, s) in got:
                assert abs(dict(want)[tuple(words)] - s) <= 1e-9
            assert len({tuple(w) for w, _ in got}) == len(got)
            compared += 1
        if want:
            assert lat.nbest(1)[0].score == lat.tot_score()
    assert compared >= 200 and multi >= 15


def test_nbest_native_equals_the_python_search():
    """Lattice.nbest (the reference module's LatticeNBest) against _nbest_python, the Python A* it
    replaced: the same sequences in the same order with the same float64 bits, on random CTC,
    epsilon and multi-word graphs, with and without allow_partial, n from 1 to past the count,
    and again after the lattice's backward scores are cached."""
    rng = np.random.default_rng(21)
    compared = 0
    for case in range(90):
        kind = case % 3
        g = (random_ctc_graph(rng, int(rng.integers(2, 7)), 4, 3, final_prob=0.5) if kind == 0 else
             _graph_with_multiword_arcs(rng, int(rng.integers(2, 5)), 3) if kind == 1 else
             random_eps_graph_any(rng, int(rng.integers(3, 7)), 3, 2, eps_prob=0.4, cycles=False))
        if g.has_epsilon and g.max_epsilon_chain < 0:
            continue
        V = 4 if kind == 0 else 3
        lp = random_log_probs(rng, 2, int(rng.integers(1, 9)), V, peaky=False)
        opts = DecoderOptions(output_beam=float(rng.choice([2.0, 8.0, 50.0])), allow_partial=bool(case % 2), **WIDE)
        for h in Decoder(g, opts).decode(lp, lattice=True):
            lat = h.lattice
            for k in (1, 3, 40):
                want, got = lat._nbest_python(k), lat.nbest(k)
                assert got == want, (case, k)
                assert [x.score.hex() for x in got] == [x.score.hex() for x in want]
                compared += bool(want)
    assert compared >= 150


def _tied_lattice(rng, S):
    """A random DAG lattice (states in topological order, arcs grouped by source) whose scores
    are 0, -1 or -2 and whose arcs carry no word, one or two: most paths tie exactly."""
    src, dst, words = [], [], []
    for s in range(S - 1):
        for _ in range(int(rng.integers(1, 4))):
            src.append(s)
            dst.append(int(rng.integers(s + 1, S)))
            r = rng.random()
            words.append([] if r < 0.4 else [int(rng.integers(1, 4))] if r < 0.85 else
                         [int(rng.integers(1, 4)), int(rng.integers(1, 4))])
    A = len(src)
    sc = (-rng.integers(0, 3, A)).astype(np.float32)
    z = np.zeros(A, np.int32)
    return Lattice(num_states=S, src=np.array(src, np.int32), dst=np.array(dst, np.int32), frame=z.copy(),
                   graph_arc=z.copy(), redirect_arc=np.full(A, -1, np.int32), token=z.copy(), acoustic=sc.copy(),
                   graph_score=np.zeros(A, np.float32), score=sc,
                   word_splits=np.concatenate([[0], np.cumsum([len(w) for w in words])]).astype(np.int32),
                   word_ids=np.array([x for w in words for x in w], np.int32),
                   state_frame=np.arange(S, dtype=np.int32), state_graph=np.zeros(S, np.int32),
                   state_level=np.arange(S, dtype=np.int32))


def test_nbest_native_equals_the_python_search_on_exact_ties():
    """Where many word sequences tie exactly, the order of equal scores decides which n come
    back: the native search must break ties as the Python heap does (complete sequences before
    open prefixes of the same priority, then the words as a tuple)."""
    rng = np.random.default_rng(23)
    ties = 0
    for case in range(300):
        lat = _tied_lattice(rng, int(rng.integers(2, 9)))
        full = lat._nbest_python(10 ** 6)
        ties += len({x.score for x in full}) < len(full)
        for k in (1, 2, 3, 5, 8, 10 ** 6):
            assert lat.nbest(k) == lat._nbest_python(k), (case, k)
    assert ties >= 100


def test_nbest_past_its_first_room():
    """nbest first makes room for min(n, 64) sequences of up to a word a frame and searches
    again where more were found: a chain of 150 one-word arcs (one sequence of 150 words, past
    the room of 64 words a frame-less lattice gets), and a lattice with 2^7 = 128 sequences
    asked for all of them."""
    def chain(S, branch):
        src, dst, words = [], [], []
        for s in range(S - 1):
            for b in range(branch):
                src.append(s)
                dst.append(s + 1)
                words.append(1 + (s * branch + b) % 5)
        A = len(src)
        z = np.zeros(A, np.int32)
        sc = np.full(A, -0.5, np.float32)
        sc[::2] = -0.25
        return Lattice(num_states=S, src=np.array(src, np.int32), dst=np.array(dst, np.int32), frame=z.copy(),
                       graph_arc=z.copy(), redirect_arc=np.full(A, -1, np.int32), token=z.copy(), acoustic=sc.copy(),
                       graph_score=np.zeros(A, np.float32), score=sc, word_splits=np.arange(A + 1, dtype=np.int32),
                       word_ids=np.array(words, np.int32), state_frame=np.zeros(S, np.int32),
                       state_graph=np.zeros(S, np.int32), state_level=np.arange(S, dtype=np.int32))

    long = chain(151, 1)
    got = long.nbest(1)
    assert len(got) == 1 and len(got[0].words) == 150 and got == long._nbest_python(1)
    wide = chain(8, 2)
    got = wide.nbest(1000)
    assert len(got) == 128 and got == wide._nbest_python(1000)
    assert [x.score.hex() for x in got] == [x.score.hex() for x in wide._nbest_python(1000)]


def test_nbest_refuses_arcs_out_of_source_order():
    rng = np.random.default_rng(22)
    lat = Decoder(random_ctc_graph(rng, 4, 3, 2, 0.5)).decode(random_log_probs(rng, 1, 4, 3, False),
                                                             lattice=True)[0].lattice
    assert lat.num_arcs > 2 and len(set(lat.src.tolist())) > 1
    fields = {k: v for k, v in lat.__dict__.items() if not k.startswith("_")}
    p = np.arange(lat.num_arcs)[::-1].copy()
    for name in ("src", "dst", "frame", "graph_arc", "redirect_arc", "token", "acoustic", "graph_score", "score"):
        fields[name] = np.ascontiguousarray(getattr(lat, name)[p])
    words = [lat.word_ids[lat.word_splits[i]: lat.word_splits[i + 1]] for i in range(lat.num_arcs)]
    fields["word_ids"] = np.concatenate([words[i] for i in p] + [np.zeros(0, np.int32)]).astype(np.int32)
    fields["word_splits"] = np.concatenate([[0], np.cumsum([len(words[i]) for i in p])]).astype(np.int32)
    with pytest.raises(ValueError, match="grouped by source state"):
        type(lat)(**fields).nbest(2)


def test_nbest_checks_n():
    rng = np.random.default_rng(1)
    lat = Decoder(random_ctc_graph(rng, 4, 3, 2, 0.5)).decode(random_log_probs(rng, 1, 3, 3, False),
                                                             lattice=True)[0].lattice
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n must be an int"):
            lat.nbest(bad)


# ---------------------------------------------------------------------- posteriors
def test_posteriors_against_brute_force():
    rng = np.random.default_rng(13)
    checked = 0
    for case in range(30):
        g = random_ctc_graph(rng, int(rng.integers(2, 6)), 3, 3, final_prob=0.5)
        n = int(rng.integers(1, 6))
        lp = random_log_probs(rng, 1, n, 3, peaky=False)
        lat = Decoder(g, DecoderOptions(output_beam=5.0, allow_partial=False, **WIDE)).decode(
            lp, lattice=True)[0].lattice
        paths = lattice_paths(lat)
        if not paths:
            assert (lat.arc_posteriors() == 0).all() and lat.word_posteriors() == []
            continue
        z = logsumexp(s for _, s in paths)
        assert abs(lat.tot_score(True) - z) <= 1e-9 * abs(z)
        want = np.zeros(lat.num_arcs)
        for arcs, s in paths:
            want[arcs] += math.exp(s - z)
        post = lat.arc_posteriors()
        assert np.allclose(post, want, atol=1e-9)
        # every complete path crosses each frame on exactly one arc (no epsilon arcs)
        per_frame = np.bincount(lat.frame, weights=post, minlength=n + 1)
        assert np.allclose(per_frame, 1.0, atol=1e-9)
        for wp in lat.word_posteriors():
            hit = [i for i in range(lat.num_arcs) if lat.frame[i] == wp.frame and wp.word in lat.words(i)]
            assert abs(wp.posterior - sum(want[i] * lat.words(i).count(wp.word) for i in hit)) <= 1e-9
        # word confidences: the probability that a path carries the word inside the span
        for word, first, last in itertools.product(range(1, 8), range(n + 1), range(n + 1)):
            if last < first or (first + last + word) % 3:
                continue
            p = sum(math.exp(s - z) for arcs, s in paths
                    if any(first <= lat.frame[i] <= last and word in lat.words(i) for i in arcs))
            assert abs(lat.word_confidence(word, first, last) - p) <= 1e-9, (case, word, first, last)
            checked += 1
    assert checked > 200


def test_hypothesis_word_times_and_confidences():
    """A graph with one path: words at known frames, confidence 1."""
    # 0 -a:w7-> 1 -blank-> 1 ... ; tokens 1 (a), 2 (b), 0 blank
    src = [0, 1, 1, 2, 2]
    dst = [1, 1, 2, 2, 3]
    il = [1, 0, 2, 0, -1]
    words = [[7], [], [8], [], []]
    g = Graph.from_arcs(num_states=4, start_state=0, src=src, dest=dst, ilabel=il, weight=[0.0] * 5,
                        words=words, vocab_size=3)
    lp = np.log(np.full((1, 6, 3), 1 / 3, np.float32))
    lp[0, 0] = [-9, 0, -9]  # a
    lp[0, 1] = [0, -9, -9]  # blank
    lp[0, 2] = [0, -9, -9]  # blank
    lp[0, 3] = [-9, -9, 0]  # b
    h = Decoder(g).decode(lp, lattice=True)[0]
    assert h.words == [7, 8]
    assert h.word_times == [(0, 0), (3, 3)]
    assert h.word_confidences == [1.0, 1.0]
    assert h.lattice.nbest(5) == [([7, 8], pytest.approx(h.lattice.tot_score()))]


# ---------------------------------------------------------------------- API
def test_lattice_argument_checks():
    rng = np.random.default_rng(2)
    g = random_ctc_graph(rng, 5, 3, 2, 0.5)
    dec = Decoder(g)
    lp = random_log_probs(rng, 2, 4, 3, False)
    with pytest.raises(TypeError, match="lattice must be a bool"):
        dec.decode(lp, lattice=1)
    assert all(h.lattice is None and h.word_confidences is None for h in dec.decode(lp))

    class Backend:  # the GPU backend is handed the flag (tests/test_gpu_lattice.py runs the real one)
        calls = []

        def decode(self, log_probs, lengths, frontend, online=False, lattice=False):
            self.calls.append((online, lattice))
            return [types.SimpleNamespace() for _ in range(log_probs.shape[0])]

    dec._gpu = Backend()
    hyps = dec.decode(lp, lattice=True)
    assert Backend.calls[-1] == (False, True) and [h.frames_decoded for h in hyps] == [4, 4]
    dec.decode(lp, online=True)
    assert Backend.calls[-1] == (True, False)


def test_batching_and_threads_do_not_change_lattices():
    rng = np.random.default_rng(3)
    g = random_ctc_graph(rng, 30, 6, 4, 0.2)
    lp = random_log_probs(rng, 5, 90, 6, peaky=True)
    lens = np.array([90, 3, 45, 0, 70], np.int32)
    batch = Decoder(g, num_threads=3).decode(lp, lens, lattice=True)
    for b in range(5):
        alone = Decoder(g, num_threads=1).decode(lp[b:b + 1, : max(lens[b], 1)], lens[b:b + 1], lattice=True)[0]
        x, y = batch[b].lattice, alone.lattice
        for name in ("src", "dst", "frame", "graph_arc", "score", "state_graph"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), (b, name)


# ---------------------------------------------------------------------- allow_partial, k2's rules
def _model_keys(graph, model_arcs):
    src = graph.source_arc_ids([a for _, a, _, _ in model_arcs]).tolist() if model_arcs else []
    return sorted((t, ("r", s) if red else s, float(sc)) for (t, _, red, sc), s in zip(model_arcs, src))


def _lattice_keys(lat):
    return sorted((f, k, float(sc)) for (f, k), sc in zip(_arc_keys(lat), lat.score))


def test_k2_model_reproduces_the_goldens():
    """The Python model of k2's lattice (tests/k2_lattice_model.py) gives k2's answers on the
    golden rows it can afford (so it can stand in for k2 >= 1.24 where 1.23.4 has none)."""
    from helpers import load_cases
    from k2_lattice_model import k2_lattice
    from lattice_helpers import lattice_case_inputs

    rows = 0
    for case in load_cases("k2_lattice_goldens.json.gz"):
        if max(case["lens"]) > 130 or case["graph"].count("\n") > 400:
            continue
        graph, lp, lens, opts = lattice_case_inputs(case)
        for r, (n, row) in enumerate(zip(lens, case["rows"])):
            arcs, num_states = k2_lattice(graph, lp[r], int(n), opts.search_beam, opts.output_beam,
                                          opts.min_active_states, opts.max_active_states)
            frames = np.repeat(np.arange(len(row["frame_counts"])), row["frame_counts"])
            src = graph.source_arc_ids([a for _, a, _, _ in arcs]).tolist() if arcs else []
            assert sorted(zip((t for t, _, _, _ in arcs), src)) == list(zip(frames.tolist(), row["arcs"])), \
                (case["name"], r)
            assert num_states == row["num_states"], (case["name"], r)
            rows += 1
    assert rows >= 150


def test_allow_partial_lattices_match_the_k2_model():
    """allow_partial (k2 >= 1.24) with forward pruning and pruning windows: the C++ lattice
    equals the model's, arc for arc and score for score."""
    from k2_lattice_model import k2_lattice

    rng = np.random.default_rng(21)
    rows = redirected = long_rows = 0
    for case in range(40):
        g = random_ctc_graph(rng, int(rng.integers(4, 30)), 5, 3, final_prob=float(rng.choice([0.05, 0.2])))
        lp = random_log_probs(rng, 3, int(rng.integers(1, 90)), 5, peaky=bool(case % 2))
        lens = rng.integers(1, lp.shape[1] + 1, size=3).astype(np.int32)
        beams = [(6.0, 4.0, 1, 3), (10.0, 8.0, 2, 6), (3.0, 20.0, 1, 10000), (15.0, 1.0, 1, 2)][case % 4]
        opts = DecoderOptions(search_beam=beams[0], output_beam=beams[1], min_active_states=beams[2],
                              max_active_states=beams[3], allow_partial=True)
        for b, h in enumerate(Decoder(g, opts).decode(lp, lens, lattice=True)):
            arcs, num_states = k2_lattice(g, lp[b], int(lens[b]), *beams, allow_partial=True)
            assert _lattice_keys(h.lattice) == _model_keys(g, arcs), (case, b)
            assert h.lattice.num_states == num_states, (case, b)
            rows += 1
            redirected += bool((h.lattice.redirect_arc >= 0).any())
            long_rows += int(lens[b]) > 40
    assert rows == 120 and redirected >= 15 and long_rows >= 20
