"""Weight files of benchmarks.model.net without torch: how save_npz stores one weight, and
the int8 file made from the float one (numpy only).

    python -m benchmarks.model.weights model.npz model.int8.npz
"""

from __future__ import annotations

import os
import sys

import numpy as np


def store(arrays: dict, name: str, a: np.ndarray, int8: bool) -> None:
    """One weight as save_npz stores it (int8 rows + scales, float32 input scale, or float16)."""
    if int8 and a.ndim >= 2 and a.size >= 1024:
        rows = a.reshape(a.shape[0], -1)
        scale = np.maximum(np.abs(rows).max(axis=1), 1e-12) / 127.0
        arrays[name + "::q"] = np.round(rows / scale[:, None]).astype(np.int8).reshape(a.shape)
        arrays[name + "::s"] = scale.astype(np.float32)
    elif name in ("feat_mean", "feat_istd"):
        arrays[name] = a.astype(np.float32)  # the input scale: float16 would shift every feature
    else:
        arrays[name] = a.astype(np.float16)


def npz_to_int8(src, dst) -> int:
    """save_npz's float file as its int8 file, without torch (numpy only): what the training
    script writes as model.int8.npz, made again from model.npz. Returns the file size."""
    arrays = {}
    with np.load(src) as z:
        for key in z.files:
            if key.startswith("__"):
                arrays[key] = z[key]
            elif key.endswith("::q") or key.endswith("::s"):
                raise ValueError(f"{src} is already int8 ({key})")
            else:
                store(arrays, key, z[key].astype(np.float32), True)
    np.savez_compressed(dst, **arrays)
    return os.path.getsize(dst)


if __name__ == "__main__":
    src, dst = sys.argv[1:3]
    print(f"{dst}: {npz_to_int8(src, dst) / 2**20:.1f} MiB")
