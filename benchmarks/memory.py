"""Device memory and speed of the GPU decoder with memory that tracks use (issue 9), one run.

python -m benchmarks.memory --graph HLG.img --log-probs shard.npz [--batch 32 256] [--utts 256]
    [--riva-dir /tmp/corpus-full] [--long-frames 180000]
    [--modes pooled pooled-admit pooled-gc pooled-bins pooled-slots pooled-fixedhints pooled-handout lazy lazy-gc eager]
    [--json out.jsonl] [--md out.md]

1. Memory: for each batch size and memory mode ("pooled-default": memory="pooled" as users get it,
   the pool variables left to the library; "pooled": VMM-committed winners log and lane
   pools; "lazy", the default: that log and every lane's worst case; "eager": everything up
   front; with --modes, also "pooled-slots": pooled with the regions sized by the slots, the
   rule before; "pooled-bins": sized by the bins bound, CUWFST_POOL_BOUND=bins; and
   "pooled-fixedhints": the admissible arcs with the slot hints of 2f568a0, every 32nd slot,
   CUWFST_POOL_HINTS=fixed; "pooled-handout": pooled with the hand-out after the max in a
   kernel of its own, CUWFST_POOL_HANDOUT=kernel; "pooled-gc" and "lazy-gc": those modes with
   gc_interval = --gc-interval on the batches too, so the winners log holds a window), a decoder on a graph
   of its own decodes every utterance; its total device memory, graph included, is measured
   four ways: cudaMemGetInfo's used memory before it was built and after its last decode
   (PyTorch's cache emptied, so only what the decoder and its graph hold is left), its peak
   over the build and the decodes sampled as riva's is (a transient such as the rescue
   instance's growth before its trim counts there, not after), the
   module's own live counters (device bytes the native module holds), and the decoder's
   memory_stats() (committed + graph). With --riva-dir, riva-asrlib-decoder on the same
   utterances and that directory's TLG.fst, its device peak sampled the same way
   (benchmarks.peers.measure.GpuMemoryProbe).
2. Speed at the first batch size: the modes' decoders decode the same utterances in
   alternating timed passes (median of --reps each); the ratio is the issue's bar (within 3%).
   Every row of the two must agree (bit-identical float32 scores; same words or an exact-score
   tie), and --check rows are compared with the CPU decoder.
3. Long form: the utterances' frames tiled into one --long-frames utterance, decoded with
   gc_interval (--gc-interval) and without; words and score must be identical. The GC run's
   winners memory is reported for growing prefixes (1/8, 1/4, 1/2, all of it, each a fresh
   decoder): flat after warm-up is the bar; the no-GC run's grows with the input.

Exit status 1 when a check fails (a mismatch, GC on != off).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from cuwfst import Decoder, DecoderOptions, Graph  # noqa: E402

MiB = 2**20
# seconds between the device-peak probe's samples, the same for every decoder measured
PROBE_INTERVAL = 0.005


def _module_bytes() -> int:
    from cuwfst.jit.decoder import module

    out = np.zeros(5, np.int64)
    module(0).gpu_memory_info(0, out)
    return int(out[2])


def _module_peak(reset: bool = False) -> int:
    """The most device bytes the native module held at once since the last reset (every
    acquisition updates it: a transient a 5 ms sampler misses counts)."""
    from cuwfst.jit.decoder import module

    return int(module(0).gpu_memory_peak(reset))


def _used(torch) -> int:
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    return total - free


def _decode_all(dec, lp, lens, batch):
    out = []
    for s in range(0, lp.shape[0], batch):
        out += dec.decode(lp[s : s + batch], lens[s : s + batch])
    return out


def _same(graph, lp_host, a, b) -> bool:
    """Two GPU results of one row agree: bit-identical float32 scores, and the same words or
    another path of the same float32 score (an exact-score tie)."""
    from helpers import path_score_f32

    if a.empty != b.empty or a.overflow or b.overflow:
        return False
    if a.empty:
        return True
    if np.float32(a.score) != np.float32(b.score):
        return False
    return a.words == b.words or path_score_f32(graph, lp_host, b.arcs, b.redirect_arc) == np.float32(a.score)


MODES = ("pooled-default", "pooled", "pooled-admit", "pooled-keep", "pooled-maintrimoff", "pooled-devlog", "pooled-gc", "pooled-bins",
         "pooled-slots", "pooled-slots-devlog", "pooled-late", "pooled-late-fin", "pooled-late-ahead",
         "pooled-late-ahead-eager", "pooled-late-ahead-slot", "pooled-fixedhints", "pooled-handout", "lazy", "lazy-gc",
         "lazy-vmm", "lazy-slot", "eager", "pooled-late-ahead-fullclaims", "pooled-late-ahead-fullhash",
         "pooled-late-ahead-fulltokens", "pooled-late-ahead-fullall", "pooled-late-ahead-hash2x",
         "pooled-late-ahead-hash4x", "pooled-late-ahead-hostlog", "pooled-late-ahead-keep",
         "pooled-late-ahead-hostlog-keep", "pooled-late-ahead-lq2", "pooled-late-ahead-hostlog-lq2",
         "pooled-late-ahead-lq4")
FULL_SUFFIXES = {"-fullclaims": "claims", "-fullhash": "hash", "-fulltokens": "tokens", "-fullall": "all",
                 "-hash2x": "hash2x", "-hash4x": "hash4x"}


def mode_gc(mode: str, gc_interval: int) -> tuple[str, int]:
    """A mode named NAME-gc is NAME with the winners-log GC of the long form on ordinary
    batches (gc_interval = --gc-interval): rows longer than that many frames run in segments
    with a GC round after each, so the log holds a window, not a batch's whole search."""
    return (mode[: -len("-gc")], gc_interval) if mode.endswith("-gc") else (mode, 0)


