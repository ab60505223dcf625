"""Streaming capacity (issue 8): N simulated streams, each receiving its next chunk (16 frames,
0.64 s of audio at 40 ms frames) every tick, for N from a list; per N the latency of the
chunk's advance (p50/p99), whether the N streams keep real time, the real-time factor and
the memory.

python -m benchmarks.streaming --graph HLG.img --log-probs shard.npz --streams 64 256 1024 4096 \\
    [--device cuda] [--ticks 40] [--seconds 30] [--total-seconds 150] [--check 16] \\
    [--riva [--riva-graph TLG.fst]] [--md out.md] [--json out.jsonl]

The streams: lane i starts inside utterance i mod U of the shard at a random frame (so
streams end at different ticks); when a lane's utterance ends its stream is finalized and
a new stream opened in that lane on a random utterance, so all N lanes stay busy. A tick
gives every lane its next chunk (the last chunk of an utterance may be shorter) and times:

- advance: one `StreamingDecoder.advance(streams, chunks)` moving every stream. The GPU
  decoder holds at most GPU_MAX_LANES (4096) lanes, so N > --lanes-per-decoder streams are spread over
  ceil(N / lanes) decoders advanced one after the other; a chunk's latency is then the time
  from the tick's start to the end of its decoder's advance (the first group waits least).
  (--lanes-per-decoder sets the group size on the CPU too.)
  Chunks are views of one stacked tensor: on the GPU (--chunks cuda, the default with
  torch) or in host memory (--chunks host).
  With --partial every stream's partial result is read after its decoder's advance, inside
  the chunk's latency (riva's decode_batch returns partial hypotheses with every chunk).
- turnover: finalizing the streams whose utterance ended and opening their successors.

Wall clock around each call with the GPU synchronised on both sides (the decoder runs on
its own CUDA stream and synchronises it before returning, so CUDA events on the caller's
stream would time the same host interval). Ticks run back to back; --pace sleeps until
each chunk's arrival time instead. The first --warmup-ticks ticks (CUDA-graph captures,
arena growth) are left out of the statistics.

Per tick (JSON per_tick, the measured ticks in order): advance_ms and turnover_ms, Python's
garbage collector inside the advance (py_gc_ms, py_gc_gen2: full collections); on the
GPU also the winners-log events of GpuDecoder::MemStats read around the tick, outside its
timed intervals (a native call, no device sync): growths before a launch and their host ms
(grows / grow_ms; turnover_grows / turnover_grow_ms for the finalizes and opens), growths
committed ahead of need while the advance's kernels ran (ahead_grows / ahead_ms,
CUWFST_ARENA_AHEAD), launch rounds (rounds: more than one per decoder when the arena guard
paused steps), GC rounds and ms, CUDA-graph captures, and the log's capacity (Mi entries);
log_events sums them over the measured ticks. --configs (GPU) runs one row per
configuration and N for same-run A/B: memory= (lazy / eager / pooled: streams keep the
static lanes in every mode, so lazy vs eager is the log's VMM vs plain buffer), kernels=
(a KERNEL_VARIANTS name; at 512 lanes and more "new" auto-picks the old grids, see the
row's "effective") and arena_ahead= (on / off), e.g.

python -m benchmarks.streaming --graph HLG.img --log-probs shard.npz --streams 2048 --ticks 30 \
    --configs default arena_ahead=off memory=eager kernels=old --json ab.jsonl

Keeps up: p99 chunk latency below the chunk's duration and the decode time of the
measured ticks (advance + turnover) below their audio time (ticks x chunk duration).
load = decode time / audio time (below 1 keeps up); RTFx = audio seconds of all streams
decoded per second.

Memory per N: cudaMemGetInfo's used bytes over the value before the decoders were built,
what the decoders hold (fixed workspace, committed, arena high water) and the lane
capacities used (--main-q-factor x --max-active-states tokens per lane). Where the lanes do
not fit in GPU memory the row says "does not fit" with the allocation that failed.

--check K: K lanes sampled at random; the first stream finalized in each (or the one open
at the end, finalized then) is compared with `Decoder(graph, options, device="cpu").decode(
frames, online=True)` on the frames it was fed: words and float32 score identical.

--riva: riva's online decoder (riva-asrlib-decoder's BatchedMappedOnlineDecoderCuda,
decode_batch with is_first/is_last per stream) on the graph's TLG.fst at the same N with
the same chunks, batches of at most --riva-max-batch streams per call; skipped cleanly
where riva or a CUDA torch is missing. Its final result is the partial hypothesis of the
stream's last chunk (no lattice callback, so no lattice post-processing).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.stream_tools import (DEMO_SHARD, TINY, DeviceMemory, add_option_flags, decoder_memory,  # noqa: E402
                                     gpu_instance,
                                     host_available_bytes, is_gpu, load_shard, mib, online_reference,
                                     options_from, percentile, rss_bytes, same_result, torch_cuda)

from cuwfst.decoder.streaming import GPU_MAX_LANES  # StreamingDecoder's lanes per decoder on the GPU


class NotFit(Exception):
    """The decoder for N streams could not be built (GPU or host memory)."""


# ---------------------------------------------------------------------------- the workload
class Feeder:
    """Which frames each lane gets at each tick. Lane i starts inside utterance i mod U at a
    random frame; when its utterance ends, the lane's next stream starts at frame 0 of an
    utterance drawn at random. Deterministic for a seed, so every engine sees the same chunks."""

    def __init__(self, lengths: np.ndarray, n: int, chunk: int, seed: int):
        self.rng = np.random.default_rng(seed)
        self.lengths = lengths.astype(np.int64)
        self.chunk = chunk
        self.utt = np.arange(n) % len(lengths)
        self.start = self.rng.integers(0, self.lengths[self.utt])  # at least one frame left
        self.pos = self.start.copy()
        self.fresh = np.ones(n, bool)  # the lane's stream gets its first chunk this tick

    def bounds(self):
        """(utt, first frame, end frame, first chunk of its stream, last chunk) per lane."""
        length = self.lengths[self.utt]
        end = np.minimum(self.pos + self.chunk, length)
        return self.utt.copy(), self.pos.copy(), end, self.fresh.copy(), end == length

    def commit(self, end: np.ndarray, last: np.ndarray) -> None:
        self.pos = end.copy()
        self.fresh[:] = False
        done = np.flatnonzero(last)
        if done.size:
            self.utt[done] = self.rng.integers(0, len(self.lengths), done.size)
            self.start[done] = 0
            self.pos[done] = 0
            self.fresh[done] = True


def group_sizes(n: int, per: int) -> list[int]:
    """n lanes over ceil(n / per) decoders of equal size (within one)."""
    g = -(-n // per)
    return [n // g + (1 if i < n % g else 0) for i in range(g)]


# ---------------------------------------------------------------------------- configurations
CONFIG_KEYS = ("memory", "kernels", "arena_ahead")


def parse_config(text: str) -> dict:
    """"memory=eager,kernels=old,arena_ahead=off" (any subset; "default": none) -> a dict."""
    from cuwfst.decoder.gpu import KERNEL_VARIANTS
    from cuwfst.decoder.memory import ARENA_AHEAD, MEMORY_MODES

    allowed = {"memory": MEMORY_MODES, "kernels": tuple(KERNEL_VARIANTS), "arena_ahead": ARENA_AHEAD}
    out = {}
    for part in filter(None, text.split(",")):
        if part == "default":
            continue
        key, _, val = part.partition("=")
        key = key.strip().replace("-", "_")
        if key not in allowed or val not in allowed[key]:
            choices = "; ".join(k + ": " + " ".join(v) for k, v in allowed.items())
            raise ValueError(f"config {text!r}: {part!r} is not KEY=VALUE ({choices})")
        out[key] = val
    return out


def config_kwargs(config: dict) -> tuple[dict, dict]:
    """(StreamingDecoder keywords, environment) for a configuration: memory= and the kernel
    variant's switches as keywords (they win over CUWFST_MEMORY / CUWFST_KERNELS),
    arena_ahead through CUWFST_ARENA_AHEAD (read when the native decoder is built)."""
    from cuwfst.decoder.gpu import KERNEL_VARIANTS

    kw, env = {}, {}
    if "memory" in config:
        kw["memory"] = config["memory"]
    if "kernels" in config:
        kw.update(KERNEL_VARIANTS[config["kernels"]])
    if "arena_ahead" in config:
        env["CUWFST_ARENA_AHEAD"] = config["arena_ahead"]
    return kw, env


class _environ:
    """Sets environment variables for a block and puts the old values back."""

    def __init__(self, env: dict):
        self.env, self.old = env, {}

    def __enter__(self):
        for k, v in self.env.items():
            self.old[k] = os.environ.get(k)
            os.environ[k] = v

    def __exit__(self, *exc):
        for k, v in self.old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def config_name(config: dict) -> str:
    return ",".join(f"{k}={config[k]}" for k in CONFIG_KEYS if k in config) or "default"


# ---------------------------------------------------------------------------- engines
class CuwfstEngine:
    """N streams over one or more StreamingDecoders (GPU: at most --lanes-per-decoder each)."""

    name = "cuwfst"

    def __init__(self, graph, options, a, n: int, sync, config: dict | None = None):
        from cuwfst import StreamingDecoder

        kw, env = config_kwargs(config or {})
        per = a.lanes_per_decoder or (GPU_MAX_LANES if is_gpu(a.device) else n)
        self.sync, self.partial = sync, a.partial
        self.groups = []  # (StreamingDecoder, lane indices)
        self.owner = [None] * n
        self.streams = [None] * n
        t = time.perf_counter()
        lane = 0
        try:
            for size in group_sizes(n, per):
                with _environ(env):  # read when the native decoder is built
                    sd = StreamingDecoder(graph, options, device=a.device, max_streams=size, num_threads=a.threads,
                                          main_q_factor=a.main_q_factor, arena_entries=a.arena_entries, **kw)
                lanes = list(range(lane, lane + size))
                lane += size
                self.groups.append((sd, lanes))
                for l in lanes:
                    self.owner[l] = sd
            self.build_s = time.perf_counter() - t
            t = time.perf_counter()
            for sd, lanes in self.groups:
                for l in lanes:
                    self.streams[l] = sd.open_stream()
            self.sync()
            self.open_s = time.perf_counter() - t
        except MemoryError as e:
            self.close()
            raise NotFit(str(e)) from None

    def describe(self) -> dict:
        out = {"decoders": len(self.groups), "lanes_per_decoder": max(len(l) for _, l in self.groups)}
        st = decoder_memory(self.groups[0][0])
        if st:  # what the native decoder runs (after the auto choices and fallbacks)
            out["effective"] = {"memory": "lazy" if st["vmm"] else "eager", "scan_split": int(st["scan_split"]),
                                "closure_lists": int(st["closure_lists"]),
                                "finalize_split": int(st["finalize_split"]), "fused_max": int(st["fused_max"]),
                                "granularity": int(st["granularity"])}
        return out

    def counters(self) -> dict | None:
        """The winners-log event counters (COUNTERS) summed over the decoders; None on the CPU.
        A native call under the decoder's mutex, no device sync."""
        tot = None
        for sd, _ in self.groups:
            inst = gpu_instance(sd)
            if inst is None:
                return None
            st = inst.mem_stats()
            tot = tot or dict.fromkeys(COUNTERS, 0)
            for k in COUNTERS:
                tot[k] += int(st.get(k, 0))
        return tot

    def step(self, chunks, fresh, last):
        """One advance per decoder; [(streams in it, seconds from the start to its end)], {}."""
        out = []
        t0 = time.perf_counter()
        for sd, lanes in self.groups:
            sd.advance([self.streams[l] for l in lanes], [chunks[l] for l in lanes])
            if self.partial:  # what riva's decode_batch returns with every chunk
                for l in lanes:
                    self.streams[l].partial()
            self.sync()
            out.append((len(lanes), time.perf_counter() - t0))
        return out, {}

    def turnover(self, lanes, reopen: bool = True) -> dict:
        """Finalizes the streams of `lanes` and (reopen) opens their successors."""
        res = {}
        by_decoder: dict[int, list] = {}
        for l in lanes:
            by_decoder.setdefault(id(self.owner[l]), []).append(l)
        for group in by_decoder.values():  # one finalize (one launch sequence) per decoder
            sd = self.owner[group[0]]
            for l, h in zip(group, sd.finalize([self.streams[l] for l in group])):
                res[l] = (h.words, h.score, h.overflow, h)
                self.streams[l] = None
            if reopen:  # one open (one launch sequence) for the decoder's new streams
                for l, s in zip(group, sd.open_streams(len(group))):
                    self.streams[l] = s
        return res

    def memory(self) -> dict:
        tot = {"decoder_fixed": 0, "decoder_committed": 0, "decoder_reserved": 0, "arena_high_water": 0}
        caps = {}
        for sd, lanes in self.groups:
            st = decoder_memory(sd)
            if not st:
                continue
            tot["decoder_fixed"] += st["fixed"]
            tot["decoder_committed"] += st["committed"]
            tot["decoder_reserved"] += st["reserved"]
            tot["arena_high_water"] = max(tot["arena_high_water"], st["arena_high_water"])
            caps = {k: st[k] for k in ("main_q", "claims_cap", "hash_cap", "arena_max")}
            live = [s for s in (self.streams[l] for l in lanes) if s is not None]
            if live:  # GPU: the decoder's winners log after its last GC round (all its streams)
                tot["live_winners"] = tot.get("live_winners", 0) + sd.memory_stats(live[0])["winners"]
        if not caps:  # the CPU: the search-log entries the open streams hold
            held = [o.memory_stats(s)["winners"] for o, s in zip(self.owner, self.streams) if s is not None]
            return {"stream_winners_max": max(held, default=0), "stream_winners_sum": int(sum(held))}
        return {**tot, **caps}

    def drain(self) -> None:
        pass

    def close(self) -> None:
        for sd, lanes in self.groups:
            for l in lanes:
                s = self.streams[l]
                if s is not None and not s.closed:
                    sd.release(s)
        self.groups, self.streams, self.owner = [], [], []


