"""The CPU lattice's records filter (reference_lattice.h, LatticeBuilder): the arcs it does not
store are arcs no pruning window keeps, so every lattice is the one the unfiltered builder gives,
bit for bit; its guard decodes a row again without it when the magnitudes it assumed are
exceeded. Each case decodes with CUWFST_CPU_LATTICE_FILTER on and off and compares every array."""

from __future__ import annotations

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from helpers import random_ctc_graph, random_eps_graph, random_log_probs


def _decode(dec: Decoder, lp: np.ndarray, lens: np.ndarray, online: bool = False):
    """ref_decode_lattice's raw rows: (1-best outputs, [(states, arcs, scores, recorded)], stats [B, 2])."""
    lp = np.ascontiguousarray(lp, np.float32)
    lens = np.ascontiguousarray(lens, np.int32)
    B, T, _ = lp.shape
    outs = [np.zeros((B, dec.path_capacity(T)), np.int32), np.zeros(B, np.int32), np.zeros(B, np.float32),
            np.zeros((B, 4), np.int32), np.zeros((B, 2), np.int64), np.zeros((B, 3), np.int64)]
    o, ref = dec.options, dec._ref
    h = ref.mod.ref_decode_lattice(ref.handle, lp, lens, o.search_beam, o.output_beam, o.min_active_states,
                                   o.max_active_states, o.allow_partial, dec.eps_iterations, online, 1, *outs)
    rows, stats = _take_rows(ref.mod, h, outs[5])
    return outs[:5], rows, stats


def _take_rows(mod, h, sizes: np.ndarray):
    """A lattice handle's rows [(states, arcs, scores, recorded)] and filter stats [B, 2]; frees it.
    sizes [B, 3]: each row's (states, arcs, recorded arcs)."""
    try:
        rows = []
        for b in range(sizes.shape[0]):
            S, A, recorded = (int(x) for x in sizes[b])
            st, ar, sc = np.zeros((3, S), np.int32), np.zeros((4, A), np.int32), np.zeros((3, A), np.float32)
            mod.ref_lattice_row(h, b, st, ar, sc)
            rows.append((st, ar, sc, recorded))
        stats = np.zeros((sizes.shape[0], 2), np.int64)
        mod.ref_lattice_filter_stats(h, stats)
    finally:
        mod.ref_lattice_free(h)
    return rows, stats


def _on_and_off(monkeypatch, dec, lp, lens, online=False, pad=None):
    monkeypatch.setenv("CUWFST_CPU_LATTICE_FILTER", "on")
    if pad is not None:
        monkeypatch.setenv("CUWFST_CPU_LATTICE_FILTER_PAD", str(pad))
    on = _decode(dec, lp, lens, online)
    monkeypatch.delenv("CUWFST_CPU_LATTICE_FILTER_PAD", raising=False)
    monkeypatch.setenv("CUWFST_CPU_LATTICE_FILTER", "off")
    off = _decode(dec, lp, lens, online)
    monkeypatch.delenv("CUWFST_CPU_LATTICE_FILTER")
    return on, off


def _same(on, off) -> bool:
    """Every output of the two decodes identical, scores as bits."""
    for x, y in zip(on[0], off[0]):
        if x.tobytes() != y.tobytes():
            return False
    for (s1, a1, c1, r1), (s2, a2, c2, r2) in zip(on[1], off[1]):
        if s1.tobytes() != s2.tobytes() or a1.tobytes() != a2.tobytes() or c1.tobytes() != c2.tobytes() or r1 != r2:
            return False
    return True


