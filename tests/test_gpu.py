"""The GPU decoder against the CPU reference: identical words, arcs and float32 scores.

Run on a machine with a CUDA GPU (skipped elsewhere). Exact-score ties may pick another
path of the bit-identical float32 score; that is checked, counted and printed.
"""

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from helpers import case_inputs, load_cases, path_score_f32, random_ctc_graph, random_log_probs

pytestmark = pytest.mark.gpu

BEAMS = [
    (20.0, 8.0, 30, 10000),   # icefall defaults
    (8.0, 5.0, 5, 200),
    (3.0, 2.0, 1, 50),        # tight beam
    (15.0, 8.0, 1, 4),        # max_active small: the beam shrinks every frame
    (2.0, 2.0, 100, 1000),    # min_active large: the beam widens
    (10.0, 4.0, 0, 3),
]
TOTALS = {"rows": 0, "ties": 0}


def _compare(graph, lp, lens, cpu_h, gpu_h, where):
    assert len(cpu_h) == len(gpu_h)
    for b, (c, g) in enumerate(zip(cpu_h, gpu_h)):
        TOTALS["rows"] += 1
        assert g.overflow == 0, f"{where} row {b}: overflow {g.overflow}"
        assert c.empty == g.empty, f"{where} row {b}: cpu empty {c.empty}, gpu empty {g.empty}"
        assert (c.max_frontier, c.frontier_total) == (g.max_frontier, g.frontier_total), \
            f"{where} row {b}: search statistics"
        if c.empty:
            continue
        assert np.float32(c.score) == np.float32(g.score), f"{where} row {b}: {c.score!r} vs {g.score!r}"
        assert (c.reached_final, c.redirect_arc >= 0) == (g.reached_final, g.redirect_arc >= 0), where
        if (c.arcs, c.redirect_arc) != (g.arcs, g.redirect_arc):
            # an exact-score tie: the GPU's path must score bit-identically under our arithmetic
            assert path_score_f32(graph, lp[b], g.arcs, g.redirect_arc) == np.float32(c.score), where
            TOTALS["ties"] += 1
        else:
            assert c.words == g.words


def test_k2_goldens_gpu_equals_cpu():
    for case in load_cases("k2_goldens.json.gz") + load_cases("k2-allow-partial-cases.json.gz"):
        graph, lp, lens, opts = case_inputs(case)
        cpu = Decoder(graph, opts).decode(lp, lens)
        gpu = Decoder(graph, opts, device="cuda").decode(lp, lens)
        _compare(graph, lp, lens, cpu, gpu, case.get("name", "allow_partial case"))


@pytest.mark.parametrize("seed", range(300))
def test_random_graphs_gpu_equals_cpu(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([3, 10, 40, 200, 1500]))
    V = int(rng.integers(2, 40))
    graph = random_ctc_graph(rng, n, V, degree=int(rng.integers(1, 10)), final_prob=float(rng.choice([0.02, 0.2, 0.8])))
    B = int(rng.integers(1, 9))
    T = int(rng.integers(1, 80))
    lens = rng.integers(0, T + 1, size=B).astype(np.int32)
    lens[0] = T
    if B > 2:
        lens[1] = 1
        lens[2] = 0
    lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
    s, o, mn, mx = BEAMS[seed % len(BEAMS)]
    opts = DecoderOptions(search_beam=s, output_beam=o, min_active_states=mn, max_active_states=mx,
                          allow_partial=bool(seed % 3 != 0))
    cpu = Decoder(graph, opts).decode(lp, lens)
    walker = "thread" if seed % 4 == 0 else "warp"
    gpu = Decoder(graph, opts, device="cuda", max_lanes=int(rng.choice([1, 4, 32])), walker=walker,
                  walk_blocks=int(rng.choice([0, 1, 7, 132]))).decode(lp, lens)
    _compare(graph, lp, lens, cpu, gpu, f"seed {seed} ({walker} walker)")


