"""The torch-free GPU backend's Python wiring, on a machine without a GPU.

The CUDA driver and the native GPU module are replaced by stand-ins: device memory is host
memory described by the same DLPack capsule (device type CPU), and the "GPU module" decodes
with the CPU reference, returning results in the GPU module's format. What is under test
is everything around the kernels: numpy batches uploaded through DLPack, sub-batches
chosen longest-first and selected on the host, results back in the caller's order,
lengths, NaN checks, and the rescue path. tests/test_gpu.py runs the real thing on a GPU.
"""

import dataclasses
import os
import sys

import threading

import numpy as np
import pytest

from conftest_data import TINY, demo_arrays
from cuwfst import Decoder, DecoderOptions, Graph, cuda
from cuwfst.decoder import gpu
from cuwfst.decoder.offline import REDIRECT_ARC_BIT


class FakeDeviceArray:
    """Host memory standing in for device memory, described by the real capsule code."""

    uploads = 0

    def __init__(self, host, index):
        self.host = np.ascontiguousarray(host)
        self.index = index
        FakeDeviceArray.uploads += 1

    def __dlpack__(self, stream=None, **_):
        return cuda.dlpack_capsule(self, self.host.ctypes.data, self.host.shape, self.host.dtype, 1, self.index)


class FakeGpuModule:
    """gpu_* entry points backed by the CPU reference decoder."""

    def __init__(self, overflow_rows=()):
        from cuwfst.jit.reference import module
        self.ref = module()
        self.graphs, self.decoders, self.calls = {}, {}, []
        self.threads = []  # (lanes, thread name) of each gpu_decode / gpu_decode_rows
        self.fail_lanes = None  # those of a decoder instance whose decodes raise (injected)
        self.many_calls = []  # (lanes, rows, segment, gc) of gpu_decode_many
        self.overflow_rows = set(overflow_rows)
        self.lazy = {}  # decoder -> the memory flag it was built with

    def gpu_graph_upload(self, rs, fc, ec, dest, il, w, source_arc, vocab, start, finals_at_end, device, pack):
        assert type(pack) is bool
        self.pack = pack
        h = len(self.graphs) + 1
        self.keep = (rs, fc, ec, dest, il, w, source_arc)
        self.graphs[h] = self.ref.ref_graph_create(*self.keep, vocab, start, finals_at_end)
        return h

    def gpu_graph_free(self, h):
        self.ref.ref_graph_free(self.graphs.pop(h))

    def gpu_decoder_create(self, graph_h, beam, obeam, mn, mx, partial, lanes, *rest):
        h = len(self.decoders) + 100
        # rest: max_frames, main_q, claims_cap, hash_cap, arena_cap, arena_max, use_cuda_graphs, walker,
        # walk_blocks, graph_cache_size, graph_max_steps, eps_iterations, lazy, lane_pool, scan_split,
        # closure_lists, eps_blocks, finalize_split, fused_max, lattice_entries, pool_bound, pool_hints,
        # arena_ahead, pool_handout, trim_arcs, pdl, scan_round, scan_order, refill_kernel, winners_host,
        # graph_chunks, payload_tokens, pool_full, pool_q
        assert len(rest) == 34, "gpu_decoder_create's arguments changed: update this fake"
        assert type(rest[33]) is int
        self.pool_q = rest[33]
        assert type(rest[29]) is bool and type(rest[30]) is bool and type(rest[31]) is bool and type(rest[32]) is int
        self.winners_host = rest[29]
        self.pool_bound = rest[20]
        self.graph_chunks = rest[30]
        self.payload_tokens = rest[31]
        self.pool_full = rest[32]
        assert type(rest[20]) is int and type(rest[21]) is bool and type(rest[22]) is bool and type(rest[23]) is int
        assert type(rest[24]) is bool and type(rest[25]) is bool and type(rest[26]) is int and type(rest[27]) is int
        assert type(rest[18]) is bool and type(rest[28]) is bool
        self.decoders[h] = (graph_h, beam, obeam, mn, mx, partial, lanes, int(rest[11]))
        self.lazy[h] = bool(rest[12])
        self.lane_pool = int(rest[13])
        self.arena_ahead = rest[22]
        self.pool_handout = rest[23]
        # scan_split, closure_lists, finalize_split, fused_max, trim_arcs
        self.kernels = (int(rest[14]), int(rest[15]), int(rest[17]), rest[18], rest[24])
        self.pdl = rest[25]
        self.scan_round = rest[26]
        self.scan_order = rest[27]
        self.walker = rest[7]
        self.refill_kernel = rest[28]
        self.eps_blocks = rest[16]
        return h

    def gpu_decoder_trim(self, h, log):
        assert type(log) is bool
        self.trims = getattr(self, "trims", 0) + 1
        self.trim_calls = getattr(self, "trim_calls", []) + [(h, log)]
        return 0

    def gpu_decoder_mem_stats(self, h, out):
        from cuwfst.decoder.memory import MEM_STATS
        v = dict.fromkeys(MEM_STATS, 0)
        lanes = self.decoders[h][6]
        v.update(fixed=1000 * lanes, winners_committed=2 << 20, winners_reserved=(64 << 20) if self.lazy[h] else 2 << 20,
                 path_bytes=100 * lanes, graph_bytes=12345, arena_capacity=1 << 18, arena_high_water=777 * lanes,
                 vmm=int(self.lazy[h]), granularity=(2 << 20) if self.lazy[h] else 0)
        v["committed"] = v["fixed"] + v["winners_committed"] + v["path_bytes"]
        v["reserved"] = v["fixed"] + v["winners_reserved"] + v["path_bytes"]
        out[:] = [v[k] for k in MEM_STATS]

    def gpu_decode_many(self, h, lp, lens, online, segment, gc, refill, stream, *outs):
        # continuous batching: any number of rows, each decoded as if alone
        graph_h, beam, obeam, mn, mx, partial, lanes, eps = self.decoders[h]
        self.many_calls.append((lanes, len(lens), int(segment), bool(gc)))
        self.refills = getattr(self, "refills", []) + [bool(refill)]
        saved, self.decoders[h] = self.decoders[h], (graph_h, beam, obeam, mn, mx, partial, 1 << 30, eps)
        try:
            self.gpu_decode(h, lp, lens, online, stream, *outs)
        finally:
            self.decoders[h] = saved

    def gpu_decode_many_begin(self, h, lp, lens, online, segment, gc, refill, stream, *outs):
        """The segmented run: every row decoded now into scratch outputs, then given to the
        caller's outputs a lane-count of rows per wait, longest first (as the native run
        orders them), so the caller must read only the rows each wait reports."""
        assert not gc and getattr(self, "many_run", None) is None
        scratch = [np.zeros_like(o) for o in outs]
        self.gpu_decode_many(h, lp, lens, online, segment, gc, refill, stream, *scratch)
        order = np.argsort(-np.asarray(lens), kind="stable").tolist()
        lanes = self.decoders[h][6]
        self.many_run = {"outs": outs, "scratch": scratch, "groups": [order[i:i + lanes] for i in range(0, len(order), lanes)],
                         "launched": False}
        for o in outs:  # nothing is the caller's before a wait says so
            o[...] = -7

    def gpu_decode_many_launch(self, h):
        run = self.many_run
        assert run is not None and not run["launched"]
        if not run["groups"]:
            self.many_run = None
            return False
        run["launched"] = True
        return True

    def gpu_decode_many_wait(self, h, rows_out):
        run = self.many_run
        assert run is not None and run["launched"]
        run["launched"] = False
        rows = run["groups"].pop(0)
        for o, s in zip(run["outs"], run["scratch"]):
            o[rows] = s[rows]
        rows_out[:len(rows)] = rows
        self.many_waits = getattr(self, "many_waits", 0) + 1
        return len(rows)

    def gpu_decode_many_abort(self, h):
        self.many_aborts = getattr(self, "many_aborts", 0) + 1
        self.many_run = None

    def gpu_decoder_free(self, h):
        self.decoders.pop(h, None)

    def gpu_decode(self, h, lp, lens, online, stream, out_arcs, out_len, out_score, out_meta, out_stats):
        import tvm_ffi
        x = np.from_dlpack(tvm_ffi.from_dlpack(lp.__dlpack__())).astype(np.float32)  # what the kernels read
        self._decode(h, x, lens, online, stream, out_arcs, out_len, out_score, out_meta, out_stats)

    def gpu_decode_rows(self, h, lp, rows, lens, online, stream, out_arcs, out_len, out_score, out_meta, out_stats):
        """gpu_decode of lp's rows `rows`, read in place (the binding's checks: int32 rows in range)."""
        import tvm_ffi
        x = np.from_dlpack(tvm_ffi.from_dlpack(lp.__dlpack__())).astype(np.float32)
        assert rows.dtype == np.int32 and rows.ndim == 1 and len(rows) == len(lens)
        assert ((rows >= 0) & (rows < x.shape[0])).all()
        self.row_calls = getattr(self, "row_calls", 0) + 1
        self._decode(h, x[rows], lens, online, stream, out_arcs, out_len, out_score, out_meta, out_stats)

    def _decode(self, h, x, lens, online, stream, out_arcs, out_len, out_score, out_meta, out_stats):
        graph_h, beam, obeam, mn, mx, partial, lanes, eps = self.decoders[h]
        B, T = x.shape[:2]
        assert B <= lanes and stream == 0
        self.threads.append((lanes, threading.current_thread().name))
        if self.fail_lanes == lanes:
            raise RuntimeError(f"decode on {lanes} lanes failed (injected)")
        self.calls.append((lanes, x.copy(), lens.copy()))
        arcs, n = np.zeros((B, (T + 2) * (1 + eps)), np.int32), np.zeros(B, np.int32)
        score, meta = np.zeros(B, np.float32), np.zeros((B, 4), np.int32)
        self.ref.ref_decode(self.graphs[graph_h], np.ascontiguousarray(x), lens, beam, obeam, mn, mx, partial,
                            eps, online, 2, arcs, n, score, meta, out_stats)
        out_arcs[:] = 0
        for b in range(B):
            k = int(n[b])
            out_arcs[b, :k] = arcs[b, :k]
            if meta[b, 2] >= 0:  # the GPU marks the allow_partial redirect in the path itself
                out_arcs[b, k] = meta[b, 2] | REDIRECT_ARC_BIT
                k += 1
            out_len[b] = k
        out_score[:] = score
        out_meta[:, 0], out_meta[:, 1] = meta[:, 0], meta[:, 2] >= 0
        out_meta[:, 2] = [16 if lanes > 4 and float(x[b].sum()) in self.overflow_rows else 0 for b in range(B)]
        out_meta[:, 3] = meta[:, 3]

    def gpu_decode_snapshots(self, h, lp, length, stream, cnt, st, sc, ar, step, overflow):
        """The CPU's snapshots; on the main instance (more than 4 lanes) with snapshot_cut set,
        frontiers are cut at snapshot_cut tokens from the first one past it on, each flagged
        with the frontier bit, as the GPU's DecodeSnapshots leaves a frontier past main_q."""
        import tvm_ffi
        graph_h, beam, obeam, mn, mx, partial, lanes, eps = self.decoders[h]
        x = np.from_dlpack(tvm_ffi.from_dlpack(lp.__dlpack__())).astype(np.float32)
        assert x.shape[0] == 1 and stream == 0 and overflow.shape == cnt.shape and overflow.dtype == np.int32
        self.snapshot_calls = getattr(self, "snapshot_calls", []) + [lanes]
        self.ref.ref_decode_snapshots(self.graphs[graph_h], np.ascontiguousarray(x[0]), length, beam, obeam, mn, mx,
                                      partial, eps, False, cnt, st, sc, ar, step)
        overflow[:] = 0
        cut = getattr(self, "snapshot_cut", None)
        if lanes > 4 and cut is not None:
            over = np.flatnonzero(cnt > cut)
            if len(over):
                overflow[over[0]:] = 16
                cnt[over[0]:] = np.minimum(cnt[over[0]:], cut)

    def gpu_decode_lattice(self, h, lp, lens, online, stream, out_arcs, out_len, out_score, out_meta, out_stats,
                           out_counts, out_cutoffs, out_sizes, out_total, eps_filter, output_beam, filter_pad,
                           out_producer_a):
        """gpu_decode plus the records the CPU search makes as the GPU makes them (with eps_filter
        on an epsilon graph, through the CPU twin of the GPU's records filter)."""
        import tvm_ffi
        self.gpu_decode(h, lp, lens, online, stream, out_arcs, out_len, out_score, out_meta, out_stats)
        graph_h, beam, obeam, mn, mx, partial, lanes, eps = self.decoders[h]
        x = np.from_dlpack(tvm_ffi.from_dlpack(lp.__dlpack__())).astype(np.float32)
        self.lattice_calls = getattr(self, "lattice_calls", 0) + 1
        total = np.zeros(1, np.int64)
        rh = self.ref.ref_decode_records(self.graphs[graph_h], np.ascontiguousarray(x), lens, beam, obeam, mn, mx,
                                         partial, eps, online, 2, out_counts, out_cutoffs, out_sizes, total,
                                         bool(eps_filter) and eps > 0, filter_pad, out_producer_a)
        if getattr(self, "records_handle", 0):
            self.ref.ref_records_free(self.records_handle)
        self.records_handle = rh
        out_total[0] = total[0]

    def gpu_check_finite(self, h, lp, lens, stream):
        """The native input check (GpuDecoder::FirstNonFinite): b * T + t of the first frame
        within a row's length that holds a NaN or +inf, or -1."""
        import tvm_ffi
        x = np.from_dlpack(tvm_ffi.from_dlpack(lp.__dlpack__()))
        self.finite_checks = getattr(self, "finite_checks", 0) + 1
        inside = np.arange(x.shape[1])[None, :] < np.asarray(lens)[:, None]
        hits = np.flatnonzero((np.isnan(x) | (x == np.inf)).any(axis=2) & inside)
        return int(hits[0]) if len(hits) else -1

    def gpu_lattice_records(self, h, out_records):
        # the caller's array goes through the bindings' own check (tensor_checks.h), as the
        # GPU module's gpu_lattice_records does: its dtype, shape [N, 3] and density
        rh, self.records_handle = self.records_handle, 0
        try:
            self.ref.ref_records_take(rh, out_records)
        finally:
            self.ref.ref_records_free(rh)


