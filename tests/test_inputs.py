"""Input checks and transforms before decoding, the torch-free device path, the readers."""

import numpy as np
import pytest

from conftest_data import TINY, demo_arrays, make_dataset
from cuwfst import Decoder, DecoderOptions, Graph
from cuwfst.decoder.prepare import LSE_TOLERANCE


@pytest.fixture(scope="module")
def graph():
    return Graph.load(TINY / "HLG.img")


@pytest.fixture(scope="module")
def utts():
    lp, lens, _ = demo_arrays()
    return lp[:3].astype(np.float32), lens[:3]


def _same(a, b):
    return [(h.words, h.score, h.arcs) for h in a] == [(h.words, h.score, h.arcs) for h in b]


def test_neutral_knobs_leave_results_bit_identical(graph, utts):
    lp, lens = utts
    base = Decoder(graph).decode(lp, lens)
    explicit = Decoder(graph, acoustic_scale=1.0, blank_penalty=0.0, check_log_probs=False).decode(lp, lens)
    assert _same(base, explicit)


@pytest.mark.parametrize("scale,penalty", [(0.5, 0.0), (1.0, 2.0), (0.7, 1.5)])
def test_acoustic_scale_and_blank_penalty_transform_the_log_probs(graph, utts, scale, penalty):
    lp, lens = utts
    got = Decoder(graph, acoustic_scale=scale, blank_penalty=penalty).decode(lp, lens)
    manual = lp * np.float32(scale)
    manual[..., 0] -= np.float32(penalty)
    want = Decoder(graph, check_log_probs=False).decode(manual, lens)
    assert _same(got, want)
    assert [h.score for h in got] != [h.score for h in Decoder(graph).decode(lp, lens)]
    before = lp.copy()
    Decoder(graph, acoustic_scale=scale, blank_penalty=penalty).decode(lp, lens)
    assert np.array_equal(before, lp)  # the caller's array is never modified


def test_blank_penalty_on_another_column(graph, utts):
    lp, lens = utts
    got = Decoder(graph, blank_penalty=3.0, blank_id=7).decode(lp, lens)
    manual = lp.copy()
    manual[..., 7] -= 3.0
    assert _same(got, Decoder(graph, check_log_probs=False).decode(manual, lens))


def test_options_checked():
    for kw, msg in ((dict(acoustic_scale=0.0), "acoustic_scale"), (dict(blank_penalty=float("nan")), "blank_penalty"),
                    (dict(blank_id=-1), "blank_id"), (dict(normalize=1), "normalize")):
        with pytest.raises(ValueError, match=msg):
            DecoderOptions(**kw)


def test_log_prob_check_and_hints(graph, utts):
    lp, lens = utts
    dec = Decoder(graph)
    with pytest.raises(ValueError, match="probabilities.*np.log"):
        dec.decode(np.exp(lp), lens)
    with pytest.raises(ValueError, match="logits.*normalize=True"):
        dec.decode(lp * 0.5 + 2, lens)
    with pytest.raises(ValueError, match="sum to less than 1"):
        dec.decode(lp - 1.0, lens)
    # within the tolerance passes; padding frames are never sampled
    ok = lp + np.float32(LSE_TOLERANCE / 2)
    ok[0, lens[0]:] = 55.0
    dec.decode(ok, lens)
    # log_softmax of shifted log-probs is the log-probs again, up to float rounding
    norm, base = Decoder(graph, normalize=True).decode(lp + 4.0, lens), dec.decode(lp, lens)
    assert [h.words for h in norm] == [h.words for h in base]
    assert [h.score for h in norm] == pytest.approx([h.score for h in base], rel=1e-4)
    Decoder(graph, check_log_probs=False).decode(lp + 4.0, lens)  # deliberately unnormalised: allowed


def test_width_checks(graph, utts):
    lp, lens = utts
    wide = np.concatenate([lp, np.full(lp.shape[:2] + (3,), -40, np.float32)], axis=2)
    with pytest.raises(ValueError, match="504 columns but the graph reads only 501.*allow_extra_columns"):
        Decoder(graph).decode(wide, lens)
    assert _same(Decoder(graph, allow_extra_columns=True).decode(wide, lens), Decoder(graph).decode(lp, lens))
    with pytest.raises(ValueError, match="token-offset"):
        Decoder(graph).decode(lp[..., :500], lens)


def test_float_dtypes(graph, utts):
    lp, lens = utts
    base = Decoder(graph).decode(lp, lens)
    assert _same(Decoder(graph).decode(lp.astype(np.float64), lens), base)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = lp.astype(ml_dtypes.bfloat16)
    assert _same(Decoder(graph).decode(bf, lens), Decoder(graph).decode(bf.astype(np.float32), lens))
    with pytest.raises(TypeError, match="floating point"):
        Decoder(graph).decode(lp.astype(np.int16), lens)


def test_dlpack_cpu_tensor(graph, utts):
    """Any DLPack producer (here tvm-ffi's own tensor) is read on the CPU without torch."""
    import tvm_ffi
    lp, lens = utts
    assert _same(Decoder(graph).decode(tvm_ffi.from_dlpack(lp), lens), Decoder(graph).decode(lp, lens))