class RivaEngine:
    """riva's online decoder (Kaldi's CUDA decoder): one channel per stream, decode_batch over
    batches of at most --riva-max-batch streams; one decoder serves every N (built once)."""

    name = "riva"

    def __init__(self, dec, batch: int, n: int, sync, first_frame):
        self.dec, self.batch, self.n, self.sync = dec, batch, n, sync
        self.first_frame = first_frame  # lane -> a 1-frame chunk, to close streams at the end
        self.corr = [None] * n
        self.fresh = np.ones(n, bool)
        self.build_s = 0.0
        t = time.perf_counter()
        self._start(range(n))
        self.open_s = time.perf_counter() - t

    @staticmethod
    def build(graph_path: str, words_path: str, vocab: int, options, a, channels: int):
        from riva.asrlib.decoder.python_decoder import (BatchedMappedOnlineDecoderCuda,
                                                        BatchedMappedOnlineDecoderCudaConfig)

        c = BatchedMappedOnlineDecoderCudaConfig()
        d = c.decoder_opts
        d.default_beam = float(options.search_beam)
        d.lattice_beam = float(options.output_beam)
        d.max_active = int(options.max_active_states)
        d.ntokens_pre_allocated = int(a.riva_ntokens)
        c.max_batch_size = int(a.riva_max_batch)
        # a stream's channel is freed at its last chunk (no lattice callback is set), so N
        # channels plus one batch of successors suffice; riva wants at least 2 x the batch
        c.num_channels = int(max(channels + a.riva_max_batch, 2 * a.riva_max_batch))
        c.frame_shift_seconds = float(a.frame_shift)
        c.determinize_lattice = False
        c.num_decoder_copy_threads = 2
        c.num_post_processing_worker_threads = max(1, (os.cpu_count() or 4) - 2)
        return BatchedMappedOnlineDecoderCuda(c, graph_path, words_path, int(vocab)), c

    _next_id = 0

    def _start(self, lanes) -> None:
        for l in lanes:
            cid = RivaEngine._next_id
            RivaEngine._next_id += 1
            if not self.dec.try_init_corr_id(cid, 0):
                raise RuntimeError(f"riva: no free channel for stream {cid} (num_channels too small)")
            self.corr[l] = cid
            self.fresh[l] = True

    def describe(self) -> dict:
        return {"decoders": 1, "batches_per_tick": -(-self.n // self.batch), "max_batch": self.batch}

    def counters(self) -> None:
        return None

    def _call(self, lanes, chunks, last):
        _, partials = self.dec.decode_batch([self.corr[l] for l in lanes], [chunks[l] for l in lanes],
                                            [bool(self.fresh[l]) for l in lanes], [bool(last[l]) for l in lanes])
        return partials

    def step(self, chunks, fresh, last):
        out, finals = [], {}
        t0 = time.perf_counter()
        for s in range(0, self.n, self.batch):
            lanes = list(range(s, min(self.n, s + self.batch)))
            partials = self._call(lanes, chunks, last)
            self.sync()
            out.append((len(lanes), time.perf_counter() - t0))
            for l, ph in zip(lanes, partials):
                if last[l]:
                    finals[l] = (list(ph.words), float(ph.score), 0, None)
        self.fresh[:] = False
        return out, finals

    def turnover(self, lanes, reopen: bool = True) -> dict:
        if reopen:
            self._start(lanes)
        return {}

    def memory(self) -> dict:
        return {}

    def drain(self) -> None:
        """Ends every open stream with one more frame, freeing its channel for the next N."""
        open_lanes = [l for l in range(self.n) if self.corr[l] is not None]
        chunks = {l: self.first_frame(l) for l in open_lanes}
        last = np.ones(self.n, bool)
        for s in range(0, len(open_lanes), self.batch):
            self._call(open_lanes[s : s + self.batch], chunks, last)
        self.sync()
        self.corr = [None] * self.n

    def close(self) -> None:
        self.dec = None


class PyGcClock:
    """Wall time Python's cyclic garbage collector spends, from gc.callbacks: a collection
    that lands inside an advance is part of that advance's latency (the tick loop reads it
    around each advance, like the decoder's counters)."""

    def __init__(self):
        self.ms = 0.0
        self.collections = [0, 0, 0]
        self._t = None

    def __call__(self, phase, info):
        if phase == "start":
            self._t = time.perf_counter()
        elif self._t is not None:
            self.ms += (time.perf_counter() - self._t) * 1e3
            self.collections[info.get("generation", 0)] += 1
            self._t = None

    def __enter__(self):
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self)


# ---------------------------------------------------------------------------- one N
def run_one(engine, n: int, feeder: Feeder, chunk_of, a, t_begin: float, budget_s: float, check_lanes, sync):
    """The tick loop for one engine at N streams; the row's timing fields and the samples."""
    with PyGcClock() as gc_clock:
        return _run_ticks(engine, n, feeder, chunk_of, a, t_begin, budget_s, check_lanes, sync, gc_clock)


def _run_ticks(engine, n, feeder, chunk_of, a, t_begin, budget_s, check_lanes, sync, gc_clock):
    chunk_s = a.chunk * a.frame_shift
    lat, ticks, advances, turnovers = [], [], [], []
    events = []  # per measured tick: the counters' change over its advance and over its turnover
    py_gc_ms, py_gc_gen2 = [], []  # per measured tick: Python GC inside the advance
    frames = finalized = overflowed = words = 0
    samples = {}
    stopped = None
    k = 0
    while k < a.warmup_ticks + a.ticks:
        utt, pos, end, fresh, last = feeder.bounds()
        chunks = [chunk_of(u, s, e) for u, s, e in zip(utt.tolist(), pos.tolist(), end.tolist())]
        sync()
        c0 = engine.counters()  # (outside the timed interval)
        g0, g0_2 = gc_clock.ms, gc_clock.collections[2]
        t0 = time.perf_counter()
        try:
            groups, fin = engine.step(chunks, fresh, last)
            t1 = time.perf_counter()
            g1, g1_2 = gc_clock.ms, gc_clock.collections[2]
            c1 = engine.counters() if c0 is not None else None  # microseconds, inside the turnover's time
            t1b = time.perf_counter()
            done = np.flatnonzero(last)
            fin.update(engine.turnover(done.tolist()))
        except MemoryError as e:
            stopped = f"out of memory at tick {k}: {e}"
            break
        t2 = time.perf_counter()
        c2 = engine.counters() if c0 is not None else None
        for l in done.tolist():
            w, _, ov, h = fin[l]
            finalized += 1
            overflowed += bool(ov)
            words += len(w)
            if l in check_lanes and l not in samples and h is not None:
                samples[l] = (int(utt[l]), int(feeder.start[l]), int(end[l]), h)
        feeder.commit(end, last)
        if k >= a.warmup_ticks:
            lat.extend(np.repeat([c for _, c in groups], [s for s, _ in groups]).tolist())
            advances.append(t1 - t0)
            turnovers.append(t2 - t1b)
            py_gc_ms.append(round(g1 - g0, 3))
            py_gc_gen2.append(g1_2 - g0_2)
            ticks.append(t2 - t0 - (t1b - t1))
            if c0 is not None:
                events.append(({x: c1[x] - c0[x] for x in COUNTERS}, {x: c2[x] - c1[x] for x in COUNTERS},
                               c2["arena_capacity"]))
            frames += int((end - pos).sum())
        k += 1
        if a.pace:
            time.sleep(max(0.0, t0 + chunk_s - time.perf_counter()))
        if time.perf_counter() - t_begin > budget_s:
            stopped = stopped or f"time cap after {k} ticks"
            break
    measured = len(ticks)
    decode_s = float(sum(ticks))
    audio_s = measured * chunk_s
    p99 = percentile(lat, 99)
    row = dict(ticks=measured, warmup_ticks=min(k, a.warmup_ticks), stopped=stopped,
               p50_ms=_ms(percentile(lat, 50)), p99_ms=_ms(p99), max_ms=_ms(max(lat) if lat else None),
               advance_p50_ms=_ms(percentile(advances, 50)), advance_p99_ms=_ms(percentile(advances, 99)),
               advance_max_ms=_ms(max(advances) if advances else None),
               tick_p50_ms=_ms(percentile(ticks, 50)), tick_p99_ms=_ms(percentile(ticks, 99)),
               turnover_mean_ms=_ms(float(np.mean(turnovers)) if turnovers else None),
               decode_s=round(decode_s, 3), audio_s_per_stream=round(audio_s, 2),
               load=round(decode_s / audio_s, 4) if audio_s else None,
               rtfx=round(frames * a.frame_shift / decode_s, 1) if decode_s else None,
               keeps_up=bool(measured and p99 is not None and p99 < chunk_s and decode_s < audio_s),
               p99_under_100ms=bool(p99 is not None and p99 < 0.1),
               finalized=finalized, overflow_streams=overflowed,
               mean_words=round(words / finalized, 2) if finalized else None,
               per_tick={"advance_ms": [_ms(x) for x in advances], "turnover_ms": [_ms(x) for x in turnovers],
                         "py_gc_ms": py_gc_ms, "py_gc_gen2": py_gc_gen2})
    if events:
        row["per_tick"].update(tick_events(events))
        row["log_events"] = log_totals(events, engine.describe()["decoders"])
    return row, samples


# winners-log counters of GpuDecoder::MemStats read around each tick (cuwfst/decoder/memory.py
# MEM_STATS): growths (ahead_grows of them committed ahead while an advance's kernels ran), the
# host microseconds of the others and of those, launch rounds of the advances (more than one:
# the arena guard paused steps), GC rounds and their microseconds, CUDA-graph captures, and the
# log's capacity (entries)
COUNTERS = ("arena_grows", "arena_ahead_grows", "arena_grow_us", "arena_ahead_us", "advance_rounds", "gc_rounds",
            "gc_us", "graph_captures", "arena_capacity")


def tick_events(events) -> dict:
    """Per measured tick (lists): the advance's growths, growth ms (before a launch could go on),
    ahead growths and their ms, launch rounds, GC rounds and ms, graph captures; the turnover's
    growths and growth ms; the log's capacity after the tick (Mi entries)."""
    adv = lambda k: [e[0][k] for e in events]  # noqa: E731
    trn = lambda k: [e[1][k] for e in events]  # noqa: E731
    return {"grows": adv("arena_grows"), "grow_ms": [round(x / 1000, 3) for x in adv("arena_grow_us")],
            "ahead_grows": adv("arena_ahead_grows"), "ahead_ms": [round(x / 1000, 3) for x in adv("arena_ahead_us")],
            "rounds": adv("advance_rounds"), "gc_rounds": adv("gc_rounds"),
            "gc_ms": [round(x / 1000, 3) for x in adv("gc_us")], "captures": adv("graph_captures"),
            "turnover_grows": trn("arena_grows"), "turnover_grow_ms": [round(x / 1000, 3) for x in trn("arena_grow_us")],
            "capacity_mi": [round(e[2] / 2**20, 2) for e in events]}


def log_totals(events, decoders: int) -> dict:
    """The measured ticks' winners-log events: growths (and in how many ticks), growth ms
    before launches, ahead growths and ms, extra launch rounds (past one per decoder's advance:
    the guard paused steps), GC rounds and ms, graph captures."""
    tot = {k: sum(e[0][k] + e[1][k] for e in events) for k in COUNTERS if k != "arena_capacity"}
    grew = sum(1 for e in events if e[0]["arena_grows"] + e[1]["arena_grows"])
    return {"grows": tot["arena_grows"], "ticks_with_grows": grew,
            "grow_ms": round(tot["arena_grow_us"] / 1000, 3), "ahead_grows": tot["arena_ahead_grows"],
            "ahead_ms": round(tot["arena_ahead_us"] / 1000, 3),
            "extra_rounds": tot["advance_rounds"] - decoders * len(events),
            "gc_rounds": tot["gc_rounds"], "gc_ms": round(tot["gc_us"] / 1000, 3),
            "captures": tot["graph_captures"]}


def _ms(s):
    return None if s is None else round(1000.0 * s, 3)


def check_samples(graph, options, lp, samples: dict, check_lanes) -> dict:
    """CPU online-mode decode of each sampled stream's frames against its finalize result."""
    keys = [l for l in check_lanes if l in samples]
    rows = [lp[u, s:e] for u, s, e, _ in (samples[l] for l in keys)]
    refs, secs = online_reference(graph, options, rows)
    bad = []
    for l, ref in zip(keys, refs):
        u, s, e, h = samples[l]
        if h.overflow or not same_result(ref, h):
            bad.append({"lane": int(l), "utt": u, "frames": [s, e], "overflow": int(h.overflow),
                        "cpu": [ref.words, float(ref.score)], "stream": [h.words, float(h.score)]})
    return {"checked": len(keys), "identical": len(keys) - len(bad), "mismatches": bad[:8],
            "cpu_check_s": round(secs, 2)}


# ---------------------------------------------------------------------------- tables
def md_table(rows, header: str) -> str:
    out = [header, "",
           "| engine | N | decoders x lanes | ticks | p50 ms | p99 ms | turnover ms | tick p99 ms | load | RTFx "
           "| keeps up | p99 < 100 ms | device MiB | fixed MiB/lane | check | status |",
           "|" + " --- |" * 16]

    def f(x, nd=1):
        return "-" if x is None else f"{x:,.{nd}f}"

    for r in rows:
        eng = r["engine"] + (f" ({r['config']})" if r.get("config") else "")
        if r["status"] not in ("ok", "partial"):
            out.append(f"| {eng} | {r['n']} |" + " - |" * 13 + f" {r['status']}: {r.get('reason', '')[:200]} |")
            continue
        shape = (f"{r['decoders']} x {r['lanes_per_decoder']}" if r["engine"] == "cuwfst"
                 else f"{r['batches_per_tick']} x {r['max_batch']}")
        mem = r.get("memory", {})
        per_lane = (mem["decoder_fixed"] / r["n"] / 2**20) if mem.get("decoder_fixed") else None
        chk = f"{r['check']['identical']}/{r['check']['checked']}" if r.get("check") else "-"
        status = r["status"] + (f" ({r['stopped']})" if r.get("stopped") else "")
        out.append(f"| {eng} | {r['n']} | {shape} | {r['ticks']} | {f(r['p50_ms'])} | {f(r['p99_ms'])} "
                   f"| {f(r['turnover_mean_ms'])} | {f(r['tick_p99_ms'])} | {f(r['load'], 3)} | {f(r['rtfx'])} | {'yes' if r['keeps_up'] else 'no'} "
                   f"| {'yes' if r['p99_under_100ms'] else 'no'} | {f(mem.get('device_used_mib'))} | {f(per_lane, 2)} "
                   f"| {chk} | {status} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", default=str(TINY / "HLG.img"))
    p.add_argument("--log-probs", default=str(DEMO_SHARD), help="shard .npz: log_probs (or log_probs_fp16), lengths")
    p.add_argument("--streams", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048, 4096])
    p.add_argument("--device", default="auto")
    p.add_argument("--chunk", type=int, default=16, help="frames per chunk")
    p.add_argument("--frame-shift", type=float, default=0.04, help="seconds per log-prob frame")
    p.add_argument("--ticks", type=int, default=40, help="measured ticks per N (at most)")
    p.add_argument("--warmup-ticks", type=int, default=3)
    p.add_argument("--seconds", type=float, default=30.0, help="time cap per N, setup included")
    p.add_argument("--total-seconds", type=float, default=0.0,
                   help="time cap over all N of the cuwfst rows (0: none); an N predicted not to finish its "
                        "warm-up and --min-ticks ticks in the time left is skipped")
    p.add_argument("--min-ticks", type=int, default=5)
    p.add_argument("--pace", action="store_true", help="sleep until each chunk's arrival (real-time pacing)")
    p.add_argument("--partial", action="store_true",
                   help="cuwfst: read every stream's partial result after its advance, inside the chunk's latency "
                        "(riva's decode_batch returns partial hypotheses with every chunk)")
    p.add_argument("--lanes-per-decoder", type=int, default=None,
                   help=f"streams per StreamingDecoder (GPU: at most and by default {GPU_MAX_LANES}; CPU: all by "
                        "default); more streams use more decoders, advanced one after the other")
    p.add_argument("--chunks", choices=["auto", "cuda", "host"], default="auto",
                   help="where the chunks live: one stacked GPU tensor (auto with torch on a GPU) or host memory")
    p.add_argument("--threads", type=int, default=None, help="CPU: threads of the CPU streams")
    p.add_argument("--memory", choices=["lazy", "eager", "pooled"], default=None,
                   help="GPU: the decoders' memory mode (default: CUWFST_MEMORY, else lazy); streams keep the "
                        "static lanes in every mode, so lazy vs eager is the winners log's VMM vs plain buffer")
    p.add_argument("--kernels", default=None,
                   help="GPU: the kernel variant (cuwfst.decoder.gpu.KERNEL_VARIANTS: new, old, split, lists, wide, "
                        "fused; default: CUWFST_KERNELS, else new). At 512 lanes and more 'new' auto-picks one scan "
                        "CTA a lane and 8 Finalize CTAs (the old grids): the row's 'effective' says what ran")
    p.add_argument("--arena-ahead", choices=["on", "off"], default=None,
                   help="GPU: stream advances commit the lazy winners log ahead of need while their kernels run "
                        "(CUWFST_ARENA_AHEAD; default on)")
    p.add_argument("--configs", nargs="+", default=None, metavar="KEY=VAL[,KEY=VAL]",
                   help="GPU: one row per configuration and N, e.g. 'default' 'arena_ahead=off' 'memory=eager' "
                        "'kernels=old' (keys memory, kernels, arena_ahead; on top of --memory/--kernels/"
                        "--arena-ahead), for same-run A/B")
    p.add_argument("--check", type=int, default=0, help="sampled streams compared with the CPU decoder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--riva", action="store_true", help="also riva's online decoder at the same N")
    p.add_argument("--riva-only", action="store_true", help="riva's rows alone")
    p.add_argument("--riva-graph", default=None, help="riva's graph (default: TLG.fst beside --graph)")
    p.add_argument("--riva-words", default=None, help="riva's words.txt (default: beside --riva-graph)")
    p.add_argument("--riva-max-batch", type=int, default=1024, help="riva: streams per decode_batch (its lanes)")
    p.add_argument("--riva-ntokens", type=int, default=1_000_000, help="riva: ntokens_pre_allocated")
    p.add_argument("--riva-total-seconds", type=float, default=0.0, help="time cap over all N of riva's rows")
    p.add_argument("--md", help="write the table here (markdown)")
    p.add_argument("--json", help="append one JSON line per row here")
    add_option_flags(p)
    a = p.parse_args(argv)
    if min(a.streams) < 1 or a.chunk < 1 or a.ticks < 1 or a.warmup_ticks < 0 or a.min_ticks < 1:
        p.error("--streams, --chunk, --ticks and --min-ticks must be >= 1, --warmup-ticks >= 0")
    if a.lanes_per_decoder is not None and not 1 <= a.lanes_per_decoder <= GPU_MAX_LANES:
        p.error(f"--lanes-per-decoder must be in [1, {GPU_MAX_LANES}]")
    if a.check < 0 or a.riva_max_batch < 1:
        p.error("--check must be >= 0 and --riva-max-batch >= 1")
    base = {k: v for k, v in (("memory", a.memory), ("kernels", a.kernels), ("arena_ahead", a.arena_ahead)) if v}
    try:
        parse_config(",".join(f"{k}={v}" for k, v in base.items()))
        a.config_list = [dict(base, **parse_config(c)) for c in (a.configs or ["default"])]
    except ValueError as e:
        p.error(str(e))
    return a


