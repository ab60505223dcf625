"""What a corpus build records: graph sizes, out-degrees, stage times, peak memory, the machine."""

from __future__ import annotations

import hashlib
import os
import platform
import resource
import socket
import time
from contextlib import contextmanager

import numpy as np


def sha256_file(path) -> str:
    """Hex SHA-256 of a file, read in 16 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def machine() -> dict:
    import kaldifst
    import kaldilm

    return {"hostname": socket.gethostname(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__,
            "kaldifst": getattr(kaldifst, "__version__", "?"), "kaldilm": getattr(kaldilm, "__version__", "?")}


def degree_stats(row_splits: np.ndarray) -> dict:
    deg = np.diff(np.asarray(row_splits, np.int64))
    if deg.size == 0:
        return {"min": 0, "median": 0, "p99": 0, "max": 0, "mean": 0.0}
    return {"min": int(deg.min()), "median": float(np.median(deg)), "p99": float(np.percentile(deg, 99)),
            "max": int(deg.max()), "mean": round(float(deg.mean()), 3)}


def graph_stats(graph, image_bytes: int | None = None, fst_bytes: int | None = None) -> dict:
    """Sizes of a cuwfst.Graph (final arcs included in arcs and out-degrees, as k2 counts them)."""
    out = {"states": graph.num_states, "arcs": graph.num_arcs, "epsilon_arcs": graph.num_epsilon_arcs,
           "final_arcs": graph.num_final_arcs, "vocab_size": graph.vocab_size,
           "out_degree": degree_stats(graph.arrays.row_splits)}
    if graph.has_epsilon:
        out["max_epsilon_chain"] = graph.max_epsilon_chain
    if image_bytes is not None:
        out["image_bytes"] = int(image_bytes)
    if fst_bytes is not None:
        out["fst_bytes"] = int(fst_bytes)
    return out


def fst_stats(fst, disambig_label: int | None = None) -> dict:
    """Sizes of an FstArrays (an OpenFst graph before export); `disambig_arcs` counts the arcs
    reading a disambiguation symbol (label >= disambig_label): G's backoff arcs, LG's #k arcs."""
    out = {"states": fst.num_states, "arcs": fst.num_arcs, "input_epsilon_arcs": int((fst.ilabel == 0).sum()),
           "final_states": int(np.isfinite(fst.final).sum()), "out_degree": degree_stats(fst.row_splits)}
    if disambig_label is not None:
        out["disambig_arcs"] = int((fst.ilabel >= disambig_label).sum())
    return out


class StageTimer:
    """Wall time and peak RSS after each named stage, printed as they finish."""

    def __init__(self, log=print):
        self.stages: dict[str, dict] = {}
        self.t0 = time.perf_counter()
        self.log = log

    @contextmanager
    def stage(self, name: str):
        t = time.perf_counter()
        yield
        dt = time.perf_counter() - t
        self.stages[name] = {"seconds": round(dt, 3), "peak_rss_mb": round(peak_rss_mb(), 1)}
        self.log(f"[{name}] {dt:.1f} s, peak RSS {peak_rss_mb():.0f} MB")

    @property
    def total(self) -> float:
        return time.perf_counter() - self.t0
