"""Epsilon closure on the GPU (TLG graphs) against the CPU reference: identical words,
arcs and float32 scores, batch rows equal to single rows, step-by-step frontiers equal to
the CPU's snapshots, and the exhaustive Viterbi at wide beams.

Skipped where there is no CUDA GPU. Exact-score ties may pick another path of the
bit-identical float32 score; that is checked, counted and printed.
"""

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from helpers import (assert_same_snapshots, graph_upload_bytes, path_score, path_score_f32, random_eps_graph,
                     random_eps_graph_any, random_log_probs, viterbi)

pytestmark = pytest.mark.gpu

BEAMS = [
    (20.0, 8.0, 30, 10000),
    (8.0, 5.0, 5, 200),
    (3.0, 2.0, 1, 50),
    (15.0, 8.0, 1, 4),        # the beam shrinks every frame
    (2.0, 2.0, 100, 1000),    # the beam widens
    (10.0, 4.0, 0, 3),
]
TOTALS = {"rows": 0, "ties": 0, "eps_rows": 0}


def compare(graph, lp, cpu_h, gpu_h, where, allow_overflow=False):
    assert len(cpu_h) == len(gpu_h)
    for b, (c, g) in enumerate(zip(cpu_h, gpu_h)):
        TOTALS["rows"] += 1
        if not allow_overflow:
            assert g.overflow == 0, f"{where} row {b}: overflow {g.overflow}"
        assert c.empty == g.empty, f"{where} row {b}: cpu empty {c.empty}, gpu empty {g.empty}"
        if not allow_overflow:  # the search itself is the same: frontier sizes step by step
            assert (c.max_frontier, c.frontier_total, c.closure_added) == \
                   (g.max_frontier, g.frontier_total, g.closure_added), f"{where} row {b}: search statistics"
        if c.empty:
            continue
        assert np.float32(c.score) == np.float32(g.score), f"{where} row {b}: {c.score!r} vs {g.score!r}"
        assert (c.reached_final, c.redirect_arc >= 0) == (g.reached_final, g.redirect_arc >= 0), where
        if any(graph.arrays.ilabel[a] == -2 for a in graph.image_arc_ids(c.arcs)):
            TOTALS["eps_rows"] += 1
        if (c.arcs, c.redirect_arc) != (g.arcs, g.redirect_arc):
            assert path_score_f32(graph, lp[b], g.arcs, g.redirect_arc) == np.float32(c.score), \
                f"{where} row {b}: different path, different score"
            TOTALS["ties"] += 1
        else:
            assert c.words == g.words, f"{where} row {b}"


def _random_case(seed):
    rng = np.random.default_rng(70000 + seed)
    n = int(rng.choice([3, 8, 30, 150, 800]))
    V = int(rng.integers(2, 30))
    graph = random_eps_graph_any(rng, n, V, degree=int(rng.integers(1, 6)),
                                 eps_prob=float(rng.choice([0.3, 0.7, 1.0])), cycles=bool(seed % 3 == 0),
                                 chain=int(rng.choice([1, 2, 5])))
    B = int(rng.integers(1, 7))
    T = int(rng.integers(1, 50))
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    if B > 2:
        lens[1], lens[2] = 1, 0
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    s, o, mn, mx = BEAMS[seed % len(BEAMS)]
    eps_it = None if seed % 5 else int(rng.integers(1, 4))
    opts = DecoderOptions(search_beam=s, output_beam=o, min_active_states=mn, max_active_states=mx,
                          allow_partial=bool(seed % 4 != 0), eps_iterations=eps_it)
    return rng, graph, lp, lens, opts


@pytest.mark.parametrize("seed", range(300))
def test_random_epsilon_graphs_gpu_equals_cpu(seed):
    rng, graph, lp, lens, opts = _random_case(seed)
    assert graph.has_epsilon
    cpu = Decoder(graph, opts).decode(lp, lens)
    walker = "thread" if seed % 4 == 1 else "warp"
    gpu = Decoder(graph, opts, device="cuda", max_lanes=int(rng.choice([1, 4, 32])), walker=walker,
                  walk_blocks=int(rng.choice([0, 1, 7]))).decode(lp, lens)
    compare(graph, lp, cpu, gpu, f"seed {seed} ({walker})")


@pytest.mark.parametrize("seed", range(0, 300, 10))
def test_batch_equals_rows(seed):
    rng, graph, lp, lens, opts = _random_case(seed)
    dec = Decoder(graph, opts, device="cuda", max_lanes=8)
    batch = dec.decode(lp, lens)
    again = dec.decode(lp, lens)
    for b in range(lp.shape[0]):
        one = dec.decode(lp[b : b + 1], lens[b : b + 1])[0]
        for other in (batch[b], again[b]):
            assert one.empty == other.empty
            if one.empty:
                continue
            assert np.float32(one.score) == np.float32(other.score)
            if one.arcs != other.arcs:
                assert path_score_f32(graph, lp[b], other.arcs, other.redirect_arc) == np.float32(one.score)