# ---------------------------------------------------------------------- devices
def test_device_detection_without_a_gpu(graph, monkeypatch):
    from cuwfst import cuda
    if cuda.device_count() > 0:
        pytest.skip("a GPU is visible here")
    assert cuda.resolve_device("auto", graph) == "cpu"
    assert Decoder(graph, device="auto").device == "cpu"
    with pytest.raises(ValueError, match="'auto', 'cpu' or 'cuda"):
        cuda.resolve_device("gpu")
    from cuwfst.decoder.gpu_host import HostGpuBackend
    monkeypatch.setattr(cuda, "has_torch_cuda", lambda: False)
    assert cuda.gpu_backend_class() is HostGpuBackend
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        Decoder(graph, device="cuda")


def test_a_cpu_only_torch_leaves_the_gpu_to_the_torch_free_backend(monkeypatch):
    """A torch without CUDA beside a GPU (a CPU-only build) used to pick the torch backend, which
    then refused the GPU ("torch sees no CUDA GPU"), and `cuwfst demo` moved its inputs to a
    device torch could not reach. Now that GPU is served by the torch-free backend; a torch
    with CUDA still gets the torch backend; a torch whose CUDA check raises counts as none."""
    import sys
    import types

    from cuwfst import cuda
    from cuwfst.decoder.gpu import GpuBackend
    from cuwfst.decoder.gpu_host import HostGpuBackend

    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(is_available=lambda: False)
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert not cuda.has_torch_cuda() and cuda.gpu_backend_class() is HostGpuBackend
    fake.cuda.is_available = lambda: True
    assert cuda.has_torch_cuda() and cuda.gpu_backend_class() is GpuBackend

    def broken():
        raise RuntimeError("CUDA driver initialization failed")

    fake.cuda.is_available = broken
    assert not cuda.has_torch_cuda()
    monkeypatch.setitem(sys.modules, "torch", None)  # (import torch raises ImportError)
    assert not cuda.has_torch_cuda() and cuda.gpu_backend_class() is HostGpuBackend


def test_auto_prefers_the_gpu(monkeypatch):
    from cuwfst import cuda
    monkeypatch.setattr(cuda, "device_count", lambda: 1)
    assert cuda.resolve_device("auto", Graph.load(TINY / "HLG.img")) == "cuda"
    assert cuda.resolve_device("auto", Graph.load(TINY / "TLG.img")) == "cuda"  # epsilon graphs too
    monkeypatch.setattr(cuda, "device_count", lambda: 0)
    assert cuda.resolve_device("auto") == "cpu"


def test_dlpack_capsule_describes_memory_exactly():
    """The capsule the torch-free GPU path hands the native module, checked on CPU memory."""
    import tvm_ffi
    from cuwfst import cuda
    a = np.arange(2 * 3 * 5, dtype=np.float16).reshape(2, 3, 5)

    class Owner:
        pass
    owner = Owner()
    t = tvm_ffi.from_dlpack(cuda.dlpack_capsule(owner, a.ctypes.data, a.shape, a.dtype, 1, 0))
    assert t.shape == (2, 3, 5) and str(t.dtype) == "float16"
    assert np.array_equal(np.from_dlpack(t), a)
    hb = cuda.HostBatch(np.arange(24, dtype=np.float32).reshape(4, 3, 2), 0)
    assert np.array_equal(hb.take(np.array([3, 1])).host, hb.host[[3, 1]]) and hb[1:2].shape == (1, 3, 2)


# ---------------------------------------------------------------------- readers
def test_npz_streaming_matches_a_full_load(tmp_path):
    from cuwfst.io import open_inputs
    lp, lens, _ = demo_arrays()
    np.savez_compressed(tmp_path / "c.npz", emissions=lp[:3], lens=lens[:3], utt_ids=np.array([b"a", b"b", b"c"]))
    utts = list(open_inputs([str(tmp_path / "c.npz")]))
    assert [u.id for u in utts] == ["a", "b", "c"]
    for i, u in enumerate(utts):
        assert np.array_equal(u.log_probs, lp[i, : lens[i]])
    np.savez(tmp_path / "one.npz", whatever=lp[0, :10])  # one float array, one utterance [T, V]
    (u,) = list(open_inputs([str(tmp_path / "one.npz")]))
    assert u.id == "one-0" and np.array_equal(u.log_probs, lp[0, :10])
    np.savez(tmp_path / "bad.npz", a=np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="no log-probs array found.*--key"):
        open_inputs([str(tmp_path / "bad.npz")])


@pytest.mark.parametrize("backend", ["kaldi_native_io", "kaldiio"])
def test_kaldi_readers(tmp_path, backend, monkeypatch):
    pytest.importorskip(backend)
    pytest.importorskip("kaldiio")
    import builtins
    from cuwfst.io import open_inputs
    ds = make_dataset(tmp_path)
    if backend == "kaldiio":  # hide kaldi_native_io: the fallback must read the same
        real = builtins.__import__
        monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                            if name == "kaldi_native_io" else real(name, *a, **k))
    src = open_inputs([f"scp:{tmp_path / 'utts.scp'}"])
    assert src.count == 8
    for i, u in enumerate(src):
        assert u.id == ds["ids"][i] and np.array_equal(u.log_probs, ds["lp"][i, : ds["lens"][i]].astype(np.float32))


