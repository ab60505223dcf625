"""Lanes as slots on the GPU: continuous batching (Decoder(batching="continuous")) and
streams (StreamingDecoder(device="cuda")) against the CPU reference: identical words, arcs
and float32 scores, and the same search statistics, with GC rounds and arena growth forced
by a tiny initial arena. Skipped where there is no CUDA GPU."""

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, StreamingDecoder
from cuwfst.decoder.gpu import chain_closure_ok
from helpers import feed_interleaved, path_score_f32, random_ctc_graph, random_eps_graph_any, random_log_probs

pytestmark = pytest.mark.gpu
TOTALS = {"rows": 0, "ties": 0, "streams": 0}


def _same(graph, lp_row, c, g, where):
    TOTALS["rows"] += 1
    assert g.overflow == 0, f"{where}: overflow {g.overflow}"
    assert c.empty == g.empty, where
    if c.empty:
        return
    assert np.float32(c.score) == np.float32(g.score), f"{where}: {c.score!r} vs {g.score!r}"
    assert (c.reached_final, c.redirect_arc >= 0) == (g.reached_final, g.redirect_arc >= 0), where
    assert (c.max_frontier, c.frontier_total, c.closure_added) == (g.max_frontier, g.frontier_total, g.closure_added), where
    if (c.arcs, c.redirect_arc) != (g.arcs, g.redirect_arc):
        assert path_score_f32(graph, lp_row, g.arcs, g.redirect_arc) == np.float32(c.score), where
        TOTALS["ties"] += 1
    else:
        assert c.words == g.words, where


def _case(seed):
    rng = np.random.default_rng(8000 + seed)
    V = int(rng.integers(2, 20))
    if seed % 2:
        graph = random_eps_graph_any(rng, int(rng.choice([8, 60, 400])), V, 4, 0.7, cycles=bool(seed % 4 == 1),
                                     chain=int(rng.choice([1, 3])))
    else:
        graph = random_ctc_graph(rng, int(rng.choice([8, 60, 400])), V, 5, 0.3)
    opts = DecoderOptions(search_beam=float(rng.choice([5.0, 12.0])), min_active_states=int(rng.choice([0, 3])),
                          max_active_states=int(rng.choice([6, 100, 10000])), allow_partial=bool(seed % 3))
    return rng, graph, V, opts


@pytest.mark.parametrize("seed", range(60))
def test_continuous_batching_equals_cpu(seed):
    rng, graph, V, opts = _case(seed)
    N = int(rng.integers(5, 40))
    T = int(rng.integers(1, 70))
    lens = rng.integers(0, T + 1, size=N).astype(np.int32)
    lens[0] = T
    lp = random_log_probs(rng, N, T, V, peaky=bool(seed % 2))
    online = bool(seed % 5 == 4)
    cpu = Decoder(graph, opts).decode(lp, lens, online=online)
    dec = Decoder(graph, opts, device="cuda", max_lanes=int(rng.choice([1, 3, 8])), batching="continuous",
                  segment=int(rng.choice([1, 5, 32])), arena_entries=int(rng.choice([4096, 1 << 20])))
    gpu = dec.decode(lp, lens, online=online)
    again = dec.decode(lp, lens, online=online)  # the decoder is reusable, and deterministic in score
    for b in range(N):
        _same(graph, lp[b], cpu[b], gpu[b], f"seed {seed} row {b}")
        assert np.float32(again[b].score) == np.float32(gpu[b].score)


def test_continuous_equals_padded_on_the_tiny_tlg():
    from importlib.resources import files
    from cuwfst import Graph
    data = files("cuwfst") / "data"
    z = np.load(str(data / "demo" / "tiny_utts.npz"))
    lp = z["log_probs_fp16"].astype(np.float32)
    lens = z["lengths"].astype(np.int32)
    for name in ("TLG.img", "HLG.img"):
        graph = Graph.load(str(data / "tiny" / name))
        padded = Decoder(graph, device="cuda", max_lanes=3).decode(lp, lens)
        cont = Decoder(graph, device="cuda", max_lanes=3, batching="continuous", arena_entries=1 << 16).decode(lp, lens)
        cpu = Decoder(graph).decode(lp, lens)
        for b in range(lp.shape[0]):
            _same(graph, lp[b], cpu[b], cont[b], f"{name} continuous row {b}")
            _same(graph, lp[b], cpu[b], padded[b], f"{name} padded row {b}")