# Every variable a mode of mode_env may set: "pooled-default" takes each out of the environment
# (pool_env pops a None), so the decoder runs memory="pooled" with the library's own defaults.
POOL_VARS = ("CUWFST_POOL_BOUND", "CUWFST_POOL_HINTS", "CUWFST_POOL_HANDOUT", "CUWFST_RESCUE_TRIM",
             "CUWFST_MAIN_TRIM", "CUWFST_WINNERS_LOG", "CUWFST_LANE_VMM", "CUWFST_PAYLOAD", "CUWFST_POOL_FULL",
             "CUWFST_POOL_LANE_Q")


def mode_env(mode: str) -> tuple[str, dict]:
    """"pooled-default": memory="pooled" exactly as a user gets it (every POOL_VARS variable
    removed from the environment while the decoder is built, so the library's defaults apply;
    "pooled" below is not that: it is the anchor bound, the default before 2026-12-02 19:45).
    Otherwise mode_settings(NAME) for a mode NAME, and for NAME-slot the same with the emitting hash
    payloads holding the arc's slot ($CUWFST_PAYLOAD=slot, the rule before 2026-12-02: lazy-slot,
    pooled-late-ahead-slot); every other mode pins $CUWFST_PAYLOAD=token (the default), so a
    stray environment cannot change a row. NAME-fullclaims / -fullhash / -fulltokens / -fullall:
    NAME with those pooled regions handed out at the static layout's sizes ($CUWFST_POOL_FULL, a
    diagnostic of what the small regions cost); NAME-hash2x / -hash4x: NAME with hash tables 2x /
    4x larger; every other mode pins CUWFST_POOL_FULL=none. NAME-keep (NAME pooled): NAME whose
    instances keep what they grew (CUWFST_RESCUE_TRIM=off, CUWFST_MAIN_TRIM=off: what the trims
    around a rescue cost a pass; "pooled-keep" is this for "pooled"). NAME-lqF: NAME whose pooled
    1-best lanes may hold F x main_q (CUWFST_POOL_LANE_Q=F), so a row past main_q needs no
    rescue; every other mode pins CUWFST_POOL_LANE_Q=1."""
    if mode == "pooled-default":
        return "pooled", dict.fromkeys(POOL_VARS)
    if re.search(r"-lq\d+$", mode):  # NAME-lqF: NAME whose pooled lanes may hold F x main_q
        base, f = mode.rsplit("-lq", 1)
        memory, env = mode_env(base)
        return memory, dict(env, CUWFST_POOL_LANE_Q=f)
    if mode.endswith("-keep") and mode != "pooled-keep":
        memory, env = mode_env(mode[: -len("-keep")])
        if memory != "pooled":
            raise ValueError(f"{mode}: -keep applies to pooled modes")
        return memory, dict(env, CUWFST_RESCUE_TRIM="off", CUWFST_MAIN_TRIM="off")
    suffix = next((k for k in FULL_SUFFIXES if mode.endswith(k)), None)
    full = FULL_SUFFIXES[suffix] if suffix else "none"
    if suffix:
        mode = mode[: -len(suffix)]
    slot = mode.endswith("-slot")
    memory, env = mode_settings(mode[: -len("-slot")] if slot else mode)
    return memory, dict(env, CUWFST_PAYLOAD="slot" if slot else "token", CUWFST_POOL_FULL=full, CUWFST_POOL_LANE_Q="1")