def test_loaded_image_on_gpu(tmp_path):
    from cuwfst import Graph
    rng = np.random.default_rng(3)
    graph = random_ctc_graph(rng, 200, 10, 4, 0.2)
    graph.save(tmp_path / "g.img")
    lp = random_log_probs(rng, 3, 20, 10, peaky=True)
    a = Decoder(graph).decode(lp)
    b = Decoder(Graph.load(tmp_path / "g.img"), device="cuda").decode(lp)
    _compare(graph, lp, None, a, b, "loaded image")


def test_batch_equals_rows_and_repeatable():
    rng = np.random.default_rng(7)
    graph = random_ctc_graph(rng, 500, 30, 6, 0.1)
    lp = random_log_probs(rng, 16, 60, 30, peaky=True)
    lens = rng.integers(1, 61, size=16).astype(np.int32)
    dec = Decoder(graph, DecoderOptions(search_beam=12.0, max_active_states=300), device="cuda")
    batch = dec.decode(lp, lens)
    again = dec.decode(lp, lens)
    for b in range(16):
        one = dec.decode(lp[b : b + 1], lens[b : b + 1])[0]
        assert np.float32(one.score) == np.float32(batch[b].score)
        assert np.float32(again[b].score) == np.float32(batch[b].score)
        if one.arcs != batch[b].arcs:
            assert path_score_f32(graph, lp[b], one.arcs) == np.float32(batch[b].score)


def test_without_cuda_graphs_and_fp16():
    rng = np.random.default_rng(11)
    graph = random_ctc_graph(rng, 300, 20, 5, 0.2)
    lp = random_log_probs(rng, 5, 40, 20, peaky=True)
    opts = DecoderOptions(search_beam=10.0)
    ref = Decoder(graph, opts).decode(lp)
    plain = Decoder(graph, opts, device="cuda", use_cuda_graphs=False).decode(lp)
    _compare(graph, lp, None, ref, plain, "no cuda graphs")
    torch = pytest.importorskip("torch")
    half = torch.from_numpy(lp).half().cuda()
    ref16 = Decoder(graph, opts).decode(half.float().cpu().numpy())
    gpu16 = Decoder(graph, opts, device="cuda").decode(half)
    _compare(graph, half.float().cpu().numpy(), None, ref16, gpu16, "fp16")


@pytest.mark.parametrize("seed", range(12))
def test_step_by_step_frontier_equals_cpu_snapshots(seed):
    rng = np.random.default_rng(100 + seed)
    graph = random_ctc_graph(rng, int(rng.choice([5, 30, 120])), 8, 4, 0.3)
    T = int(rng.integers(1, 25))
    lp = random_log_probs(rng, 1, T, 8, peaky=bool(seed % 2))[0]
    s, o, mn, mx = BEAMS[seed % len(BEAMS)]
    opts = DecoderOptions(search_beam=s, output_beam=o, min_active_states=mn, max_active_states=mx,
                          allow_partial=True)
    cpu = Decoder(graph, opts).decode_snapshots(lp)
    gpu = Decoder(graph, opts, device="cuda", max_lanes=2).decode_snapshots(lp)
    assert len(cpu) == len(gpu) == T + 2
    for k, (c, g) in enumerate(zip(cpu, gpu)):
        if k > 0:
            assert (c["phase"], c["beam"], c["cutoff"]) == (g["phase"], g["beam"], g["cutoff"]), k
        assert set(c["tokens"]) == set(g["tokens"]), f"step {k}: frontier states differ"
        for st, (score, arc) in c["tokens"].items():
            assert np.float32(score) == np.float32(g["tokens"][st][0]), f"step {k} state {st}"


