"""What the streaming benchmarks share (benchmarks/streaming.py, benchmarks/long_stream.py,
benchmarks/continuous.py): shard loading, decoder options from flags, device and host
memory probes, and the exactness check against the CPU decoder's online mode."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "cuwfst" / "data" / "tiny"
DEMO_SHARD = REPO / "cuwfst" / "data" / "demo" / "tiny_utts.npz"


def load_shard(path) -> tuple[np.ndarray, np.ndarray]:
    """(log_probs [U, T, V] float32, lengths [U] int32) of a benchmarks.corpus.simulate shard
    (log_probs, or log_probs_fp16 widened exactly) or any .npz with those keys."""
    with np.load(path) as z:
        keys = set(z.files)
        key = "log_probs" if "log_probs" in keys else "log_probs_fp16"
        if key not in keys or "lengths" not in keys:
            raise KeyError(f"{path}: needs log_probs (or log_probs_fp16) and lengths; it has {sorted(keys)}")
        lp = np.ascontiguousarray(z[key], dtype=np.float32)
        lens = np.asarray(z["lengths"]).astype(np.int32)
    if lp.ndim != 3 or lens.shape != (lp.shape[0],):
        raise ValueError(f"{path}: log_probs {lp.shape} and lengths {lens.shape} do not go together")
    if (lens < 1).any() or (lens > lp.shape[1]).any():
        raise ValueError(f"{path}: lengths must be in [1, {lp.shape[1]}]")
    return lp, lens


def add_option_flags(p) -> None:
    """The search and capacity knobs every streaming benchmark exposes."""
    p.add_argument("--search-beam", type=float, default=20.0)
    p.add_argument("--output-beam", type=float, default=8.0)
    p.add_argument("--min-active-states", type=int, default=30)
    p.add_argument("--max-active-states", type=int, default=10000,
                   help="also sizes a GPU lane: frontier capacity = main_q_factor x this (at least 1024)")
    p.add_argument("--main-q-factor", type=int, default=8,
                   help="GPU: frontier capacity per lane in units of max_active_states (StreamingDecoder's "
                        "default 8; the offline Decoder's is 32). A stream whose frontier outgrows it is flagged "
                        "(overflow), not rescued")
    p.add_argument("--arena-entries", type=int, default=None,
                   help="GPU: initial winners-arena entries per decoder (it grows on demand; default 16 Mi)")


def options_from(a):
    from cuwfst import DecoderOptions

    return DecoderOptions(search_beam=a.search_beam, output_beam=a.output_beam,
                          min_active_states=a.min_active_states, max_active_states=a.max_active_states)


def is_gpu(device: str) -> bool:
    return str(device).startswith("cuda")


def device_index(device: str) -> int:
    return int(device.split(":", 1)[1]) if ":" in str(device) else 0


def torch_cuda():
    """torch when it is installed and sees a GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def host_available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


class DeviceMemory:
    """cudaMemGetInfo and the cuwfst module's own device and pinned bytes, through the
    module's gpu_memory_info (no torch needed). On the CPU every field is None."""

    def __init__(self, device: str):
        self.device = device
        self.mod = None
        if is_gpu(device):
            from cuwfst.jit.decoder import module

            self.index = device_index(device)
            self.mod = module(self.index)

    def sample(self) -> dict:
        if self.mod is None:
            return {"device_used": None, "device_total": None, "module_device": None, "module_pinned": None}
        info = np.zeros(5, np.int64)
        self.mod.gpu_memory_info(self.index, info)
        return {"device_used": int(info[1] - info[0]), "device_total": int(info[1]),
                "module_device": int(info[2]), "module_pinned": int(info[3])}


def gpu_instance(sd):
    """The native decoder instance behind a GPU StreamingDecoder (None on the CPU)."""
    backend = getattr(getattr(sd, "_frontend", None), "_gpu", None)
    return getattr(backend, "main", None)


def decoder_memory(sd) -> dict:
    """What a StreamingDecoder's native GPU decoder holds (GpuInstance.mem_stats: reserved,
    committed, fixed bytes, arena_high_water entries, ...) and its capacities; {} on the CPU."""
    inst = gpu_instance(sd)
    if inst is None:
        return {}
    st = inst.mem_stats()
    st.update(main_q=int(inst.main_q), claims_cap=int(inst.claims_cap), hash_cap=int(inst.hash_cap),
              lanes=int(inst.max_lanes), arena_max=int(inst.arena_max))
    return st


def mib(x) -> float | None:
    return None if x is None else round(x / 2**20, 1)


def same_result(ref, hyp) -> bool:
    """Words and float32 score identical (both empty counts as identical)."""
    if ref.empty or hyp.empty:
        return ref.empty and hyp.empty
    return ref.words == hyp.words and np.float32(ref.score) == np.float32(hyp.score)


def online_reference(graph, options, rows: list[np.ndarray], num_threads: int | None = None):
    """`Decoder(graph, options, device="cpu").decode(frames, online=True)` of each row
    ([T, V] float32, T >= 0), one call over all rows (threads over rows). Returns
    (hypotheses, seconds)."""
    from cuwfst import Decoder

    if not rows:
        return [], 0.0
    V = rows[0].shape[1]
    T = max(max(r.shape[0] for r in rows), 1)
    packed = np.zeros((len(rows), T, V), np.float32)
    lens = np.zeros(len(rows), np.int32)
    for i, r in enumerate(rows):
        packed[i, : r.shape[0]] = r
        lens[i] = r.shape[0]
    dec = Decoder(graph, options, device="cpu", num_threads=num_threads or os.cpu_count() or 1)
    t = time.perf_counter()
    hyps = dec.decode(packed, lens, online=True)
    return hyps, time.perf_counter() - t


def percentile(xs, q) -> float | None:
    return float(np.percentile(np.asarray(xs, np.float64), q)) if len(xs) else None