@pytest.mark.parametrize("refill", ["device", "segment"])
def test_continuous_run_left_half_way_then_decoded_again(refill, monkeypatch):
    """Continuous batching turns each segment's rows into hypotheses while the GPU runs the
    next (gpu_decode_many_begin / launch / wait). A failure there (here make_hypotheses raising
    on its second call, as a Ctrl-C would) aborts the native run with a segment in flight;
    the decoder then decodes the same rows again equal to the CPU, and a padded batch too."""
    rng, graph, V, opts = _case(2)
    N, T = 24, 40
    lens = rng.integers(1, T + 1, size=N).astype(np.int32)
    lp = random_log_probs(rng, N, T, V, peaky=True)
    cpu = Decoder(graph, opts).decode(lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=3, batching="continuous", segment=8, refill=refill)
    real, calls = Decoder.make_hypotheses, {"n": 0}

    def failing(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self, *a, **kw)

    monkeypatch.setattr(Decoder, "make_hypotheses", failing)
    with pytest.raises(KeyboardInterrupt):
        dec.decode(lp, lens)
    monkeypatch.setattr(Decoder, "make_hypotheses", real)
    assert calls["n"] == 2  # the run stopped at its second segment's rows
    gpu = dec.decode(lp, lens)
    for b in range(N):
        _same(graph, lp[b], cpu[b], gpu[b], f"{refill} row {b}")
    # and a batch on the same native decoder (its lanes were released by the abort)
    padded = dec.decode(lp[:3], lens[:3])  # (rows <= lanes: one whole-batch Decode)
    for b in range(3):
        _same(graph, lp[b], cpu[b], padded[b], f"{refill} padded row {b}")


def _chunks(rng, T):
    cuts, t = [], 0
    while t < T:
        c = int(rng.choice([0, 1, 2, 5, 8, 16]))
        cuts.append(min(c, T - t))
        t += cuts[-1]
    return cuts


@pytest.mark.parametrize("seed", range(40))
def test_gpu_streams_equal_cpu_online_decode(seed):
    rng, graph, V, opts = _case(seed)
    S = int(rng.integers(1, 6))
    T = [int(rng.integers(0, 50)) for _ in range(S)]
    lps = [random_log_probs(rng, 1, max(t, 1), V, peaky=bool(seed % 2))[0][:t] for t in T]
    ref = Decoder(graph, opts)
    want = [ref.decode(lps[i][None] if T[i] else np.zeros((1, 1, V), np.float32), [T[i]], online=True)[0]
            for i in range(S)]
    sd = StreamingDecoder(graph, opts, device="cuda", max_streams=8, arena_entries=int(rng.choice([4096, 1 << 20])))
    streams = [sd.open_stream() for _ in range(S)]
    plans = [_chunks(rng, t) for t in T]
    committed = feed_interleaved(rng, sd, streams, lps, plans, f"seed {seed}")
    for i in range(S):
        got = sd.finalize(streams[i])
        TOTALS["streams"] += 1
        _same(graph, lps[i] if T[i] else np.zeros((1, V), np.float32), want[i], got, f"seed {seed} stream {i}")
        if not got.empty:
            assert got.words[: len(committed[i])] == committed[i]


def _tight_arena(sd, graph, opts, slack, memory):
    """Swap the streaming decoder's instance for one whose arena can never grow past one
    worst-case step of every lane plus `slack` entries, its winners log held the `memory`
    way: the arena guard must make steps wait and the advance run in rounds, with the
    results unchanged. arena_max bounds a lazy log as it bounds an eager one: the log's
    reservation is arena_max entries and its published limit (what the kernels and the
    guard read) never passes it, whatever the 2 MiB pieces behind it could hold."""
    import gc

    from cuwfst.decoder.gpu import GpuInstance

    b = sd._frontend._gpu
    q, lanes, eps = b.main.main_q, b.main.max_lanes, b.main.eps_iterations
    claims = b.main.claims_cap
    b.main = sd._backend.inst = None
    gc.collect()
    arena_max = 2 * lanes * (claims + eps * q) + slack  # the guard keeps half the arena free
    b.main = sd._backend.inst = GpuInstance(b.mod, b.uploaded, graph, opts, b.index, main_q=q, arena_entries=1024,
                                            arena_max=arena_max, **dict(b.kw, memory=memory))
    st = b.main.mem_stats()
    assert st["arena_capacity"] == 1024 and st["vmm"] == (memory == "lazy"), st  # (the H200's driver has VMM)
    return b.main


