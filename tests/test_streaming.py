"""StreamingDecoder (CPU): any chunking of an utterance, interleaved with other streams,
gives exactly `Decoder.decode(frames, online=True)`; partial results never retract a
committed word; compacted streams hold bounded memory; the lifecycle's errors."""

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, EndpointConfig, EndpointRule, StreamingDecoder
from helpers import feed_interleaved, random_ctc_graph, random_eps_graph_any, random_log_probs


def _random_chunks(rng, T):
    """A split of T frames into chunks, empty and 1-frame chunks included."""
    cuts, t = [], 0
    while t < T:
        c = int(rng.choice([0, 1, 1, 2, 3, 7, 16]))
        cuts.append(min(c, T - t))
        t += cuts[-1]
    if rng.random() < 0.5:
        cuts.insert(int(rng.integers(0, len(cuts) + 1)), 0)
    return cuts


def _same(a, b, where):
    assert a.empty == b.empty, where
    if a.empty:
        return
    assert np.float32(a.score) == np.float32(b.score), f"{where}: {a.score!r} vs {b.score!r}"
    assert (a.arcs, a.words, a.redirect_arc, a.reached_final) == (b.arcs, b.words, b.redirect_arc, b.reached_final), where
    assert (a.max_frontier, a.frontier_total, a.closure_added) == (b.max_frontier, b.frontier_total, b.closure_added), where


@pytest.mark.parametrize("seed", range(400))
def test_any_chunking_equals_online_decode(seed):
    rng = np.random.default_rng(4000 + seed)
    V = int(rng.integers(2, 12))
    if seed % 2:
        graph = random_eps_graph_any(rng, int(rng.choice([5, 40, 300])), V, 4, 0.7, cycles=bool(seed % 4 == 1),
                                     chain=int(rng.choice([1, 3])))
    else:
        graph = random_ctc_graph(rng, int(rng.choice([5, 40, 300])), V, 5, 0.3)
    S = int(rng.integers(1, 5))
    T = [int(rng.integers(0, 40)) for _ in range(S)]
    lps = [random_log_probs(rng, 1, max(t, 1), V, peaky=bool(seed % 3))[0][:t] for t in T]
    opts = DecoderOptions(search_beam=float(rng.choice([4.0, 10.0, 20.0])), min_active_states=int(rng.choice([0, 3])),
                          max_active_states=int(rng.choice([5, 50, 10000])), allow_partial=bool(seed % 5))
    ref = Decoder(graph, opts)
    want = [ref.decode(lps[i][None] if T[i] else np.zeros((1, 1, V), np.float32), [T[i]], online=True)[0]
            for i in range(S)]
    sd = StreamingDecoder(graph, opts, max_streams=8, compact=bool(seed % 3))
    streams = [sd.open_stream() for _ in range(S)]
    plans = [_random_chunks(rng, t) for t in T]
    committed = feed_interleaved(rng, sd, streams, lps, plans, f"seed {seed}")
    for i in range(S):
        got = sd.finalize(streams[i])
        _same(got, want[i], f"seed {seed} stream {i} chunks {plans[i]}")
        if not got.empty:  # (no path at all is possible without allow_partial)
            assert got.words[: len(committed[i])] == committed[i], "the final result retracted a committed word"


def test_online_differs_from_offline_only_in_the_last_frames_rule():
    """online=True switches k2's last-5-frames min_active rule off: with a frontier below
    max_active / 2 near the end the offline beam widens, the online one does not."""
    rng = np.random.default_rng(3)
    graph = random_ctc_graph(rng, 200, 8, 5, 0.3)
    lp = random_log_probs(rng, 1, 30, 8, peaky=False)
    opts = DecoderOptions(search_beam=3.0, min_active_states=1, max_active_states=400)
    dec = Decoder(graph, opts)
    off = dec.decode_snapshots(lp[0])
    # compare the frontier sizes of the last steps: offline may keep more, never fewer
    on = Decoder(graph, opts).decode(lp, online=True)[0]
    offh = dec.decode(lp)[0]
    assert on.frontier_total <= offh.frontier_total
    assert len(off) == 32


def test_lifecycle_errors_and_reuse():
    rng = np.random.default_rng(1)
    graph = random_ctc_graph(rng, 30, 5, 3, 0.3)
    sd = StreamingDecoder(graph, max_streams=2)
    a, b = sd.open_stream(), sd.open_stream()
    with pytest.raises(RuntimeError, match="all 2 streams are in use"):
        sd.open_stream()
    sd.release(a)
    c = sd.open_stream()  # the released slot is reusable
    with pytest.raises(ValueError, match="finalized or released"):
        sd.advance([a], [np.zeros((1, 5), np.float32)])
    with pytest.raises(ValueError, match="twice"):
        sd.advance([b, b], [np.zeros((1, 5), np.float32)] * 2)
    with pytest.raises(ValueError, match="columns"):
        sd.advance([b], [np.zeros((1, 4), np.float32)])
    with pytest.raises(ValueError, match=r"\[Tc, V\]"):
        sd.advance([b], [np.zeros((1, 1, 5), np.float32)])
    bad = np.log(np.full((2, 5), 0.2, np.float32))
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sd.advance([b], [bad])
    h0 = sd.finalize(c)  # finalize after 0 frames: only the final arcs of the start
    ref = Decoder(graph).decode(np.zeros((1, 1, 5), np.float32), [0], online=True)[0]
    _same(h0, ref, "zero frames")
    with pytest.raises(ValueError, match="finalized or released"):
        sd.finalize(c)
    with pytest.raises(TypeError, match="opened by this"):
        StreamingDecoder(graph).finalize(b)