@pytest.fixture
def fake_gpu(monkeypatch):
    from cuwfst.jit import decoder as jit_decoder
    mod = FakeGpuModule()
    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    monkeypatch.setattr(cuda, "has_torch_cuda", lambda: False)
    monkeypatch.setattr(cuda, "DeviceArray", FakeDeviceArray)
    monkeypatch.setattr(cuda, "synchronize", lambda index: None)
    monkeypatch.setattr(jit_decoder, "module", lambda index=0: mod)
    monkeypatch.setattr(gpu, "_uploads", {})
    return mod


@pytest.mark.parametrize("name", ["HLG.img", "TLG.img"])
def test_numpy_batches_decode_like_the_cpu(fake_gpu, name):
    graph = Graph.load(TINY / name)
    lp, lens, _ = demo_arrays()
    lens = lens.copy()
    lens[3] = 0
    want = Decoder(graph).decode(lp, lens)
    dec = Decoder(graph, device="auto", max_lanes=3)  # auto: the (fake) driver reports a GPU
    assert type(dec._gpu).__name__ == "HostGpuBackend" and dec.device == "cuda"
    got = dec.decode(lp, lens)
    assert [(h.words, h.score, h.arcs, h.reached_final) for h in got] == \
        [(h.words, h.score, h.arcs, h.reached_final) for h in want]
    # three sub-batches of at most 3 rows, longest first, each row's frames intact, each read
    # in place from the uploaded batch (gpu_decode_rows)
    assert [(c[0], len(c[2])) for c in fake_gpu.calls] == [(3, 3), (3, 3), (3, 2)]
    assert fake_gpu.row_calls == 3
    order = np.argsort(-lens, kind="stable")
    assert np.concatenate([c[2] for c in fake_gpu.calls]).tolist() == lens[order].tolist()
    first = fake_gpu.calls[0][1]
    assert np.array_equal(first[0, : lens[order[0]]], lp[order[0], : lens[order[0]]].astype(np.float32))


def test_fp16_stays_fp16_and_nan_is_refused(fake_gpu):
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    dec = Decoder(graph, device="cuda")
    FakeDeviceArray.uploads = 0
    dec.decode(lp[:2], lens[:2])
    assert FakeDeviceArray.uploads == 1
    bad = lp[:2].astype(np.float32)
    bad[1, 5, 7] = np.nan
    with pytest.raises(ValueError, match=r"log_probs\[1, 5, 7\] is nan"):
        dec.decode(bad, lens[:2])


class ForeignDeviceArray:
    """Another framework's CUDA array (cupy, JAX) as the torch-free backend sees it: DLPack
    device (2, 0); its capsule describes host memory, which the fake module reads."""

    def __init__(self, host):
        self.host = np.ascontiguousarray(host)
        self.shape, self.dtype = self.host.shape, self.host.dtype

    def __dlpack__(self, stream=None, **_):
        return cuda.dlpack_capsule(self, self.host.ctypes.data, self.host.shape, self.host.dtype, 1, 0)

    def __dlpack_device__(self):
        return (2, 0)


def test_device_arrays_of_other_frameworks_are_checked_for_nan(fake_gpu):
    """A device array from another framework goes through the native input check (it was
    read as it was, NaN included); NaN in a row's padding is allowed, -inf always."""
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    lp, lens = lp[:3].astype(np.float32), lens[:3].copy()
    lens[1] = lp.shape[1] - 2
    # (check_log_probs samples rows through the array's own namespace, which this stand-in lacks)
    dec = Decoder(graph, device="cuda", check_log_probs=False)
    good = lp.copy()
    good[1, lens[1]:, 0] = np.nan  # padding
    good[0, 3, 2] = -np.inf
    want = Decoder(graph, check_log_probs=False).decode(good, lens)
    got = dec.decode(ForeignDeviceArray(good), lens)
    assert [(h.words, h.score) for h in got] == [(h.words, h.score) for h in want]
    assert fake_gpu.finite_checks == 1
    for value in (np.nan, np.inf):
        bad = good.copy()
        bad[2, 4, 1] = value
        bad[2, 6, 0] = np.nan
        with pytest.raises(ValueError, match=r"log_probs\[2, 4\] holds NaN or \+inf"):
            dec.decode(ForeignDeviceArray(bad), lens)
    assert fake_gpu.finite_checks == 3


def test_a_torch_that_cannot_take_a_device_array_leaves_it_to_its_namespace(monkeypatch):
    """With a torch installed that cannot import a CUDA array (a CPU-only build beside cupy:
    torch.from_dlpack raises), the array goes the torch-free way, as with no torch at all;
    before, the decode failed with torch's own error."""
    import types

    from cuwfst.decoder import prepare

    fake = types.ModuleType("torch")

    def from_dlpack(x):
        raise RuntimeError("Found no NVIDIA driver on your system.")

    fake.from_dlpack = from_dlpack
    monkeypatch.setitem(sys.modules, "torch", fake)
    x = ForeignDeviceArray(np.zeros((1, 2, 3), np.float32))
    kind, got = prepare._adopt(x)
    assert kind == "xp" and got is x
    fake.from_dlpack = lambda x: types.SimpleNamespace(detach=lambda: "adopted")
    assert prepare._adopt(x) == ("torch", "adopted")


def test_transforms_apply_on_the_host(fake_gpu):
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    got = Decoder(graph, device="cuda", acoustic_scale=0.8, blank_penalty=1.0).decode(lp[:2], lens[:2])
    want = Decoder(graph, acoustic_scale=0.8, blank_penalty=1.0).decode(lp[:2], lens[:2])
    assert [(h.words, h.score) for h in got] == [(h.words, h.score) for h in want]


def test_overflowed_rows_are_rescued(fake_gpu):
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    x = lp[:3].astype(np.float32)
    fake_gpu.overflow_rows = {float(x[1].sum())}  # the main instance "overflows" on row 1
    got = Decoder(graph, device="cuda").decode(x, lens[:3])
    assert [c[0] for c in fake_gpu.calls] == [32, 4]  # the batch, then row 1 on the four-lane rescue
    assert np.array_equal(fake_gpu.calls[1][1][0], x[1])
    assert [h.overflow for h in got] == [0, 0, 0]


@pytest.mark.parametrize("name", ["HLG.img", "TLG.img"])
def test_cut_snapshots_are_rescued(fake_gpu, name):
    """decode_snapshots on the (fake) GPU: the overflow bits come back per snapshot; a frontier
    cut on the main instance (the H200's test_fused_max_float16_rows_many_lanes_and_exact_cutoffs
    at beam 1000: 1,260 tokens, main_q 1,024) sends the row to the rescue instance, whose
    snapshots are the CPU's; an uncut row stays on the main instance."""
    graph = Graph.load(TINY / name)
    lp, lens, _ = demo_arrays()
    row, n = lp[0].astype(np.float32), int(lens[0])
    want = Decoder(graph).decode_snapshots(row, n)
    assert all(c["overflow"] == 0 for c in want)
    dec = Decoder(graph, device="cuda")
    assert dec.decode_snapshots(row, n) == want and fake_gpu.snapshot_calls == [32]
    cut = max(len(c["tokens"]) for c in want) - 1
    fake_gpu.snapshot_cut = cut
    with dec._gpu.lock:
        raw = dec._gpu.snapshots_on(dec._gpu.main, dec._gpu.to_device(row), n, 0)
    k = next(i for i, c in enumerate(want) if len(c["tokens"]) > cut)
    assert [g["overflow"] for g in raw] == [0] * k + [16] * (len(want) - k)
    assert len(raw[k]["tokens"]) == cut and set(raw[k]["tokens"]) < set(want[k]["tokens"])
    fake_gpu.snapshot_calls = []
    assert dec.decode_snapshots(row, n) == want and fake_gpu.snapshot_calls == [32, 4]


