"""Checks and conversion of the tensors a decode takes."""

from __future__ import annotations

import numpy as np


def _describe_device(x) -> str | None:
    dev = getattr(x, "device", None)
    if dev is None:
        return None
    return str(dev)


def is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def log_probs_to_host(log_probs) -> np.ndarray:
    """numpy / torch (CPU) / any DLPack CPU tensor -> numpy, with a clear error otherwise."""
    if isinstance(log_probs, np.ndarray):
        return log_probs
    if is_torch(log_probs):
        if log_probs.device.type != "cpu":
            raise ValueError(f"log_probs is on {log_probs.device} but this decoder runs on the CPU; "
                             "pass a CPU tensor (.cpu()) or use device='cuda'")
        return log_probs.detach().numpy()
    if hasattr(log_probs, "__dlpack__"):
        try:
            return np.from_dlpack(log_probs)
        except (RuntimeError, BufferError, TypeError) as e:
            raise ValueError(f"log_probs could not be read on the CPU through DLPack ({e}); "
                             "pass a CPU tensor or use device='cuda'") from None
    raise TypeError(f"log_probs must be a numpy array, a torch tensor or a DLPack tensor, "
                    f"got {type(log_probs).__name__}")


def check_log_probs(lp: np.ndarray, vocab_size: int) -> np.ndarray:
    """Returns [B, T, V] float32 (float16 is widened exactly)."""
    if lp.ndim == 2:
        lp = lp[None]
    if lp.ndim != 3:
        raise ValueError(f"log_probs must be [B, T, V] or [T, V], got shape {tuple(lp.shape)}")
    if lp.dtype == np.float16:
        lp = lp.astype(np.float32)
    if lp.dtype != np.float32:
        raise TypeError(f"log_probs must be float32 (or float16), got {lp.dtype}")
    if lp.shape[2] < vocab_size:
        raise ValueError(f"log_probs has {lp.shape[2]} columns but the graph's vocab_size is "
                         f"{vocab_size}: every token id of the graph needs a column")
    return np.ascontiguousarray(lp)


def check_lengths(lengths, batch: int, frames: int) -> np.ndarray:
    if lengths is None:
        return np.full(batch, frames, np.int32)
    if is_torch(lengths):
        lengths = lengths.detach().cpu().numpy()
    arr = np.asarray(lengths)
    if arr.ndim == 0:
        arr = arr[None]
    if arr.shape != (batch,):
        raise ValueError(f"lengths must have one entry per batch row ({batch}), got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise TypeError(f"lengths must be integers, got {arr.dtype}")
    arr = arr.astype(np.int64)
    bad = (arr < 0) | (arr > frames)
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        raise ValueError(f"lengths[{b}] = {int(arr[b])} is outside [0, T={frames}]")
    return arr.astype(np.int32)


def check_finite(lp: np.ndarray, lengths: np.ndarray) -> None:
    """NaN or +inf inside a row's length is refused (-inf is a legal log-prob)."""
    bad = np.isnan(lp) | (lp == np.inf)
    if not bad.any():
        return
    for b in range(lp.shape[0]):
        rows = bad[b, : lengths[b]]
        if rows.any():
            t, v = map(int, np.argwhere(rows)[0])
            raise ValueError(f"log_probs[{b}, {t}, {v}] is {lp[b, t, v]}: log-probs must not be NaN or +inf")


def pad_on_device(torch, rows, what: str):
    """[T_i, V] torch tensors on one device -> ([N, max T, V] padded there, lengths int32):
    no copy through the host. Rows of 0 frames may have any width, the others share V; a
    mix of dtypes becomes float32."""
    rows = [r.detach() for r in rows]
    for i, r in enumerate(rows):
        if r.dim() != 2:
            raise ValueError(f"{what} {i} has shape {tuple(r.shape)}: each must be [T, V]")
    widths = sorted({int(r.shape[1]) for r in rows if r.shape[0]})
    if len(widths) > 1:
        raise ValueError(f"every {what} must have the same number of columns, got {widths}")
    V = widths[0] if widths else max(int(r.shape[1]) for r in rows)
    dtype = rows[0].dtype if all(r.dtype == rows[0].dtype for r in rows) else torch.float32
    lens = np.array([r.shape[0] for r in rows], np.int32)
    N, T = len(rows), int(lens.max(initial=0))
    if T == 0:
        return rows[0].new_zeros((N, 1, max(V, 1)), dtype=dtype), lens
    # one concatenation and one scatter into the zeroed [N, T, V] (pad_sequence copies row by
    # row: 256 copies took 2.8-4.4 ms of host time a call on the H200's host)
    flat = torch.cat([r.to(dtype) for r in rows if r.shape[0]])  # [sum T, V]
    n = lens.astype(np.int64)
    first = np.cumsum(n) - n  # each row's first frame in flat
    slot = np.repeat(np.arange(N, dtype=np.int64) * T - first, n) + np.arange(int(n.sum()), dtype=np.int64)
    packed = flat.new_zeros((N, T, V))
    packed.view(N * T, V).index_copy_(0, torch.from_numpy(slot).to(flat.device), flat)
    return packed, lens