def test_long_stream_memory_is_bounded_with_compaction():
    """A 3,000-frame stream fed in 16-frame chunks: with compaction the search log holds a
    window that does not grow with the stream; the result equals the online decode."""
    rng = np.random.default_rng(8)
    graph = random_ctc_graph(rng, 120, 10, 4, 0.3)
    T = 3000
    lp = random_log_probs(rng, 1, T, 10, peaky=True)[0]
    opts = DecoderOptions(search_beam=8.0, max_active_states=50, min_active_states=2)
    sd = StreamingDecoder(graph, opts)
    s = sd.open_stream()
    held = []
    for t in range(0, T, 16):
        sd.advance([s], [lp[t : t + 16]])
        held.append(sd.memory_stats(s)["winners"])
    first, last = max(held[10:40]), max(held[-30:])
    assert last <= 3 * first, f"the log grew from {first} to {last} entries"
    got = sd.finalize(s)
    _same(got, Decoder(graph, opts).decode(lp[None], online=True)[0], "long stream")


def test_endpoint_rules():
    rng = np.random.default_rng(2)
    graph = random_ctc_graph(rng, 30, 5, 3, 0.3)
    blank = np.full((60, 5), -20.0, np.float32)
    blank[:, 0] = 0.0  # every frame certainly blank
    cfg = EndpointConfig(rules=(EndpointRule(False, 1.0),), frame_shift_s=0.04)
    sd = StreamingDecoder(graph, DecoderOptions(search_beam=30.0), endpoint=cfg)
    s = sd.open_stream()
    sd.advance([s], [blank[:20]])  # 0.8 s of silence: not yet
    assert not s.endpoint
    sd.advance([s], [blank[20:30]])  # 1.2 s
    assert s.endpoint
    long = StreamingDecoder(graph, endpoint=EndpointConfig(rules=(EndpointRule(False, 0.0, 2.0),)))
    s2 = long.open_stream()
    long.advance([s2], [blank[:49]])
    assert not s2.endpoint
    long.advance([s2], [blank[49:51]])  # 51 frames = 2.04 s
    assert s2.endpoint


def test_decode_all_equals_decoding_each_alone():
    rng = np.random.default_rng(12)
    graph = random_eps_graph_any(rng, 60, 6, 4, 0.6, cycles=False, chain=2)
    utts = [random_log_probs(rng, 1, int(rng.integers(1, 30)), 6, peaky=True)[0] for _ in range(11)]
    dec = Decoder(graph, DecoderOptions(search_beam=10.0, max_active_states=60))
    got = list(dec.decode_all(iter(utts), progress=False, chunk=4))
    assert len(got) == 11
    for u, h in zip(utts, got):
        _same(h, dec.decode(u)[0], "decode_all")
    with pytest.raises(ValueError, match=r"\[T, V\]"):
        list(dec.decode_all([np.zeros((2, 3, 6), np.float32)], progress=False))


def test_finalize_many_equals_one_by_one_and_frees_every_search():
    """finalize([s1, s2, ...]) returns what finalizing each alone returns, in order; every
    finalized or released stream's search is freed (the CPU searches used to outlive their
    finalize: one winners log leaked per stream)."""
    rng = np.random.default_rng(31)
    graph = random_ctc_graph(rng, 60, 8, 4, 0.3)
    opts = DecoderOptions(search_beam=10.0, max_active_states=50)
    lps = [random_log_probs(rng, 1, int(t), 8, peaky=True)[0] for t in (5, 17, 1, 30)]
    sd = StreamingDecoder(graph, opts, max_streams=8)
    mod = sd._backend.mod
    live0 = mod.ref_streams_live()
    one = []
    for lp in lps:
        s = sd.open_stream()
        sd.advance([s], [lp])
        one.append(sd.finalize(s))
    many_streams = sd.open_streams(len(lps))
    assert sd.open_streams(0) == []
    sd.advance(many_streams, lps)
    dropped = sd.open_stream()
    many = sd.finalize(many_streams)
    sd.release(dropped)
    assert [(h.words, h.score, h.arcs) for h in many] == [(h.words, h.score, h.arcs) for h in one]
    assert all(s.closed for s in many_streams) and sd.finalize([]) == []
    assert mod.ref_streams_live() == live0
    with pytest.raises(ValueError, match="twice"):
        s = sd.open_stream()
        sd.finalize([s, s])