@pytest.mark.parametrize("name", ["HLG.img", "TLG.img"])
def test_lattices_through_the_gpu_backend(fake_gpu, name):
    """decode(lattice=True) on the (fake) GPU: GpuInstance.decode_lattice's buffers, the
    records to lattices, the rescue with lattices; every row's lattice is the CPU's."""
    from test_lattice_records import assert_same_lattice

    graph = Graph.load(TINY / name)
    lp, lens, _ = demo_arrays()
    x = lp[:5].astype(np.float32)
    lens = lens[:5].copy()
    lens[4] = 0
    want = Decoder(graph, output_beam=5.0).decode(x, lens, lattice=True)
    fake_gpu.overflow_rows = {float(x[1].sum())}  # row 1 "overflows" on the main instance
    got = Decoder(graph, device="cuda", output_beam=5.0, max_lanes=8).decode(x, lens, lattice=True)
    assert [c[0] for c in fake_gpu.calls] == [8, 4] and fake_gpu.lattice_calls == 2
    for b, (w, g) in enumerate(zip(want, got)):
        assert g.overflow == 0 and (g.words, g.score, g.word_times) == (w.words, w.score, w.word_times), b
        # (on the TLG the records' filter on epsilon graphs ran: recorded arcs not known)
        filtered = graph.has_epsilon and lens[b] > 0  # (a row of 0 frames has no real step)
        assert (g.lattice.recorded_arcs is None) == filtered, b
        want_lat = dataclasses.replace(w.lattice, recorded_arcs=None) if filtered else w.lattice
        assert_same_lattice(want_lat, g.lattice, f"{name} row {b}")
        assert g.word_confidences == w.word_confidences
    assert sum(h.lattice.num_arcs for h in got) > 100


def test_lattice_sub_batch_without_records(fake_gpu):
    """A sub-batch whose decode makes no lattice record at all: a row of 0 frames without
    allow_partial (nothing final at step 0: no arc and no redirect is recorded). The host
    asks for a [0, 3] array; numpy 2 gives it the strides (0, 0), which the bindings' dense
    check refused (the H200 run of tests/test_gpu_lattice.py at cdd8330: 13 random cases,
    each with a row of 0 frames alone in a sub-batch of one or three lanes)."""
    from test_lattice_records import assert_same_lattice, random_lattice_case

    rng, graph, lp, lens, opts = random_lattice_case(0)  # allow_partial off, lens [48, 1, 0, 25]
    assert not opts.allow_partial and lens.tolist() == [48, 1, 0, 25]
    want = Decoder(graph, opts).decode(lp, lens, lattice=True)
    assert want[2].lattice.num_arcs == 0
    got = Decoder(graph, opts, device="cuda", max_lanes=1).decode(lp, lens, lattice=True)
    assert fake_gpu.lattice_calls == 4  # a row a sub-batch; the last (row 2) has no records
    for b, (w, g) in enumerate(zip(want, got)):
        assert np.float32(g.score).view(np.int32) == np.float32(w.score).view(np.int32), b
        assert g.words == w.words, b
        assert_same_lattice(w.lattice, g.lattice, f"row {b}")


def test_refill_reaches_the_native_continuous_decode(fake_gpu):
    """refill="device" (continuous batching: a lane takes its next row on the GPU in the step
    after its row ends; the default) reaches gpu_decode_many as refill=True, "segment" as
    False, and the long-form GC segments never ask for it; the segment length defaults to 256
    steps with the device's refill and 32 with the host's, and an explicit one is kept; results
    as the CPU's; a bad value is refused by name."""
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    want = Decoder(graph).decode(lp, lens)
    decs = []
    for kw, flag, segment in ((dict(refill="device", segment=64), True, 64), (dict(refill="segment", segment=64), False, 64),
                              ({}, True, 256), (dict(refill="segment"), False, 32)):
        fake_gpu.refills, fake_gpu.many_calls = [], []
        decs.append(Decoder(graph, device="cuda", max_lanes=2, batching="continuous", **kw))  # (alive: the fake reuses handles)
        got = decs[-1].decode(lp, lens)
        assert fake_gpu.refills == [flag], kw
        assert [c[2] for c in fake_gpu.many_calls] == [segment], kw
        assert [(h.words, h.score) for h in got] == [(h.words, h.score) for h in want]
    fake_gpu.refills = []
    Decoder(graph, device="cuda", max_lanes=3, gc_interval=int(lens.max()) - 1, refill="device").decode(lp, lens)
    assert fake_gpu.refills == [False]
    with pytest.raises(ValueError, match="refill"):
        Decoder(graph, device="cuda", refill="host")


def test_gc_interval_sends_long_rows_through_segments_with_gc(fake_gpu):
    """gc_interval: a batch whose longest row is past it goes through the lanes in segments of
    gc_interval steps with a GC round after each (gpu_decode_many, gc=True); shorter batches
    decode as before. Results equal the CPU's either way."""
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    want = Decoder(graph).decode(lp, lens)
    dec = Decoder(graph, device="cuda", max_lanes=3, gc_interval=int(lens.max()) - 1)
    got = dec.decode(lp, lens)
    assert fake_gpu.many_calls == [(3, len(lens), int(lens.max()) - 1, True)] and fake_gpu.calls[0][0] == 1 << 30
    assert [(h.words, h.score) for h in got] == [(h.words, h.score) for h in want]
    short = lens.copy()
    short[:] = np.minimum(short, int(lens.max()) - 1)
    fake_gpu.many_calls.clear()
    dec.decode(lp, short)
    assert fake_gpu.many_calls == []  # no row past gc_interval: padded sub-batches as before
    with pytest.raises(ValueError, match="gc_interval"):
        Decoder(graph, device="cuda", gc_interval=-3)


def test_memory_stats_sum_the_instances(fake_gpu, monkeypatch):
    graph = Graph.load(TINY / "HLG.img")
    monkeypatch.delenv("CUWFST_MEMORY", raising=False)
    dec = Decoder(graph, device="cuda", max_lanes=8)
    st = dec.memory_stats()
    assert st["memory"] == "lazy" and st["device"] == "cuda:0"
    assert st["committed"] == 8000 + (2 << 20) + 800 and st["graph"] == 12345
    assert st["total"] == st["committed"] + st["graph"] and st["reserved"] > st["committed"]
    assert st["pools"]["winners"]["granularity"] == 2 << 20 and list(st["instances"]) == ["main"]
    dec._gpu.rescue_instance()  # a rescue instance counts once it exists
    both = dec.memory_stats()
    assert both["committed"] == st["committed"] + 4000 + (2 << 20) + 400 and both["graph"] == 12345
    assert list(both["instances"]) == ["main", "rescue"]
    monkeypatch.setenv("CUWFST_MEMORY", "eager")
    eager = Decoder(graph, device="cuda", max_lanes=8).memory_stats()
    assert eager["memory"] == "eager" and eager["reserved"] == eager["committed"]
    assert Decoder(graph, device="cuda", memory="lazy").memory_stats()["memory"] == "lazy"  # the argument wins
    # lazy keeps the lanes static; pooled asks the native side for auto (pooled where it pays)
    monkeypatch.delenv("CUWFST_LANE_POOL", raising=False)
    lazy = Decoder(graph, device="cuda", memory="lazy")
    assert lazy._gpu.mod.lane_pool == 0
    pooled = Decoder(graph, device="cuda", memory="pooled")
    assert pooled._gpu.mod.lane_pool == 2 and pooled.memory_stats()["memory"] == "pooled"
    monkeypatch.setenv("CUWFST_MEMORY", "bogus")
    with pytest.raises(ValueError, match="CUWFST_MEMORY"):
        Decoder(graph, device="cuda")


def test_out_of_memory_retries_once_after_pytorch_gives_its_cache_back(fake_gpu):
    """Our allocations cannot use memory PyTorch caches: a native MemoryError is retried once
    after torch.cuda.empty_cache() when PyTorch holds unused memory, else raised as is."""
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    dec = Decoder(graph, device="cuda", max_lanes=8)
    backend = dec._gpu

    class FakeCuda:
        emptied = 0
        reserved, allocated = 10 << 20, 1 << 20

        def memory_reserved(self, i):
            return self.reserved

        def memory_allocated(self, i):
            return self.allocated

        def empty_cache(self):
            FakeCuda.emptied += 1
            if not FakeCuda.pinned_segments:  # else every cached block shares a segment with a live tensor
                self.reserved = self.allocated

        pinned_segments = False

    class FakeTorch:
        cuda = FakeCuda()

    backend.torch = FakeTorch()
    real, failures = fake_gpu.gpu_decode, [1]

    def flaky(*a):
        if failures[0]:
            failures[0] -= 1
            raise MemoryError("cannot grow the winners arena ...; lower max_lanes")
        return real(*a)

    fake_gpu.gpu_decode = flaky
    got = dec.decode(lp[:2], lens[:2])
    assert FakeCuda.emptied == 1 and len(got) == 2 and backend.oom_retries == 1
    failures[0] = 1  # nothing cached any more: the error reaches the caller, naming the option
    with pytest.raises(MemoryError, match="max_lanes"):
        dec.decode(lp[:2], lens[:2])
    assert FakeCuda.emptied == 1 and backend.oom_retries == 1
    # cached blocks that empty_cache cannot give back (their segments hold live tensors): no retry
    backend.torch.cuda.reserved, FakeCuda.pinned_segments = 10 << 20, True
    failures[0] = 1
    with pytest.raises(MemoryError, match="max_lanes"):
        dec.decode(lp[:2], lens[:2])
    assert FakeCuda.emptied == 2 and backend.oom_retries == 1
    backend.torch = None


