"""closure="chain" on the GPU (epsilon.cuh "closure = chain"): the epsilon closure's passes
replaced by their fixpoint, computed by following each listed token's epsilon chain, where
every state has at most one epsilon arc, the epsilon arcs are acyclic and eps_iterations
covers the longest chain (TLGs built from an ARPA LM: one backoff arc a state). Against the
CPU reference's passes: identical float32 scores and search statistics, words identical or an
exact-score tie re-scored bit for bit; the frontiers step by step; streams and continuous
batching; lattices (which run the lists); and the fallback to the lists where the graph or
eps_iterations does not allow chains.

Skipped where there is no CUDA GPU."""

from pathlib import Path

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from cuwfst.decoder.gpu import chain_closure_ok
from helpers import assert_same_row, assert_same_snapshots, check_continuous_and_streams, random_log_probs

BEAMS = [(20.0, 30, 10000), (8.0, 5, 200), (3.0, 1, 50), (15.0, 1, 4), (2.0, 100, 1000), (10.0, 0, 3)]
TOTALS = {"rows": 0, "ties": 0}


def same(graph, lp_row, c, g, where):
    assert_same_row(graph, lp_row, c, g, where, TOTALS)

pytestmark = pytest.mark.gpu
TINY = Path(__file__).resolve().parent.parent / "cuwfst" / "data" / "tiny"


def chain_graph(rng: np.random.Generator, n: int, vocab: int, degree: int, eps_prob: float, span: int,
                two_eps_state: bool = False) -> Graph:
    """A random CTC-like graph with at most one epsilon arc a state, forward (s -> s + 1 ..
    s + span, so acyclic; chains of up to n hops), some into states with final arcs and into
    the final state; two_eps_state gives state 0 a second epsilon arc (not a chain graph)."""
    final = n
    has_final = rng.random(n) < 0.4
    has_final[n - 1] = True
    src, dst, il, w, words = [], [], [], [], []

    def arc(s, d, lab):
        src.append(s)
        dst.append(d)
        il.append(lab)
        w.append(float(np.float32(rng.uniform(-3, 0.5))))
        words.append([int(rng.integers(1, 30))] if rng.random() < 0.3 and lab != -1 else [])

    for s in range(n):
        for _ in range(int(rng.integers(1, degree + 1))):
            arc(s, int(rng.integers(0, n)), int(rng.integers(0, vocab)))
        if s + 1 < n and rng.random() < eps_prob:
            if rng.random() < 0.1 and has_final[s + 1:].any():  # into a state with final arcs
                arc(s, int(s + 1 + rng.choice(np.flatnonzero(has_final[s + 1:]))), -2)
            else:
                arc(s, int(rng.integers(s + 1, min(n, s + 1 + span))), -2)
        elif rng.random() < 0.03:
            arc(s, final, -2)  # into the super-final state (a dead end before T)
        if has_final[s]:
            arc(s, final, -1)
    if -2 not in il and n > 1:  # at least one epsilon arc (state 0 has none here)
        arc(0, 1, -2)
    if two_eps_state and n > 2:
        arc(0, n - 1, -2)
    eps = np.array(il) == -2
    return Graph.from_arcs(num_states=n + 1, start_state=0, src=src, dest=dst, ilabel=il, weight=w, words=words,
                           vocab_size=vocab, epsilon=eps)


def _case(seed):
    rng = np.random.default_rng(47000 + seed)
    V = int(rng.integers(2, 25))
    n = int(rng.choice([4, 12, 60, 300, 1500]))
    span = int(rng.choice([1, 3, 20]))
    while True:  # chains of at most 64 hops (eps_iterations' limit; past it the decoder runs the lists)
        graph = chain_graph(rng, n, V, degree=int(rng.integers(1, 6)), eps_prob=float(rng.choice([0.4, 0.8, 1.0])),
                            span=span)
        if graph.max_epsilon_chain <= 64:
            break
        span += 2
    B = int(rng.integers(1, 8))
    T = int(rng.integers(1, 40))
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    s, mn, mx = BEAMS[seed % len(BEAMS)]
    chain = graph.max_epsilon_chain
    eps_it = None if seed % 3 else chain + int(rng.integers(0, 3))  # None: the longest chain
    opts = DecoderOptions(search_beam=s, min_active_states=mn, max_active_states=mx,
                          allow_partial=bool(seed % 4 != 0), eps_iterations=eps_it)
    return rng, graph, lp, lens, opts