def test_overflow_is_rescued(monkeypatch):
    """A frontier capacity far too small overflows; the rescue instance re-decodes the row.
    (Pooled lanes keep main_q here, CUWFST_POOL_LANE_Q=1, whatever CUWFST_MEMORY says.)"""
    monkeypatch.setenv("CUWFST_POOL_LANE_Q", "1")
    rng = np.random.default_rng(5)
    graph = random_ctc_graph(rng, 3000, 30, 8, 0.1)
    lp = random_log_probs(rng, 3, 40, 30, peaky=False)
    # a very wide beam fills the graph for many frames before max_active's decay bites
    opts = DecoderOptions(search_beam=1000.0, min_active_states=1, max_active_states=100)
    cpu = Decoder(graph, opts).decode(lp)
    assert max(h.max_frontier for h in cpu) > 1024  # the main instance holds 1024 tokens
    dec = Decoder(graph, opts, device="cuda", main_q_factor=1)
    raw = dec._gpu.main.decode(dec._gpu.to_device(lp), np.full(3, 40, np.int32), 0)
    assert (raw[3][:, 2] & 16).all(), "the main instance should overflow its frontier"
    gpu = dec.decode(lp)
    for c, g in zip(cpu, gpu):
        assert np.float32(c.score) == np.float32(g.score) and g.overflow == 0 and c.words == g.words


def test_rows_rescued_beside_the_next_sub_batches(monkeypatch):
    """A 1-best decode of nine rows in padded sub-batches of 2 lanes at beam 30, max_active 100:
    most rows' frontiers pass the main instance's 1,024 tokens, the others stay below. With
    CUWFST_EARLY_RESCUE=on each sub-batch's flagged rows are rescued on the rescue instance on a
    thread of its own while the next sub-batches decode (decoder/gpu.py EarlyRescue); off, after
    the sub-batches. The CPU's words and float32 scores either way (and on a second call, the
    rescue instance reused), the same rescue counts, no row left flagged."""
    monkeypatch.setenv("CUWFST_POOL_LANE_Q", "1")
    from helpers import early_rescue_case

    graph, lp, lens = early_rescue_case()
    opts = DecoderOptions(search_beam=30.0, min_active_states=1, max_active_states=100)
    cpu = Decoder(graph, opts).decode(lp, lens)
    big = sum(1 for h in cpu if h.max_frontier > 1024)
    assert 2 <= big < len(cpu)
    stats = {}
    for early in ("off", "on"):
        monkeypatch.setenv("CUWFST_EARLY_RESCUE", early)
        dec = Decoder(graph, opts, device="cuda", main_q_factor=1, max_lanes=2)
        assert dec._gpu.early_rescue_on() == (early == "on") and dec._gpu.batching == "padded"
        for call in ("first", "second"):  # (the second: the rescue instance reused)
            gpu = dec.decode(lp, lens)
            for b, (c, g) in enumerate(zip(cpu, gpu)):
                assert g.overflow == 0 and c.words == g.words and np.float32(c.score) == np.float32(g.score), \
                    (early, call, b)
        stats[early] = {k: dec._gpu.stats[k] for k in ("flagged_rows", "flagged_bits", "rescued_rows", "unabsorbed_rows")}
    # flagged_bits ORs the flagged rows' bits: the frontier past main_q (16) on every side; whether a
    # row's step also fills the distinct-state claims list (8) first varies from run to run (the
    # H100, 5bce007: 16 on one side and 24 on the other, either way round)
    for s in stats.values():
        assert s.pop("flagged_bits") & ~8 == 16, stats
    assert stats["on"] == stats["off"] and stats["on"]["rescued_rows"] >= 2 and stats["on"]["unabsorbed_rows"] == 0, stats


def test_gpu_input_errors():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    graph = random_ctc_graph(rng, 20, 5, 3, 0.3)
    dec = Decoder(graph, device="cuda", check_log_probs=False)  # zeros are not log-probs
    lp = torch.zeros(2, 4, 5, device="cuda")
    with pytest.raises(TypeError, match="float32"):
        dec.decode(lp.int())
    with pytest.raises(ValueError, match="vocab_size"):
        dec.decode(lp[:, :, :4])
    with pytest.raises(ValueError, match="packed"):
        dec.decode(torch.zeros(2, 5, 4, device="cuda").transpose(1, 2))
    with pytest.raises(ValueError, match="outside"):
        dec.decode(lp, [5, 1])
    bad = lp.clone()
    bad[1, 2, 3] = float("nan")
    with pytest.raises(ValueError, match=r"log_probs\[1, 2\]"):
        dec.decode(bad)