def test_kernel_variants_reach_the_native_decoder(fake_gpu, monkeypatch):
    """scan_split / closure / finalize_split / fused_max / trim_arcs pick the kernels; None
    takes the default, "new", or what CUWFST_KERNELS names when the decoder is built. "new"
    closes by chains where the graph allows it (the tiny TLG does), else by lists."""
    graph = Graph.load(TINY / "TLG.img")
    monkeypatch.delenv("CUWFST_KERNELS", raising=False)
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (0, 2, 0, False, True)
    monkeypatch.setenv("CUWFST_KERNELS", "old")
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (1, False, 8, False, False)
    Decoder(graph, device="cuda", scan_split=4)  # a keyword wins over the environment
    assert fake_gpu.kernels == (4, False, 8, False, False)
    Decoder(graph, device="cuda", fused_max=True)  # the fused max goes with any other switch
    assert fake_gpu.kernels == (1, False, 8, True, False)
    Decoder(graph, device="cuda", trim_arcs=True)  # so does the trim
    assert fake_gpu.kernels == (1, False, 8, False, True)
    monkeypatch.setenv("CUWFST_KERNELS", "split")
    Decoder(graph, device="cuda", closure="lists")
    assert fake_gpu.kernels == (0, True, 8, False, False)
    monkeypatch.setenv("CUWFST_KERNELS", "fused")  # "new" and the fused max
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (0, True, 0, True, True)
    Decoder(graph, device="cuda", fused_max=False)
    assert fake_gpu.kernels == (0, True, 0, False, True)
    dec = Decoder(graph, device="cuda", max_lanes=8)  # the rescue instance gets the same kernels
    assert dec._gpu.kw["fused_max"] is True and dec._gpu.kw["trim_arcs"] is True
    monkeypatch.setenv("CUWFST_KERNELS", "untrimmed")  # "new" without the trim
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (0, True, 0, False, False)
    monkeypatch.setenv("CUWFST_KERNELS", "new_lists")  # "new" with the closure by lists
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (0, True, 0, False, True)
    monkeypatch.delenv("CUWFST_KERNELS")
    Decoder(graph, DecoderOptions(eps_iterations=graph.max_epsilon_chain - 1), device="cuda")
    assert fake_gpu.kernels == (0, 1, 0, False, True)  # short of the longest chain: the lists
    Decoder(graph, device="cuda", closure="scan")
    assert fake_gpu.kernels == (0, 0, 0, False, True)
    assert fake_gpu.pdl is True  # programmatic dependent launch: "new" has it, the older variants not
    monkeypatch.setenv("CUWFST_KERNELS", "old")
    Decoder(graph, device="cuda")
    assert fake_gpu.pdl is False
    monkeypatch.delenv("CUWFST_KERNELS")
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (0, 2, 0, False, True) and fake_gpu.pdl is True
    monkeypatch.setenv("CUWFST_KERNELS", "new_fused")
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (0, 2, 0, True, True) and fake_gpu.pdl is True
    Decoder(graph, device="cuda", pdl=False)
    assert fake_gpu.pdl is False
    monkeypatch.setenv("CUWFST_KERNELS", "new_nopdl")
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (0, 2, 0, False, True) and fake_gpu.pdl is False
    Decoder(graph, device="cuda", pdl=True)
    assert fake_gpu.pdl is True
    monkeypatch.delenv("CUWFST_KERNELS")
    with pytest.raises(ValueError, match="pdl"):
        Decoder(graph, device="cuda", pdl=1)
    assert fake_gpu.scan_round == 512  # the split scan's granule: "new" has 512-token granules
    Decoder(graph, device="cuda", scan_round=1024)
    assert fake_gpu.scan_round == 1024
    assert fake_gpu.eps_blocks == 0  # the closure's expand grid: auto unless asked
    Decoder(graph, device="cuda", eps_blocks=1)
    assert fake_gpu.eps_blocks == 1
    for bad in (-1, 70000, 1.0, True):
        with pytest.raises(ValueError, match="eps_blocks"):
            Decoder(graph, device="cuda", eps_blocks=bad)
    for bad in (16, 4096, 512.0, True):
        with pytest.raises(ValueError, match="scan_round"):
            Decoder(graph, device="cuda", scan_round=bad)
    assert fake_gpu.scan_order == 2  # persistent in "new" (the native side falls back where it cannot be)
    Decoder(graph, device="cuda", scan_order="chunk")
    assert fake_gpu.scan_order == 1
    monkeypatch.setenv("CUWFST_KERNELS", "new_chunks")
    Decoder(graph, device="cuda")
    assert fake_gpu.scan_order == 1 and fake_gpu.scan_round == 0 and fake_gpu.kernels == (0, 2, 0, False, True)
    monkeypatch.setenv("CUWFST_KERNELS", "new_lane")
    Decoder(graph, device="cuda")
    assert fake_gpu.scan_order == 0 and fake_gpu.scan_round == 0 and fake_gpu.pdl is True
    assert fake_gpu.refill_kernel is False  # the refill in Finalize unless a variant asks for RefillKernel
    monkeypatch.setenv("CUWFST_KERNELS", "new_rk")
    Decoder(graph, device="cuda")
    assert fake_gpu.refill_kernel is True and fake_gpu.scan_order == 2 and fake_gpu.scan_round == 512
    Decoder(graph, device="cuda", refill_kernel=False)
    assert fake_gpu.refill_kernel is False
    monkeypatch.setenv("CUWFST_KERNELS", "new_lane")
    Decoder(graph, device="cuda", scan_order="persistent", scan_round=256)
    assert fake_gpu.scan_order == 2 and fake_gpu.scan_round == 256
    assert fake_gpu.walker == 4  # "auto": "warp_coop_pdl" on this epsilon graph
    Decoder(Graph.load(TINY / "HLG.img"), device="cuda")
    assert fake_gpu.walker == 0  # "auto": "warp" on an epsilon-free graph
    Decoder(graph, device="cuda", walker="warp")
    assert fake_gpu.walker == 0
    Decoder(graph, device="cuda", walker="warp_search")  # the searches before WarpLaneOf and the window
    assert fake_gpu.walker == 2
    monkeypatch.setenv("CUWFST_KERNELS", "new_noload")  # the persistent scan, tokens read after the anchor
    Decoder(graph, device="cuda")
    assert fake_gpu.scan_order == 3 and fake_gpu.scan_round == 512 and fake_gpu.pdl is True
    monkeypatch.delenv("CUWFST_KERNELS")
    with pytest.raises(ValueError, match="scan_order"):
        Decoder(graph, device="cuda", scan_order="lanes")
    with pytest.raises(ValueError, match="fused_max"):
        Decoder(graph, device="cuda", fused_max=1)
    with pytest.raises(ValueError, match="trim_arcs"):
        Decoder(graph, device="cuda", trim_arcs=1)
    with pytest.raises(ValueError, match="refill_kernel"):
        Decoder(graph, device="cuda", refill_kernel="yes")
    monkeypatch.setenv("CUWFST_KERNELS", "fast")
    with pytest.raises(ValueError, match="CUWFST_KERNELS"):
        Decoder(graph, device="cuda")
    monkeypatch.delenv("CUWFST_KERNELS")
    with pytest.raises(ValueError, match="closure"):
        Decoder(graph, device="cuda", closure="eager")
    with pytest.raises(ValueError, match="scan_split"):
        Decoder(graph, device="cuda", scan_split=-1)
    with pytest.raises(ValueError, match="finalize_split"):
        Decoder(graph, device="cuda", finalize_split=65)


def test_decoders_take_the_pool_handout_from_the_environment(fake_gpu, monkeypatch):
    """CUWFST_POOL_HANDOUT (lastblock, the default / kernel) reaches gpu_decoder_create as
    its index, read when the decoder is built; a bad value is refused."""
    graph = Graph.load(TINY / "HLG.img")
    monkeypatch.delenv("CUWFST_POOL_HANDOUT", raising=False)
    Decoder(graph, device="cuda", max_lanes=2)
    assert fake_gpu.pool_handout == 0
    monkeypatch.setenv("CUWFST_POOL_HANDOUT", "kernel")
    dec = Decoder(graph, device="cuda", max_lanes=2)
    assert fake_gpu.pool_handout == 1
    monkeypatch.setenv("CUWFST_POOL_HANDOUT", "lastblock")
    assert dec._gpu.kw["pool_handout"] == "kernel"  # read once: the rescue instance gets the same
    monkeypatch.setenv("CUWFST_POOL_HANDOUT", "grid")
    with pytest.raises(ValueError, match="CUWFST_POOL_HANDOUT"):
        Decoder(graph, device="cuda", max_lanes=2)


def test_decoders_take_the_pool_bound_from_the_environment(fake_gpu, monkeypatch):
    """CUWFST_POOL_BOUND (admit / slots / bins / anchor / claims / claims-finalize /
    claims-finalize-ahead, the default) reaches
    gpu_decoder_create as its index (types.cuh kPoolBound*), read when the decoder is built; a
    bad value is refused."""
    graph = Graph.load(TINY / "HLG.img")
    monkeypatch.delenv("CUWFST_POOL_BOUND", raising=False)
    Decoder(graph, device="cuda", max_lanes=2)
    assert fake_gpu.pool_bound == 6
    for i, name in enumerate(("admit", "slots", "bins", "anchor", "claims", "claims-finalize", "claims-finalize-ahead")):
        monkeypatch.setenv("CUWFST_POOL_BOUND", name)
        Decoder(graph, device="cuda", max_lanes=2)
        assert fake_gpu.pool_bound == i, name
    monkeypatch.setenv("CUWFST_POOL_BOUND", "best")
    with pytest.raises(ValueError, match="CUWFST_POOL_BOUND"):
        Decoder(graph, device="cuda", max_lanes=2)


def test_pooled_decoders_take_the_pool_lane_factor_from_the_environment(fake_gpu, monkeypatch):
    """CUWFST_POOL_LANE_Q (2, the default) reaches gpu_decoder_create as its last argument,
    pool_q = factor x main_q, for the main instance of a decoder whose lanes may be pooled
    (memory lazy or pooled); 0 under memory="eager" and for the rescue instance; a value outside
    [1, 16] or not an int is refused by name."""
    graph = Graph.load(TINY / "HLG.img")
    monkeypatch.delenv("CUWFST_POOL_LANE_Q", raising=False)
    dec = Decoder(graph, DecoderOptions(max_active_states=1000), device="cuda", max_lanes=2, memory="pooled")
    # (32 x max_active asked; the native side caps it, as main_q, at the graph's states)
    assert fake_gpu.pool_q == 2 * 32000 == dec._gpu.pool_q
    for value, memory, want in (("4", "pooled", 4 * 32000), ("1", "lazy", 32000), ("3", "eager", 0)):
        monkeypatch.setenv("CUWFST_POOL_LANE_Q", value)
        Decoder(graph, DecoderOptions(max_active_states=1000), device="cuda", max_lanes=2, memory=memory)
        assert fake_gpu.pool_q == want, (value, memory)
    monkeypatch.setenv("CUWFST_POOL_LANE_Q", "2")
    dec = Decoder(graph, DecoderOptions(max_active_states=1000), device="cuda", max_lanes=2, memory="pooled")
    dec._gpu.rescue_instance()
    assert fake_gpu.pool_q == 0  # (the rescue instance, built last)
    for bad in ("0", "17", "two", "1.5"):
        monkeypatch.setenv("CUWFST_POOL_LANE_Q", bad)
        with pytest.raises(ValueError, match="CUWFST_POOL_LANE_Q"):
            Decoder(graph, device="cuda", max_lanes=2, memory="pooled")


def test_decoders_take_the_winners_log_place_from_the_environment(fake_gpu, monkeypatch):
    """CUWFST_WINNERS_LOG (device, the default / host) reaches gpu_decoder_create as a flag
    under memory="pooled", read once when the decoder is built (the rescue instance gets the
    same); the other memory modes never ask for the host log; a bad value is refused."""
    graph = Graph.load(TINY / "HLG.img")
    monkeypatch.delenv("CUWFST_WINNERS_LOG", raising=False)
    Decoder(graph, device="cuda", max_lanes=2, memory="pooled")
    assert fake_gpu.winners_host is False
    monkeypatch.setenv("CUWFST_WINNERS_LOG", "host")
    for memory in ("lazy", "eager"):
        Decoder(graph, device="cuda", max_lanes=2, memory=memory)
        assert fake_gpu.winners_host is False, memory
    dec = Decoder(graph, device="cuda", max_lanes=2, memory="pooled")
    assert fake_gpu.winners_host is True
    monkeypatch.setenv("CUWFST_WINNERS_LOG", "device")
    assert dec._gpu.kw["winners_log"] == "host"
    monkeypatch.setenv("CUWFST_WINNERS_LOG", "pinned")
    with pytest.raises(ValueError, match="CUWFST_WINNERS_LOG"):
        Decoder(graph, device="cuda", max_lanes=2, memory="pooled")