class Report:
    def __init__(self, a, header: str):
        self.a, self.header, self.rows = a, header, []

    def add(self, row: dict) -> None:
        self.rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("machine",)}), flush=True)
        if self.a.json:
            with open(self.a.json, "a") as f:
                f.write(json.dumps(row) + "\n")
        if self.a.md:  # rewritten after every row, so a run cut short still leaves its table
            Path(self.a.md).write_text(md_table(self.rows, self.header))


class Bench:
    """What every row of one run shares: arguments, graph, options, utterances, chunks."""

    def __init__(self, a):
        from benchmarks.peers.measure import git_commit, machine
        from cuwfst import Graph
        from cuwfst.cuda import resolve_device

        a.device = resolve_device(a.device)
        if not is_gpu(a.device) and any(a.config_list):
            raise SystemExit("--memory, --kernels, --arena-ahead and --configs are GPU knobs (the CPU streams have "
                             "none of them)")
        self.a = a
        self.graph = Graph.load(a.graph)
        self.options = options_from(a)
        self.lp, self.lens = load_shard(a.log_probs)
        self.torch = torch_cuda() if is_gpu(a.device) or a.riva or a.riva_only else None
        if a.chunks == "cuda" and (self.torch is None or not is_gpu(a.device)):
            raise SystemExit("--chunks cuda needs --device cuda and torch with a CUDA GPU")
        self.cuda_chunks = a.chunks == "cuda" or (a.chunks == "auto" and self.torch is not None and is_gpu(a.device))
        # one stacked tensor on the GPU: a chunk is a view of it (riva reads these too)
        self.lp_dev = self.torch.from_numpy(self.lp).cuda() if self.torch is not None else None
        mach = machine()
        self.commit = git_commit()
        chunk_s = a.chunk * a.frame_shift
        self.knobs = dict(search_beam=a.search_beam, max_active_states=a.max_active_states,
                          min_active_states=a.min_active_states, main_q_factor=a.main_q_factor,
                          lane_frontier_tokens=max(a.main_q_factor * a.max_active_states, 1024),
                          arena_entries=a.arena_entries, chunk=a.chunk, chunk_s=chunk_s,
                          chunks="cuda" if self.cuda_chunks else "host", pace=a.pace, partial=a.partial)
        what = (f"riva on {a.riva_graph or Path(a.graph).with_name('TLG.fst')}" if a.riva_only
                else f"{a.graph} ({self.graph.num_states:,} states)")
        self.header = (
            f"Streaming capacity: {what}, {len(self.lens)} utterances of "
            f"{a.log_probs} (mean {self.lens.mean():.0f} frames), chunks of {a.chunk} frames ({chunk_s:.2f} s), "
            f"device {a.device} ({mach['gpu'] or mach['cpu']}), commit {self.commit}. Knobs: "
            + ", ".join(f"{k}={v}" for k, v in self.knobs.items()))
        self.base = dict(graph=a.graph, log_probs=a.log_probs, device=a.device, commit=self.commit, machine=mach,
                         knobs=self.knobs, bench="streaming")
        self.report = Report(a, self.header)

    def sync(self) -> None:
        if self.torch is not None:
            self.torch.cuda.synchronize()

    def clean(self) -> None:
        gc.collect()
        if self.torch is not None:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()

    def host_chunk(self, u, s, e):
        return self.lp[u, s:e]

    def cuda_chunk(self, u, s, e):
        return self.lp_dev[u, s:e]


