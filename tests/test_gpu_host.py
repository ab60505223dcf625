"""The torch-free GPU backend's Python wiring, on a machine without a GPU.

The CUDA driver and the native GPU module are replaced by stand-ins: device memory is host
memory described by the same DLPack capsule (device type CPU), and the "GPU module" decodes
with the CPU reference, returning results in the GPU module's format. What is under test
is everything around the kernels: numpy batches uploaded through DLPack, sub-batches
chosen longest-first and selected on the host, results back in the caller's order,
lengths, NaN checks, and the rescue path. tests/test_gpu.py runs the real thing on a GPU.
"""

import numpy as np
import pytest

from conftest_data import TINY, demo_arrays
from cuwfst import Decoder, Graph, cuda
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
        self.overflow_rows = set(overflow_rows)

    def gpu_graph_upload(self, rs, fc, ec, dest, il, w, vocab, start, finals_at_end, device):
        h = len(self.graphs) + 1
        self.keep = (rs, fc, ec, dest, il, w)
        self.graphs[h] = self.ref.ref_graph_create(*self.keep, vocab, start, finals_at_end)
        return h

    def gpu_graph_free(self, h):
        self.ref.ref_graph_free(self.graphs.pop(h))

    def gpu_decoder_create(self, graph_h, beam, obeam, mn, mx, partial, lanes, *rest):
        h = len(self.decoders) + 100
        # rest: max_frames, main_q, claims_cap, hash_cap, arena_cap, arena_max, use_cuda_graphs, walker,
        # walk_blocks, graph_cache_size, graph_max_steps, eps_iterations, scan_split, closure_lists, eps_blocks,
        # finalize_split, fused_max
        assert len(rest) == 17, "gpu_decoder_create's arguments changed: update this fake"
        assert type(rest[16]) is bool
        self.decoders[h] = (graph_h, beam, obeam, mn, mx, partial, lanes, int(rest[11]))
        # scan_split, closure_lists, finalize_split, fused_max
        self.kernels = (int(rest[12]), bool(rest[13]), int(rest[15]), rest[16])
        return h

    def gpu_decoder_free(self, h):
        self.decoders.pop(h, None)

    def gpu_decode(self, h, lp, lens, online, stream, out_arcs, out_len, out_score, out_meta, out_stats):
        import tvm_ffi
        graph_h, beam, obeam, mn, mx, partial, lanes, eps = self.decoders[h]
        x = np.from_dlpack(tvm_ffi.from_dlpack(lp.__dlpack__())).astype(np.float32)  # what the kernels read
        B, T = x.shape[:2]
        assert B <= lanes and stream == 0
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


@pytest.fixture
def fake_gpu(monkeypatch):
    from cuwfst.jit import decoder as jit_decoder
    mod = FakeGpuModule()
    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    monkeypatch.setattr(cuda, "has_torch", lambda: False)
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
    # three sub-batches of at most 3 rows, longest first, each row's frames intact
    assert [(c[0], len(c[2])) for c in fake_gpu.calls] == [(3, 3), (3, 3), (3, 2)]
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


def test_kernel_variants_reach_the_native_decoder(fake_gpu, monkeypatch):
    """scan_split / closure / finalize_split / fused_max pick the kernels; None takes the
    default, "new", or what CUWFST_KERNELS names when the decoder is built."""
    graph = Graph.load(TINY / "TLG.img")
    monkeypatch.delenv("CUWFST_KERNELS", raising=False)
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (0, True, 0, False)
    monkeypatch.setenv("CUWFST_KERNELS", "old")
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (1, False, 8, False)
    Decoder(graph, device="cuda", scan_split=4)  # a keyword wins over the environment
    assert fake_gpu.kernels == (4, False, 8, False)
    Decoder(graph, device="cuda", fused_max=True)  # the fused max goes with any other switch
    assert fake_gpu.kernels == (1, False, 8, True)
    monkeypatch.setenv("CUWFST_KERNELS", "split")
    Decoder(graph, device="cuda", closure="lists")
    assert fake_gpu.kernels == (0, True, 8, False)
    monkeypatch.setenv("CUWFST_KERNELS", "fused")  # "new" and the fused max
    Decoder(graph, device="cuda")
    assert fake_gpu.kernels == (0, True, 0, True)
    Decoder(graph, device="cuda", fused_max=False)
    assert fake_gpu.kernels == (0, True, 0, False)
    dec = Decoder(graph, device="cuda", max_lanes=8)  # the rescue instance gets the same kernels
    assert dec._gpu.kw["fused_max"] is True
    with pytest.raises(ValueError, match="fused_max"):
        Decoder(graph, device="cuda", fused_max=1)
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