@pytest.mark.parametrize("env,key,flag,default,other,bad", [
    ("CUWFST_GRAPH_CHUNKS", "graph_chunks", "graph_chunks", "on", "off", "some"),
    ("CUWFST_PAYLOAD", "payload", "payload_tokens", "token", "slot", "slots"),
])
def test_decoders_take_flags_from_the_environment(fake_gpu, monkeypatch, env, key, flag, default, other, bad):
    """CUWFST_GRAPH_CHUNKS (on, the default / off) and CUWFST_PAYLOAD (token, the default /
    slot) reach gpu_decoder_create as its last two flags, read once when the decoder is built
    (the rescue instance gets the same); a bad value is refused."""
    graph = Graph.load(TINY / "HLG.img")
    on = {"graph_chunks": "on", "payload": "token"}[key]  # the value the native flag is True for
    monkeypatch.delenv(env, raising=False)
    Decoder(graph, device="cuda", max_lanes=2)
    assert getattr(fake_gpu, flag) is (default == on)
    monkeypatch.setenv(env, other)
    dec = Decoder(graph, device="cuda", max_lanes=2)
    assert getattr(fake_gpu, flag) is (other == on)
    monkeypatch.setenv(env, default)
    assert dec._gpu.kw[key] == other
    monkeypatch.setenv(env, bad)
    with pytest.raises(ValueError, match=env):
        Decoder(graph, device="cuda", max_lanes=2)


def test_decoders_take_the_pool_full_mask_from_the_environment(fake_gpu, monkeypatch):
    """CUWFST_POOL_FULL (the pooled layout's diagnostic) reaches gpu_decoder_create as its last
    argument, a mask: none (the default) 0, claims 1, hash 2, tokens 4, hash2x 8, hash4x 16, kinds
    joined by '+', all 7 (the three full kinds); anything else (an unknown kind, a kind twice, an empty part) is refused by name."""
    graph = Graph.load(TINY / "HLG.img")
    monkeypatch.delenv("CUWFST_POOL_FULL", raising=False)
    Decoder(graph, device="cuda", max_lanes=2, memory="pooled")
    assert fake_gpu.pool_full == 0
    for value, mask in (("none", 0), ("claims", 1), ("hash", 2), ("tokens", 4), ("hash+tokens", 6), ("all", 7),
                        ("tokens+claims+hash", 7), ("hash2x", 8), ("hash4x", 16), ("tokens+hash2x", 12)):
        monkeypatch.setenv("CUWFST_POOL_FULL", value)
        Decoder(graph, device="cuda", max_lanes=2, memory="pooled")
        assert fake_gpu.pool_full == mask, value
    for bad in ("some", "hash+hash", "hash+", "Hash"):
        monkeypatch.setenv("CUWFST_POOL_FULL", bad)
        with pytest.raises(ValueError, match="CUWFST_POOL_FULL"):
            Decoder(graph, device="cuda", max_lanes=2, memory="pooled")


def test_stream_decoders_take_memory_kernels_and_arena_ahead_from_the_environment(fake_gpu, monkeypatch):
    """A StreamingDecoder builds its native decoder like Decoder: CUWFST_MEMORY,
    CUWFST_KERNELS and CUWFST_ARENA_AHEAD (read when it is built) or the keywords, which win
    (benchmarks/streaming.py --memory / --kernels / --arena-ahead rely on it)."""
    from cuwfst import StreamingDecoder

    graph = Graph.load(TINY / "HLG.img")
    for var in ("CUWFST_MEMORY", "CUWFST_KERNELS", "CUWFST_ARENA_AHEAD"):
        monkeypatch.delenv(var, raising=False)
    sd = StreamingDecoder(graph, device="cuda", max_streams=4)
    h = sd._frontend._gpu.main.handle
    assert fake_gpu.lazy[h] is True and fake_gpu.kernels == (0, True, 0, False, True)
    assert fake_gpu.arena_ahead is True
    monkeypatch.setenv("CUWFST_MEMORY", "eager")
    monkeypatch.setenv("CUWFST_KERNELS", "old")
    monkeypatch.setenv("CUWFST_ARENA_AHEAD", "off")
    sd = StreamingDecoder(graph, device="cuda", max_streams=4)
    assert fake_gpu.lazy[sd._frontend._gpu.main.handle] is False
    assert fake_gpu.kernels == (1, False, 8, False, False) and fake_gpu.arena_ahead is False
    assert sd.memory_stats()["memory"] == "eager"
    sd = StreamingDecoder(graph, device="cuda", max_streams=4, memory="lazy", scan_split=0, closure="lists",
                          finalize_split=0)  # (trim_arcs still from CUWFST_KERNELS=old: off)
    assert fake_gpu.lazy[sd._frontend._gpu.main.handle] is True and fake_gpu.kernels == (0, True, 0, False, False)
    monkeypatch.setenv("CUWFST_ARENA_AHEAD", "sometimes")
    with pytest.raises(ValueError, match="CUWFST_ARENA_AHEAD"):
        StreamingDecoder(graph, device="cuda", max_streams=4)