def main(argv=None) -> int:
    a = parse_args(argv)
    b = Bench(a)
    print(b.header, flush=True)
    status = 0
    if not a.riva_only:
        status = cuwfst_rows(b)
    if a.riva or a.riva_only:
        riva_rows(b)
    print(md_table(b.report.rows, b.report.header))
    return status


def cuwfst_rows(b: Bench) -> int:
    """One row per N, smallest first; 1 when a checked stream differs from the CPU decoder."""
    a, status = b.a, 0
    t_all = time.perf_counter()
    last = {}  # seconds per stream of setup and of a tick, lane workspace bytes, from the last N run
    if is_gpu(a.device):
        # the graph's upload (kept while b.graph lives) and the module load, before any row
        # is measured: every row's device memory and setup time are then its lanes' alone
        from cuwfst import StreamingDecoder

        probe = DeviceMemory(a.device)
        b.clean()
        m0, t = probe.sample(), time.perf_counter()
        one = StreamingDecoder(b.graph, b.options, device=a.device, max_streams=1, main_q_factor=a.main_q_factor)
        st = decoder_memory(one)
        del one
        b.clean()
        b.base["graph_upload_mib"] = mib(_delta(probe.sample()["device_used"], m0["device_used"]))
        caps = (f"lane capacities main_q={st['main_q']} tokens, claims_cap={st['claims_cap']}, "
                f"hash_cap={st['hash_cap']}; a 1-lane decoder's fixed workspace {mib(st['fixed'])} MiB")
        b.base["lane_capacities"] = {k: st[k] for k in ("main_q", "claims_cap", "hash_cap", "fixed")}
        b.report.header += f". {caps}"
        print(f"graph uploaded in {time.perf_counter() - t:.1f} s: {b.base['graph_upload_mib']} MiB of device "
              f"memory stay for the run; {caps}", flush=True)
    for n, config in ((n, c) for n in sorted(set(a.streams)) for c in a.config_list):
        row = dict(b.base, engine="cuwfst", n=n)
        if config or len(a.config_list) > 1:
            row["config"] = config_name(config)
        left = a.total_seconds - (time.perf_counter() - t_all) if a.total_seconds else float("inf")
        if "tick" in last:
            need = n * (last["setup"] + (a.warmup_ticks + a.min_ticks) * last["tick"])
            if need > left:
                b.report.add(dict(row, status="skipped", reason=f"predicted {need:.0f} s for warm-up and "
                                  f"{a.min_ticks} ticks, {max(left, 0):.0f} s left of --total-seconds"))
                continue
        if left <= 0:
            b.report.add(dict(row, status="skipped", reason="no time left of --total-seconds"))
            continue
        try:
            row = cuwfst_one(b, row, n, min(a.seconds, left), last, config)
        except Exception as e:  # one N's failure is reported; the next N still runs
            row.update(status="error", reason=f"{type(e).__name__}: {e}")
        b.clean()
        b.report.add(row)
        if row.get("check") and row["check"]["identical"] != row["check"]["checked"]:
            status = 1
    return status