@pytest.mark.parametrize("seed", range(40))
def test_step_by_step_frontier_equals_cpu_snapshots(seed):
    rng = np.random.default_rng(900 + seed)
    graph = random_eps_graph_any(rng, int(rng.choice([5, 20, 80])), 6, 3, 0.8, cycles=bool(seed % 2),
                                 chain=int(rng.choice([0, 3])))
    T = int(rng.integers(0, 20))
    lp = random_log_probs(rng, 1, max(T, 1), 6, peaky=bool(seed % 2))[0]
    s, o, mn, mx = BEAMS[seed % len(BEAMS)]
    opts = DecoderOptions(search_beam=s, output_beam=o, min_active_states=mn, max_active_states=mx,
                          allow_partial=True)
    cpu = Decoder(graph, opts).decode_snapshots(lp, T)
    gpu = Decoder(graph, opts, device="cuda", max_lanes=2).decode_snapshots(lp, T)
    assert_same_snapshots(cpu, gpu, T + 2)


WIDE = DecoderOptions(search_beam=1e4, output_beam=8.0, min_active_states=0,
                      max_active_states=10**8, allow_partial=False)


@pytest.mark.parametrize("seed", range(40))
def test_gpu_matches_exhaustive_viterbi(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(3, 14))
    vocab = int(rng.integers(2, 7))
    graph = random_eps_graph(rng, n, vocab, degree=3, eps_prob=0.6)
    while not graph.has_epsilon:
        graph = random_eps_graph(rng, n, vocab, degree=3, eps_prob=0.6)
    T = int(rng.integers(0, 9))
    lp = rng.normal(size=(max(T, 1), vocab)).astype(np.float32) * 2
    lp = (lp - np.log(np.exp(lp).sum(1, keepdims=True))).astype(np.float32)
    h = Decoder(graph, WIDE, device="cuda", max_lanes=2).decode(lp, [T])[0]
    best, arcs = viterbi(graph, lp, T)
    if best == -np.inf:
        assert h.empty and not h.reached_final
        return
    assert h.reached_final
    assert abs(h.score - best) <= 1e-4 * abs(best) + 1e-4
    assert abs(path_score(graph, lp, h.arcs) - best) <= 1e-4 * abs(best) + 1e-4


def test_tiny_tlg_gpu_equals_cpu():
    """The shipped tiny TLG (OpenFst, Riva-style) with the demo utterances."""
    from importlib.resources import files
    data = files("cuwfst") / "data"
    graph = Graph.load(str(data / "tiny" / "TLG.img"))
    z = np.load(str(data / "demo" / "tiny_utts.npz"))
    key = "log_probs" if "log_probs" in z else "log_probs_fp16"
    lp = z[key].astype(np.float32)
    lens = z["lengths"].astype(np.int32) if "lengths" in z else None
    for opts in (DecoderOptions(), DecoderOptions(search_beam=10.0, max_active_states=500)):
        cpu = Decoder(graph, opts).decode(lp, lens)
        gpu = Decoder(graph, opts, device="cuda").decode(lp, lens)
        compare(graph, lp, cpu, gpu, f"tiny TLG {opts.search_beam}")
        one = [Decoder(graph, opts, device="cuda", max_lanes=1).decode(lp[b : b + 1], None if lens is None else lens[b : b + 1])[0]
               for b in range(lp.shape[0])]
        compare(graph, lp, cpu, one, "tiny TLG one by one")


def test_overflow_on_epsilon_graph_is_rescued():
    rng = np.random.default_rng(5)
    graph = random_eps_graph_any(rng, 3000, 30, 6, 1.0, cycles=False)
    lp = random_log_probs(rng, 3, 30, 30, peaky=False)
    opts = DecoderOptions(search_beam=1000.0, min_active_states=1, max_active_states=100)
    cpu = Decoder(graph, opts).decode(lp)
    assert max(h.max_frontier for h in cpu) > 1024
    gpu = Decoder(graph, opts, device="cuda", main_q_factor=1).decode(lp)
    compare(graph, lp, cpu, gpu, "rescued")


def test_report_totals():
    print(f"\nGPU vs CPU on epsilon graphs: {TOTALS['rows']} rows compared ({TOTALS['eps_rows']} best paths "
          f"through epsilon arcs), {TOTALS['ties']} exact-score ties, 0 mismatches")