def mode_settings(mode: str) -> tuple[str, dict]:
    """The memory mode and the pool settings ($CUWFST_POOL_BOUND, $CUWFST_POOL_HINTS,
    $CUWFST_POOL_HANDOUT) of a benchmark mode: "pooled" (the admissible arcs counted against
    the trim's anchor, adaptive hints, the hand-out in MaxKernel's last block: memory="pooled"'s
    default until 2026-12-02 19:45; "pooled-late-ahead-hostlog" was its default from then until
    2026-12-03 08:47, "pooled-late-ahead-lq2" since: mode "pooled-default" takes it from the library), "pooled-bins"
    (the bins bound), "pooled-slots" (the slots, the rule before admit), "pooled-fixedhints"
    (the admissible arcs with the hints at every 32nd slot: the layout 2f568a0 measured), "pooled-handout" ("pooled" with the hand-out
    in a kernel of its own after MaxKernel), "pooled-keep" ("pooled" whose instances keep what
    they grew, CUWFST_RESCUE_TRIM=off and CUWFST_MAIN_TRIM=off), "pooled-maintrimoff" ("pooled"
    whose main instance keeps its pools' growth while the rescue runs, the rule before),
    "pooled-admit" ("pooled" counting against the scans' best token, CUWFST_POOL_BOUND=admit,
    the rule before),
    "pooled-devlog" ("pooled" with its winners log on the
    device, CUWFST_WINNERS_LOG=device, the rule before; "pooled" keeps it in pinned host memory),
    "pooled-slots-devlog" ("pooled-slots" with its winners log on the device: what the host log
    costs under the slots bound), "pooled-late" ("pooled-slots-devlog" with each lane's next
    frontier sized by its claims after the expansion, CUWFST_POOL_BOUND=claims), "pooled-late-fin"
    ("pooled-late" handed out by FinalizeKernel's CTAs, CUWFST_POOL_BOUND=claims-finalize),
    "pooled-late-ahead" ("pooled-late-fin" with each working CTA's prefix beside its first
    loads, CUWFST_POOL_BOUND=claims-finalize-ahead), "pooled-late-ahead-hostlog" ("pooled-late-ahead"
    with the winners log in pinned host memory, CUWFST_WINNERS_LOG=host),
    "pooled-late-ahead-eager" ("pooled-late-ahead" whose lane pools are cudaMalloc'd regions, moved
    on growth, instead of VMM reservations: CUWFST_LANE_VMM=off, a diagnostic), "lazy-vmm" (lazy
    whose static lanes are one VMM reservation committed whole instead of cudaMalloc'd:
    CUWFST_LANE_VMM=on, a diagnostic), or a plain memory mode."""
    if mode == "lazy-vmm":
        return "lazy", {"CUWFST_LANE_VMM": "on"}
    if not mode.startswith("pooled"):
        return mode, {}
    eager = mode == "pooled-late-ahead-eager"
    hostlog = mode == "pooled-late-ahead-hostlog"
    mode = "pooled-late-ahead" if eager or hostlog else mode
    bound = {"pooled-bins": "bins", "pooled-slots": "slots", "pooled-slots-devlog": "slots",
             "pooled-admit": "admit", "pooled-late": "claims", "pooled-late-fin": "claims-finalize",
             "pooled-late-ahead": "claims-finalize-ahead"}.get(mode, "anchor")
    return "pooled", {"CUWFST_POOL_BOUND": bound,
                      "CUWFST_POOL_HINTS": "fixed" if mode == "pooled-fixedhints" else "adaptive",
                      "CUWFST_POOL_HANDOUT": "kernel" if mode == "pooled-handout" else "lastblock",
                      "CUWFST_RESCUE_TRIM": "off" if mode == "pooled-keep" else "on",
                      "CUWFST_MAIN_TRIM": "off" if mode in ("pooled-keep", "pooled-maintrimoff") else "on",
                      "CUWFST_WINNERS_LOG": "device" if mode in ("pooled-devlog", "pooled-slots-devlog", "pooled-late", "pooled-late-fin",
                                                               "pooled-late-ahead") and not hostlog
                      else "host",
                      "CUWFST_LANE_VMM": "off" if eager else "auto"}