@pytest.mark.parametrize("seed,memory", [(s, ("lazy", "eager")[(s // 2) % 2]) for s in range(16)])
def test_gpu_streams_wait_for_arena_room(seed, memory):
    """Many streams' chunks in an arena that holds one worst-case step and a few hundred
    entries more: each advance runs in several rounds (steps wait for the GC to free room),
    and every stream still equals the CPU's online decode; no stream is flagged. Both ways
    of holding the log: lazy (grows in place, the captured graphs replay and the guard reads
    the new limit) and eager (replaced by a larger copy, the graphs captured again)."""
    rng, graph, V, opts = _case(seed)
    S = int(rng.integers(3, 7))
    T = [int(rng.integers(20, 70)) for _ in range(S)]
    lps = [random_log_probs(rng, 1, t, V, peaky=bool(seed % 2))[0] for t in T]
    ref = Decoder(graph, opts)
    want = [ref.decode(lps[i][None], [T[i]], online=True)[0] for i in range(S)]
    sd = StreamingDecoder(graph, opts, device="cuda", max_streams=S)
    q = sd._frontend._gpu.main.main_q
    _tight_arena(sd, graph, opts, slack=max(8192, 24 * S * q), memory=memory)  # room for the live windows
    streams = [sd.open_stream() for _ in range(S)]
    pos = [0] * S
    while any(pos[i] < T[i] for i in range(S)):
        todo = [i for i in range(S) if pos[i] < T[i]]
        chunks = []
        for i in todo:
            c = int(rng.integers(1, 24))
            chunks.append(lps[i][pos[i] : pos[i] + c])
            pos[i] += len(chunks[-1])
        sd.advance([streams[i] for i in todo], chunks)
    for i in range(S):
        got = sd.finalize(streams[i])
        TOTALS["streams"] += 1
        _same(graph, lps[i], want[i], got, f"seed {seed} {memory} stream {i}")


@pytest.mark.parametrize("memory", ["lazy", "eager"])
def test_gpu_streams_wait_rounds_happen(memory):
    """The guard is exercised, with the log held either way: over the tight-arena cases,
    advances took more rounds than calls."""
    rounds = calls = short = 0
    for seed in range(8):
        rng = np.random.default_rng(8800 + seed)
        V = 12
        graph = random_ctc_graph(rng, 400, V, 5, 0.3)
        opts = DecoderOptions(search_beam=12.0, max_active_states=10000)
        sd = StreamingDecoder(graph, opts, device="cuda", max_streams=4)
        inst = _tight_arena(sd, graph, opts, slack=4 * 8 * sd._frontend._gpu.main.main_q, memory=memory)
        lps = [random_log_probs(rng, 1, 60, V, peaky=False)[0] for _ in range(4)]
        want = [Decoder(graph, opts).decode(lp[None], [60], online=True)[0] for lp in lps]
        streams = [sd.open_stream() for _ in range(4)]
        try:
            for start in range(0, 60, 20):
                sd.advance(streams, [lp[start : start + 20] for lp in lps])
                calls += 1
        except RuntimeError as e:  # the live windows outgrew the slack: a clear error, not a wrong answer
            assert "cannot hold one step" in str(e), e
            assert all(st.frames == sd.memory_stats(st)["frames"] for st in streams)  # counts follow the decoder
            short += 1
            continue
        for i in range(4):
            _same(graph, lps[i], want[i], sd.finalize(streams[i]), f"seed {seed} {memory} stream {i}")
        rounds += inst.mem_stats()["advance_rounds"]
    assert short < 8 and rounds > calls, (memory, rounds, calls, short)


@pytest.mark.parametrize("memory", ["lazy", "eager"])
def test_gpu_stream_log_is_sized_by_the_steps_taken(memory):
    """The arena guard holds a step back unless the log has room for twice what that step can
    append (each stepping lane's slots, at most claims_cap, plus the closure passes), not for
    every lane's worst case: 64 streams on a graph of 200,000 states (claims_cap 160,000 a
    lane) with peaky posteriors (frontiers of at most ~1,000 tokens) keep the winners log far
    below the old reservation, 2 x 64 x claims_cap entries (and below the old room estimate of
    twice the largest frontier, at least 1,024 a frame: 2.1 M entries for the first chunk), and
    equal the CPU's online decode (steps held back are covered by the tight-arena tests above,
    which count the rounds). The finalize reserves one entry a stream
    (a final step's arcs all end in the final state), so the log does not grow for it."""
    rng = np.random.default_rng(77)
    V = 30
    graph = random_ctc_graph(rng, 200000, V, 5, 0.3)
    opts = DecoderOptions(search_beam=10.0, max_active_states=10000)
    S, T = 64, 48
    lps = [random_log_probs(rng, 1, T, V, peaky=True)[0] for _ in range(S)]
    ref = Decoder(graph, opts)
    want = [ref.decode(lp[None], [T], online=True)[0] for lp in lps]
    sd = StreamingDecoder(graph, opts, device="cuda", max_streams=S, memory=memory, arena_entries=1024)
    inst = sd._frontend._gpu.main
    old = 2 * S * (inst.claims_cap + inst.eps_iterations * inst.main_q)
    streams = sd.open_streams(S)
    for start in range(0, T, 16):
        sd.advance(streams, [lp[start : start + 16] for lp in lps])
    w = sd.memory_stats()["pools"]["winners"]
    rounds = inst.mem_stats()["advance_rounds"]
    print(memory, "winners log after the advances:", w["capacity_entries"], "entries, high water",
          w["high_water_entries"], "; the old reservation", old, "; rounds", rounds)
    assert inst.claims_cap == 160000 and old == 2 * 64 * 160000
    assert w["high_water_entries"] <= w["capacity_entries"] <= old // 16, (w, old)
    assert rounds >= T // 16, rounds
    got = sd.finalize(streams)
    after = sd.memory_stats()["pools"]["winners"]
    assert after["capacity_entries"] == w["capacity_entries"], (after, w)
    for i in range(S):
        TOTALS["streams"] += 1
        _same(graph, lps[i], want[i], got[i], f"{memory} stream {i}")


def test_gpu_stream_lifecycle_and_long_stream_memory():
    rng = np.random.default_rng(21)
    graph = random_ctc_graph(rng, 120, 10, 4, 0.3)
    opts = DecoderOptions(search_beam=8.0, max_active_states=50, min_active_states=2)
    sd = StreamingDecoder(graph, opts, device="cuda", max_streams=2, arena_entries=1 << 14)
    a, b = sd.open_stream(), sd.open_stream()
    with pytest.raises(RuntimeError, match="all 2 streams are in use"):
        sd.open_stream()
    h0 = sd.finalize(b)  # after 0 frames
    _same(graph, np.zeros((1, 10), np.float32), Decoder(graph, opts).decode(np.zeros((1, 1, 10), np.float32), [0],
                                                                             online=True)[0], h0, "zero frames")
    sd.release(a)
    s = sd.open_stream()  # a released lane is reused
    T = 4000
    lp = random_log_probs(rng, 1, T, 10, peaky=True)[0]
    held = []
    for t in range(0, T, 16):
        sd.advance([s], [lp[t : t + 16]])
        held.append(sd.memory_stats(s)["winners"])
    first, last = max(held[10:40]), max(held[-40:])
    assert last <= 3 * first, f"the GPU log grew from {first} to {last} entries"
    got = sd.finalize(s)
    _same(graph, lp, Decoder(graph, opts).decode(lp[None], online=True)[0], got, "long stream")


def test_report_totals():
    print(f"\nlanes: {TOTALS['rows']} rows/streams equal to the CPU ({TOTALS['streams']} streams), "
          f"{TOTALS['ties']} exact-score ties, 0 mismatches")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gpu_streams_take_cuda_chunks_without_the_host(dtype):
    """CUDA torch chunks are padded and checked on the GPU (no copy through the host): the
    same results as numpy chunks of the same values, zero-length chunks included, and
    finalize of a list equals finalize one by one."""
    torch = pytest.importorskip("torch")
    rng, graph, V, opts = _case(3)
    S = 4
    T = [int(t) for t in rng.integers(10, 40, S)]
    lps = [random_log_probs(rng, 1, t, V, peaky=True)[0].astype(dtype) for t in T]
    results = []
    for kind in ("numpy", "cuda"):
        sd = StreamingDecoder(graph, opts, device="cuda", max_streams=S)
        streams = sd.open_streams(S) if kind == "cuda" else [sd.open_stream() for _ in range(S)]
        pos = [0] * S
        plan = np.random.default_rng(5)
        while any(pos[i] < T[i] for i in range(S)):
            chunks = []
            for i in range(S):
                c = int(plan.integers(0, 9))  # 0: an empty chunk for that stream
                x = lps[i][pos[i] : pos[i] + c]
                pos[i] += len(x)
                chunks.append(torch.from_numpy(np.ascontiguousarray(x)).cuda() if kind == "cuda" else x)
            sd.advance(streams, chunks)
        results.append(sd.finalize(streams[:2]) + [sd.finalize(s) for s in streams[2:]])
    ref = Decoder(graph, opts)
    for i in range(S):
        want = ref.decode(lps[i].astype(np.float32)[None], [T[i]], online=True)[0] if dtype == "float32" else None
        a, b = results[0][i], results[1][i]
        assert (a.words, a.arcs, np.float32(a.score)) == (b.words, b.arcs, np.float32(b.score)), f"stream {i}"
        if want is not None:
            _same(graph, lps[i], want, b, f"stream {i}")
    with pytest.raises(ValueError, match="NaN"):
        sd = StreamingDecoder(graph, opts, device="cuda", max_streams=1)
        s = sd.open_stream()
        bad = torch.full((3, V), -float(np.log(V)), device="cuda")  # uniform log-probs
        bad[1, 0] = float("nan")
        sd.advance([s], [bad])


@pytest.mark.parametrize("source", ["numpy16", "numpy32", "cuda"])
def test_gpu_decode_all_is_continuous_and_exact(source):
    """decode_all on the GPU batches each chunk continuously (whatever `batching` says), keeps
    float16 rows float16, pads CUDA rows on the device; each result equals the CPU's."""
    torch = pytest.importorskip("torch")
    rng, graph, V, opts = _case(6)
    lens = [int(t) for t in rng.integers(1, 45, 11)]
    lps = [random_log_probs(rng, 1, t, V, peaky=True)[0].astype(np.float16).astype(np.float32) for t in lens]
    if source == "numpy16":
        utts = [x.astype(np.float16) for x in lps]
    elif source == "cuda":
        utts = [torch.from_numpy(x).cuda() for x in lps]
    else:
        utts = lps
    dec = Decoder(graph, opts, device="cuda", max_lanes=3)  # batching="padded"
    got = list(dec.decode_all(iter(utts), progress=False, chunk=7))
    assert dec._gpu.batching == "padded"
    ref = Decoder(graph, opts)
    for i, (x, h) in enumerate(zip(lps, got)):
        _same(graph, x, ref.decode(x[None], [len(x)])[0], h, f"{source} utterance {i}")


@pytest.mark.parametrize("lanes", [1024, 1100])
def test_epsilon_graph_past_the_closure_lists_lane_limit(lanes):
    """closure = lists serves at most 1,024 lanes (EpsListExpandKernel's one-CTA lane scan),
    and so does closure = chain, which starts from the same lists; a larger decoder on an
    epsilon graph falls back to the scan closure: every sampled row of a full batch, lanes
    past 1,024 included, equals the CPU decoder."""
    rng, graph, V, opts = _case(1)  # odd seeds: an epsilon graph
    assert graph.num_epsilon_arcs > 0
    T = [int(t) for t in rng.integers(1, 20, lanes)]
    lp = random_log_probs(rng, lanes, max(T), V, peaky=True)
    lens = np.array(T, np.int32)
    dec = Decoder(graph, opts, device="cuda", max_lanes=lanes)
    by_lists = 2 if chain_closure_ok(graph, dec.eps_iterations) else 1  # "new": by chains where allowed
    assert dec._gpu.main.mem_stats()["closure_lists"] == (by_lists if lanes <= 1024 else 0)
    got = dec.decode(lp, lens)
    ref = Decoder(graph, opts)
    sample = sorted(set(rng.choice(lanes, 16, replace=False).tolist()) | {lanes - 1, 1023})
    for b in sample:
        _same(graph, lp[b], ref.decode(lp[b : b + 1], lens[b : b + 1])[0], got[b], f"row {b} of {lanes}")


def test_four_thousand_lanes_in_one_decoder():
    """A decoder of 4,096 lanes (kMaxLanes): a batch of 4,096 rows and 4,096 streams advanced in
    one call, sampled rows and streams equal to the CPU decoder; 4,097 is a clear error."""
    rng, graph, V, opts = _case(2)
    N = 4096
    T = [int(t) for t in rng.integers(1, 24, N)]
    lp = random_log_probs(rng, N, max(T), V, peaky=True)
    lens = np.array(T, np.int32)
    dec = Decoder(graph, opts, device="cuda", max_lanes=N)
    got = dec.decode(lp, lens)
    ref = Decoder(graph, opts)
    for b in rng.choice(N, 24, replace=False).tolist():
        _same(graph, lp[b], ref.decode(lp[b : b + 1], lens[b : b + 1])[0], got[b], f"row {b} of {N}")
    sd = StreamingDecoder(graph, opts, device="cuda", max_streams=N)
    streams = sd.open_streams(N)
    sd.advance(streams, [lp[b, : T[b]] for b in range(N)])
    sample = rng.choice(N, 24, replace=False).tolist()
    hyps = sd.finalize([streams[b] for b in sample])
    for b, h in zip(sample, hyps):
        want = ref.decode(lp[b : b + 1], lens[b : b + 1], online=True)[0]
        _same(graph, lp[b], want, h, f"stream {b} of {N}")
    with pytest.raises(ValueError, match="at most 4096"):
        StreamingDecoder(graph, opts, device="cuda", max_streams=N + 1)
    with pytest.raises(ValueError, match="max_lanes must be in"):
        Decoder(graph, opts, device="cuda", max_lanes=N + 1)


@pytest.mark.parametrize("seed", range(48))
def test_device_refill_equals_cpu(seed):
    """refill="device": a lane whose row ends inside a segment takes the next queued row on the
    GPU (in Finalize's last CTA of the lane, or RefillKernel after it), its start closure in that step's closure passes; the ended
    row's result comes from its done record (RefillBacktrackKernel). Every row equals the CPU's,
    search statistics included, with segments from 1 step to longer than any row, queues and
    done records that run out inside a segment (one lane: 4 queued rows and 4 records), rows of
    0 and 1 frames, GC rounds between segments (a small log), epsilon graphs (odd seeds) under
    each closure (scan, lists, chain where the graph allows it), with and without the fused max
    and programmatic dependent launch, and online rows (no refill:
    the host refills as before). The refill must have happened, and it may not send more rows
    to the rescue than the host's refill does (the rescue would hide a refill that leaves a
    lane dirty: the rows would come back right, flagged and re-decoded)."""
    rng, graph, V, opts = _case(100 + seed)
    N = int(rng.integers(6, 60))
    T = int(rng.integers(1, 50))
    lens = rng.integers(0, T + 1, size=N).astype(np.int32)
    lens[0] = T
    lens[1:4] = [0, 1, min(T, 2)]
    lp = random_log_probs(rng, N, T, V, peaky=bool(seed % 2))
    online = seed % 8 == 7
    cpu = Decoder(graph, opts).decode(lp, lens, online=online)
    lanes = int(rng.choice([1, 3, 8]))
    kw = dict(max_lanes=lanes, batching="continuous", segment=int(rng.choice([1, 5, 64, 300])),
              arena_entries=int(rng.choice([4096, 1 << 20])), closure=str(rng.choice(["scan", "lists", "chain"])),
              fused_max=seed % 3 == 0, pdl=seed % 4 < 2,  # (the refill beside the fused max and PDL launches)
              refill_kernel=seed % 5 == 4)  # (RefillKernel after Finalize, else in Finalize's last CTAs)
    dec = Decoder(graph, opts, device="cuda", refill="device", **kw)
    gpu = dec.decode(lp, lens, online=online)
    for b in range(N):
        _same(graph, lp[b], cpu[b], gpu[b], f"refill seed {seed} row {b}")
    host = Decoder(graph, opts, device="cuda", refill="segment", **kw)
    host.decode(lp, lens, online=online)
    assert dec._gpu.stats["rescued_rows"] <= host._gpu.stats["rescued_rows"], (dec._gpu.stats, host._gpu.stats)
    st = dec._gpu.main.mem_stats()
    assert st["refill_kernel"] == (seed % 5 == 4), st  # the refill ran where the test asked
    refills = st["refills"]
    if online:
        assert refills == 0, refills  # a stream-like row's length is not the plan's to know: no refill
    elif N > lanes and dec._gpu.segment > T + 1:
        # the first rows all end inside the first segment, with rows still queued
        assert refills > 0, (lanes, dec._gpu.segment, N)
    again = dec.decode(lp, lens, online=online)  # reusable, the same scores
    assert [np.float32(h.score) for h in again] == [np.float32(h.score) for h in gpu]


def test_device_refill_across_gc_rounds():
    """refill="device" with a winners log small enough that GC rounds run between segments: a
    row a lane held when a round drained its prefix ends inside a later segment and is
    replaced there (its done record gets that prefix; HarvestRefills). Rows equal the CPU's;
    both the rounds and the refills happened."""
    rng, graph, V, opts = _case(2)
    N, T = 40, 60
    lens = rng.integers(30, T + 1, size=N).astype(np.int32)
    lp = random_log_probs(rng, N, T, V, peaky=False)
    cpu = Decoder(graph, opts).decode(lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=4, batching="continuous", refill="device", segment=16,
                  arena_entries=4096)
    gpu = dec.decode(lp, lens)
    for b in range(N):
        _same(graph, lp[b], cpu[b], gpu[b], f"refill with GC row {b}")
    st = dec._gpu.main.mem_stats()
    assert st["refills"] > 0 and st["gc_rounds"] > 0, st


def test_pad_on_device_equals_pad_sequence():
    """decode_all's and the streams' packing on the device (one concatenation and one scatter)
    gives what torch's pad_sequence gives: rows of 0 frames (of any width), mixed dtypes
    (float32 then), one row, every row empty."""
    import torch

    from cuwfst.decoder.inputs import pad_on_device

    rng = np.random.default_rng(5)
    for case in range(40):
        N, V = int(rng.integers(1, 12)), int(rng.integers(1, 7))
        lens = rng.integers(0, 9, size=N)
        if case % 7 == 0:
            lens[:] = 0
        dts = [torch.float16 if (case % 3 == 0 and i % 2) else torch.float32 for i in range(N)]
        rows = [torch.tensor(rng.normal(size=(int(n), V if n or i % 2 else V + 3)), dtype=dts[i], device="cuda")
                for i, n in enumerate(lens)]
        packed, got = pad_on_device(torch, rows, "row")
        assert got.tolist() == lens.tolist()
        if lens.max() == 0:
            # (as before: one zero frame as wide as the widest row)
            assert tuple(packed.shape) == (N, 1, max(int(r.shape[1]) for r in rows)) and not packed.any()
            continue
        dtype = torch.float32 if len(set(dts)) > 1 else dts[0]
        want = torch.nn.utils.rnn.pad_sequence([r.to(dtype) if len(r) else r.new_zeros((0, V), dtype=dtype)
                                                for r in rows], batch_first=True)
        assert packed.dtype == want.dtype and torch.equal(packed, want), case