@pytest.mark.parametrize("eps", [False, True])
def test_states_with_hundreds_of_final_and_epsilon_arcs(eps):
    """The device keeps each state's final and epsilon arc counts in a byte, 255 and more
    through the big-count table (types.cuh StateCount): states with 254, 255, 256 and 300
    final arcs (and, with eps, 255, 300 and 260 epsilon arcs) decode as on the CPU, and the
    upload holds the table (3 or 2 int32 a big state)."""
    rng = np.random.default_rng(255)
    n, V = 30, 6
    src, dst, il, w = [], [], [], []

    def arc(s, d, lab):
        src.append(s)
        dst.append(int(d))
        il.append(int(lab))
        w.append(float(np.float32(rng.uniform(-3, 0))))

    for s in range(n):
        arc(s, s, 0)
        for _ in range(3):
            arc(s, rng.integers(0, n), rng.integers(1, V))
    arc(0, n, -1)
    for s, k in ((3, 254), (5, 255), (7, 256), (9, 300)):
        for _ in range(k):
            arc(s, n, -1)
    if eps:  # forward only: no epsilon cycle
        for s, k in ((4, 255), (6, 300), (9, 260)):
            for _ in range(k):
                arc(s, rng.integers(s + 1, n), -2)
    graph = Graph.from_arcs(num_states=n + 1, start_state=0, src=src, dest=dst, ilabel=il, weight=w, vocab_size=V,
                            epsilon=np.array(il) == -2)
    assert graph.has_epsilon == eps
    fc = np.asarray(graph.arrays.final_count)
    assert [int(fc[s]) for s in (3, 5, 7, 9)] == [254, 255, 256, 300]
    lp = random_log_probs(rng, 6, 25, V, peaky=False)
    lens = np.array([25, 1, 0, 12, 25, 7], np.int32)
    opts = DecoderOptions(search_beam=20.0, output_beam=8.0, min_active_states=1, max_active_states=10000)
    cpu = Decoder(graph, opts).decode(lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=4)
    compare(graph, lp, cpu, dec.decode(lp, lens), f"big counts, eps {eps}")
    assert any(h.reached_final for h in cpu)
    # big states: 5, 7 and 9 (254 fits a byte), with eps also 4 and 6 (9 is one already)
    ec = np.asarray(graph.arrays.eps_count) if eps else np.zeros(n + 1, np.int32)
    assert int(np.count_nonzero((fc >= 255) | (ec >= 255))) == (5 if eps else 3)
    assert dec.memory_stats()["graph"] == graph_upload_bytes(graph)


@pytest.mark.parametrize("eps", [False, True])
def test_packed_and_unpacked_arcs_decode_alike(eps, monkeypatch):
    """CUWFST_GRAPH_PACK (types.cuh DeviceGraph::arc_packed): a graph whose states and labels
    fit in 32 bits together keeps each arc's destination and label in one uint32 (4 bytes an
    arc, against 6 for the int32 and uint16 arrays); the same graph uploaded unpacked decodes
    to the same rows and the same lattices, both equal to the CPU's, and each upload's bytes
    are what graph_upload_bytes says. A graph whose labels and states do not fit (a label of
    40,000 takes 16 bits; 70,000 states take 17) stays unpacked with packing on, and decodes
    as the CPU."""
    from test_lattice_records import assert_same_lattice

    from helpers import graph_packs, random_ctc_graph

    rng = np.random.default_rng(2_000 + eps)
    V = 12
    graph = random_ctc_graph(rng, 400, V, 5, 0.2)
    while eps:  # lattices need acyclic epsilon arcs
        graph = random_eps_graph_any(rng, 400, V, 5, 0.3, cycles=False, chain=2)
        if graph.max_epsilon_chain >= 0:
            break
    assert graph.has_epsilon == eps and graph_packs(graph)
    opts = DecoderOptions(search_beam=15.0, output_beam=6.0, min_active_states=1, max_active_states=2000)
    lp = random_log_probs(rng, 5, 30, V, peaky=True)
    lens = np.array([30, 1, 0, 17, 30], np.int32)
    cpu = Decoder(graph, opts).decode(lp, lens, lattice=True)
    got = {}
    for pack in ("on", "off"):
        monkeypatch.setenv("CUWFST_GRAPH_PACK", pack)
        g = Graph(graph.arrays)  # a fresh upload: the setting is read at a graph's first upload
        dec = Decoder(g, opts, device="cuda", max_lanes=3)
        assert dec._gpu.uploaded.packed == (pack == "on")
        assert dec.memory_stats()["graph"] == graph_upload_bytes(g, packed=pack == "on")
        got[pack] = dec.decode(lp, lens, lattice=True)
        compare(graph, lp, cpu, got[pack], f"eps {eps}, pack {pack}")
    for b, (x, y) in enumerate(zip(got["on"], got["off"])):
        assert list(x.arcs) == list(y.arcs) and np.float32(x.score) == np.float32(y.score), b
        assert_same_lattice(x.lattice, y.lattice, f"eps {eps}, row {b}")
    assert graph_upload_bytes(graph, packed=False) - graph_upload_bytes(graph, packed=True) == 2 * graph.num_arcs
    monkeypatch.setenv("CUWFST_GRAPH_PACK", "on")
    big = random_ctc_graph(rng, 70_000, 40_001, 2, 0.01)
    assert not graph_packs(big)
    lp2 = random_log_probs(rng, 2, 6, 40_001, peaky=True)
    dec = Decoder(big, opts, device="cuda", max_lanes=2)
    assert not dec._gpu.uploaded.packed
    assert dec.memory_stats()["graph"] == graph_upload_bytes(big, packed=False)
    compare(big, lp2, Decoder(big, opts).decode(lp2), dec.decode(lp2), "does not fit")