def _first_non_finite(x: np.ndarray, lens: np.ndarray) -> int:
    """numpy's answer for GpuDecoder::FirstNonFinite: b * T + t of the first frame within a
    row's length holding a NaN or +inf, else -1."""
    x = x.astype(np.float32)
    inside = np.arange(x.shape[1])[None, :] < lens[:, None]
    hits = np.flatnonzero((np.isnan(x) | (x == np.inf)).any(axis=2) & inside)
    return int(hits[0]) if len(hits) else -1


def test_native_input_check_against_numpy():
    """The native NaN / +inf check (gpu_check_finite, one kernel on the caller's stream) on
    random tensors with planted NaN, +inf and -inf values, inside and past the rows' lengths,
    float32 and float16, packed and strided (rows of a larger tensor, more columns than the
    vocabulary), B above max_lanes, T = 0 and all-zero lengths: the same first frame as
    numpy's, every time."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    graph = random_ctc_graph(rng, 30, 6, 3, 0.3)
    dec = Decoder(graph, device="cuda", max_lanes=4, check_log_probs=False)
    main = dec._gpu.main
    stream = torch.cuda.current_stream().cuda_stream
    found = 0
    for trial in range(300):
        B, T, V = int(rng.integers(1, 12)), int(rng.integers(0, 40)), int(rng.integers(6, 70))
        x = rng.normal(size=(B, T, V)).astype(np.float32)
        for _ in range(int(rng.integers(0, 4))):
            if T:
                x[rng.integers(B), rng.integers(T), rng.integers(V)] = rng.choice([np.nan, np.inf, -np.inf])
        lens = rng.integers(0, T + 1, size=B).astype(np.int32)
        f16 = trial % 3 == 2
        dev = torch.from_numpy(x).cuda()
        if f16:
            dev = dev.half()
        if trial % 4 == 1 and T > 1:  # strided: the first T - 1 frames of every row
            dev, x, lens = dev[:, : T - 1], x[:, : T - 1], np.minimum(lens, T - 1)
        want = _first_non_finite(x, lens)
        got = main.first_non_finite(dev, lens, stream)
        assert got == want, f"trial {trial}: B {B} T {T} V {V} f16 {f16}: {got} vs {want}"
        found += want >= 0
    assert found > 50, "too few trials had a bad frame to find"
    # through decode: the first bad frame is named, padding and -inf pass
    lp = torch.from_numpy(random_log_probs(rng, 9, 12, 6, True)).cuda()
    lens = np.array([12, 5, 12, 12, 3, 12, 12, 12, 7], np.int32)
    lp[1, 7, 2] = float("nan")  # past row 1's length
    lp[0, 4, 1] = float("-inf")
    dec.decode(lp, lens)
    lp[6, 2, 5] = float("inf")
    lp[8, 1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"log_probs\[6, 2\] holds NaN or \+inf"):
        dec.decode(lp, lens)


def test_a_batch_of_zero_frames_decodes_like_the_cpu():
    """log_probs [B, 0, V] (every row empty), torch on the device and numpy: the final step from
    the start state, as the CPU decodes it. (A case of the input check's fuzz test, likely
    T = 0, was refused by the binding's tensor checks on the H200 at 9e2d264; this is the
    decode's own path for such a batch.)"""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    graph = random_ctc_graph(rng, 30, 6, 3, 0.3)
    empty = np.zeros((3, 0, graph.vocab_size), np.float32)
    lens = np.zeros(3, np.int32)
    cpu = Decoder(graph).decode(empty, lens)
    dec = Decoder(graph, device="cuda", max_lanes=4)
    for what, lp in (("torch", torch.from_numpy(empty).cuda()), ("numpy", empty)):
        _compare(graph, empty, lens, cpu, dec.decode(lp, lens), f"T = 0 ({what})")


def test_the_sampled_log_prob_check_reads_device_rows_without_kernels():
    """check_log_probs' sampled runs come to the host as plain copies: the same values as numpy's
    for packed, column-sliced and float16 tensors, and (where the profiler sees CUDA) no kernel
    runs. PyTorch's indexing and cast kernels, which the check ran before, load lazily and kept
    ~90 MiB of device memory at their first call (H200, session of 2026-12-01 23:52)."""
    torch = pytest.importorskip("torch")
    from cuwfst.decoder.prepare import _host_rows, _sample_runs

    rng = np.random.default_rng(23)
    lens = np.array([40, 0, 3, 77, 12], np.int32)
    x = rng.normal(size=(5, 80, 14)).astype(np.float32)
    b, t0, t1 = _sample_runs(lens)
    want = _host_rows("numpy", x, b, t0, t1)
    dev = torch.from_numpy(x).cuda()
    for what, d, w in (("packed", dev, want), ("float16", dev.half(), _host_rows("numpy", x.astype(np.float16), b, t0, t1)),
                       ("columns sliced", dev[..., :9], _host_rows("numpy", x[..., :9], b, t0, t1))):
        got = _host_rows("torch", d, b, t0, t1)
        assert got.dtype == np.float64 and np.array_equal(got, w), what
    torch.cuda.synchronize()
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            _host_rows("torch", dev, b, t0, t1)
            _host_rows("torch", dev[..., :9], b, t0, t1)
            torch.cuda.synchronize()
        events = list(prof.events())
    except Exception as e:  # no CUPTI here: the values above still count
        pytest.skip(f"the profiler does not see CUDA here: {e}")
    kernels = [e.name for e in events if getattr(e, "device_type", None) is not None
               and "CUDA" in str(e.device_type) and "memcpy" not in e.name.lower()]
    assert kernels == [], kernels


@pytest.mark.parametrize("lanes", [4, 2])
def test_a_default_decode_of_a_torch_tensor_runs_only_our_kernels(lanes):
    """Decoder.decode on a torch tensor already on the GPU, default options (input checks on):
    every CUDA kernel the profiler sees is one of cuwfst's. A PyTorch kernel on this path costs
    device memory the first time it runs in a process (its code loads lazily: ~90 MiB for the
    input check's indexing and cast on the H200), which issue 9 counts against us. lanes 2:
    sub-batches (longest first: rows 2 and 0, then row 1), whose rows were picked by
    index_select until the H200 showed a rescued row loading it (GpuBackend._take_rows)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(31)
    graph = random_ctc_graph(rng, 40, 8, 3, 0.3)
    lp = torch.from_numpy(random_log_probs(rng, 3, 30, graph.vocab_size, True)).cuda()
    lens = np.array([17, 5, 30], np.int32)
    dec = Decoder(graph, device="cuda", max_lanes=lanes)
    want = [h.words for h in dec.decode(lp, lens)]
    torch.cuda.synchronize()
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            got = [h.words for h in dec.decode(lp, lens)]
            torch.cuda.synchronize()
        events = list(prof.events())
    except Exception as e:
        pytest.skip(f"the profiler does not see CUDA here: {e}")
    assert got == want == [h.words for h in Decoder(graph).decode(lp.cpu().numpy(), lens)]
    names = [e.name for e in events if "CUDA" in str(getattr(e, "device_type", ""))]
    kernels = [n for n in names if not any(w in n.lower() for w in ("memcpy", "memset"))]
    if not kernels:
        pytest.skip("the profiler recorded no kernel (graph replays not traced here)")
    assert all("cuwfst" in n for n in kernels), sorted(set(n for n in kernels if "cuwfst" not in n))


@pytest.mark.parametrize("lanes", [8, 3])
def test_inputs_still_being_made_on_the_default_stream_are_waited_for(lanes):
    """log_probs whose producer still runs on torch's default stream (stream 0, the legacy
    default stream) when decode() is called, with both input scans off (they synchronise):
    the decoder's own stream is non-blocking, so GpuDecoder::Wait has to wait for stream 0 as
    for any other. A ~0.1 s spin queued ahead of the copy that fills the tensor makes a
    missed wait read it before the copy lands (it holds -inf until then: empty results).
    lanes 3: sub-batches, whose rows are selected on that stream too."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    graph = random_ctc_graph(rng, 200, 12, degree=4, final_prob=0.2)
    B, T, V = 8, 50, 12
    lp = random_log_probs(rng, B, T, V, peaky=True)
    lens = np.full(B, T, np.int32)
    cpu = Decoder(graph).decode(lp, lens)
    dec = Decoder(graph, device="cuda", max_lanes=lanes, check_inputs=False, check_log_probs=False)
    src = torch.from_numpy(lp).cuda()
    for rep in range(3):
        dst = torch.full_like(src, float("-inf"))
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # on the current (default) stream, ahead of the copy
        dst.copy_(src)
        assert torch.cuda.current_stream().cuda_stream == 0
        _compare(graph, lp, lens, cpu, dec.decode(dst, lens), f"lanes {lanes} rep {rep}")


