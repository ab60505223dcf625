"""Timing, GPU memory and the machine: what each row of the peers table is measured with."""

from __future__ import annotations

import datetime
import gc
import os
import platform
import statistics
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def time_decodes(peer, log_probs, lengths, batch: int, reps: int, sync=None):
    """Decode every utterance `batch` at a time: one warm-up pass, then `reps` timed passes.

    A pass ends when the last word-id list is on the host. Returns (seconds of each timed
    pass, every pass's hypotheses, the warm-up's first and the last pass's last): a peer
    whose results differ from pass to pass shows it (riva's 1-best does)."""
    n = int(lengths.shape[0])

    def one_pass():
        out = []
        for s in range(0, n, batch):
            out += peer.decode(log_probs[s : s + batch], lengths[s : s + batch])
        return out

    passes = [one_pass()]
    times = []
    for _ in range(reps):
        if sync:
            sync()
        t0 = time.perf_counter()
        passes.append(one_pass())
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    for hyps in passes:
        if len(hyps) != n:
            raise RuntimeError(f"{peer.name} returned {len(hyps)} hypotheses for {n} utterances")
    return times, passes


def median(xs) -> float:
    return statistics.median(xs)


class GpuMemoryProbe:
    """Peak GPU memory of one table entry, from a baseline taken before the peer is built.

    torch_peak: torch.cuda.max_memory_allocated() minus what torch held at the baseline (the
    staged log-probs). device_peak: cudaMemGetInfo's used memory minus its baseline, sampled
    every `interval` s by a thread and at the end; it sees allocations made outside torch
    (and torch's cache), but a sample can miss a short peak while a peer holds the GIL."""

    def __init__(self, torch, interval: float = 0.02):
        self.torch, self.interval = torch, interval
        self.torch_peak = self.device_peak = 0
        self._stop = threading.Event()

    def _used(self) -> int:
        free, total = self.torch.cuda.mem_get_info()
        return total - free

    def _poll(self):
        while not self._stop.wait(self.interval):
            self._max_used = max(self._max_used, self._used())

    def __enter__(self):
        torch = self.torch
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self._base_used = self._max_used = self._used()
        torch.cuda.reset_peak_memory_stats()
        self._base_alloc = torch.cuda.memory_allocated()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.torch.cuda.synchronize()
        self._max_used = max(self._max_used, self._used())
        self.torch_peak = self.torch.cuda.max_memory_allocated() - self._base_alloc
        self.device_peak = self._max_used - self._base_used
        return False


def git_commit() -> str:
    """Short HEAD of this checkout, with `+dirty` when tracked files differ from it; where the
    checkout has no history (the GPU machine's copy), $CUWFST_COMMIT as the sender recorded it."""
    if os.environ.get("CUWFST_COMMIT"):
        return os.environ["CUWFST_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_name() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return None


def versions(names=("cuwfst", "torch", "torchaudio", "riva-asrlib-decoder", "kaldi-decoder", "kaldifst",
                    "kaldialign", "numpy")) -> dict[str, str]:
    from importlib import metadata

    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            pass
    return out


def machine() -> dict:
    return {"gpu": gpu_name(), "cpu": cpu_model(), "cores": os.cpu_count(), "host": platform.node(),
            "python": platform.python_version(), "versions": versions(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