def test_continuous_rows_become_hypotheses_segment_by_segment(fake_gpu, monkeypatch):
    """Continuous batching runs the native decode a segment at a time (gpu_decode_many_begin /
    launch / wait) and turns each wait's rows into hypotheses while the next segment runs: the
    fake hands rows out a lane-count per wait, longest first, and poisons every other row
    until then, so a row read early would differ from the CPU's. A failure while the rows
    become hypotheses aborts the native run, and the decoder decodes again afterwards."""
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    want = Decoder(graph).decode(lp, lens)
    dec = Decoder(graph, device="cuda", max_lanes=2, batching="continuous")
    got = dec.decode(lp, lens)
    assert len(lens) > 4 and fake_gpu.many_waits == (len(lens) + 1) // 2
    assert [(h.words, h.score, h.arcs, h.timestamps) for h in got] == \
        [(h.words, h.score, h.arcs, h.timestamps) for h in want]
    assert list(dec.decode_all(lp[b, : lens[b]] for b in range(len(lens)))) == got
    calls = {"n": 0}
    real = Decoder.make_hypotheses

    def failing(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # (what a user's Ctrl-C looks like mid-decode)
        return real(self, *a, **kw)

    monkeypatch.setattr(Decoder, "make_hypotheses", failing)
    with pytest.raises(KeyboardInterrupt):
        dec.decode(lp, lens)
    assert getattr(fake_gpu, "many_aborts", 0) == 1 and fake_gpu.many_run is None
    monkeypatch.setattr(Decoder, "make_hypotheses", real)
    assert dec.decode(lp, lens) == got


@pytest.mark.parametrize("overlap", ["on", "off"])
def test_lattice_sub_batches_with_host_overlap(fake_gpu, monkeypatch, overlap):
    """Several lattice sub-batches (3 of at most 2 lanes): each one's host replay, Lattice
    objects, word times and confidences beside the next one's decode (HostOverlap, "on") or
    after it ("off"); every row the CPU's either way."""
    from test_lattice_records import assert_same_lattice

    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    x = lp[:5].astype(np.float32)
    lens = lens[:5].copy()
    want = Decoder(graph, output_beam=5.0).decode(x, lens, lattice=True)
    monkeypatch.setenv("CUWFST_LATTICE_OVERLAP", overlap)
    got = Decoder(graph, device="cuda", output_beam=5.0, max_lanes=2).decode(x, lens, lattice=True)
    assert fake_gpu.lattice_calls == 3
    for b, (w, g) in enumerate(zip(want, got)):
        assert (g.words, g.score, g.word_times, g.word_confidences) == (w.words, w.score, w.word_times,
                                                                       w.word_confidences), b
        assert_same_lattice(w.lattice, g.lattice, f"overlap {overlap} row {b}")


class FakePrunedGpuModule(FakeGpuModule):
    """FakeGpuModule with the GPU-pruned lattice path (gpu_decode_lattice_pruned and its
    pipelined halves): the pruning is the CPU replay of the records, and the jobs keep the
    native rules (GpuDecoder::PruneBegin / PruneFinish), each decoder (instance) its own: two
    sets taken in turn, a Begin on a set whose job is running fails, a job is finished once,
    rows come from the decoder's last finish."""

    def __init__(self):
        super().__init__()
        import threading
        self.jobs = {}  # id -> dict(h, set, state, handle, sizes, thread)
        self.turns, self.ids, self.rows_of = {}, 0, {}  # (per decoder: the next set, the last finish's rows)
        self.lock = threading.Lock()
        self.finish_threads, self.finish_names, self.most_pending = set(), set(), 0
        # (the base fake keeps one decode's records module-wide: a replay is one piece, whichever
        # thread and decoder runs it; EarlyRescue's thread decodes beside the calling thread)
        self.replay_lock = threading.Lock()
        self.decode_threads = []  # (decoder lanes, thread name) of each decode with records

    def _replay(self, h, lp, lens, online, out, counts, cutoffs, sizes, total, rows=None):
        import threading
        with self.replay_lock:
            self.decode_threads.append((self.decoders[h][6], threading.current_thread().name))
            if self.fail_lanes == self.decoders[h][6]:
                raise RuntimeError(f"decode on {self.fail_lanes} lanes failed (injected)")
            return self._replay_locked(h, lp, lens, online, out, counts, cutoffs, sizes, total, rows)

    def _replay_locked(self, h, lp, lens, online, out, counts, cutoffs, sizes, total, rows=None):
        import tvm_ffi
        if rows is not None:  # the rows read in place: the fake copies them
            x = np.from_dlpack(tvm_ffi.from_dlpack(lp.__dlpack__()))
            assert rows.dtype == np.int32 and len(rows) == len(lens) and ((rows >= 0) & (rows < len(x))).all()
            lp = FakeDeviceArray(np.ascontiguousarray(x[rows]), 0)
        self.gpu_decode_lattice(h, lp, lens, online, 0, *out, counts, cutoffs, sizes, total, 0, 0.0, 0.0,
                                np.zeros(counts.shape, np.float32))
        graph_h, beam, obeam, mn, mx, partial, lanes, eps = self.decoders[h]
        records = np.zeros((int(total[0]), 3), np.int32)
        self.gpu_lattice_records(h, records)
        B = len(lens)
        skip = ((out[3][:, 2] & gpu.RESCUE_BITS) != 0).astype(np.uint8)
        size, score = np.zeros((B, 3), np.int64), np.zeros(B, np.float32)
        handle = self.ref.ref_lattices_from_records(self.graphs[graph_h], np.ascontiguousarray(lens, np.int32),
                                                    records, counts, cutoffs, sizes, skip, beam, obeam, mn, mx,
                                                    partial, eps, 1, size, score, np.zeros((0, 0), np.float32),
                                                    np.zeros(B, np.uint8))
        return handle, size

    def _begin(self, h, lp, lens, online, out, counts, cutoffs, sizes, total, set_, rows=None):
        handle, size = self._replay(h, lp, lens, online, out, counts, cutoffs, sizes, total, rows)
        with self.lock:
            for k, j in list(self.jobs.items()):
                if j["h"] == h and j["set"] == set_:
                    assert j["state"] != "running", "PruneBegin on a set whose job is running"
                    self.ref.ref_lattice_free(j["handle"])  # a pending job nobody finished is dropped
                    del self.jobs[k]
            self.ids += 1
            self.jobs[self.ids] = dict(h=h, set=set_, state="pending", handle=handle, size=size)
            self.most_pending = max(self.most_pending, len(self.jobs))
            return self.ids

    def _finish(self, job, sizes2):
        import threading
        with self.lock:
            j = self.jobs.get(job)
            assert j is not None and j["state"] == "pending", "PruneFinish: no pending pruning"
            j["state"] = "running"
        self.finish_threads.add(threading.get_ident())
        self.finish_names.add(threading.current_thread().name)
        sizes2[:] = j["size"]
        if self.rows_of.get(j["h"]) is not None:
            self.ref.ref_lattice_free(self.rows_of[j["h"]])
        self.rows_of[j["h"]] = j["handle"]
        with self.lock:
            del self.jobs[job]

    def gpu_decode_lattice_pruned(self, h, lp, lens, online, stream, a, l, sc, m, st, counts, cutoffs, sizes, total,
                                  obeam, sizes2, ms, chunk, filt, pad, trim):
        self.sync_prunes = getattr(self, "sync_prunes", 0) + 1
        job = self._begin(h, lp, lens, online, (a, l, sc, m, st), counts, cutoffs, sizes, total, 0)
        self._finish(job, sizes2)

    def gpu_decode_lattice_pruned_begin(self, h, lp, rows, lens, online, stream, a, l, sc, m, st, counts, cutoffs,
                                        sizes, total, obeam, filt, pad, trim):
        with self.lock:
            set_ = self.turns.get(h, 0)
            self.turns[h] = 1 - set_
        self.begin_rows = getattr(self, "begin_rows", []) + [len(rows)]
        return self._begin(h, lp, lens, online, (a, l, sc, m, st), counts, cutoffs, sizes, total, set_, rows)

    def gpu_lattice_prune_finish(self, h, job, sizes2, ms):
        self._finish(job, sizes2)

    def gpu_lattice_pruned_rows(self, h, rows, arrays):
        for i, b in enumerate(rows):
            self.ref.ref_lattice_row(self.rows_of[h], int(b), *arrays[3 * i: 3 * i + 3])


def _pruned_case(monkeypatch):
    """The GPU-pruned fake tests' case: FakePrunedGpuModule in place of the native module, the tiny
    HLG, the demo's rows and two of them again (9 rows), and the CPU's lattice decode of them
    (output_beam 5). (mod, graph, x, lens, want)"""
    mod = FakePrunedGpuModule()
    from cuwfst.jit import decoder as jit_decoder
    monkeypatch.setattr(jit_decoder, "module", lambda index=0: mod)
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    x = np.concatenate([lp, lp[:2]]).astype(np.float32)[:9]
    lens = np.concatenate([lens, lens[:2]])[:9].copy()
    return mod, graph, x, lens, Decoder(graph, output_beam=5.0).decode(x, lens, lattice=True)


@pytest.mark.parametrize("pipeline,gather,finish,workers,split,tail", [
    ("on", "native", "worker", 1, "off", "on"), ("on", "copy", "worker", 1, "off", "on"),
    ("off", "native", "worker", 1, "off", "on"), ("on", "native", "thread", 1, "off", "on"),
    ("on", "native", "worker", 2, "off", "on"), ("off", "native", "worker", 3, "off", "on"),
    ("on", "native", "worker", 2, "on", "on"), ("on", "native", "worker", 3, "on", "on"),
    ("on", "native", "worker", 1, "on", "on"), ("on", "native", "worker", 2, "last", "on"),
    ("on", "native", "worker", 1, "last", "on"), ("on", "native", "worker", 2, "last", "off"),
    ("on", "native", "thread", 1, "off", "off"), ("on", "native", "worker", 1, "off", "off")])
def test_gpu_pruned_sub_batches_prune_beside_the_next_decode(fake_gpu, monkeypatch, pipeline, gather, finish, workers,
                                                             split, tail):
    """The GPU-pruned lattice path over 5 sub-batches of 2 lanes: with the pipeline on, each
    sub-batch's pruning (PruneFinish) and rows run on the host-overlap worker while this
    thread decodes the next one, never more than two jobs at once (each job has its own
    buffers); with it off, one whole pruning a sub-batch. CUWFST_LATTICE_HOST_WORKERS > 1:
    the finishes on the finish thread (one thread, in order), the host work on that many
    workers, and with CUWFST_LATTICE_HOST_SPLIT=on each sub-batch's host work in one share of its
    rows a worker (=last: the last sub-batch's alone; one worker: no split).
    CUWFST_LATTICE_TAIL_HYPS=on (the default): the last sub-batch's hypotheses made on this
    thread while its pruning finishes; off: on the finish's thread after it, as the others'.
    Every row's words, score, word times and confidences and lattice the CPU's whichever way."""
    import threading

    from test_lattice_records import assert_same_lattice

    mod, graph, x, lens, want = _pruned_case(monkeypatch)
    monkeypatch.setenv("CUWFST_LATTICE_PIPELINE", pipeline)
    monkeypatch.setenv("CUWFST_ROW_GATHER", gather)
    monkeypatch.setenv("CUWFST_LATTICE_FINISH", finish)
    monkeypatch.setenv("CUWFST_LATTICE_HOST_WORKERS", str(workers))
    monkeypatch.setenv("CUWFST_LATTICE_HOST_SPLIT", split)
    monkeypatch.setenv("CUWFST_LATTICE_TAIL_HYPS", tail)
    dec = Decoder(graph, device="cuda", output_beam=5.0, max_lanes=2)
    monkeypatch.setenv("CUWFST_LATTICE_HOST_SPLIT", "bad")  # (read when the decoder was made)
    monkeypatch.setenv("CUWFST_LATTICE_TAIL_HYPS", "bad")
    assert dec._gpu.lattice_worker_count() == workers and dec._gpu.lattice_host_split_mode() == split
    assert dec._gpu.lattice_tail_hyps_on() == (tail == "on")
    from cuwfst.decoder.gpu import GpuBackend
    collect_threads, real_collect = [], GpuBackend._collect  # (each sub-batch's hypotheses: which thread)

    def collect(*args, **kw):
        collect_threads.append(threading.current_thread().name)
        return real_collect(*args, **kw)
    monkeypatch.setattr(GpuBackend, "_collect", staticmethod(collect))
    assert dec._gpu.lattice_host_split_on() == (split == "on")
    shares = []  # (rows of each attach_all call: a share, or a sub-batch's whole host work)
    if split != "off" and workers > 1:  # the shares' threads: every host worker takes a share
        import time as _time

        from cuwfst.decoder import lattice as lattice_mod
        share_threads, real = set(), lattice_mod.attach_all

        def attach_all(*args, **kw):
            shares.append(len(args[1]))
            share_threads.add(threading.current_thread().name)
            _time.sleep(0.01)  # (a share long enough that the next one starts on another worker)
            return real(*args, **kw)
        monkeypatch.setattr(lattice_mod, "attach_all", attach_all)
    dec._gpu.lattice_trace, dec._gpu.lattice_trace_worker = [], []  # (benchmarks.lattice_speed's stamps)
    import faulthandler

    armed = []
    monkeypatch.setattr(faulthandler, "dump_traceback_later", lambda *a, **k: armed.append((a, k)))
    monkeypatch.setattr(faulthandler, "cancel_dump_traceback_later", lambda: armed.append("cancel"))
    got = dec.decode(x, lens, lattice=True)
    assert mod.lattice_calls == 5
    calls, jobs = dec._gpu.lattice_trace, dec._gpu.lattice_trace_worker
    if pipeline == "on":  # a stamp set a sub-batch on each side, each in order, a job after its decode call
        assert len(calls) == len(jobs) == 5
        jobs = sorted(jobs)  # (several host workers: stamped as each ends; the finishes run in order)
        assert all(list(c) == sorted(c) for c in calls) and all(list(j[:4]) == sorted(j[:4]) for j in jobs)
        assert all(j[2] <= j[4] <= j[5] <= j[3] for j in jobs)  # the host work's inner stamps
        assert all(j[0] >= c[4] for c, j in zip(calls, jobs))
        # the call's host work all done (the overlap's exit) after the last job's last stamp
        assert dec._gpu.lattice_trace_exit >= max(j[3] for j in jobs)
    else:
        assert calls == [] and jobs == []
    assert dec._gpu.lattice_trace_exit is not None
    assert dec._gpu.lattice_trace_end >= dec._gpu.lattice_trace_exit  # (no rescue here: right after the exit)
    # the frame's locals dropped one at a time after the rescue's end, each stamped, before the lock is left
    assert list(dec._gpu.lattice_trace_drops) == ["overlap", "early", "got_subs", "host", "rows_redo"]
    assert all(v >= 0 for v in dec._gpu.lattice_trace_drops.values())
    # then the frame's return (stamped in the lock), then the lock left; no gap dump asked for, none armed
    assert dec._gpu.lattice_trace_end <= dec._gpu.lattice_trace_dropped <= dec._gpu.lattice_trace_returned \
        <= dec._gpu.lattice_trace_unlocked
    assert armed == []
    hd = dec._gpu.lattice_trace_host_drops  # the overlap's parts dropped one at a time (none with the overlap off)
    assert (hd is not None) == dec._gpu.lattice_overlap_on()
    if hd is not None:
        assert hd["futures"] >= 5 and len(hd["slowest"]) == 3 and all(k != "error" for _, _, k in hd["slowest"])
        assert hd["futures_ms"] >= 0 and hd["pool_ms"] >= 0 and hd["finish_ms"] >= 0
    if pipeline == "on":  # the begins always name their rows: the sub-batch's (in place) or all of a packed copy
        assert sorted(mod.begin_rows) == [1, 2, 2, 2, 2]
    if pipeline == "on":
        assert getattr(mod, "sync_prunes", 0) == 0 and mod.finish_threads and \
            threading.get_ident() not in mod.finish_threads
        # (finish "thread": the finishes on one thread of their own, the host work on the worker)
        assert len(mod.finish_threads) == 1
        assert all(x.startswith("cuwfst-lattice-" + ("finish" if finish == "thread" or workers > 1 else "host"))
                   for x in mod.finish_names), mod.finish_names
        assert 1 <= mod.most_pending <= 2
    else:
        assert mod.sync_prunes == 5 and not mod.finish_threads - {threading.get_ident()}
    assert not mod.jobs
    if split != "off" and workers > 1:
        assert len(share_threads) == workers and all(x.startswith("cuwfst-lattice-host") for x in share_threads)
        # (9 rows in sub-batches of 2, longest first: the last holds one row, its second share none)
        assert len(shares) == (5 * workers if split == "on" else 4 + workers) and sum(shares) == 9, shares
    if pipeline == "on":  # the last sub-batch's hypotheses on this thread (tail "on"), every other one's not
        assert len(collect_threads) == 5
        main = threading.current_thread().name
        assert collect_threads.count(main) == (1 if tail == "on" else 0), collect_threads
    for b, (w, g) in enumerate(zip(want, got)):
        assert (g.words, g.score, g.word_times, g.word_confidences) == (w.words, w.score, w.word_times,
                                                                       w.word_confidences), b
        assert_same_lattice(w.lattice, g.lattice, f"pipeline {pipeline} row {b}")
    # a gap dump asked for: armed after the locals' drops (repeating), cancelled once the lock is left
    armed.clear()
    sink = object()
    dec._gpu.lattice_trace_gap_dump = sink
    dec.decode(x, lens, lattice=True)
    assert armed == [((dec._gpu.lattice_trace_gap_every,), {"repeat": True, "file": sink}), "cancel"]
    dec._gpu.lattice_trace_gap_dump = None
    dec._gpu.lattice_tail_hyps = "yes"
    with pytest.raises(ValueError, match="lattice_tail_hyps"):
        dec._gpu.lattice_tail_hyps_on()
    dec._gpu.lattice_host_split = "Last"  # (the attribute wins over the variable; a value it does not know)
    with pytest.raises(ValueError, match="lattice_host_split"):
        dec._gpu.lattice_host_split_mode()


def _flagged_rows_case():
    """The early-rescue fake tests' rows: the demo's rows three times over (15 rows), the fake main
    instance flagging rows 1 and 4 and their copies. (x, lens, the flagged rows' sums, how many)."""
    lp, lens, _ = demo_arrays()
    x = np.concatenate([lp, lp, lp]).astype(np.float32)[:15]
    lens = np.concatenate([lens, lens, lens])[:15].copy()
    flagged = {float(x[1].sum()), float(x[4].sum())}  # rows 1 and 4 and their copies
    n_flagged = sum(1 for b in range(15) if float(x[b].sum()) in flagged)
    assert n_flagged >= 4
    return x, lens, flagged, n_flagged


def _check_rescue_threads(threads, early: str, stats: dict, n_flagged: int) -> None:
    """threads: (lanes, thread name) of each decode. The three 5-lane sub-batches ran on the calling
    thread; the 4-lane rescue decodes on the early-rescue thread (early "on") or the calling one;
    every flagged row rescued, none left."""
    rescues = [name for lanes, name in threads if lanes == 4]
    mains = [name for lanes, name in threads if lanes == 5]
    assert set(mains) == {threading.current_thread().name} and len(mains) == 3 and rescues
    if early == "on":
        assert all(n.startswith("cuwfst-early-rescue") for n in rescues), rescues
    else:
        assert set(rescues) == {threading.current_thread().name}
    assert stats["flagged_rows"] == stats["rescued_rows"] == n_flagged and stats["unabsorbed_rows"] == 0
    assert stats["flagged_bits"] == 16


@pytest.mark.parametrize("workers,error", [(1, RuntimeError), (2, RuntimeError), (2, KeyboardInterrupt)])
def test_last_sub_batch_hypotheses_error_reaches_the_caller(fake_gpu, monkeypatch, workers, error):
    """CUWFST_LATTICE_TAIL_HYPS on: an error while the calling thread makes the last sub-batch's
    hypotheses (here _collect raising there) is raised by decode() once the jobs are done, not
    lost and not a hang (an interrupt too: the job waiting for them gets it); attach_all refuses
    word times that do not match its hypotheses."""
    from cuwfst.decoder.gpu import GpuBackend
    from cuwfst.decoder.lattice import attach_all

    mod = FakePrunedGpuModule()
    from cuwfst.jit import decoder as jit_decoder
    monkeypatch.setattr(jit_decoder, "module", lambda index=0: mod)
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    monkeypatch.setenv("CUWFST_LATTICE_HOST_WORKERS", str(workers))
    dec = Decoder(graph, device="cuda", output_beam=5.0, max_lanes=2)
    real = GpuBackend._collect

    def collect(*args, **kw):
        if threading.current_thread() is threading.main_thread():
            raise error("collect failed on the calling thread")
        return real(*args, **kw)
    monkeypatch.setattr(GpuBackend, "_collect", staticmethod(collect))
    with pytest.raises(error, match="collect failed on the calling thread"):
        dec.decode(lp.astype(np.float32), lens, lattice=True)
    monkeypatch.setattr(GpuBackend, "_collect", staticmethod(real))
    got = dec.decode(lp.astype(np.float32), lens, lattice=True)  # (the decoder still works)
    want = Decoder(graph, output_beam=5.0).decode(lp, lens, lattice=True)
    assert [(g.words, g.word_times) for g in got] == [(w.words, w.word_times) for w in want]
    with pytest.raises(ValueError, match="word-time lists"):
        attach_all(graph, [got[0]], [got[0].lattice], times=[])


@pytest.mark.parametrize("early,pipeline,finish", [("on", "on", "worker"), ("on", "on", "thread"), ("on", "off", "worker"),
                                                  ("off", "on", "worker")])
def test_lattice_rows_rescued_beside_the_next_sub_batches(fake_gpu, monkeypatch, early, pipeline, finish):
    """A lattice decode whose sub-batches flag rows with a capacity overflow (the fake's bit 16 on
    a main instance of more than 4 lanes): with CUWFST_EARLY_RESCUE=on those rows are
    decoded on the rescue instance (4 lanes) on the early-rescue thread, each flagged sub-batch's
    rows handed over as its decode returns; off, on the calling thread after the sub-batches.
    Either way every row's words, score, word times, confidences and lattice are the CPU's, no
    row is left flagged, and the rescue's counts are the same."""
    from test_lattice_records import assert_same_lattice

    mod = FakePrunedGpuModule()
    from cuwfst.jit import decoder as jit_decoder
    monkeypatch.setattr(jit_decoder, "module", lambda index=0: mod)
    graph = Graph.load(TINY / "HLG.img")
    x, lens, flagged, n_flagged = _flagged_rows_case()
    want = Decoder(graph, output_beam=5.0).decode(x, lens, lattice=True)
    mod.overflow_rows = flagged
    monkeypatch.setenv("CUWFST_EARLY_RESCUE", early)
    monkeypatch.setenv("CUWFST_LATTICE_PIPELINE", pipeline)
    monkeypatch.setenv("CUWFST_LATTICE_FINISH", finish)
    dec = Decoder(graph, device="cuda", output_beam=5.0, max_lanes=5)
    got = dec.decode(x, lens, lattice=True)
    _check_rescue_threads(mod.decode_threads, early, dec._gpu.stats, n_flagged)
    for b, (w, g) in enumerate(zip(want, got)):
        assert g.overflow == 0, b
        assert (g.words, g.score, g.word_times, g.word_confidences) == (w.words, w.score, w.word_times,
                                                                       w.word_confidences), b
        assert_same_lattice(w.lattice, g.lattice, f"early {early} row {b}")
    assert not mod.jobs


def test_early_rescue_option_is_checked(fake_gpu, monkeypatch):
    graph = Graph.load(TINY / "HLG.img")
    dec = Decoder(graph, device="cuda", max_lanes=5)
    assert dec._gpu.early_rescue_on() is True  # (the default)
    dec._gpu.early_rescue = "off"
    assert dec._gpu.early_rescue_on() is False
    dec._gpu.early_rescue = "on"
    assert dec._gpu.early_rescue_on() is True
    dec._gpu.early_rescue = "off"
    assert dec._gpu.early_rescue_on() is False
    dec._gpu.early_rescue = "on"
    assert dec._gpu.early_rescue_on() is True
    dec._gpu.early_rescue = None
    monkeypatch.setenv("CUWFST_EARLY_RESCUE", "yes")
    with pytest.raises(ValueError, match="early_rescue"):
        dec._gpu.early_rescue_on()


@pytest.mark.parametrize("early", ["on", "off"])
def test_rows_rescued_beside_the_next_sub_batches(fake_gpu, monkeypatch, early):
    """A 1-best decode of padded sub-batches (three of five rows) whose main instance flags some
    rows with a capacity overflow (the fake's bit 16 on more than 4 lanes): with
    CUWFST_EARLY_RESCUE=on each sub-batch's flagged rows go to the rescue instance (4 lanes) on
    the early-rescue thread as its decode returns, while the calling thread decodes the next
    sub-batches; off, on the calling thread after them. Either way every row is the CPU's, none
    is left flagged, and the rescue's counts are the same."""
    graph = Graph.load(TINY / "HLG.img")
    x, lens, flagged, n_flagged = _flagged_rows_case()
    want = Decoder(graph).decode(x, lens)
    fake_gpu.overflow_rows = flagged
    monkeypatch.setenv("CUWFST_EARLY_RESCUE", early)
    dec = Decoder(graph, device="cuda", max_lanes=5)
    assert dec._gpu.batching == "padded"
    got = dec.decode(x, lens)
    _check_rescue_threads(fake_gpu.threads, early, dec._gpu.stats, n_flagged)
    assert [(h.words, h.score, h.overflow) for h in got] == [(h.words, h.score, 0) for h in want]


@pytest.mark.parametrize("lattice", [True, False])
def test_early_rescue_error_reaches_the_caller(fake_gpu, monkeypatch, lattice):
    """An error on the early-rescue thread (the rescue instance's decode) of a lattice or 1-best
    decode is raised by decode after the thread is done; the next call, without the fault,
    gives the CPU's results."""
    mod = fake_gpu
    if lattice:
        mod = FakePrunedGpuModule()
        from cuwfst.jit import decoder as jit_decoder
        monkeypatch.setattr(jit_decoder, "module", lambda index=0: mod)
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    x = np.concatenate([lp, lp]).astype(np.float32)[:10]
    lens = np.concatenate([lens, lens])[:10].copy()
    mod.overflow_rows = {float(x[1].sum())}
    monkeypatch.setenv("CUWFST_EARLY_RESCUE", "on")
    dec = Decoder(graph, device="cuda", output_beam=5.0, max_lanes=5)
    mod.fail_lanes = 4  # the rescue instance's lanes
    with pytest.raises(RuntimeError, match="injected"):
        dec.decode(x, lens, lattice=lattice)
    assert not any(t.name.startswith("cuwfst-early-rescue") for t in threading.enumerate())
    ran = mod.decode_threads if lattice else mod.threads
    assert any(name.startswith("cuwfst-early-rescue") for lanes, name in ran if lanes == 4)
    mod.fail_lanes = None
    want = Decoder(graph, output_beam=5.0).decode(x, lens, lattice=lattice)
    got = dec.decode(x, lens, lattice=lattice)
    assert [(h.words, h.score, h.overflow) for h in got] == [(h.words, h.score, 0) for h in want]


@pytest.mark.parametrize("kept", [False, True])
def test_host_overlap_runs_in_order_and_reraises(kept):
    """HostOverlap (a lattice decode's host work beside the next sub-batch's GPU decode): its
    work runs in submission order, all of it is done when the block ends, and the first error
    is raised there; an error of the block itself wins once the worker has finished. kept (pools
    kept between blocks, GpuBackend.lattice_keep_pools): the same, every block on the same
    thread, the pools not shut down; without them each block's pools end with it."""
    import threading
    import time as _time

    from cuwfst.decoder.gpu import HostOverlap

    pools = {} if kept else None
    done, main, threads = [], threading.get_ident(), set()

    def slow(i):
        _time.sleep(0.002)  # (the block ends before the work does: its end waits)
        done.append((i, threading.get_ident() != main))
        threads.add(threading.current_thread())  # (the objects: an ended thread's ident may come again)

    for _ in range(2):
        done.clear()
        with HostOverlap(pools=pools) as host:
            for i in range(5):
                host.run(lambda i=i: slow(i))
        assert done == [(i, True) for i in range(5)]
        assert host._pool._shutdown is not kept
    assert len(threads) == (1 if kept else 2)  # (one worker a pool: kept, the same thread both times)
    if kept:
        assert list(pools) == [(1, False)] and pools[(1, False)][0] is host._pool

    def boom():
        raise RuntimeError("worker failed")

    later = []
    with pytest.raises(RuntimeError, match="worker failed"):
        with HostOverlap(pools=pools) as host:
            host.run(boom)
            host.run(lambda: (_time.sleep(0.01), later.append(1)))
    assert later == [1]  # the work after the failing one still ran before the block ended
    with pytest.raises(KeyError, match="block"):
        with HostOverlap(pools=pools) as host:
            host.run(boom)
            raise KeyError("block")


@pytest.mark.parametrize("kept", [False, True])
def test_host_overlap_host_workers_run_side_by_side(kept):
    """HostOverlap(host_workers=3): the finishes on the finish thread, one at a time in submission
    order (even with finish_thread False); the host work of several sub-batches at once on the host
    workers (two host works held until both have started: one worker would never get there); a
    bad count is refused by name, as the decoder's option is."""
    import threading

    from cuwfst.decoder.gpu import HostOverlap

    log, lock = [], threading.Lock()
    both = threading.Barrier(2, timeout=10)

    def finish(i):
        def f():
            with lock:
                log.append(("finish", i, threading.current_thread().name))
            return i
        return f

    def then(r):
        if r < 2:
            both.wait()  # host works 0 and 1 side by side
        with lock:
            log.append(("host", r, threading.current_thread().name))

    with HostOverlap(host_workers=3, pools={} if kept else None) as host:
        for i in range(5):
            host.run_pruning(finish(i), then)
    assert [e[1] for e in log if e[0] == "finish"] == list(range(5))
    assert {e[2] for e in log if e[0] == "finish"} == {next(e[2] for e in log if e[0] == "finish")}
    assert all(e[2].startswith("cuwfst-lattice-finish") for e in log if e[0] == "finish")
    assert sorted(e[1] for e in log if e[0] == "host") == list(range(5))
    assert len({e[2] for e in log if e[0] == "host"}) >= 2
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="host_workers"):
            HostOverlap(host_workers=bad)