@pytest.mark.parametrize("kernels,walker,memory", [("new", "warp", "lazy"), ("old", "thread", "lazy"),
                                                   ("fused", "warp", "lazy"), ("new", "warp_coop", "lazy"),
                                                   ("new", "warp", "pooled")])
def test_payloads_naming_their_token_decode_as_the_slots(kernels, walker, memory, monkeypatch):
    """CUWFST_PAYLOAD=token: the emitting steps' hash payloads hold {token : index among its
    slots} instead of the slot (types.cuh Workspace::payload_tok), so FinalizeKernel needs no
    search for the token. The same rows as slot payloads and as the CPU, on each kernel set and
    walker, in both layouts (pooled: CUWFST_LANE_POOL=on, claims-finalize-ahead), with the
    encoding in use (memory_stats' payload_tok: the shift, 0 for slots) and a wrong value named."""
    monkeypatch.setenv("CUWFST_KERNELS", kernels)
    if memory == "pooled":
        monkeypatch.setenv("CUWFST_LANE_POOL", "on")
        monkeypatch.setenv("CUWFST_POOL_BOUND", "claims-finalize-ahead")
    for seed in range(10):
        rng = np.random.default_rng(1000 + seed)
        degree = 200 if seed == 0 else int(rng.integers(1, 10))  # seed 0: ~9-bit indices
        V = int(rng.integers(2, 40))
        graph = random_ctc_graph(rng, int(rng.choice([40, 200, 1500])), V, degree=degree,
                                 final_prob=float(rng.choice([0.02, 0.2, 0.8])))
        B, T = int(rng.integers(1, 9)), int(rng.integers(1, 60))
        lens = rng.integers(0, T + 1, size=B).astype(np.int32)
        lens[0] = T
        lp = random_log_probs(rng, B, T, V, peaky=bool(seed % 2))
        s, o, mn, mx = BEAMS[seed % len(BEAMS)]
        opts = DecoderOptions(search_beam=s, output_beam=o, min_active_states=mn, max_active_states=mx,
                              allow_partial=bool(seed % 3 != 0))
        cpu = Decoder(graph, opts).decode(lp, lens)
        rows = {}
        for payload in ("slot", "token"):
            monkeypatch.setenv("CUWFST_PAYLOAD", payload)
            dec = Decoder(graph, opts, device="cuda", max_lanes=int(rng.choice([1, 4, 32])), walker=walker,
                          memory=memory)
            rows[payload] = dec.decode(lp, lens)
            shift = dec.memory_stats()["instances"]["main"]["payload_tok"]
            assert (shift > 0) == (payload == "token"), (payload, shift)
            _compare(graph, lp, lens, cpu, rows[payload], f"seed {seed} payload {payload} ({kernels}, {walker}, {memory})")
        for b, (x, y) in enumerate(zip(rows["slot"], rows["token"])):
            assert (x.arcs, x.redirect_arc, x.words) == (y.arcs, y.redirect_arc, y.words), f"seed {seed} row {b}"
            assert np.float32(x.score) == np.float32(y.score), f"seed {seed} row {b}"
    monkeypatch.setenv("CUWFST_PAYLOAD", "slots")
    with pytest.raises(ValueError, match="CUWFST_PAYLOAD must be one of 'slot', 'token', got 'slots'"):
        Decoder(graph, opts, device="cuda")