def cuwfst_one(b: Bench, row: dict, n: int, budget_s: float, last: dict, config: dict | None = None) -> dict:
    a = b.a
    probe = DeviceMemory(a.device)
    b.clean()
    m0, rss0 = probe.sample(), rss_bytes()
    t_begin = time.perf_counter()
    try:
        engine = CuwfstEngine(b.graph, b.options, a, n, b.sync, config)
    except NotFit as e:
        per = last.get("fixed_per_lane")
        need = (f"; about {per * n / 2**30:.1f} GiB of lane workspace at the last N's {per / 2**20:.1f} MiB "
                f"per lane" if per else "")
        return dict(row, status="does not fit", reason=f"{e}{need}", device_total_mib=mib(probe.sample()["device_total"]))
    try:
        rng = np.random.default_rng(a.seed + 1)
        check_lanes = set(rng.choice(n, min(a.check, n), replace=False).tolist()) if a.check else set()
        feeder = Feeder(b.lens, n, a.chunk, a.seed)
        timing, samples = run_one(engine, n, feeder, b.cuda_chunk if b.cuda_chunks else b.host_chunk, a, t_begin,
                                  budget_s, check_lanes, b.sync)
        m1, rss1 = probe.sample(), rss_bytes()
        mem = engine.memory()
        mem.update(device_used_mib=mib(_delta(m1["device_used"], m0["device_used"])),
                   module_device_mib=mib(m1["module_device"]), rss_delta_mib=mib(rss1 - rss0))
        missing = [l for l in sorted(check_lanes) if l not in samples]
        if missing:  # the streams open now, finalized on the frames fed so far
            fin = engine.turnover(missing, reopen=False)
            for l in missing:
                samples[l] = (int(feeder.utt[l]), int(feeder.start[l]), int(feeder.pos[l]), fin[l][3])
        setup_s = engine.build_s + engine.open_s
        row.update(engine.describe(), status=_status(timing, a),
                   setup_s=round(setup_s, 2), memory=mem, **timing)
    finally:
        engine.close()
        del engine
        b.clean()
    if check_lanes:
        row["check"] = check_samples(b.graph, b.options, b.lp, samples, sorted(check_lanes))
    if mem.get("decoder_fixed"):
        last["fixed_per_lane"] = mem["decoder_fixed"] / n
    if timing["ticks"]:
        last.update(tick=timing["decode_s"] / timing["ticks"] / n, setup=setup_s / n)
    return row