def _cases():
    rng = np.random.default_rng(2026_12_05)
    for i in range(48):
        yield (int(rng.integers(0, 2**31)), dict(
            search_beam=float(rng.choice([4.0, 8.0, 20.0])),
            output_beam=float(rng.choice([0.01, 0.5, 3.0, 8.0, 30.0])),
            min_active_states=int(rng.choice([0, 5])),
            max_active_states=int(rng.choice([8, 40, 10000])),
            allow_partial=bool(i % 2)), bool((i // 2) % 2))


def test_filtered_lattices_are_the_unfiltered_ones(monkeypatch):
    dropped = stored = 0
    for seed, opts, online in _cases():
        rng = np.random.default_rng(seed)
        g = random_ctc_graph(rng, int(rng.integers(15, 60)), 8, int(rng.integers(2, 7)), 0.3)
        T = int(rng.integers(20, 95))  # several pruning windows (30 times, shifted by 20)
        lp = random_log_probs(rng, 3, T, 8, bool(rng.random() < 0.5))
        lens = np.array([T, max(1, T - 17), max(1, T // 3)], np.int32)
        dec = Decoder(g, DecoderOptions(**opts), device="cpu")
        on, off = _on_and_off(monkeypatch, dec, lp, lens, online)
        assert _same(on, off), (seed, opts, online)
        assert (on[2][:, 1] == 0).all(), (seed, opts)  # no row needed the guard's second decode
        assert (off[2][:, 0] == [r[3] for r in off[1]]).all()  # off: every recorded arc stored
        stored += int(on[2][:, 0].sum())
        dropped += sum(r[3] for r in on[1]) - int(on[2][:, 0].sum())
    # the filter dropped arcs: the comparison above is not between two unfiltered decodes
    assert dropped > stored // 4, (dropped, stored)


def test_the_guard_decodes_again_when_magnitudes_grow(monkeypatch):
    """Scores that move by thousands a step leave the magnitude a filtered step assumed (twice the
    scores then, plus 4096) inside a window: the row is decoded again without the filter."""
    redone = 0
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        g = random_ctc_graph(rng, 30, 8, 4, 0.3)
        T = 70
        lp = random_log_probs(rng, 2, T, 8, False) * np.float32(400.0)  # ~ -400 to -2000 a frame
        dec = Decoder(g, DecoderOptions(search_beam=2000.0, output_beam=800.0, max_active_states=50),
                      device="cpu")
        on, off = _on_and_off(monkeypatch, dec, lp, np.array([T, T - 5], np.int32))
        assert _same(on, off), seed
        redone += int(on[2][:, 1].sum())
        assert (on[2][on[2][:, 1] == 1, 0] == [r[3] for r, x in zip(on[1], on[2][:, 1]) if x]).all()
    assert redone > 0


def test_a_bound_too_tight_is_seen(monkeypatch):
    """A negative pad makes the filter drop arcs within ~0.1 of their destination's score minus
    output_beam, some of which the windows keep: the comparison must see the difference."""
    differ = 0
    for seed, opts, online in list(_cases())[:16]:
        if opts["output_beam"] < 3.0:
            continue
        rng = np.random.default_rng(seed)
        g = random_ctc_graph(rng, int(rng.integers(15, 60)), 8, int(rng.integers(2, 7)), 0.3)
        T = int(rng.integers(20, 95))
        lp = random_log_probs(rng, 3, T, 8, bool(rng.random() < 0.5))
        dec = Decoder(g, DecoderOptions(**opts), device="cpu")
        on, off = _on_and_off(monkeypatch, dec, lp, np.full(3, T, np.int32), online,
                              pad=-(opts["output_beam"] - 0.1))
        differ += not _same(on, off)
    assert differ > 0


def test_filtered_lattices_on_epsilon_graphs(monkeypatch):
    """Graphs with epsilon arcs: the bound's chain also counts the closures' epsilon layers, and
    the guard's forward check runs after a time's epsilon arcs."""
    rng0 = np.random.default_rng(5)
    dropped = stored = 0
    for i in range(32):
        seed = int(rng0.integers(0, 2**31))
        rng = np.random.default_rng(seed)
        opts = dict(search_beam=float(rng.choice([4.0, 8.0, 20.0])),
                    output_beam=float(rng.choice([0.01, 0.5, 3.0, 8.0, 30.0])),
                    min_active_states=int(rng.choice([0, 5])), max_active_states=int(rng.choice([8, 40, 10000])),
                    allow_partial=bool(i % 2))
        g = random_eps_graph(rng, int(rng.integers(15, 60)), 8, int(rng.integers(2, 7)), 0.3)
        T = int(rng.integers(20, 95))
        lp = random_log_probs(rng, 3, T, 8, bool(rng.random() < 0.5))
        lens = np.array([T, max(1, T - 17), max(1, T // 3)], np.int32)
        dec = Decoder(g, DecoderOptions(**opts), device="cpu")
        assert dec.eps_iterations > 0
        on, off = _on_and_off(monkeypatch, dec, lp, lens, bool((i // 2) % 2))
        assert _same(on, off), (seed, opts)
        assert (on[2][:, 1] == 0).all(), (seed, opts)
        stored += int(on[2][:, 0].sum())
        dropped += sum(r[3] for r in on[1]) - int(on[2][:, 0].sum())
    assert dropped > stored // 8, (dropped, stored)


def _late_chain_graph(chain: int) -> Graph:
    """State 0 loops on tokens 0 and 1; token 2 leads to a chain of `chain` epsilon arcs (states
    1 .. chain + 1), each of whose states goes back to 0 on token 1 and has a final arc."""
    src, dst, il, w = [0, 0, 0, 0], [0, 0, 1, chain + 2], [0, 1, 2, -1], [-0.1, -0.2, -0.5, 0.0]
    eps = [False] * 4
    for s in range(1, chain + 2):
        if s <= chain:
            src.append(s), dst.append(s + 1), il.append(0), w.append(-0.25), eps.append(True)
        src += [s, s]
        dst += [0, chain + 2]
        il += [1, -1]
        w += [-0.3, -0.1]
        eps += [False, False]
    return Graph.from_arcs(num_states=chain + 3, start_state=0, src=src, dest=dst, ilabel=il, weight=w,
                           words=[[1] if x == 2 else [] for x in il], vocab_size=3, epsilon=np.array(eps))


def _late_chain_case():
    """The chain-of-9 graph, with token 2 out of the beam for the first 40 of 90 frames."""
    rng = np.random.default_rng(11)
    T = 90
    lp = random_log_probs(rng, 2, T, 3, False)
    lp[:, :40, 2] = -100.0
    dec = Decoder(_late_chain_graph(9), DecoderOptions(search_beam=20.0, output_beam=8.0, min_active_states=0),
                  device="cpu")
    return dec, lp, np.array([T, T - 9], np.int32)


def test_the_guard_decodes_again_when_epsilon_layers_grow(monkeypatch):
    """A chain of 9 epsilon arcs gives times 9 layers (eps_iterations 9, the graph's longest chain:
    the filtered steps assume 9, and nothing is redone). Told to assume 2 (the tests' knob), the
    steps filtered before the chain is reached (token 2 is out of the beam for the first 40 frames)
    are tested by windows that see 9 layers: the row is decoded again without the filter."""
    dec, lp, lens = _late_chain_case()
    assert dec.eps_iterations == 9
    got = {}
    for layers in (None, "2"):
        if layers is not None:
            monkeypatch.setenv("CUWFST_CPU_LATTICE_FILTER_LAYERS", layers)
        on, off = _on_and_off(monkeypatch, dec, lp, lens)
        monkeypatch.delenv("CUWFST_CPU_LATTICE_FILTER_LAYERS", raising=False)
        assert _same(on, off), layers
        got[layers] = on[2][:, 1].tolist()
        if layers is None:
            assert (on[2][:, 0] < [r[3] for r in on[1]]).all()  # filtered, arcs dropped
    assert got == {None: [0, 0], "2": [1, 1]}, got


def test_no_filter_with_an_unbounded_beam(monkeypatch):
    rng = np.random.default_rng(7)
    lp = random_log_probs(rng, 2, 50, 6, False)
    g = random_ctc_graph(rng, 25, 6, 3, 0.3)
    dec = Decoder(g, DecoderOptions(search_beam=10.0, output_beam=5e6), device="cpu")  # A + beam >= 2^22
    on, off = _on_and_off(monkeypatch, dec, lp, np.array([50, 40], np.int32))
    assert _same(on, off)
    assert (on[2][:, 0] == [r[3] for r in on[1]]).all()  # every recorded arc stored


@pytest.mark.parametrize("name", ["HLG", "TLG"])
def test_decode_api_lattices_with_the_filter(monkeypatch, name):
    """Decoder.decode(lattice=True) on the tiny HLG and TLG: the same hypotheses, lattices, word
    times and confidences with the filter on and off."""
    from conftest_data import TINY

    g = Graph.load(TINY / f"{name}.img")
    rng = np.random.default_rng(3)
    lp = random_log_probs(rng, 4, 120, g.arrays.vocab_size, True)
    lens = np.array([120, 100, 64, 31], np.int32)
    dec = Decoder(g, DecoderOptions(output_beam=8.0), device="cpu")
    got = {}
    for mode in ("on", "off"):
        monkeypatch.setenv("CUWFST_CPU_LATTICE_FILTER", mode)
        got[mode] = dec.decode(lp, lens, lattice=True)
    for a, b in zip(got["on"], got["off"]):
        assert a.words == b.words and a.score == b.score and a.word_times == b.word_times
        assert a.word_confidences == b.word_confidences
        for f in ("src", "dst", "frame", "graph_arc", "score", "acoustic"):
            assert getattr(a.lattice, f).tobytes() == getattr(b.lattice, f).tobytes(), f
        assert a.lattice.recorded_arcs == b.lattice.recorded_arcs


def test_long_rows_stay_filtered(monkeypatch):
    """1,500 frames (75 windows; the scores reach thousands): the assumed magnitudes hold, no row is
    decoded twice, and the filter still drops arcs at the end of the row."""
    rng = np.random.default_rng(21)
    g = random_ctc_graph(rng, 40, 8, 4, 0.3)
    T = 1500
    lp = random_log_probs(rng, 2, T, 8, False)
    dec = Decoder(g, DecoderOptions(search_beam=12.0, output_beam=6.0), device="cpu")
    on, off = _on_and_off(monkeypatch, dec, lp, np.array([T, T - 100], np.int32))
    assert _same(on, off)
    assert (on[2][:, 1] == 0).all()
    assert all(r[3] > s for r, s in zip(on[1], on[2][:, 0]))
    assert float(np.abs(on[0][2]).max()) > 1000.0  # the 1-best scores: magnitudes in the thousands


def _replay(dec: Decoder, lens: np.ndarray, rec):
    """ref_lattices_from_records' raw rows (the host replay of a GPU decode's records, here a CPU
    decode's): ([(states, arcs, scores, recorded)], 1-best scores, stats [B, 2])."""
    from cuwfst.decoder.lattice_records import RECORD_INTS

    B = len(lens)
    lens = np.ascontiguousarray(lens, np.int32)
    size, score = np.zeros((B, 3), np.int64), np.zeros(B, np.float32)
    o, ref = dec.options, dec._ref
    h = ref.mod.ref_lattices_from_records(
        ref.handle, lens, np.ascontiguousarray(rec.records, np.int32).reshape(-1, RECORD_INTS), rec.counts, rec.cutoffs,
        rec.sizes, np.zeros(B, np.uint8), o.search_beam, o.output_beam, o.min_active_states, o.max_active_states,
        o.allow_partial, dec.eps_iterations, 1, size, score, np.zeros((0, 0), np.float32), np.zeros(B, np.uint8))
    rows, stats = _take_rows(ref.mod, h, size)
    return rows, score, stats


def _replay_on_and_off(monkeypatch, dec, lens, rec, layers=None):
    monkeypatch.setenv("CUWFST_CPU_LATTICE_FILTER", "on")
    if layers is not None:
        monkeypatch.setenv("CUWFST_CPU_LATTICE_FILTER_LAYERS", layers)
    on = _replay(dec, lens, rec)
    monkeypatch.delenv("CUWFST_CPU_LATTICE_FILTER_LAYERS", raising=False)
    monkeypatch.setenv("CUWFST_CPU_LATTICE_FILTER", "off")
    off = _replay(dec, lens, rec)
    monkeypatch.delenv("CUWFST_CPU_LATTICE_FILTER")
    return on, off


def _same_replay(on, off) -> bool:
    if on[1].tobytes() != off[1].tobytes():
        return False
    return all(s1.tobytes() == s2.tobytes() and a1.tobytes() == a2.tobytes() and c1.tobytes() == c2.tobytes()
               and r1 == r2 for (s1, a1, c1, r1), (s2, a2, c2, r2) in zip(on[0], off[0]))


def test_the_records_replay_filtered(monkeypatch):
    """The host replay of a decode's records (the GPU lattice's path on epsilon graphs, records in
    any order inside a step) filters a real step's arcs as the CPU decode's walk does: the same
    lattices and 1-best scores as the unfiltered replay, with and without epsilon arcs."""
    from cuwfst.decoder.lattice_records import cpu_records
    from test_lattice_records import random_lattice_case, shuffle_within_steps

    dropped = {False: 0, True: 0}
    for seed in range(36):
        rng, graph, lp, lens, opts = random_lattice_case(seed)
        dec = Decoder(graph, opts, device="cpu")
        rec = shuffle_within_steps(cpu_records(dec, lp, lens), lens, rng)
        on, off = _replay_on_and_off(monkeypatch, dec, lens, rec)
        assert _same_replay(on, off), seed
        if dec.eps_iterations >= graph.max_epsilon_chain:  # (fewer passes than the longest chain, the
            assert (on[2][:, 1] == 0).all(), seed          # caller's choice, may see more layers)
        assert (off[2][:, 0] == [r[3] for r in off[0]]).all()
        dropped[dec.eps_iterations > 0] += sum(r[3] for r in on[0]) - int(on[2][:, 0].sum())
    assert dropped[False] > 0 and dropped[True] > 0, dropped


def test_the_records_replay_guard(monkeypatch):
    """The replay's guard: told to assume 2 epsilon layers on a graph whose times reach 9, the
    replay runs again without the filter (the same lattice either way)."""
    from cuwfst.decoder.lattice_records import cpu_records

    dec, lp, lens = _late_chain_case()
    rec = cpu_records(dec, lp, lens)
    got = {}
    for layers in (None, "2"):
        on, off = _replay_on_and_off(monkeypatch, dec, lens, rec, layers)
        assert _same_replay(on, off), layers
        got[layers] = on[2][:, 1].tolist()
    assert got == {None: [0, 0], "2": [1, 1]}, got