class pool_env:
    """Sets a mode's pool settings while a decoder is built (GpuBackend reads them once, for its
    rescue instance too), then puts the environment back."""

    def __init__(self, mode: str):
        self.memory, self.env = mode_env(mode)

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in self.env}
        for k, v in self.env.items():  # (None: the variable out of the environment, the library's default)
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return self.memory

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return False


def memory_row(torch, graph_path, lp, lens, batch, mode, opts, gc_interval: int = 128) -> tuple[dict, object, object]:
    """Build a decoder (a graph of its own) in `mode` (a memory mode, or a pooled variant of
    mode_env: "pooled-slots", "pooled-bins", "pooled-fixedhints", "pooled-handout"), decode
    everything once; its memory, four ways (the module docstring's 1.). Returns
    (row, decoder, hypotheses). (At 2f568a0 "lazy" pooled the lanes by default: its rows were
    named lazy and lazy-slots; they are this pooled and pooled-slots.)"""
    from benchmarks.peers.measure import GpuMemoryProbe

    used0, mod0 = _used(torch), _module_bytes()
    _module_peak(reset=True)
    base, gc = mode_gc(mode, gc_interval)
    # the device peak the same way as riva's (riva_row): cudaMemGetInfo sampled by a thread,
    # so a transient (the rescue instance's growth before its trim) counts too
    with pool_env(base) as memory, GpuMemoryProbe(torch, PROBE_INTERVAL) as probe:
        t = time.perf_counter()
        graph = Graph.load(graph_path)
        dec = Decoder(graph, opts, device="cuda", max_lanes=batch, memory=memory, gc_interval=gc)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        hyps = _decode_all(dec, lp, lens, batch)
        first_s = time.perf_counter() - t
    used1, mod1 = _used(torch), _module_bytes()
    mod_peak = _module_peak() - mod0
    st = dec.memory_stats()
    lanes, winners = st["pools"]["lanes"], st["pools"]["winners"]
    row = dict(part="memory", batch=batch, memory=mode, build_s=round(build_s, 2), first_pass_s=round(first_s, 3),
               device_used_mib=round((used1 - used0) / MiB, 1), device_peak_mib=round(probe.device_peak / MiB, 1),
               module_mib=round((mod1 - mod0) / MiB, 1), module_peak_mib=round(mod_peak / MiB, 1),
               # the module's counted peak plus what it does not count (CUDA context, graph
               # executables, PyTorch) as it stands after the decodes: the peak the sampler
               # should have seen
               counted_peak_mib=round((mod_peak + (used1 - used0) - (mod1 - mod0)) / MiB, 1),
               stats_total_mib=round(st["total"] / MiB, 1), graph_mib=round(st["graph"] / MiB, 1),
               committed_mib=round(st["committed"] / MiB, 1), reserved_mib=round(st["reserved"] / MiB, 1),
               fixed_mib=round(st["fixed"] / MiB, 1), lanes_mib=round(lanes["committed"] / MiB, 1),
               lanes_pooled=lanes["pooled"], lane_pool_grows=lanes["grows"],
               winners_mib=round(winners["committed"] / MiB, 1),
               winners_host_mib=round(winners["host_committed"] / MiB, 1), pinned_mib=round(st["pinned"] / MiB, 1),
               winners_high_water=st["winners_high_water"],
               winners_grows=winners["grows"], paths_mib=round(st["pools"]["paths"]["committed"] / MiB, 1),
               rescue_instance="rescue" in st["instances"], overflow_rows=sum(1 for h in hyps if h.overflow),
               max_frontier=max(h.max_frontier for h in hyps))
    return row, dec, hyps