def _wide_state_graph(rng, n: int, wide: int, V: int):
    """n + 1 states: the start state with `wide` emitting arcs, every other state a blank
    self-loop and up to three arcs, some final arcs (a CSR of no words: the arcs carry none)."""
    src = [np.zeros(wide, np.int64)]
    dst = [rng.integers(1, n, size=wide)]
    lab = [rng.integers(1, V, size=wide)]
    for s in range(1, n):
        k = int(rng.integers(1, 4))
        final = rng.random() < 0.3
        src.append(np.full(k + 1 + final, s))
        dst.append(np.concatenate([[s], rng.integers(1, n, size=k), [n] * final]))
        lab.append(np.concatenate([[0], rng.integers(0, V, size=k), [-1] * final]))
    src, dst, lab = np.concatenate(src), np.concatenate(dst), np.concatenate(lab)
    w = rng.uniform(-4, 0.5, size=src.size).astype(np.float32)
    return Graph.from_arcs(num_states=n + 1, start_state=0, src=src, dest=dst, ilabel=lab, weight=w,
                           words=(np.zeros(src.size + 1, np.int64), np.zeros(0, np.int64)), vocab_size=V)


@pytest.mark.parametrize("n,taken", [(300, True), (1200, False)])
def test_token_payloads_give_way_to_slots_where_their_words_would_pass_2_31(n, taken, monkeypatch):
    """Token payloads (the default) are taken only where every {token << shift | index} stays
    below 2^31 (gpu_decoder.cu Allocate: 2^shift >= the graph's max degree, main_q << shift <=
    2^31). A start state of 2^21 + 1 arcs needs shift 22, so a lane frontier (main_q: at most the
    graph's states) of 301 states takes them and one of 1,201 keeps slots; memory_stats'
    payload_tok says which, and the rows equal the CPU's either way."""
    monkeypatch.delenv("CUWFST_PAYLOAD", raising=False)
    rng = np.random.default_rng(n)
    V = 30
    graph = _wide_state_graph(rng, n, (1 << 21) + 1, V)
    B, T = 3, 24
    lp = random_log_probs(rng, B, T, V, peaky=True)
    lens = np.array([T, T // 2, 1], np.int32)
    opts = DecoderOptions(search_beam=12.0, output_beam=8.0, min_active_states=30, max_active_states=2000)
    cpu = Decoder(graph, opts).decode(lp, lens)
    dec = Decoder(graph, opts, device="cuda", max_lanes=4)
    gpu = dec.decode(lp, lens)
    shift = dec.memory_stats()["instances"]["main"]["payload_tok"]
    assert shift == (22 if taken else 0), (n, shift)
    _compare(graph, lp, lens, cpu, gpu, f"n {n} payload_tok {shift}")


def test_report_totals():
    print(f"\nGPU vs CPU: {TOTALS['rows']} rows compared, {TOTALS['ties']} exact-score ties, 0 mismatches")


def test_slot_hint_fallback_on_huge_steps():
    """Steps with more slots than the token hint covers (32 x 4 x main_q) fall back to the
    plain binary search; a lane whose frontier outgrows main_q is rescued."""
    rng = np.random.default_rng(9)
    graph = random_ctc_graph(rng, 1100, 40, 400, 0.3)  # about 200 arcs per state
    lp = random_log_probs(rng, 2, 12, 40, peaky=False)
    opts = DecoderOptions(search_beam=1000.0, min_active_states=1, max_active_states=20)
    cpu = Decoder(graph, opts).decode(lp)
    assert max(h.max_frontier for h in cpu) > 1024
    gpu = Decoder(graph, opts, device="cuda", main_q_factor=1).decode(lp)
    _compare(graph, lp, None, cpu, gpu, "hint fallback")