def test_inputs_that_are_not_inputs(tmp_path):
    from cuwfst.io import open_inputs
    with pytest.raises(ValueError, match="symbol table"):
        open_inputs([str(TINY / "words.txt")])
    with pytest.raises(FileNotFoundError, match="holds no .npy"):
        open_inputs([str(tmp_path)])
    with pytest.raises(FileNotFoundError, match="input not found"):
        open_inputs([str(tmp_path / "nope.npz")])


def test_batches_bound_memory_and_keep_order():
    from cuwfst.io import Utterance, batches
    utts = [Utterance(f"u{i}", np.full((i + 1, 4), -1.386, np.float32)) for i in range(5)]
    bs = list(batches(iter(utts), 2))
    assert [b.ids for b in bs] == [["u0", "u1"], ["u2", "u3"], ["u4"]]
    assert bs[1].log_probs.shape == (2, 4, 4) and bs[1].lengths.tolist() == [3, 4]
    with pytest.raises(ValueError, match="one model"):
        list(batches(iter([utts[0], Utterance("x", np.zeros((2, 5), np.float32))]), 4))


def test_sampled_runs_stay_inside_valid_frames():
    """check_log_probs reads up to 8 runs of up to 8 consecutive frames of one row (one copy a
    run on a GPU, no kernel): every run inside its row's length, at most 64 frames, the first
    valid frame and the last valid frames always among them, padding never."""
    from cuwfst.decoder.prepare import SAMPLED_FRAMES, _host_rows, _sample_runs

    rng = np.random.default_rng(5)
    for trial in range(300):
        B = int(rng.integers(1, 40))
        lens = rng.integers(0, 3 if trial % 3 == 0 else 700, size=B).astype(np.int32)
        b, t0, t1 = _sample_runs(lens)
        total = int(lens.sum())
        if total == 0:
            assert b.size == 0
            continue
        assert (t0 >= 0).all() and (t1 <= lens[b]).all() and (t1 > t0).all(), (lens, b, t0, t1)
        assert (t1 - t0 <= 8).all() and int((t1 - t0).sum()) <= SAMPLED_FRAMES
        flat = np.concatenate([[0], np.cumsum(lens)])[b] + t0
        assert (np.diff(flat) > 0).all()  # distinct starts, in order
        assert flat[0] == 0  # the first valid frame
        last = int(np.flatnonzero(lens)[-1])
        assert b[-1] == last and t1[-1] == lens[last]  # the last valid frame
        if total >= SAMPLED_FRAMES:
            assert b.size == 8
        x = rng.normal(size=(B, int(lens.max()) + 1, 5)).astype(np.float32)
        rows = _host_rows("numpy", x, b, t0, t1)
        want = np.concatenate([x[i, a:c] for i, a, c in zip(b, t0, t1)])
        assert rows.dtype == np.float64 and np.array_equal(rows, want)


class _StridedTensor:
    """The few methods _host_rows' "torch" branch calls, over a numpy view: slicing,
    is_contiguous (PyTorch's rule: size-1 dimensions' strides do not count), cpu(), numpy()."""

    def __init__(self, a: np.ndarray):
        self.a = a

    def __getitem__(self, key):
        return _StridedTensor(self.a[key])

    def is_contiguous(self) -> bool:
        expect = self.a.itemsize
        for size, stride in zip(reversed(self.a.shape), reversed(self.a.strides)):
            if size != 1 and stride != expect:
                return False
            expect *= size
        return True

    def cpu(self):
        assert self.is_contiguous(), "a copy of a non-contiguous view would run a kernel on a GPU"
        return self

    def numpy(self):
        return np.array(self.a)


def test_sampled_rows_keep_their_shape_when_a_tensors_rows_are_not_packed():
    """A tensor whose frames are not packed (its columns sliced) is read a frame a copy; each
    copy keeps its [1, V] shape, so the rows come back [frames, V] as from a packed tensor.
    (The H200 found them flattened: x[b, t] is [V], and the check's row maxima then failed.)"""
    from cuwfst.decoder.prepare import _host_rows, _sample_runs

    rng = np.random.default_rng(11)
    lens = np.array([40, 0, 3, 77, 12], np.int32)
    x = rng.normal(size=(5, 80, 14)).astype(np.float32)
    b, t0, t1 = _sample_runs(lens)
    for what, view in (("packed", x), ("columns sliced", x[..., :9]), ("frames strided", x[:, ::2])):
        lv = np.minimum(lens, view.shape[1]).astype(np.int32)
        bb, a0, a1 = _sample_runs(lv)
        want = _host_rows("numpy", view, bb, a0, a1)
        got = _host_rows("torch", _StridedTensor(view), bb, a0, a1)
        assert got.shape == want.shape == (int((a1 - a0).sum()), view.shape[2]), what
        assert got.dtype == np.float64 and np.array_equal(got, want), what