def riva_row(torch, riva_dir, lp, lens, batch) -> dict:
    from benchmarks.peers import PeerUnavailable
    from benchmarks.peers.measure import GpuMemoryProbe
    from benchmarks.peers.riva_peer import RivaPeer

    corpus = SimpleNamespace(path=lambda name: os.path.join(riva_dir, name), vocab_size=int(lp.shape[2]),
                             frame_shift=0.04)
    cfg = SimpleNamespace(beam=20.0, lattice_beam=8.0, max_active=10000)
    try:
        with GpuMemoryProbe(torch, PROBE_INTERVAL) as probe:
            peer = RivaPeer(corpus, batch, cfg)
            t = time.perf_counter()
            for s in range(0, lp.shape[0], batch):
                peer.decode(lp[s : s + batch], lens[s : s + batch])
            secs = time.perf_counter() - t
        del peer
    except (PeerUnavailable, FileNotFoundError, OSError) as e:
        return dict(part="memory", decoder="riva", batch=batch, skipped=str(e))
    return dict(part="memory", decoder="riva", batch=batch, device_peak_mib=round(probe.device_peak / MiB, 1),
                first_pass_s=round(secs, 3), graph="TLG.fst")


def speed_rows(torch, graph, decs, lp, lp_host, lens, batch, reps, check) -> tuple[list, bool]:
    """Alternating timed passes of the decoders in `decs` ({mode: decoder}), medians; rows
    agree between modes and with the CPU on --check rows."""
    times = {m: [] for m in decs}
    hyps = {}
    for _ in range(reps):
        for m, dec in decs.items():
            torch.cuda.synchronize()
            t = time.perf_counter()
            hyps[m] = _decode_all(dec, lp, lens, batch)
            times[m].append(time.perf_counter() - t)
    modes = list(decs)
    ok = True
    disagree = 0
    for i in range(lp.shape[0]):
        if not all(_same(graph, lp_host[i], hyps[modes[0]][i], hyps[m][i]) for m in modes[1:]):
            disagree += 1
    ok &= disagree == 0
    bad_cpu = []
    if check:
        cpu = Decoder(graph, num_threads=os.cpu_count() or 1).decode(lp_host[:check], lens[:check])
        bad_cpu = [i for i in range(check) if not _same(graph, lp_host[i], cpu[i], hyps[modes[0]][i])]
        ok &= not bad_cpu
    audio_s = float(lens.sum()) * 0.04
    rows = []
    base = statistics.median(times[modes[-1]])
    for m in modes:
        med = statistics.median(times[m])
        rows.append(dict(part="speed", batch=batch, memory=m, pass_s=round(med, 4), rtfx=round(audio_s / med, 1),
                         vs_eager=round(med / base, 4), rows_disagreeing=disagree, cpu_checked=check,
                         cpu_mismatches=bad_cpu))
    return rows, ok


def tile(lp_host, lens, frames) -> np.ndarray:
    rows = [lp_host[i, : lens[i]] for i in range(len(lens)) if lens[i] > 0]
    out, n = [], 0
    while n < frames:
        for r in rows:
            out.append(r[: frames - n])
            n += out[-1].shape[0]
            if n >= frames:
                break
    return np.concatenate(out)[None]


