"""The GPU without torch: device detection and host-to-device copies through the CUDA
driver API (libcuda.so.1, which every NVIDIA driver installs), loaded with ctypes.

torch is optional for cuwfst, so `--device auto`, `cuwfst demo` and the GPU backend must
find a GPU and move numpy arrays onto it by themselves. The driver API is used rather
than libcudart because the driver library is present wherever a GPU is usable, while a
runtime library may not be on the loader path (torch wheels ship their own). Memory is
allocated in each device's primary context, the one the CUDA runtime (our native module)
uses, so pointers are valid in both.
"""

from __future__ import annotations

import ctypes
import functools
import threading

import numpy as np

_ATTR_CC_MAJOR, _ATTR_CC_MINOR = 75, 76
_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def _driver():
    """The loaded and initialised driver library, or None where there is none."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            _declare(lib)
            if lib.cuInit(0) != 0:
                return None  # a driver without a usable device (or a stub library)
        except AttributeError:
            return None
        return lib
    return None


def _declare(lib) -> None:
    """Argument types, so sizes and pointers above 2^31 pass intact."""
    P, c = ctypes.POINTER, ctypes
    for name, args in (
            ("cuInit", [c.c_uint]), ("cuDeviceGetCount", [P(c.c_int)]), ("cuDeviceGet", [P(c.c_int), c.c_int]),
            ("cuDeviceGetAttribute", [P(c.c_int), c.c_int, c.c_int]),
            ("cuDevicePrimaryCtxRetain", [P(c.c_void_p), c.c_int]), ("cuCtxPushCurrent_v2", [c.c_void_p]),
            ("cuCtxPopCurrent_v2", [P(c.c_void_p)]), ("cuCtxSynchronize", []),
            ("cuMemAlloc_v2", [P(c.c_uint64), c.c_size_t]), ("cuMemcpyHtoD_v2", [c.c_uint64, c.c_void_p, c.c_size_t]),
            ("cuMemFree_v2", [c.c_uint64])):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, c.c_int


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"CUDA driver call {what} failed with error {rc}")


def device_count() -> int:
    """Number of visible CUDA devices (0 without a driver or a device; never raises)."""
    lib = _driver()
    if lib is None:
        return 0
    n = ctypes.c_int(0)
    return n.value if lib.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0


def capability(index: int = 0) -> tuple[int, int]:
    """(major, minor) compute capability of device `index`."""
    lib = _driver()
    if lib is None or not 0 <= index < device_count():
        raise RuntimeError(f"no CUDA device {index} (visible devices: {device_count()})")
    dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _check(lib.cuDeviceGet(ctypes.byref(dev), index), "cuDeviceGet")
    _check(lib.cuDeviceGetAttribute(ctypes.byref(major), _ATTR_CC_MAJOR, dev), "cuDeviceGetAttribute")
    _check(lib.cuDeviceGetAttribute(ctypes.byref(minor), _ATTR_CC_MINOR, dev), "cuDeviceGetAttribute")
    return major.value, minor.value


def has_torch_cuda() -> bool:
    """torch is installed and sees a CUDA GPU (a CPU-only torch beside a GPU counts as no torch
    here: the torch-free backend serves that GPU, and torch's CPU tensors come in as numpy's do)."""
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # (a broken CUDA install behind torch: the same)
        return False


def resolve_device(requested: str, graph=None) -> str:
    """'auto' -> 'cuda' when a GPU is visible, else 'cpu'. 'cpu' and 'cuda[:N]' pass
    through checked. (`graph` is accepted for device rules that depend on the graph.)"""
    if requested == "auto":
        return "cuda" if device_count() > 0 else "cpu"
    if requested == "cpu" or requested == "cuda" or (
            requested.startswith("cuda:") and requested[5:].isdigit()):
        return requested
    raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:N]', got {requested!r}")


def gpu_backend_class():
    """The torch backend where torch is installed with CUDA (it follows torch's streams), else
    the torch-free one (numpy in, driver-API copies)."""
    if has_torch_cuda():
        from .decoder.gpu import GpuBackend
        return GpuBackend
    from .decoder.gpu_host import HostGpuBackend
    return HostGpuBackend


# ---------------------------------------------------------------------- primary contexts
class _Context:
    """Pushes device `index`'s primary context for the calls inside a `with` block."""

    _retained: dict = {}

    def __init__(self, index: int):
        self.index = index

    def __enter__(self):
        lib = _driver()
        if lib is None:
            raise RuntimeError("no CUDA driver (libcuda.so.1) could be loaded")
        with _lock:
            ctx = self._retained.get(self.index)
            if ctx is None:
                dev = ctypes.c_int()
                _check(lib.cuDeviceGet(ctypes.byref(dev), self.index), "cuDeviceGet")
                ctx = ctypes.c_void_p()
                _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
                self._retained[self.index] = ctx  # kept for the process's life, as the runtime does
        _check(lib.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")
        return lib

    def __exit__(self, *exc):
        ctx = ctypes.c_void_p()
        _driver().cuCtxPopCurrent_v2(ctypes.byref(ctx))


def synchronize(index: int) -> None:
    """Wait for all work on device `index` (inputs produced on streams we cannot see)."""
    with _Context(index) as lib:
        _check(lib.cuCtxSynchronize(), "cuCtxSynchronize")


# ---------------------------------------------------------------------- DLPack
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_DL_CPU, _DL_CUDA = 1, 2
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def dlpack_capsule(owner, ptr: int, shape, dtype: np.dtype, device_type: int, device_id: int):
    """A legacy 'dltensor' PyCapsule describing C-contiguous memory at `ptr`.

    The memory and the struct stay owned by `owner` (the struct is stored on it): the
    deleter is NULL, which DLPack allows, so a consumer must not outlive `owner`. Our
    native calls only read their inputs during the call."""
    dtype = np.dtype(dtype)
    code = {"f": 2, "i": 0, "u": 1}[dtype.kind]
    nd = len(shape)
    shp = (ctypes.c_int64 * nd)(*shape)
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= int(d)
    strd = (ctypes.c_int64 * nd)(*reversed(strides))
    m = _DLManagedTensor()
    m.dl_tensor.data = ptr
    m.dl_tensor.device = _DLDevice(device_type, device_id)
    m.dl_tensor.ndim = nd
    m.dl_tensor.dtype = _DLDataType(code, dtype.itemsize * 8, 1)
    m.dl_tensor.shape = shp
    m.dl_tensor.strides = strd
    m.dl_tensor.byte_offset = 0
    m.manager_ctx = None
    m.deleter = None
    # every capsule's struct stays alive with its owner (a consumer may still hold an older one)
    keep = owner.__dict__.setdefault("_dlpack_keep", [])
    keep.append((m, shp, strd))
    return _capsule_new(ctypes.addressof(m), b"dltensor", None)


class DeviceArray:
    """A C-contiguous copy of a numpy array in device memory (freed with this object),
    handed to the native module through DLPack."""

    def __init__(self, host: np.ndarray, index: int):
        host = np.ascontiguousarray(host)
        self.shape, self.dtype, self.index = host.shape, host.dtype, index
        self.nbytes = host.nbytes
        self.ptr = ctypes.c_uint64(0)
        with _Context(index) as lib:
            _check(lib.cuMemAlloc_v2(ctypes.byref(self.ptr), max(1, self.nbytes)), "cuMemAlloc")
            # synchronous for pageable memory; the context sync below also orders it before
            # the decoder's own non-blocking stream, which waits on no caller stream here
            _check(lib.cuMemcpyHtoD_v2(self.ptr, host.ctypes.data_as(ctypes.c_void_p), self.nbytes), "cuMemcpyHtoD")
            _check(lib.cuCtxSynchronize(), "cuCtxSynchronize")

    def __dlpack__(self, stream=None, **_):
        return dlpack_capsule(self, self.ptr.value, self.shape, self.dtype, _DL_CUDA, self.index)

    def __dlpack_device__(self):
        return (_DL_CUDA, self.index)

    def __del__(self):
        ptr, self.ptr = getattr(self, "ptr", None), None
        if ptr is not None and ptr.value and _driver() is not None:
            try:
                with _Context(self.index) as lib:
                    lib.cuMemFree_v2(ptr)
            except Exception:  # interpreter shutdown: the process frees it anyway
                pass


class HostBatch:
    """A numpy batch [B, T, V] that copies itself to device `index` when the native
    module asks for it through DLPack; row selection and slicing stay on the host."""

    def __init__(self, host: np.ndarray, index: int):
        self.host = np.ascontiguousarray(host)
        self.index = index
        self._device = None

    @property
    def shape(self):
        return self.host.shape

    @property
    def dtype(self):
        return self.host.dtype

    def __getitem__(self, rows):
        return HostBatch(self.host[rows], self.index)

    def take(self, rows: np.ndarray) -> "HostBatch":
        return HostBatch(self.host[np.asarray(rows)], self.index)

    def __dlpack__(self, stream=None, **kw):
        if self._device is None:
            self._device = DeviceArray(self.host, self.index)
        return self._device.__dlpack__(stream, **kw)

    def __dlpack_device__(self):
        return (_DL_CUDA, self.index)


def parse_index(device: str) -> int:
    """'cuda' -> 0, 'cuda:N' -> N."""
    return int(device.split(":", 1)[1]) if ":" in device else 0