@pytest.mark.parametrize("workers", [1, 2])
def test_lattice_keep_pools_keeps_the_threads_and_the_results(fake_gpu, monkeypatch, workers):
    """CUWFST_LATTICE_KEEP_POOLS=on: a pipelined lattice decode's host pools made by the first call
    and used by the next (the host work on the same threads, none ended between calls), the
    results the CPU's both times; off (the default): each call's own pools, shut down at its end.
    A bad value is refused by name."""
    import threading

    from test_lattice_records import assert_same_lattice

    from cuwfst.decoder.gpu import GpuBackend

    mod, graph, x, lens, want = _pruned_case(monkeypatch)
    monkeypatch.setenv("CUWFST_LATTICE_PIPELINE", "on")
    monkeypatch.setenv("CUWFST_LATTICE_HOST_WORKERS", str(workers))
    threads, real_collect = [], GpuBackend._collect

    def collect(*args, **kw):
        threads.append(threading.current_thread())
        return real_collect(*args, **kw)
    monkeypatch.setattr(GpuBackend, "_collect", staticmethod(collect))
    for keep in ("off", "on"):
        monkeypatch.setenv("CUWFST_LATTICE_KEEP_POOLS", keep)
        dec = Decoder(graph, device="cuda", output_beam=5.0, max_lanes=2)
        assert dec._gpu.lattice_keep_pools_on() == (keep == "on")
        calls = []
        for _ in range(2):
            threads.clear()
            got = dec.decode(x, lens, lattice=True)
            calls.append({t for t in threads if t is not threading.current_thread()})
            for b, (w, g) in enumerate(zip(want, got)):
                assert (g.words, g.score, g.word_times, g.word_confidences) == \
                    (w.words, w.score, w.word_times, w.word_confidences), b
                assert_same_lattice(w.lattice, g.lattice, f"keep {keep} row {b}")
        assert calls[0] and calls[1]
        if keep == "on":  # both calls on the kept pools' threads, all still alive; the pools kept by their shape
            assert len(dec._gpu._overlap_pools) == 1
            (pool, finish), = dec._gpu._overlap_pools.values()
            kept = set(pool._threads) | (set(finish._threads) if finish is not None else set())
            assert calls[0] | calls[1] <= kept and all(t.is_alive() for t in kept)
            assert not pool._shutdown and (finish is None) == (workers == 1 and
                                                              dec._gpu.lattice_finish_mode() == "worker")
        else:  # each call's own threads, ended with it
            assert not calls[0] & calls[1] and not any(t.is_alive() for t in calls[0] | calls[1])
            assert dec._gpu._overlap_pools == {}
    dec._gpu.lattice_keep_pools = "yes"
    with pytest.raises(ValueError, match="lattice_keep_pools"):
        dec._gpu.lattice_keep_pools_on()
    for pools in dec._gpu._overlap_pools.values():  # (this test's threads end here)
        for pool in pools:
            if pool is not None:
                pool.shutdown(wait=True)


