"""The GPU backend without torch: numpy in, hypotheses out.

The same decode loop as `GpuBackend` (sub-batching, rescue: inherited), with the three
places that used torch replaced: the device comes from the CUDA driver (cuwfst/cuda.py),
numpy batches are copied to the device when the native module reads them (`HostBatch`;
row selection for sub-batches happens on the host first, so only the rows decoded are
copied), and other DLPack device arrays (cupy, JAX) are read in place after a device
synchronisation, since their producer's stream is not visible without a framework.
"""

from __future__ import annotations

import numpy as np

from .. import cuda
from .gpu import GpuBackend
from .inputs import check_finite


class HostGpuBackend(GpuBackend):
    def _open_device(self, device: str) -> None:
        self.torch = None
        index = cuda.parse_index(device)
        n = cuda.device_count()
        if not 0 <= index < n:
            raise RuntimeError(f"device={device!r} but {'no CUDA GPU is' if n == 0 else f'only {n} CUDA GPU(s) are'} "
                               "visible (the CUDA driver, libcuda.so.1, reports them); use device='cpu'")
        self.index = index
        self.device = f"cuda:{index}"

    def _stream(self) -> int:
        # 0, the legacy default stream, which the decoder waits for; inputs another
        # framework made on a stream of its own were synchronised (to_device, _take_rows)
        return 0

    def _take_rows(self, lp, rows: np.ndarray):
        if isinstance(lp, cuda.HostBatch):
            return lp.take(rows)
        sub = lp[_namespace_index(lp, rows)]
        cuda.synchronize(self.index)  # made on the framework's current stream, unknown here (as in to_device)
        return sub

    def to_device(self, log_probs):
        V = self.graph.vocab_size
        if isinstance(log_probs, np.ndarray):
            lp = log_probs[None] if log_probs.ndim == 2 else log_probs
            _check_shape(lp.shape, lp.dtype.name, V)
            return cuda.HostBatch(lp, self.index)
        if hasattr(log_probs, "__dlpack_device__"):
            dev_type, dev_id = (int(x) for x in log_probs.__dlpack_device__())
            if dev_type == 1:  # a CPU array: through numpy
                return self.to_device(np.from_dlpack(log_probs))
            if dev_type != 2 or dev_id != self.index:
                raise ValueError(f"log_probs is on DLPack device {(dev_type, dev_id)} but the decoder is on {self.device}")
            lp = log_probs[None] if len(log_probs.shape) == 2 else log_probs
            _check_shape(tuple(lp.shape), str(lp.dtype).rsplit(".", 1)[-1], V)
            cuda.synchronize(self.index)  # the producer's stream is unknown without a framework
            return lp
        raise TypeError(f"log_probs must be a numpy array or a DLPack tensor, got {type(log_probs).__name__}")

    def check_finite(self, lp, lens: np.ndarray):
        if isinstance(lp, cuda.HostBatch):
            check_finite(lp.host, lens)
        else:  # a device array from another framework: the native check, as the torch path
            super().check_finite(lp, lens)


def _check_shape(shape, dtype: str, vocab_size: int) -> None:
    if len(shape) != 3:
        raise ValueError(f"log_probs must be [B, T, V] or [T, V], got shape {tuple(shape)}")
    if dtype not in ("float32", "float16"):
        raise TypeError(f"log_probs must be float32 (or float16), got {dtype}")
    if shape[2] < vocab_size:
        raise ValueError(f"log_probs has {shape[2]} columns but the graph's vocab_size is {vocab_size}: "
                         "every token id of the graph needs a column")


def _namespace_index(lp, rows: np.ndarray):
    """Row indices in the array's own namespace (cupy wants cupy indices)."""
    from .prepare import _namespace

    try:
        return _namespace(lp).asarray(rows)
    except Exception:
        return rows