def closure_of(dec) -> int:
    return dec._gpu.main.mem_stats()["closure_lists"]


@pytest.mark.parametrize("seed", range(40))
def test_random_chain_graphs_equal_the_cpu_passes(seed):
    """Also with fused_max, whose extra claims leave pruned slots ({-inf : baseline}, hash_pos
    -1) that a chain must treat as new states."""
    rng, graph, lp, lens, opts = _case(seed)
    assert chain_closure_ok(graph, opts.resolved_eps_iterations(graph))
    cpu = Decoder(graph, opts).decode(lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=int(rng.choice([1, 4, 32])), closure="chain",
                  use_cuda_graphs=bool(seed % 5 != 2), fused_max=bool(seed % 2))
    assert closure_of(dec) == 2  # the chains ran (a silent fallback would test nothing)
    gpu = dec.decode(lp, lens)
    lists = Decoder(graph, opts, device="cuda", max_lanes=4, closure="lists").decode(lp, lens)
    for b in range(len(lens)):
        same(graph, lp[b], cpu[b], gpu[b], f"chain seed {seed} row {b}")
        same(graph, lp[b], lists[b], gpu[b], f"chain vs lists seed {seed} row {b}")


@pytest.mark.parametrize("seed", range(8))
def test_large_frontiers_and_long_chains(seed):
    """Thousands of tokens a step (several scan rounds, many CTAs a lane in Resolve and Link)
    and chains of up to 40 hops."""
    rng = np.random.default_rng(47100 + seed)
    V = 8
    graph = chain_graph(rng, 3000, V, degree=8, eps_prob=0.9, span=int(rng.choice([2, 3])))
    assert graph.max_epsilon_chain >= 10
    lp = random_log_probs(rng, 3, 12, V, peaky=False)
    opts = DecoderOptions(search_beam=30.0, max_active_states=100000)
    cpu = Decoder(graph, opts).decode(lp)
    dec = Decoder(graph, opts, device="cuda", max_lanes=3, closure="chain")
    assert closure_of(dec) == 2
    gpu = dec.decode(lp)
    assert max(h.max_frontier for h in cpu) > 2048
    for b in range(3):
        same(graph, lp[b], cpu[b], gpu[b], f"chain large seed {seed} row {b}")


@pytest.mark.parametrize("seed", range(8))
def test_step_by_step_frontier_equals_cpu_snapshots(seed):
    rng = np.random.default_rng(47200 + seed)
    graph = chain_graph(rng, int(rng.choice([5, 20, 80])), 6, 3, 0.8, span=3)
    T = int(rng.integers(0, 20))
    lp = random_log_probs(rng, 1, max(T, 1), 6, peaky=bool(seed % 2))[0]
    s, mn, mx = BEAMS[seed % len(BEAMS)]
    opts = DecoderOptions(search_beam=s, min_active_states=mn, max_active_states=mx, allow_partial=True)
    cpu = Decoder(graph, opts).decode_snapshots(lp, T)
    gdec = Decoder(graph, opts, device="cuda", max_lanes=2, closure="chain")
    assert closure_of(gdec) == 2
    gpu = gdec.decode_snapshots(lp, T)
    assert_same_snapshots(cpu, gpu, T + 2, "chain")
    a = graph.arrays
    for k, g in enumerate(gpu):
        # the links: a token the closure won holds its predecessor's FINAL score + the arc's
        # weight (the passes may hold an intermediate one; the chains never do)
        for st, (score, arc) in g["tokens"].items():
            if arc < 0:
                continue
            i = int(graph.image_arc_ids(np.array([arc]))[0])
            if a.ilabel[i] != -2:  # (the image marks epsilon arcs -2)
                continue
            src = int(np.searchsorted(a.row_splits, i, side="right") - 1)
            assert src in g["tokens"], f"step {k}: the epsilon winner of {st} comes from {src}, not in the frontier"
            want = np.float32(np.float32(g["tokens"][src][0]) + np.float32(a.weight[i]))
            assert want == np.float32(score), f"step {k} state {st}: {score!r} vs {src}'s final + weight"