def long_rows(torch, graph, lp_host, lens, frames, gc_interval) -> tuple[list, bool]:
    long = tile(lp_host, lens, frames)
    lp = torch.from_numpy(long).cuda()
    rows, got = [], {}
    for k in (8, 4, 2, 1):
        T = frames // k
        dec = Decoder(graph, device="cuda", max_lanes=1, gc_interval=gc_interval)
        t = time.perf_counter()
        h = dec.decode(lp[:, :T])[0]
        secs = time.perf_counter() - t
        st = dec.memory_stats()
        m = st["instances"]["main"]
        rows.append(dict(part="long", gc_interval=gc_interval, frames=T, decode_s=round(secs, 2),
                         winners_committed_mib=round(st["pools"]["winners"]["committed"] / MiB, 1),
                         winners_capacity=st["pools"]["winners"]["capacity_entries"],
                         winners_live_max=m["winners_live_max"], gc_rounds=m["gc_rounds"],
                         total_mib=round(st["total"] / MiB, 1), words=len(h.words), score=h.score,
                         overflow=h.overflow))
        got[T] = h
        del dec
        gc.collect()
    # without GC the whole utterance's winners stay: ~600 a frame on the full tier, 108 M entries
    # for 180,000 frames, past a one-lane decoder's log limit (64 Mi entries); 16 lanes give
    # 256 Mi (the limit grows 16 Mi a lane), and the unused lanes cost nothing pooled
    dec = Decoder(graph, device="cuda", max_lanes=16, memory="pooled")
    t = time.perf_counter()
    off = dec.decode(lp)[0]
    secs = time.perf_counter() - t
    st = dec.memory_stats()
    on = got[frames]
    same = _same(graph, long[0], on, off) and on.words == off.words
    rows.append(dict(part="long", gc_interval=0, frames=frames, decode_s=round(secs, 2),
                     winners_committed_mib=round(st["pools"]["winners"]["committed"] / MiB, 1),
                     winners_capacity=st["pools"]["winners"]["capacity_entries"],
                     winners_high_water=st["winners_high_water"], total_mib=round(st["total"] / MiB, 1),
                     words=len(off.words), score=off.score, overflow=off.overflow, identical_to_gc=same,
                     score_bits_equal=bool(np.float32(on.score) == np.float32(off.score))))
    return rows, same