def _status(timing: dict, a) -> str:
    """partial: a time cap or a failure stopped the loop before the ticks asked for, or --min-ticks."""
    return "partial" if timing["stopped"] and timing["ticks"] < min(a.ticks, a.min_ticks) else "ok"


def _delta(x, x0):
    return None if x is None or x0 is None else x - x0


def riva_rows(b: Bench) -> None:
    a = b.a
    ns = sorted(set(a.streams))
    rg = a.riva_graph or str(Path(a.graph).with_name("TLG.fst"))
    rw = a.riva_words or str(Path(rg).with_name("words.txt"))
    row0 = dict(b.base, engine="riva", graph=rg)
    reason = None
    if b.torch is None:
        reason = "riva needs torch with a CUDA GPU"
    else:
        try:
            import riva.asrlib.decoder.python_decoder  # noqa: F401
        except ImportError as e:
            reason = f"riva-asrlib-decoder is not importable ({e})"
    if reason is None and not (Path(rg).exists() and Path(rw).exists()):
        reason = f"riva's graph {rg} or words {rw} is missing"
    if reason:
        for n in ns:
            b.report.add(dict(row0, n=n, status="skipped", reason=reason))
        return
    probe = DeviceMemory("cuda")
    b.clean()
    m_before = probe.sample()
    # one decoder for every N, with channels for the largest N that fits
    t = time.perf_counter()
    dec = cfg = None
    errors = {}
    for top in reversed(ns):
        try:
            dec, cfg = RivaEngine.build(rg, rw, b.lp.shape[2], b.options, a, top)
            break
        except Exception as e:  # riva raises RuntimeError (CUDA / Kaldi errors); keep the message
            errors[top] = f"{type(e).__name__}: {e}"
            b.clean()
    build_s = time.perf_counter() - t
    if dec is None:
        for n in ns:
            b.report.add(dict(row0, n=n, status="does not fit", reason=errors.get(n, "riva could not be built")))
        return
    decoder_mib = mib(_delta(probe.sample()["device_used"], m_before["device_used"]))
    capacity = cfg.num_channels - a.riva_max_batch
    print(f"riva: decoder built in {build_s:.1f} s, {cfg.num_channels} channels, max_batch_size "
          f"{cfg.max_batch_size}, {decoder_mib} MiB of device memory", flush=True)
    t_all = time.perf_counter()
    last = {}
    for n in ns:
        row = dict(row0, n=n, riva_build_s=round(build_s, 2), riva_channels=cfg.num_channels,
                   riva_decoder_mib=decoder_mib)
        if n > capacity:
            b.report.add(dict(row, status="does not fit", reason=errors.get(
                n, f"more streams than the {capacity} channels riva was built with")))
            continue
        left = a.riva_total_seconds - (time.perf_counter() - t_all) if a.riva_total_seconds else float("inf")
        if "tick" in last and n * (a.warmup_ticks + a.min_ticks) * last["tick"] > left:
            b.report.add(dict(row, status="skipped", reason=f"would not finish warm-up and {a.min_ticks} ticks in "
                                                            f"the {max(left, 0):.0f} s left of --riva-total-seconds"))
            continue
        if last.get("rss") and last["rss"] * n > 0.7 * host_available_bytes():
            b.report.add(dict(row, status="skipped", reason=f"host memory: about {last['rss'] * n / 2**30:.1f} GiB "
                              f"predicted (riva keeps each channel's tokens on the host), "
                              f"{host_available_bytes() / 2**30:.1f} GiB available"))
            continue
        b.clean()
        m0, rss0 = probe.sample(), rss_bytes()
        t_begin = time.perf_counter()
        feeder = Feeder(b.lens, n, a.chunk, a.seed)
        try:
            engine = RivaEngine(dec, min(a.riva_max_batch, n), n, b.sync,
                                lambda l: b.lp_dev[int(feeder.utt[l]), 0:1])
            timing, _ = run_one(engine, n, feeder, b.cuda_chunk, a, t_begin, min(a.seconds, left), set(), b.sync)
            m1, rss1 = probe.sample(), rss_bytes()
            engine.drain()
        except Exception as e:
            b.report.add(dict(row, status="error", reason=f"{type(e).__name__}: {e}"))
            break  # the shared decoder's state is unknown now
        mem = {"device_used_mib": mib(_delta(m1["device_used"], m0["device_used"])), "rss_delta_mib": mib(rss1 - rss0)}
        row.update(engine.describe(), status=_status(timing, a),
                   setup_s=round(engine.open_s, 2), memory=mem, **timing)
        b.report.add(row)
        if timing["ticks"]:
            last.update(tick=timing["decode_s"] / timing["ticks"] / n, rss=max(rss1 - rss0, 0) / n)
    dec = None
    b.clean()


if __name__ == "__main__":
    sys.exit(main())