@pytest.mark.parametrize("seed", range(4))
def test_continuous_batching_and_streams(seed, monkeypatch):
    monkeypatch.setenv("CUWFST_KERNELS", "new")  # closure = chain by default
    rng = np.random.default_rng(47300 + seed)
    V = int(rng.integers(2, 20))
    graph = chain_graph(rng, int(rng.choice([60, 400])), V, 4, 0.8, span=4)
    opts = DecoderOptions(search_beam=float(rng.choice([5.0, 12.0])), max_active_states=int(rng.choice([100, 10000])),
                          allow_partial=bool(seed % 3))

    def chains_ran(dec, sd):
        assert closure_of(dec) == 2 and sd._backend.inst.mem_stats()["closure_lists"] == 2

    check_continuous_and_streams(rng, graph, V, opts, seed, same, "chain", expect=chains_ran)


def test_tiny_tlg():
    graph = Graph.load(TINY / "TLG.img")
    assert chain_closure_ok(graph, graph.max_epsilon_chain)
    rng = np.random.default_rng(47400)
    lp = random_log_probs(rng, 8, 60, graph.vocab_size, peaky=True)
    opts = DecoderOptions()
    cpu = Decoder(graph, opts).decode(lp)
    dec = Decoder(graph, opts, device="cuda", max_lanes=8, closure="chain")
    assert closure_of(dec) == 2
    inst = dec._gpu.main
    before = inst.profile(True)
    got = dec.decode(lp)
    after = inst.profile(False)
    assert after["eps_link"] > before["eps_link"] and after["eps_expand"] > before["eps_expand"]
    for b, (c, g) in enumerate(zip(cpu, got)):
        same(graph, lp[b], c, g, f"tiny TLG row {b}")


def test_lattice_decodes_run_the_lists_and_equal_the_cpu():
    rng = np.random.default_rng(47500)
    graph = chain_graph(rng, 40, 6, 3, 0.8, span=3)
    lp = random_log_probs(rng, 3, 15, 6, peaky=True)
    opts = DecoderOptions(search_beam=10.0, output_beam=5.0)
    cpu = Decoder(graph, opts).decode(lp, lattice=True)
    dec = Decoder(graph, opts, device="cuda", max_lanes=3, closure="chain")
    assert closure_of(dec) == 2  # (configured; the lattice stage's decodes run the lists)
    gpu = dec.decode(lp, lattice=True)
    for b, (c, g) in enumerate(zip(cpu, gpu)):
        ca, ga = c.lattice, g.lattice
        assert sorted(zip(ca.frame.tolist(), ca.graph_arc.tolist())) == \
               sorted(zip(ga.frame.tolist(), ga.graph_arc.tolist())), f"row {b}: lattice arcs"
        assert np.float32(c.score) == np.float32(g.score)
    one = dec.decode(lp)  # and the 1-best after it runs the chains again
    for b in range(3):
        same(graph, lp[b], cpu[b], one[b], f"after lattice row {b}")


def test_falls_back_to_the_lists():
    """Two epsilon arcs out of one state, or eps_iterations short of the longest chain: the
    chains would not give the passes' result, so the decoder runs the lists, exactly."""
    rng = np.random.default_rng(47600)
    two = chain_graph(rng, 30, 5, 3, 0.9, span=2, two_eps_state=True)
    assert not chain_closure_ok(two, two.max_epsilon_chain)
    lp = random_log_probs(rng, 2, 10, 5, peaky=True)
    for graph, opts in ((two, DecoderOptions()),):
        dec = Decoder(graph, opts, device="cuda", max_lanes=2, closure="chain")
        assert closure_of(dec) == 1
        for b, (c, g) in enumerate(zip(Decoder(graph, opts).decode(lp), dec.decode(lp))):
            same(graph, lp[b], c, g, f"fallback row {b}")
    g1 = chain_graph(np.random.default_rng(47601), 30, 5, 3, 1.0, span=1)
    assert g1.max_epsilon_chain >= 3
    short = DecoderOptions(eps_iterations=g1.max_epsilon_chain - 1)
    dec = Decoder(g1, short, device="cuda", max_lanes=2, closure="chain")
    assert closure_of(dec) == 1
    for b, (c, g) in enumerate(zip(Decoder(g1, short).decode(lp), dec.decode(lp))):
        same(g1, lp[b], c, g, f"short eps_iterations row {b}")


def test_report_totals():
    print(f"\nchain closure vs CPU: {TOTALS['rows']} rows compared, {TOTALS['ties']} exact-score ties, 0 mismatches")