def markdown(rows, header) -> str:
    out = [header, ""]
    mem = [r for r in rows if r["part"] == "memory" and "decoder" not in r]
    if mem:
        out += ["| batch | memory | total MiB (device used) | device peak MiB | module MiB | memory_stats total MiB | graph | lanes | "
                "winners | winners in host memory | pinned host MiB | paths | fixed | reserved MiB | pool grows | log grows | "
                "overflow rows |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in mem:
            out.append(f"| {r['batch']} | {r['memory']} | {r['device_used_mib']} | {r['device_peak_mib']} | "
                       f"{r['module_mib']} | "
                       f"{r['stats_total_mib']} | {r['graph_mib']} | {r['lanes_mib']}"
                       f"{' (pooled)' if r['lanes_pooled'] else ''} | {r['winners_mib']} | {r.get('winners_host_mib', 0)} | "
                       f"{r.get('pinned_mib', '')} | {r['paths_mib']} | "
                       f"{r['fixed_mib']} | {r['reserved_mib']} | {r['lane_pool_grows']} | {r['winners_grows']} | "
                       f"{r['overflow_rows']} |")
    for r in rows:
        if r.get("decoder") == "riva":
            out.append(f"\nriva, batch {r['batch']}: " + (f"skipped ({r['skipped']})" if "skipped" in r else
                       f"device peak {r['device_peak_mib']} MiB (TLG.fst), first pass {r['first_pass_s']} s"))
    sp = [r for r in rows if r["part"] == "speed"]
    if sp:
        out += ["", "| batch | memory | s per pass | RTFx | time vs eager | rows disagreeing | CPU mismatches |",
                "|---|---|---|---|---|---|---|"]
        for r in sp:
            out.append(f"| {r['batch']} | {r['memory']} | {r['pass_s']} | {r['rtfx']} | {r['vs_eager']} | "
                       f"{r['rows_disagreeing']} | {len(r['cpu_mismatches'])}/{r['cpu_checked']} |")
    lg = [r for r in rows if r["part"] == "long"]
    if lg:
        out += ["", "| gc_interval | frames | decode s | winners committed MiB | log capacity | live max | GC rounds | "
                "total MiB | words | score |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in lg:
            out.append(f"| {r['gc_interval']} | {r['frames']} | {r['decode_s']} | {r['winners_committed_mib']} | "
                       f"{r['winners_capacity']} | {r.get('winners_live_max', '-')} | {r.get('gc_rounds', '-')} | "
                       f"{r['total_mib']} | {r['words']} | {r['score']:.4f} |")
        last = lg[-1]
        out.append(f"\nGC on and off identical (words, float32 score): {last['identical_to_gc']}")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", required=True)
    p.add_argument("--log-probs", required=True, help=".npz with log_probs [N, T, V] and lengths")
    p.add_argument("--utts", type=int, default=256)
    p.add_argument("--batch", type=int, nargs="+", default=[32, 256])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--check", type=int, default=8, help="rows compared with the CPU decoder")
    p.add_argument("--riva-dir", help="a corpus directory with TLG.fst and words.txt: riva's memory too")
    p.add_argument("--long-frames", type=int, default=180_000)
    p.add_argument("--gc-interval", type=int, default=128)
    p.add_argument("--skip", nargs="*", default=[], choices=["memory", "speed", "long", "riva"])
    p.add_argument("--modes", nargs="+", default=["pooled-default", "lazy", "eager"], choices=MODES,
                   help="decoders per batch size (the speed A/B takes them at the first; eager last is the base); "
                        "pooled-default is memory=\"pooled\" with the library's defaults (the pool variables out "
                        "of the environment), \"pooled\" the anchor bound (its default before 2026-12-02 19:45)")
    p.add_argument("--json", help="append rows as JSON lines here")
    p.add_argument("--md", help="write the tables here")
    a = p.parse_args(argv)
    import torch

    from benchmarks.peers.measure import git_commit

    d = np.load(a.log_probs)
    key = "log_probs" if "log_probs" in d.files else "log_probs_fp16"
    lp_host = np.ascontiguousarray(np.asarray(d[key][: a.utts], np.float32))
    lens = d["lengths"][: a.utts].astype(np.int32)
    lp = torch.from_numpy(lp_host).cuda()
    opts = DecoderOptions()
    commit, dev = git_commit(), torch.cuda.get_device_name(0)
    header = (f"benchmarks.memory on {dev}, commit {commit}: {a.graph}, {lp_host.shape[0]} utterances "
              f"(mean T {lens.mean():.0f}, max {lens.max()}), batches {a.batch}")
    print(header, flush=True)
    rows, ok = [], True
    decs = {}
    for B in a.batch:
        for memory in sorted(a.modes, key=MODES.index):  # eager last: the speed table's base
            if "memory" in a.skip:
                continue
            row, dec, _ = memory_row(torch, a.graph, lp, lens, B, memory, opts, a.gc_interval)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if B == a.batch[0] and "speed" not in a.skip:
                decs[memory] = dec  # kept for the speed A/B
            else:
                del dec
            gc.collect()
        if a.riva_dir and "riva" not in a.skip:
            row = riva_row(torch, a.riva_dir, lp, lens, B)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if decs:
        graph = next(iter(decs.values())).graph
        sp, good = speed_rows(torch, graph, decs, lp, lp_host, lens, a.batch[0], a.reps, a.check)
        rows += sp
        ok &= good
        for r in sp:
            print(json.dumps(r), flush=True)
        decs.clear()
        gc.collect()
    if a.long_frames > 0 and "long" not in a.skip:
        lr, same = long_rows(torch, Graph.load(a.graph), lp_host, lens, a.long_frames, a.gc_interval)
        rows += lr
        ok &= same
        for r in lr:
            print(json.dumps(r), flush=True)
    for r in rows:
        r.update(commit=commit, device=dev, graph=a.graph)
    if a.json:
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    md = markdown(rows, header)
    print(md)
    if a.md:
        Path(a.md).write_text(md)
    print("memory benchmark:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