def test_lattice_host_workers_option_is_checked(fake_gpu, monkeypatch):
    graph = Graph.load(TINY / "HLG.img")
    dec = Decoder(graph, device="cuda", max_lanes=2)
    for cpus, want in ((16, 2), (8, 2), (7, 1), (2, 1), (None, 1)):  # the default by the host's CPUs
        monkeypatch.setattr(os, "cpu_count", lambda cpus=cpus: cpus)
        assert dec._gpu.lattice_worker_count() == want, cpus
    dec._gpu.lattice_host_workers = 4
    assert dec._gpu.lattice_worker_count() == 4
    dec._gpu.lattice_host_workers = None
    for bad in ("0", "two", "-1", "1.5"):
        monkeypatch.setenv("CUWFST_LATTICE_HOST_WORKERS", bad)
        with pytest.raises(ValueError, match="lattice_host_workers"):
            dec._gpu.lattice_worker_count()
    # a graph with epsilon arcs (the host replays its lattices): 4 workers on 16 or more CPUs
    monkeypatch.delenv("CUWFST_LATTICE_HOST_WORKERS")
    eps = Decoder(Graph.load(TINY / "TLG.img"), device="cuda", max_lanes=2)
    assert eps._gpu.graph.has_epsilon and not dec._gpu.graph.has_epsilon
    for cpus, want in ((32, 4), (16, 4), (15, 2), (8, 2), (7, 1), (None, 1)):
        monkeypatch.setattr(os, "cpu_count", lambda cpus=cpus: cpus)
        assert eps._gpu.lattice_worker_count() == want, cpus
        assert dec._gpu.lattice_worker_count() == (2 if (cpus or 1) >= 8 else 1), cpus
    monkeypatch.setenv("CUWFST_LATTICE_HOST_WORKERS", "3")
    assert eps._gpu.lattice_worker_count() == 3


def test_host_overlap_finish_thread_keeps_the_order():
    """HostOverlap(finish_thread=True): each pipelined pruning's finish runs on the finish thread in
    submission order and its host work on the host worker, also in order; drain_prunings waits for
    the finishes only (keep=1: all but the last), a finish's error is raised there and at the
    block's end, and its host work never runs."""
    import threading
    import time as _time

    from cuwfst.decoder.gpu import HostOverlap

    log, lock = [], threading.Lock()

    def finish(i):
        def f():
            _time.sleep(0.002 * (5 - i))  # (later finishes are quicker: the order must still hold)
            with lock:
                log.append(("finish", i, threading.current_thread().name))
            return i
        return f

    def then(r):
        _time.sleep(0.003)
        with lock:
            log.append(("host", r, threading.current_thread().name))

    with HostOverlap(finish_thread=True) as host:
        for i in range(5):
            host.run_pruning(finish(i), then)
            host.drain_prunings(keep=1)
            with lock:  # every finish but the last one handed over is done
                assert sum(1 for e in log if e[0] == "finish") >= i
    assert [e[1] for e in log if e[0] == "finish"] == list(range(5))
    assert [e[1] for e in log if e[0] == "host"] == list(range(5))
    assert all(e[2].startswith("cuwfst-lattice-finish") for e in log if e[0] == "finish")
    assert all(e[2].startswith("cuwfst-lattice-host") for e in log if e[0] == "host")

    def boom():
        raise RuntimeError("finish failed")

    ran = []
    with pytest.raises(RuntimeError, match="finish failed"):
        with HostOverlap(finish_thread=True) as host:
            host.run_pruning(boom, lambda r: ran.append(r))
            host.run_pruning(lambda: 7, lambda r: ran.append(r))
            with pytest.raises(RuntimeError, match="finish failed"):
                host.drain_prunings()
    assert ran == [7]  # the failed finish's host work never ran; the next one's did

    # a host work's error: raised by the first drain_prunings after it has ended (as without the
    # finish thread, where the host work is part of what drain_prunings waits for), and at the end
    def bad_host(r):
        raise ValueError(f"host work {r} failed")

    with pytest.raises(ValueError, match="host work 0 failed"):
        with HostOverlap(finish_thread=True) as host:
            host.run_pruning(lambda: 0, bad_host)
            host.drain_prunings()
            host._futures[-1].exception()  # (its host work has ended)
            with pytest.raises(ValueError, match="host work 0 failed"):
                host.drain_prunings()


class TrimRecordingModule(FakePrunedGpuModule):
    """FakePrunedGpuModule that keeps each pruned decode's `trim` argument."""

    def __init__(self):
        super().__init__()
        self.trims = []

    def gpu_decode_lattice_pruned(self, *args):
        self.trims.append(args[-1])
        return super().gpu_decode_lattice_pruned(*args)

    def gpu_decode_lattice_pruned_begin(self, *args):
        self.trims.append(args[-1])
        return super().gpu_decode_lattice_pruned_begin(*args)


@pytest.mark.parametrize("name,env,attr,want", [("HLG.img", None, None, 1), ("HLG.img", "on", None, 1),
                                                ("TLG.img", None, None, 2), ("TLG.img", "off", None, 0),
                                                ("TLG.img", None, "off", 0), ("TLG.img", "off", "on", 2)])
def test_pruned_decodes_trim_argument(fake_gpu, monkeypatch, name, env, attr, want):
    """The native pruned decodes' `trim` argument (decoder/gpu.py _trim_bits): bit 0 the lattice
    trim of epsilon-free graphs (on by default), bit 1 the lattice trim on epsilon graphs (on by
    default), only where lattice_eps_trim_on() (CUWFST_LATTICE_EPS_TRIM read when the decoder is
    made, or the attribute) and the graph's records' filter is on; the words, scores and lattice sizes are the CPU's."""
    mod = TrimRecordingModule()
    from cuwfst.jit import decoder as jit_decoder
    monkeypatch.setattr(jit_decoder, "module", lambda index=0: mod)
    graph = Graph.load(TINY / name)
    lp, lens, _ = demo_arrays()
    x = np.ascontiguousarray(lp[:3], np.float32)
    lens = lens[:3].copy()
    if env is not None:
        monkeypatch.setenv("CUWFST_LATTICE_EPS_TRIM", env)
    dec = Decoder(graph, device="cuda", output_beam=5.0, max_lanes=4)
    monkeypatch.delenv("CUWFST_LATTICE_EPS_TRIM", raising=False)  # (read when the decoder was made)
    if attr is not None:
        dec._gpu.lattice_eps_trim = attr
    assert dec._gpu.lattice_prune_on_gpu(dec._gpu.main)
    got = dec.decode(x, lens, lattice=True)
    assert mod.trims and set(mod.trims) == {want}, mod.trims
    cpu = Decoder(graph, output_beam=5.0).decode(x, lens, lattice=True)
    for b, (w, g) in enumerate(zip(cpu, got)):
        assert w.words == g.words and w.score == g.score
        assert g.lattice.num_arcs == w.lattice.num_arcs, b
    dec._gpu.lattice_eps_trim = "yes"
    with pytest.raises(ValueError, match="lattice_eps_trim"):
        dec._gpu.lattice_eps_trim_on()
