"""The closure = chain algorithm (epsilon.cuh "closure = chain", branch closure-chain) as a
host model, against a line-by-line model of the CPU reference's ExpandEpsilon (Jacobi passes,
reference_decoder.cc), on random frontiers of random graphs with at most one epsilon arc a
state and acyclic epsilon arcs. This is the CPU twin that the GPU kernels are built against.

The chain model follows the kernels: every listed token (score + its arc's weight > cutoff)
walks its chain hop by hop in some interleaving with the others (random here, as the GPU's
races would be), offering {end : j * hops + hop} to each hop's destination as one atomicMax
would, stopping where the end fails the cutoff, where the destination was a token whose score
it does not beat, where a better offer holds the slot, or after `hops` hops. Resolve gives
every touched slot a token update and a winners entry; Link points each entry at its
predecessor's final winner.

Claims checked, for eps_iterations >= the longest chain: the same frontier states and float32
scores as the passes, and every token's winner chain, re-added in float32 from the token it
starts at, gives exactly the token's score (so the backtrace's path scores what the token
says). For eps_iterations below the longest chain the chains would NOT give the passes'
result in general (the decoder then runs the lists): checked too, as a witness that the
host's eligibility rule is needed."""

import numpy as np
import pytest

F = np.float32


def random_chain_graph(rng, n, span):
    """dest[s] (-1: no epsilon arc) and weight[s], forward arcs only (acyclic)."""
    dest = np.full(n, -1, np.int64)
    weight = np.zeros(n, np.float32)
    for s in range(n - 1):
        if rng.random() < 0.8:
            dest[s] = int(rng.integers(s + 1, min(n, s + 1 + span)))
            weight[s] = F(rng.uniform(-2.0, 0.6))
    return dest, weight


def longest_chain(dest):
    n = len(dest)
    depth = np.zeros(n, np.int64)
    for s in range(n - 1, -1, -1):
        depth[s] = 0 if dest[s] < 0 else 1 + depth[dest[s]]
    return int(depth.max())


def jacobi(dest, weight, frontier, winners, cutoff, passes):
    """reference_decoder.cc ExpandEpsilon, one epsilon arc a state. frontier: list of
    [state, score, winner]; winners: list of (prev, arc); arc id = the source state."""
    frontier = [list(t) for t in frontier]
    winners = list(winners)
    tok_of = {t[0]: i for i, t in enumerate(frontier)}
    changed = list(range(len(frontier)))
    for _ in range(passes):
        if not changed:
            break
        snap = [t[1] for t in frontier]
        cands = {}
        order = []
        for ti in changed:
            s = frontier[ti][0]
            if dest[s] < 0:
                continue
            end = F(F(snap[ti]) + weight[s])
            if not end > cutoff:
                continue
            d = int(dest[s])
            ex = tok_of.get(d, -1)
            if ex >= 0 and not end > snap[ex]:
                continue
            if d not in cands:
                cands[d] = (end, frontier[ti][2], s)
                order.append(d)
            elif end > cands[d][0]:
                cands[d] = (end, frontier[ti][2], s)
        changed = []
        for d in order:
            end, prev, arc = cands[d]
            w = len(winners)
            winners.append((prev, arc))
            ex = tok_of.get(d, -1)
            if ex >= 0:
                frontier[ex][1], frontier[ex][2] = end, w
                changed.append(ex)
            else:
                tok_of[d] = len(frontier)
                frontier.append([d, end, w])
                changed.append(len(frontier) - 1)
    return frontier, winners


def chains(dest, weight, frontier, winners, cutoff, hops, rng):
    """The kernels' algorithm, the chains interleaved at random."""
    frontier = [list(t) for t in frontier]
    winners = list(winners)
    tok_of = {t[0]: i for i, t in enumerate(frontier)}
    base_score = [t[1] for t in frontier]
    listed = [i for i, t in enumerate(frontier) if dest[t[0]] >= 0 and F(F(t[1]) + weight[t[0]]) > cutoff]
    payload = {}  # state -> (end, slot): the offers (a frontier token's baseline is its score)
    touched = []
    # walkers: [entry j, hop, state, score]; each step of a walker is one hop
    walkers = [[j, 0, frontier[ti][0], frontier[ti][1]] for j, ti in enumerate(listed)]
    live = list(range(len(walkers)))
    while live:
        k = live[int(rng.integers(len(live)))]
        j, hop, s, score = walkers[k]
        stop = hop >= hops or dest[s] < 0
        if not stop:
            end = F(F(score) + weight[s])
            d = int(dest[s])
            pos = tok_of.get(d, -1)
            if not end > cutoff or (pos >= 0 and not end > base_score[pos]):
                stop = True
            else:
                p = (end, j * hops + hop)
                seen = payload.get(d)
                if seen is None or seen < p:
                    if seen is None:
                        touched.append(d)
                    payload[d] = p
                elif seen[0] > end:
                    stop = True  # a better offer holds the slot
                if not stop:
                    walkers[k] = [j, hop + 1, d, end]
        if stop:
            live.remove(k)
    # Resolve: a token update and an entry for every touched state
    entry = {}
    for d in touched:
        end, _slot = payload[d]
        w = len(winners)
        winners.append(None)
        entry[d] = w
        if d in tok_of:
            frontier[tok_of[d]][1], frontier[tok_of[d]][2] = end, w
        else:
            tok_of[d] = len(frontier)
            frontier.append([d, end, w])
    # Link: prev = the predecessor's final winner
    for d in touched:
        _end, slot = payload[d]
        j, hop = divmod(slot, hops)
        s = frontier[listed[j]][0]
        for _ in range(hop):
            s = int(dest[s])
        prev = frontier[tok_of[s]][2]
        winners[entry[d]] = (prev, s)
    return frontier, winners


def path_score(dest, weight, winners, origin_score, w):
    """Re-adds the epsilon arcs of winner chain w in float32 from the emitting entry it ends at."""
    arcs = []
    while w >= 0 and winners[w][1] >= 0:
        prev, arc = winners[w]
        arcs.append(arc)
        w = prev
    score = origin_score[w]
    for arc in reversed(arcs):
        score = F(F(score) + weight[arc])
    return score


def _case(seed):
    rng = np.random.default_rng(88000 + seed)
    n = int(rng.choice([5, 30, 200]))
    dest, weight = random_chain_graph(rng, n, span=int(rng.choice([1, 3, 10])))
    k = int(rng.integers(1, n + 1))
    states = rng.choice(n, size=k, replace=False)
    # scores with exact ties now and then (weights 0 and equal scores)
    scores = F(rng.choice([-1.0, -2.0, -0.5], size=k)) if seed % 4 == 0 else F(rng.uniform(-6, 0, size=k))
    if seed % 5 == 0:
        weight[rng.random(n) < 0.3] = F(0)
    # the emitting entries: winner e (prev -1, arc -1) for token e; their scores, for path_score
    frontier = [[int(s), F(sc), e] for e, (s, sc) in enumerate(zip(states, scores))]
    winners = [(-1, -1)] * k
    origin_score = {e: F(sc) for e, sc in enumerate(scores)}
    cutoff = F(scores.max() - rng.choice([1.0, 3.0, 8.0]))
    return rng, dest, weight, frontier, winners, origin_score, cutoff


@pytest.mark.parametrize("seed", range(300))
def test_chains_give_the_passes_result(seed):
    rng, dest, weight, frontier, winners, origin_score, cutoff = _case(seed)
    hops = longest_chain(dest) + int(rng.integers(0, 2))
    if hops == 0:
        return
    jf, jw = jacobi(dest, weight, frontier, winners, cutoff, hops)
    for trial in range(3):
        cf, cw = chains(dest, weight, frontier, winners, cutoff, hops, rng)
        want = {t[0]: t[1] for t in jf}
        got = {t[0]: t[1] for t in cf}
        assert set(want) == set(got), f"seed {seed}: frontier states differ"
        for s in want:
            assert F(want[s]) == F(got[s]), f"seed {seed} state {s}: {want[s]!r} vs {got[s]!r}"
        for s, score, w in cf:  # every winner chain scores what its token says
            assert path_score(dest, weight, cw, origin_score, w) == F(score), f"seed {seed} state {s}"
        for s, score, w in jf:
            assert path_score(dest, weight, jw, origin_score, w) == F(score), f"seed {seed} state {s} (passes)"


def test_short_eps_iterations_need_the_passes():
    """With fewer hops than the longest chain the passes keep intermediate improvements in
    their winners and the chains' links can point past them: some case must disagree (or
    score a path differently), which is why the decoder runs the lists there."""
    differ = 0
    for seed in range(300):
        rng, dest, weight, frontier, winners, origin_score, cutoff = _case(seed)
        chain = longest_chain(dest)
        if chain < 2:
            continue
        hops = chain - 1
        jf, _ = jacobi(dest, weight, frontier, winners, cutoff, hops)
        cf, cw = chains(dest, weight, frontier, winners, cutoff, hops, rng)
        want = {t[0]: F(t[1]) for t in jf}
        got = {t[0]: F(t[1]) for t in cf}
        bad_path = any(path_score(dest, weight, cw, origin_score, w) != F(sc) for _, sc, w in cf)
        differ += int(want != got or bad_path)
    assert differ > 0
