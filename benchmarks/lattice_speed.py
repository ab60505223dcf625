"""Lattice speed, measured in one run: the GPU decoder with lattice=True against lattice=False
(the ratio the issue bounds), the split of a GPU lattice decode into its device part (the
search with the lattice stage, the records' readback) and its host parts (the CPU
reference's replay and pruning of the records; word times and confidences), the CPU
decoder's lattice speed, lattice sizes (arcs per frame) and exactness (GPU lattices equal to
the CPU's on the first --check rows).

python -m benchmarks.lattice_speed --graph HLG.img --log-probs shard-00000.npz --utts 128 --batch 32
python -m benchmarks.lattice_speed --graph HLG.img --log-probs shard-00000.npz --batch 16 --long 1000 2000 4000 8000
  (lattice memory vs frames: bounded against the whole-batch path, same run)
Times whole decodes (host to host) after a warm-up; medians of --reps.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph


def _median_time(fn, reps: int, sync) -> tuple[float, object]:
    fn()  # warm-up: build, capture, first allocations
    times, out = [], None
    for _ in range(reps):
        out = None  # the last pass's results dropped before the clock starts (freeing them is not the decode's)
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


LATTICE_FIELDS = ("src", "dst", "frame", "graph_arc", "token", "acoustic", "graph_score", "score", "state_graph",
                  "state_frame", "state_level")


def _with_attr(obj, name: str, value, fn):
    """fn() with obj.name set to value (a backend switch such as lattice_pipeline), set back to
    None (the switch's default) afterwards, also when fn raises."""
    setattr(obj, name, value)
    try:
        return fn()
    finally:
        setattr(obj, name, None)


def _host_prof_install():
    """--host-prof: wraps the lattice host work's parts (cuwfst.decoder.lattice's
    lattices_from_arrays, attach_all, word_times_many and the native calls they make) so each
    call appends (part, thread name, start, end) to the returned list; the second value undoes
    it. Timing only: the same functions run."""
    import threading

    from cuwfst.decoder import lattice as lat_mod

    calls = []

    def timed(name, fn):
        def wrapped(*args, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                calls.append((name, threading.current_thread().name, t0, time.perf_counter()))
        return wrapped

    class _Mod:  # the native module with its lattice calls timed
        def __init__(self, mod):
            self._mod = mod

        def __getattr__(self, k):
            f = getattr(self._mod, k)
            return timed(k, f) if k.startswith("ref_lattices_") else f

    saved = {k: getattr(lat_mod, k) for k in ("lattices_from_arrays", "attach_all", "word_times_many",
                                              "_reference_module")}
    for k in ("lattices_from_arrays", "attach_all", "word_times_many"):
        setattr(lat_mod, k, timed(k, saved[k]))
    real_mod = saved["_reference_module"]
    lat_mod._reference_module = lambda: _Mod(real_mod())

    def undo():
        for k, v in saved.items():
            setattr(lat_mod, k, v)
    return calls, undo


def _print_host_prof(calls, t_tail: float, label: str) -> dict:
    """--host-prof's lines: the parts of the host work that started in the tail (at or after
    t_tail), each summed over its calls (ms), with its call and thread counts, and the span from
    the tail's first part to its last part's end."""
    tail = [c for c in calls if c[2] >= t_tail]
    if not tail:
        return {}
    out = {}
    for name in dict.fromkeys(c[0] for c in tail):
        cs = [c for c in tail if c[0] == name]
        out[name] = dict(ms=sum(c[3] - c[2] for c in cs) * 1000, calls=len(cs), threads=len({c[1] for c in cs}),
                         span_ms=(max(c[3] for c in cs) - min(c[2] for c in cs)) * 1000)
    span = (max(c[3] for c in tail) - min(c[2] for c in tail)) * 1000
    print(f"{label}: the tail's host work by part (ms summed over calls / calls / threads / span): " + "; ".join(
        f"{k} {v['ms']:.2f} / {v['calls']} / {v['threads']} / {v['span_ms']:.2f}" for k, v in out.items()) +
        f"; from its first part's start to its last's end {span:.2f} ms (a part's time includes the parts it calls)")
    return dict(parts=out, span_ms=span)


def _with_env(name: str, value: str, fn):
    """fn() with the environment variable `name` set to `value` (the native side reads the
    pruning's switches at each decode), its previous value (or absence) restored afterwards."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        return fn()
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _paired(run, sync, pairs: int, nb: int) -> dict:
    """--paired: `pairs` pairs of passes, each a 1-best pass (`run(False)`) then a lattice pass
    (`run(True)`) right after it, the lattice / 1-best ratio taken within each pair (a drift of
    the machine between the two timings of a side moves both of a pair alike). The ratios' median,
    range and how many pairs are above x1.5, and each kind's median ms a batch (nb batches a pass)."""
    ratios, t1s, t2s = [], [], []
    for _ in range(pairs):
        ts = []
        for lattice in (False, True):
            sync()
            t0 = time.perf_counter()
            out = run(lattice)
            sync()
            ts.append(time.perf_counter() - t0)
            del out
        t1s.append(ts[0])
        t2s.append(ts[1])
        ratios.append(ts[1] / ts[0])
    return dict(ratios=ratios, median=statistics.median(ratios), min=min(ratios), max=max(ratios),
                over=sum(1 for r in ratios if r > 1.5), ms_1best=statistics.median(t1s) / nb * 1000,
                ms_lattice=statistics.median(t2s) / nb * 1000)


def _same_lattices(xs, ys) -> int:
    """Rows whose lattices are identical (arcs, frames, graph arcs, tokens, float32 scores,
    states, levels, recorded arcs where both counted them: the lattice trim does not), and whose
    words and float32 1-best scores are, and whose word times and confidences are where the two
    1-best paths are (a path of the same score may differ: an exact-score tie, `_ties`)."""
    return sum(1 for x, y in zip(xs, ys)
               if x.words == y.words and np.float32(x.score) == np.float32(y.score) and
               (_tie(x, y) or (x.word_times, x.word_confidences) == (y.word_times, y.word_confidences)) and
               (x.lattice is None) == (y.lattice is None) and
               (x.lattice is None or (x.lattice.num_states == y.lattice.num_states and
                                      (x.lattice.recorded_arcs is None or y.lattice.recorded_arcs is None or
                                       x.lattice.recorded_arcs == y.lattice.recorded_arcs) and
                                      all(np.array_equal(getattr(x.lattice, f), getattr(y.lattice, f))
                                          for f in LATTICE_FIELDS))))


def _tie(x, y) -> bool:
    """Two hypotheses of one row whose 1-best paths (arcs, redirect) differ."""
    return (list(x.arcs), x.redirect_arc) != (list(y.arcs), y.redirect_arc)


def _ties(xs, ys) -> int:
    """Rows whose 1-best paths differ (of the same float32 score where _same_lattices counts them)."""
    return sum(1 for x, y in zip(xs, ys) if _tie(x, y))


def _recorded(hyps):
    """The rows' recorded arcs summed; None when a row did not count them (the lattice trim)."""
    r = [h.lattice.recorded_arcs for h in hyps if h.lattice is not None]
    return None if any(x is None for x in r) else sum(r)



def gap_samples(text: str) -> list[list[tuple[str, list[str]]]]:
    """faulthandler's repeated dumps (dump_traceback_later, repeat) parsed: a list a sample of
    (thread header, its frames' lines, innermost first) for each thread."""
    samples, thread = [], None
    for line in text.splitlines():
        if line.startswith(("Thread 0x", "Current thread 0x")):
            if thread is None or any(line.split(" (most")[0] == h.split(" (most")[0] for h, _ in samples[-1]):
                samples.append([])  # (a thread seen again: the next sample)
            thread = (line.strip(), [])
            samples[-1].append(thread)
        elif line.startswith("  File ") and thread is not None:
            thread[1].append(line.strip())
    return samples


def _print_gap_samples(text: str, head: str) -> None:
    samples = gap_samples(text)
    print(f"{head}: the call's end sampled {len(samples)} times (each 2 ms past the locals' drops)")
    seen = {}
    for sample in samples:
        for header, frames in sample:
            key = (header.split(" (most")[0].replace("Current thread", "Thread"), tuple(frames[:3]))
            seen[key] = seen.get(key, 0) + 1
    for (thread, frames), n in sorted(seen.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {n} x {thread}: " + " <- ".join(f[5:].replace(', line ', ':') for f in frames)[:400])


def _print_replay_split(rp, t_call, t_done, head):
    """The records replay's share of a traced lattice call (graphs with epsilon arcs; decoder/gpu.py
    lattice_trace_replay): per sub-batch the calling thread's decode call and the records' copy to
    the host, and its host job's parts (hypotheses, the replay with the Lattice objects, word times
    and confidences), each job's wait after its records were on the host, and the call's tail."""
    subs = [e for e in rp if e.get("stamps") is not None]
    if not subs:
        return
    dec = [(e["stamps"][1] - e["stamps"][0]) * 1000 for e in subs]
    copy = [(e["stamps"][2] - e["stamps"][1]) * 1000 for e in subs]
    recs = [e["stamps"][3] for e in subs]
    jobs = [e for e in subs if e.get("job") is not None]
    f = lambda xs: " ".join(f"{x:.1f}" for x in xs)  # noqa: E731
    print(f"{head}: records replay path, {len(subs)} sub-batches: decode call {f(dec)} ms; records' copy to "
          f"the host {f(copy)} ms; records {' '.join(f'{r / 1e6:.2f}M' for r in recs)}")
    if jobs:
        j = [e["job"] for e in jobs]
        print(f"{head}: its host jobs: waited {f((x[0] - e['stamps'][2]) * 1000 for x, e in zip(j, jobs))} ms after "
              f"their records; hypotheses {f((x[1] - x[0]) * 1000 for x in j)} ms; replay and Lattice objects "
              f"{f((x[2] - x[1]) * 1000 for x in j)} ms; word times and confidences {f((x[3] - x[2]) * 1000 for x in j)} "
              f"ms; the call {(t_done - t_call) * 1000:.1f} ms, its tail after the last records' copy "
              f"{(t_done - subs[-1]['stamps'][2]) * 1000:.1f} ms")

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--graph", required=True)
    p.add_argument("--log-probs", required=True, help=".npz with log_probs [N, T, V] and lengths")
    p.add_argument("--utts", type=int, default=128)
    p.add_argument("--batch", type=int, nargs="+", default=[32])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--output-beam", type=float, default=8.0)
    p.add_argument("--cpu-utts", type=int, default=32, help="utterances the CPU decoder times (0: none)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads of the decoders (host numbering aside: word times and confidences, the CPU "
                        "decoder, the replay); default: the decoder's own, min(8, CPUs)")
    p.add_argument("--check", type=int, default=8, help="rows whose GPU lattice is compared with the CPU's")
    p.add_argument("--profile", action="store_true", help="kernel split of a lattice decode at the largest batch")
    p.add_argument("--json", help="append results as JSON lines here")
    p.add_argument("--no-replay", action="store_true", help="skip the host-replay half of the A/B")
    p.add_argument("--trim-ab", action="store_true", help="the lattice trim off, same decoder, same run")
    p.add_argument("--cand-ab", action="store_true",
                   help="candidate mode off (CUWFST_LATTICE_CAND=off: LatPersistKernel walks every lane-step), then on "
                        "again, same decoder")
    p.add_argument("--prefilter-ab", action="store_true",
                   help="LatPersistKernel's prefilter off (CUWFST_LATTICE_PREFILTER=off), then on again, same decoder")
    p.add_argument("--number-ab", action="store_true", help="the host numbering, same decoder, same run")
    p.add_argument("--walker", default="auto", help="the GPU decoder's slot walker (Decoder's walker=)")
    p.add_argument("--overlap-ab", action="store_true",
                   help="the sub-batches' host work after each GPU decode instead of beside the next (HostOverlap off)")
    p.add_argument("--eps-filter-ab", action="store_true",
                   help="the records' filter on epsilon graphs off and on again, same decoder, same run")
    p.add_argument("--pipeline-ab", action="store_true",
                   help="each sub-batch pruned before the next decode instead of beside it (lattice_pipeline off), "
                        "then on again, same decoder")
    p.add_argument("--finish-ab", action="store_true",
                   help="each sub-batch's pruning finished on a thread of its own, its host work then on the worker "
                        "(lattice_finish thread), against the default (both on the worker), then the default again, "
                        "same decoder, each with its trace")
    p.add_argument("--gather-ab", action="store_true",
                   help="with --pipeline-ab: the sub-batches' rows copied into a packed tensor first (row_gather "
                        "copy), 1-best and lattice, then read in place again")
    p.add_argument("--host-off-diag", action="store_true",
                   help="with --pipeline-ab: a diagnostic timing without the worker's Lattice objects, word times "
                        "and confidences (no lattices come back)")
    p.add_argument("--switch-us", type=float, default=None,
                   help="with --pipeline-ab: one more timing with sys.setswitchinterval at this many microseconds "
                        "(how long a thread waits for the GIL; Python's default 5,000), then the default again")
    p.add_argument("--one-call", action="store_true",
                   help="each pass decodes every utterance in one decode() call (max_lanes = the batch): the lattice "
                        "decode's sub-batches, each one's host work beside the next one's GPU decode; the 1-best by "
                        "the decoder's default batching. Without it: one call a batch, one sub-batch each")
    p.add_argument("--anchor-ab", action="store_true",
                   help="decoders built with CUWFST_MAX_KNOWN=off and CUWFST_MAX_ANCHOR=off beside the default (the "
                        "max from the trim's anchor, known lanes left out), 1-best and lattice, same run (--profile: splits)")
    p.add_argument("--env-ab", nargs="+", default=None, metavar="NAME:VAR=VAL[,VAR=VAL]",
                   help="one decoder per side, built with those environment variables set (the native side reads the "
                        "grids and switches at construction), timed beside the default one, 1-best and lattice, same "
                        "run, the default timed again last; identical results required (--profile: splits). E.g. "
                        "max512:CUWFST_MAX_BLOCKS=512")
    p.add_argument("--paired", type=int, default=0, metavar="N",
                   help="N pairs of passes with the default decoder, each a 1-best pass then a lattice pass, the "
                        "lattice / 1-best ratio taken within each pair (median, range, pairs above x1.5)")
    p.add_argument("--switch-interval", type=float, default=None, metavar="S",
                   help="Python's thread switch interval for the whole run, every side and traced call included "
                        "(sys.setswitchinterval; default 0.005 s: how long a thread that wants the GIL waits before "
                        "asking its holder to drop it); --switch-us times one extra pipelined pass under its own")
    p.add_argument("--trace-sides", action="store_true",
                   help="with --env-ab and --one-call: each side's traced call too (its tail, every job's finish and "
                        "host work), as the default's")
    p.add_argument("--gap-dump", default=None, metavar="PREFIX",
                   help="with --one-call: each traced call's end (the frame's locals dropped to the decoder's lock "
                        "left) sampled: every Python thread's stack each 2 ms by faulthandler's thread (no GIL "
                        "needed) into PREFIX.<side>.txt, and what the samples show printed")
    p.add_argument("--host-prof", action="store_true",
                   help="with --one-call: the traced calls' host work in the call's tail (after the last decode call "
                        "returned) timed by part (the native lookups and passes, the Python around them), each part "
                        "summed over its calls, and how many threads ran it")
    p.add_argument("--code-ab", action="store_true",
                   help="the pruning's rank keys with the arc id (CUWFST_PRUNE_CODE=arc), then the default again, same run")
    p.add_argument("--filter-ab", action="store_true",
                   help="also time lattice decodes with the records' filter off (CUWFST_LATTICE_FILTER), same run")
    p.add_argument("--long", type=int, nargs="*", default=None, metavar="T",
                   help="lattice memory vs input length instead: rows of T frames (utterances concatenated; "
                        "default 1000 2000 4000 8000), bounded (CUWFST_LATTICE_CHUNK, default 64) against the "
                        "whole-batch path (chunk 0), a fresh decoder each, batch --batch[0]")
    a = p.parse_args()
    if a.switch_interval is not None:
        if not a.switch_interval > 0:
            p.error(f"--switch-interval must be positive, got {a.switch_interval}")
        sys.setswitchinterval(a.switch_interval)
    if a.long is not None:
        return long_main(a)
    import torch

    from benchmarks.peers.measure import git_commit
    from cuwfst.decoder.gpu import EPS_REDO
    from cuwfst.decoder.lattice import attach, attach_all, lattices_from_arrays
    from cuwfst.decoder.lattice_records import lattices_from_records

    g = Graph.load(a.graph)
    d = np.load(a.log_probs)
    lp_all, lens_all = d["log_probs"][: a.utts], d["lengths"][: a.utts].astype(np.int32)
    opts = DecoderOptions(output_beam=a.output_beam)
    commit = os.environ.get("CUWFST_COMMIT") or git_commit()
    dev = torch.cuda.get_device_name(0)
    n = len(lens_all)
    audio_s = float(lens_all.sum()) * 0.04
    print(f"graph {a.graph}: {g.num_states} states, {g.num_arcs} arcs, {g.num_epsilon_arcs} epsilon arcs; "
          f"{n} utts, mean T {lens_all.mean():.0f}; output_beam {a.output_beam}; {dev}; "
          f"{a.threads or min(8, os.cpu_count() or 1)} CPU threads; "
          f"commit {commit}")
    lp_gpu = torch.from_numpy(lp_all).cuda()
    sync = torch.cuda.synchronize
    results = []
    gpu_lats = None
    tag = " (one call)" if a.one_call else ""
    for B in a.batch:
        dec = Decoder(g, opts, device="cuda", max_lanes=B, num_threads=a.threads, walker=a.walker)
        be = be_main = dec._gpu

        def run(lattice, dec=dec):
            if a.one_call:
                return dec.decode(lp_gpu, lens_all, lattice=lattice)
            out = []
            for s in range(0, n, B):
                out += dec.decode(lp_gpu[s : s + B], lens_all[s : s + B], lattice=lattice)
            return out

        cap0 = be.main.mem_stats().get("graph_captures", 0)
        t_best, hyps = _median_time(lambda: run(False), a.reps, sync)
        cap1 = be.main.mem_stats().get("graph_captures", 0)
        # A/B in one run: the GPU's own pruning ("gpu", gpu_lattice_prune.cu) and the host's
        # replay of every record ("replay", the path before it); their lattices must be equal
        # (epsilon graphs: the GPU prunes where the closure is exact, GpuBackend.lattice_prune_on_gpu;
        # CUWFST_LATTICE_PRUNE_EPS=replay times the replay)
        be.lattice_prune = "gpu"
        slots0 = be.main.mem_stats().get("slots", 0)
        t_lat, lat_hyps = _median_time(lambda: run(True), a.reps, sync)
        prune_ms = dict(be.main.last_prune_ms) if hasattr(be.main, "last_prune_ms") else {}
        st_on = be.main.mem_stats()
        slots_on = st_on.get("slots", 0) - slots0  # the walkers' slots of these lattice passes
        # CUDA graphs captured during the timed passes (warm-up included): 1-best, lattice
        captures = (cap1 - cap0, st_on.get("graph_captures", 0) - cap1)
        print(f"batch {B}{tag}: CUDA graphs captured during the timed passes: 1-best {captures[0]}, lattice "
              f"{captures[1]}")
        filter_ab = {}
        if a.filter_ab:  # the records' filter off, same decoder (its buffers grow to the unfiltered records)
            t_nf, nf_hyps = _with_attr(be, "lattice_filter", "off",
                                       lambda: _median_time(lambda: run(True), a.reps, sync))
            st_off = be.main.mem_stats()
            filter_ab = dict(ms_per_batch_filter_off=t_nf / ((n + B - 1) // B) * 1000,
                             filter_off_over_on=t_nf / t_lat, identical_rows=_same_lattices(lat_hyps, nf_hyps),
                             # every lattice pass over the utterances so far: the warm-up and the reps
                             dropped_per_pass=st_on["lattice_filter_dropped"] / (a.reps + 1),
                             reruns=st_on["lattice_filter_reruns"],
                             lattice_mib_on=st_on["lattice_bytes"] / 2**20,
                             lattice_mib_off=st_off["lattice_bytes"] / 2**20,
                             capacity_on=st_on["lattice_capacity"], capacity_off=st_off["lattice_capacity"])
        trim_ab = {}
        if a.trim_ab:  # the lattice trim off, same decoder: every arc of a step walked and counted
            slots1 = be.main.mem_stats().get("slots", 0)
            t_nt, nt_hyps = _with_attr(be, "lattice_trim", "off",
                                       lambda: _median_time(lambda: run(True), a.reps, sync))
            slots_off = be.main.mem_stats().get("slots", 0) - slots1
            trim_ab = dict(ms_per_batch_trim_off=t_nt / ((n + B - 1) // B) * 1000, trim_off_over_on=t_nt / t_lat,
                           identical_rows=_same_lattices(lat_hyps, nt_hyps),
                           # the walkers' slots of the passes each way (warm-up and reps, the same count)
                           slots_on=slots_on, slots_off=slots_off,
                           recorded_arcs_off=sum(h.lattice.recorded_arcs for h in nt_hyps if h.lattice is not None))
            print(f"batch {B}: lattice trim A/B: on {t_lat / ((n + B - 1) // B) * 1000:.1f} ms, off "
                  f"{trim_ab['ms_per_batch_trim_off']:.1f} ms per batch (off/on {trim_ab['trim_off_over_on']:.3f}); "
                  f"lattices identical on {trim_ab['identical_rows']}/{n} rows; walkers' slots {slots_on:,} on vs "
                  f"{slots_off:,} off (same passes)")
        prefilter_ab = {}
        if a.prefilter_ab:  # LatPersistKernel probes every walked slot's destination, then the default again
            t_pf, pf_hyps = _with_env("CUWFST_LATTICE_PREFILTER", "off", lambda: _median_time(lambda: run(True),
                                                                                               a.reps, sync))
            t_pf2, pf2_hyps = _median_time(lambda: run(True), a.reps, sync)
            nb_ = (n + B - 1) // B
            prefilter_ab = dict(ms_per_batch_on=t_lat / nb_ * 1000, ms_per_batch_off=t_pf / nb_ * 1000,
                                ms_per_batch_on_again=t_pf2 / nb_ * 1000,
                                identical_rows=min(_same_lattices(lat_hyps, pf_hyps), _same_lattices(lat_hyps, pf2_hyps)))
            print(f"batch {B}{tag}: prefilter A/B: on {prefilter_ab['ms_per_batch_on']:.1f}, off "
                  f"{prefilter_ab['ms_per_batch_off']:.1f}, on again {prefilter_ab['ms_per_batch_on_again']:.1f} ms "
                  f"per batch; lattices identical on {prefilter_ab['identical_rows']}/{n} rows")
        cand_ab = {}
        if a.cand_ab:  # LatPersistKernel walks every lane-step (no candidates), then the default again
            st0 = be.main.mem_stats()
            t_c, c_hyps = _with_env("CUWFST_LATTICE_CAND", "off", lambda: _median_time(lambda: run(True), a.reps, sync))
            t_c2, c2_hyps = _median_time(lambda: run(True), a.reps, sync)
            st1 = be.main.mem_stats()
            nb_ = (n + B - 1) // B
            cand_ab = dict(ms_per_batch_on=t_lat / nb_ * 1000, ms_per_batch_off=t_c / nb_ * 1000,
                           ms_per_batch_on_again=t_c2 / nb_ * 1000,
                           identical_rows=min(_same_lattices(lat_hyps, c_hyps), _same_lattices(lat_hyps, c2_hyps)),
                           cand_steps=st_on.get("lattice_cand_steps", 0), cand_over=st_on.get("lattice_cand_over", 0),
                           cand_steps_during_ab=st1.get("lattice_cand_steps", 0) - st0.get("lattice_cand_steps", 0))
            if a.profile:  # the kernels with candidates off (LatPersistKernel walks) and on, same decoder
                cand_ab["kernel_ms_off"] = _with_env("CUWFST_LATTICE_CAND", "off",
                                                     lambda: _split(be.main, lambda: run(True), nb_))
                cand_ab["kernel_ms_on"] = _split(be.main, lambda: run(True), nb_)
                for k in ("off", "on"):
                    ms = cand_ab[f"kernel_ms_{k}"]
                    print(f"batch {B}{tag}: candidates {k}, kernel ms a lattice batch: " +
                          ", ".join(f"{kk} {v:.2f}" for kk, v in ms.items() if v > 0) + f"; sum {sum(ms.values()):.2f}")
            print(f"batch {B}{tag}: candidates A/B: on {cand_ab['ms_per_batch_on']:.1f}, off "
                  f"{cand_ab['ms_per_batch_off']:.1f}, on again {cand_ab['ms_per_batch_on_again']:.1f} ms per batch; "
                  f"lattices identical on {cand_ab['identical_rows']}/{n} rows; candidate lane-steps so far "
                  f"{cand_ab['cand_steps']:,} (of them walked for overflow {cand_ab['cand_over']:,})")
        number_ab = {}
        if a.number_ab:  # the host numbering (lattice_number.h), same decoder: the device numbering's A/B
            t_nh, nh_hyps, pm_host = _with_env("CUWFST_LATTICE_NUMBER", "host", lambda: (
                *_median_time(lambda: run(True), a.reps, sync), dict(be.main.last_prune_ms)))
            number_ab = dict(ms_per_batch_host_numbering=t_nh / ((n + B - 1) // B) * 1000,
                             host_over_device=t_nh / t_lat, identical_rows=_same_lattices(lat_hyps, nh_hyps),
                             last_prune_ms_host=pm_host, last_prune_ms_device=prune_ms)
            print(f"batch {B}: numbering A/B: device {t_lat / ((n + B - 1) // B) * 1000:.1f} ms, host "
                  f"{number_ab['ms_per_batch_host_numbering']:.1f} ms per batch (host/device "
                  f"{number_ab['host_over_device']:.3f}); lattices identical on {number_ab['identical_rows']}/{n} rows; "
                  f"last batch's numbering {prune_ms.get('host', float('nan')):.1f} vs {pm_host.get('host', float('nan')):.1f} ms")
        def off_ab(attr):  # the backend attribute `attr` "off", then the default again, same decoder
            t_off, off_hyps = _with_attr(be, attr, "off", lambda: _median_time(lambda: run(True), a.reps, sync))
            t_on2, _ = _median_time(lambda: run(True), a.reps, sync)
            nb_ = (n + B - 1) // B
            return dict(ms_per_batch_on=t_lat / nb_ * 1000, ms_per_batch_off=t_off / nb_ * 1000,
                        ms_per_batch_on_again=t_on2 / nb_ * 1000, identical_rows=_same_lattices(lat_hyps, off_hyps)), nb_

        eps_filter_ab = {}
        if a.eps_filter_ab:  # the records' filter on epsilon graphs off, then on again, same decoder
            eps_filter_ab, nb_ = off_ab("lattice_eps_filter")
            eps_filter_ab["redone_rows"] = int(be.stats.get("eps_filter_redone_rows", 0))
            print(f"batch {B}{tag}: records' filter on epsilon graphs A/B: on {eps_filter_ab['ms_per_batch_on']:.1f}, "
                  f"off {eps_filter_ab['ms_per_batch_off']:.1f}, on again {eps_filter_ab['ms_per_batch_on_again']:.1f} ms "
                  f"per batch ({nb_} batches); lattices identical on {eps_filter_ab['identical_rows']}/{n} rows "
                  f"(recorded-arc counts aside); rows its guard sent back so far {eps_filter_ab['redone_rows']}")
        overlap_ab = {}
        if a.overlap_ab:  # the sub-batches' host work after each GPU decode (HostOverlap off), same decoder
            overlap_ab, nb_ = off_ab("lattice_overlap")
            print(f"batch {B}{tag}: host overlap A/B: on {overlap_ab['ms_per_batch_on']:.1f}, off "
                  f"{overlap_ab['ms_per_batch_off']:.1f}, on again {overlap_ab['ms_per_batch_on_again']:.1f} ms per "
                  f"batch ({nb_} batches); lattices identical on {overlap_ab['identical_rows']}/{n} rows")
        # the calling thread's share of a pipelined lattice decode: each sub-batch's wait for the
        # pruning before last, its decode call (decode + records into the pruning job), and the
        # time from one sub-batch's call to the next's start (Python, the GIL)
        def traced(label, dec_=None):
            # (dec_: another decoder, an --env-ab side; its backend in place of the default's)
            be = dec_._gpu if dec_ is not None else be_main
            be.lattice_trace, be.lattice_trace_worker, be.lattice_trace_replay = [], [], []
            be.lattice_trace_exit = be.lattice_trace_end = be.lattice_trace_unlocked = None
            be.lattice_trace_drops = be.lattice_trace_dropped = be.lattice_trace_returned = None
            be.lattice_trace_host_drops = None
            gap_file = open(f"{a.gap_dump}.{label.replace(' ', '_')}.txt", "w+") if a.gap_dump else None
            be.lattice_trace_gap_dump = gap_file
            stats0 = dict(be.stats)  # the rescue's counts before the call
            # Python's cyclic collections during the call (a full one over the live hypotheses,
            # Lattice objects and torch's objects took 44 ms on the 2-core dev VM): (generation,
            # start, end) each, whichever thread ran it
            collections, started = [], {}

            def on_gc(phase, info):
                if phase == "start":
                    started["t"] = time.perf_counter()
                elif "t" in started:
                    collections.append((info["generation"], started.pop("t"), time.perf_counter()))

            gc.callbacks.append(on_gc)
            prof_calls, prof_undo = _host_prof_install() if a.host_prof else (None, None)
            try:
                t_call = time.perf_counter()
                res = run(True, dec=dec_ if dec_ is not None else dec)
                t_done = time.perf_counter()
                del res
                t_freed = time.perf_counter()
            finally:
                gc.callbacks.remove(on_gc)
                if prof_undo is not None:
                    prof_undo()
                if gap_file is not None:
                    import faulthandler

                    faulthandler.cancel_dump_traceback_later()
                    be.lattice_trace_gap_dump = None
            t_exit, t_end, t_unlocked = be.lattice_trace_exit, be.lattice_trace_end, be.lattice_trace_unlocked
            drops, t_dropped, t_returned = be.lattice_trace_drops, be.lattice_trace_dropped, be.lattice_trace_returned
            if gap_file is not None:
                gap_file.seek(0)
                _print_gap_samples(gap_file.read(), f"batch {B}{tag} ({label})")
                gap_file.close()
            rescue_delta = {k: v - stats0.get(k, 0) for k, v in be.stats.items()
                            if isinstance(v, int) and k != "flagged_bits" and v != stats0.get(k, 0)}
            tr, be.lattice_trace = be.lattice_trace, None
            rp, be.lattice_trace_replay = be.lattice_trace_replay, None
            if rp:
                _print_replay_split(rp, t_call, t_done, f"batch {B}{tag} ({label})")
            # (sorted by the finish's start, the sub-batches' order: with several host workers the
            # jobs are stamped as each ends)
            wk, be.lattice_trace_worker = sorted(be.lattice_trace_worker or []), None
            if not tr:
                return {}
            # stamps a sub-batch: entered _decode_rows, rows taken, before and after the wait for
            # the pruning before last, the decode call returned
            gaps = [b[0] - a_[4] for a_, b in zip(tr, tr[1:])]
            out = dict(sub_batches=len(tr), take_ms=statistics.mean(x[1] - x[0] for x in tr) * 1000,
                       drain_ms=statistics.mean(x[3] - x[2] for x in tr) * 1000,
                       begin_ms=statistics.mean(x[4] - x[3] for x in tr) * 1000,
                       gap_ms=statistics.mean(gaps) * 1000 if gaps else float("nan"))
            print(f"batch {B}{tag} ({label}): the calling thread a sub-batch: rows {out['take_ms']:.2f} ms, waits for "
                  f"the pruning before last {out['drain_ms']:.2f} ms, decode call {out['begin_ms']:.2f} ms, from one "
                  f"call's return to the next sub-batch {out['gap_ms']:.2f} ms ({len(tr)} sub-batches)")
            # the tail: from the last decode call's return to the end of the call, and the worker's
            # jobs (each the pruning's finish, then the host work: rows, Lattice objects, word times)
            out.update(call_ms=(t_done - t_call) * 1000, tail_ms=(t_done - tr[-1][4]) * 1000,
                       freed_ms=(t_freed - t_done) * 1000)
            # the collections: per generation how many and their ms, in the call and in its tail
            tail0 = tr[-1][4]
            out["gc"] = {g_: dict(n=sum(1 for c in collections if c[0] == g_),
                                  ms=sum((c[2] - c[1]) * 1000 for c in collections if c[0] == g_ and c[2] <= t_done),
                                  tail_ms=sum((c[2] - max(c[1], tail0)) * 1000 for c in collections
                                              if c[0] == g_ and c[2] > tail0 and c[2] <= t_done))
                         for g_ in (0, 1, 2)}
            print(f"batch {B}{tag} ({label}): Python's collections in the call: " + "; ".join(
                f"gen {g_}: {v['n']}, {v['ms']:.1f} ms ({v['tail_ms']:.1f} in the tail)" for g_, v in out["gc"].items()))
            if t_exit is not None:  # the tail split: to the host work's end (HostOverlap's exit), then to the return
                out.update(tail_to_exit_ms=(t_exit - tr[-1][4]) * 1000, exit_to_return_ms=(t_done - t_exit) * 1000)
                print(f"batch {B}{tag} ({label}): the tail: {out['tail_to_exit_ms']:.1f} ms until the host work "
                      f"was done (the overlap's exit), {out['exit_to_return_ms']:.1f} ms from there to the call's "
                      f"return; dropping the call's hypotheses took {out['freed_ms']:.1f} ms")
            if t_exit is not None and t_end is not None:  # the exit's share: the rescue, then the return
                out.update(exit_to_rescued_ms=(t_end - t_exit) * 1000, rescued_to_return_ms=(t_done - t_end) * 1000,
                           rescue=rescue_delta, flagged_bits=be.stats.get("flagged_bits", 0))
                print(f"batch {B}{tag} ({label}): from the exit: {out['exit_to_rescued_ms']:.1f} ms to the rescue's "
                      f"end, {out['rescued_to_return_ms']:.1f} ms from there to the return; the rescue's counts in the "
                      f"call: {rescue_delta or 'none'} (flagged bits so far {out['flagged_bits']:#x}; every call so far, "
                      f"the 1-best passes too: {be.stats})")
            if t_end is not None and t_unlocked is not None:  # the rescue's end to the return: the decoder's part
                out.update(rescued_to_unlocked_ms=(t_unlocked - t_end) * 1000, unlocked_to_return_ms=(t_done - t_unlocked) * 1000)
                print(f"batch {B}{tag} ({label}): from the rescue's end: {out['rescued_to_unlocked_ms']:.1f} ms to the "
                      f"decoder's lock left (the decode's frame and its locals gone), {out['unlocked_to_return_ms']:.1f} ms "
                      f"from there to the return")
            if drops and t_dropped is not None and t_unlocked is not None:  # that stretch's first part by local
                out.update(frame_drops_ms=drops, dropped_to_unlocked_ms=(t_unlocked - t_dropped) * 1000)
                print(f"batch {B}{tag} ({label}): the frame's locals dropped: " +
                      ", ".join(f"{k} {v:.1f} ms" for k, v in drops.items()) +
                      f"; then {out['dropped_to_unlocked_ms']:.1f} ms to the lock left (the frame's return)")
                hd = be.lattice_trace_host_drops
                if hd:
                    out["host_drops"] = hd
                    print(f"batch {B}{tag} ({label}): the overlap's parts dropped: {hd['futures']} futures "
                          f"{hd['futures_ms']:.1f} ms (slowest: " + ", ".join(
                              f"#{i} {k} {ms:.1f} ms" for ms, i, k in hd["slowest"]) +
                          f"), its host pool {hd['pool_ms']:.1f} ms, its finish pool {hd['finish_ms']:.1f} ms")
                if t_returned is not None:
                    out.update(dropped_to_returned_ms=(t_returned - t_dropped) * 1000,
                               returned_to_unlocked_ms=(t_unlocked - t_returned) * 1000)
                    print(f"batch {B}{tag} ({label}): of that, {out['dropped_to_returned_ms']:.1f} ms to the decode's "
                          f"frame returned (in the lock), {out['returned_to_unlocked_ms']:.1f} ms to the lock left")
            if wk:
                out.update(worker_finish_ms=[(x[1] - x[0]) * 1000 for x in wk],
                           worker_host_ms=[(x[3] - x[2]) * 1000 for x in wk],
                           worker_host_wait_ms=[(x[2] - x[1]) * 1000 for x in wk],
                           # the host work's parts: hypotheses, Lattice objects (ref_lattices_arcs and
                           # _word_ids), word times and confidences (attach_all: ref_lattices_word_rests)
                           worker_hyps_ms=[(x[4] - x[2]) * 1000 for x in wk],
                           worker_lattices_ms=[(x[5] - x[4]) * 1000 for x in wk],
                           worker_attach_ms=[(x[3] - x[5]) * 1000 for x in wk],
                           worker_start_after_call_ms=[(x[0] - c[4]) * 1000 for x, c in zip(wk, tr)],
                           last_job_start_in_tail_ms=(wk[-1][0] - tr[-1][4]) * 1000)
                print(f"batch {B}{tag} ({label}): the call {out['call_ms']:.1f} ms, its tail after the last decode "
                      f"{out['tail_ms']:.1f} ms (the last job started {out['last_job_start_in_tail_ms']:.1f} ms into it); "
                      f"the worker's jobs: finish " + " ".join(f"{x:.1f}" for x in out['worker_finish_ms']) +
                      " ms; host " + " ".join(f"{x:.1f}" for x in out['worker_host_ms']) + " ms (waited " +
                      " ".join(f"{x:.1f}" for x in out['worker_host_wait_ms']) + " ms after its finish); each started "
                      + " ".join(f"{x:.1f}" for x in out['worker_start_after_call_ms']) + " ms after its decode call")
                print(f"batch {B}{tag} ({label}): the host work's parts a job: hypotheses " +
                      " ".join(f"{x:.1f}" for x in out['worker_hyps_ms']) + " ms; Lattice objects " +
                      " ".join(f"{x:.1f}" for x in out['worker_lattices_ms']) + " ms; word times and confidences " +
                      " ".join(f"{x:.1f}" for x in out['worker_attach_ms']) + " ms")
            if prof_calls is not None:
                out["host_prof"] = _print_host_prof(prof_calls, tr[-1][4], f"batch {B}{tag} ({label})")
            return out

        trace = traced("rows in place" if be.row_gather_in_place(be.main) else "rows copied")
        finish_ab = {}
        if a.finish_ab:  # the pruning's finish on a thread of its own (lattice_finish "thread"), same decoder
            t_ft, ft_hyps, trace_ft = _with_attr(be, "lattice_finish", "thread", lambda: (
                *_median_time(lambda: run(True), a.reps, sync), traced("finish thread")))
            t_fw, _ = _median_time(lambda: run(True), a.reps, sync)
            trace_fw = traced("finish on the worker, again")
            nb_ = (n + B - 1) // B
            finish_ab = dict(ms_per_batch_worker=t_lat / nb_ * 1000, ms_per_batch_thread=t_ft / nb_ * 1000,
                             ms_per_batch_worker_again=t_fw / nb_ * 1000,
                             identical_rows=_same_lattices(lat_hyps, ft_hyps), trace_thread=trace_ft,
                             trace_worker_again=trace_fw)
            print(f"batch {B}{tag}: finish A/B: on the worker {finish_ab['ms_per_batch_worker']:.2f}, on a thread "
                  f"{finish_ab['ms_per_batch_thread']:.2f}, on the worker again {finish_ab['ms_per_batch_worker_again']:.2f}"
                  f" ms per batch; lattices identical on {finish_ab['identical_rows']}/{n} rows")
        pipeline_ab = {}
        if a.pipeline_ab:  # each sub-batch pruned before the next decode (lattice_pipeline off), same decoder
            t_pl, pl_hyps = _with_attr(be, "lattice_pipeline", "off",
                                       lambda: _median_time(lambda: run(True), a.reps, sync))
            t_pl2, pl2_hyps = _median_time(lambda: run(True), a.reps, sync)
            nb_ = (n + B - 1) // B
            pipeline_ab = dict(ms_per_batch_on=t_lat / nb_ * 1000, ms_per_batch_off=t_pl / nb_ * 1000,
                               ms_per_batch_on_again=t_pl2 / nb_ * 1000,
                               identical_rows=min(_same_lattices(lat_hyps, pl_hyps), _same_lattices(lat_hyps, pl2_hyps)),
                               mem_committed_mib=be.main.mem_stats()["committed"] / 2**20)
            if a.gather_ab:  # the rows copied into a packed tensor first (_take_rows), 1-best and lattice
                (t_bc, bc_hyps), (t_lc, lc_hyps), trace_copy = _with_attr(be, "row_gather", "copy", lambda: (
                    _median_time(lambda: run(False), a.reps, sync), _median_time(lambda: run(True), a.reps, sync),
                    traced("rows copied")))
                t_b2, _ = _median_time(lambda: run(False), a.reps, sync)
                t_l2, _ = _median_time(lambda: run(True), a.reps, sync)
                pipeline_ab.update(gather_copy_ms_1best=t_bc / nb_ * 1000, gather_copy_ms_lattice=t_lc / nb_ * 1000,
                                   gather_native_again_ms_1best=t_b2 / nb_ * 1000,
                                   gather_native_again_ms_lattice=t_l2 / nb_ * 1000,
                                   gather_identical_rows=_same_lattices(lat_hyps, lc_hyps),
                                   gather_same_1best=sum(1 for x, y in zip(hyps, bc_hyps) if x.words == y.words and
                                                         np.float32(x.score) == np.float32(y.score)),
                                   trace_copy=trace_copy)
                print(f"batch {B}{tag}: rows copied first: 1-best {t_bc / nb_ * 1000:.1f}, lattice {t_lc / nb_ * 1000:.1f}; "
                      f"in place again: 1-best {t_b2 / nb_ * 1000:.1f}, lattice {t_l2 / nb_ * 1000:.1f} ms per batch "
                      f"(in place first: 1-best {t_best / nb_ * 1000:.1f}, lattice {t_lat / nb_ * 1000:.1f}); lattices "
                      f"identical on {pipeline_ab['gather_identical_rows']}/{n}, 1-best on "
                      f"{pipeline_ab['gather_same_1best']}/{n}")
            if a.host_off_diag:  # diagnostic: the worker builds no Lattice objects, word times or confidences
                import cuwfst.decoder.lattice as lat_mod
                real = lat_mod.attach_all, lat_mod.lattices_from_arrays
                lat_mod.attach_all = lambda *x, **k: None
                lat_mod.lattices_from_arrays = lambda *x, **k: []
                try:
                    t_ho, _ = _median_time(lambda: run(True), a.reps, sync)
                    trace_ho = traced("no host work on the worker")
                finally:
                    lat_mod.attach_all, lat_mod.lattices_from_arrays = real
                pipeline_ab.update(host_off_ms=t_ho / nb_ * 1000, trace_host_off=trace_ho)
                print(f"batch {B}{tag}: pipeline on without the worker's host work (diagnostic, no lattices): "
                      f"{t_ho / nb_ * 1000:.1f} ms per batch")
            if a.switch_us:  # the calling thread's waits for the GIL, shorter (the worker runs Python meanwhile)
                before_si = sys.getswitchinterval()
                sys.setswitchinterval(a.switch_us / 1e6)
                try:
                    t_sw, sw_hyps = _median_time(lambda: run(True), a.reps, sync)
                finally:
                    sys.setswitchinterval(before_si)
                pipeline_ab.update(switch_us=a.switch_us, ms_per_batch_switch=t_sw / nb_ * 1000,
                                   identical_rows_switch=_same_lattices(lat_hyps, sw_hyps))
                print(f"batch {B}{tag}: pipeline on, GIL switch interval {a.switch_us:.0f} us: "
                      f"{pipeline_ab['ms_per_batch_switch']:.1f} ms per batch; lattices identical on "
                      f"{pipeline_ab['identical_rows_switch']}/{n} rows")
            print(f"batch {B}{tag}: pruning pipeline A/B: on {pipeline_ab['ms_per_batch_on']:.1f}, off "
                  f"{pipeline_ab['ms_per_batch_off']:.1f}, on again {pipeline_ab['ms_per_batch_on_again']:.1f} ms per "
                  f"batch ({nb_} batches); lattices identical on {pipeline_ab['identical_rows']}/{n} rows; committed "
                  f"{pipeline_ab['mem_committed_mib']:,.0f} MiB")
        code_ab = {}
        if a.code_ab:  # the rank keys' arc part as the arc id (CUWFST_PRUNE_CODE=arc), then the default again
            t_arc, arc_hyps, pm_arc = _with_env("CUWFST_PRUNE_CODE", "arc", lambda: (
                *_median_time(lambda: run(True), a.reps, sync), dict(be.main.last_prune_ms)))
            t_place2, place2_hyps = _median_time(lambda: run(True), a.reps, sync)
            pm_place2 = dict(be.main.last_prune_ms)
            nb_ = (n + B - 1) // B
            code_ab = dict(ms_per_batch_place=t_lat / nb_ * 1000, ms_per_batch_arc=t_arc / nb_ * 1000,
                           ms_per_batch_place_again=t_place2 / nb_ * 1000,
                           identical_rows=_same_lattices(lat_hyps, arc_hyps),
                           identical_rows_again=_same_lattices(lat_hyps, place2_hyps),
                           last_prune_ms_arc=pm_arc, last_prune_ms_place_again=pm_place2,
                           last_prune_ms_place=prune_ms)
            print(f"batch {B}: rank keys A/B: place {code_ab['ms_per_batch_place']:.1f}, arc id "
                  f"{code_ab['ms_per_batch_arc']:.1f}, place again {code_ab['ms_per_batch_place_again']:.1f} ms per "
                  f"batch; lattices identical on {code_ab['identical_rows']}/{n} and {code_ab['identical_rows_again']}/{n} "
                  f"rows; last batch's prune device passes {prune_ms.get('device', float('nan')):.1f} / "
                  f"{pm_arc.get('device', float('nan')):.1f} / {pm_place2.get('device', float('nan')):.1f} ms")
        if a.filter_ab:
            print(f"batch {B}: records' filter A/B: on {t_lat / ((n + B - 1) // B) * 1000:.1f} ms, off "
                  f"{filter_ab['ms_per_batch_filter_off']:.1f} ms per batch (off/on {filter_ab['filter_off_over_on']:.3f});"
                  f" lattices identical on {filter_ab['identical_rows']}/{n} rows; records capacity "
                  f"{filter_ab['capacity_on']} vs {filter_ab['capacity_off']}, lattice buffers "
                  f"{filter_ab['lattice_mib_on']:.0f} vs {filter_ab['lattice_mib_off']:.0f} MiB; guard re-runs "
                  f"{filter_ab['reruns']}")
        t_lat_replay = float("nan")
        ab_identical = None
        if not a.no_replay:
            be.lattice_prune = "replay"
            t_lat_replay, replay_hyps = _median_time(lambda: run(True), a.reps, sync)
            ab_identical = _same_lattices(lat_hyps, replay_hyps)
            print(f"batch {B}: GPU pruning {t_lat / ((n + B - 1) // B) * 1000:.1f} ms vs host replay "
                  f"{t_lat_replay / ((n + B - 1) // B) * 1000:.1f} ms per batch; lattices identical on "
                  f"{ab_identical}/{n} rows (arcs, frames, graph arcs, tokens, float32 scores, states, levels)")
            be.lattice_prune = None
        gpu_lats = lat_hyps if gpu_lats is None else gpu_lats
        # the GPU pruning path's split, every part of a batch (ms per batch, medians of --reps):
        # the native call (decode with records + pruning), of it the pruning's device passes,
        # readback and numbering (on the device, or the host's with CUWFST_LATTICE_NUMBER=host;
        # decode = native - those), the rows into numpy, the
        # Lattice objects (lattice_from_arrays), the hypotheses (_collect), word times and
        # confidences (attach); "other" is the whole decode() of the A/B less their sum
        # (where the records are replayed instead, e.g. an epsilon graph below its chain: no split)
        be.lattice_prune = "gpu"
        keys = ("native", "decode", "device", "readback", "host", "rows", "arrays", "collect", "attach", "sum")
        splits = []
        eps = getattr(be.main, "eps_iterations", 0) > 0
        eps_filter = eps and be.lattice_eps_filter_on(be.main)
        for _ in range(a.reps if be.lattice_prune_on_gpu(be.main) else 0):
            acc = dict.fromkeys(keys, 0.0)
            for s in range(0, n, B):
                lens = np.ascontiguousarray(lens_all[s : s + B])
                sync()
                t0 = time.perf_counter()
                # (the backend's settings, as _decode_rows takes them; on an epsilon graph its own
                # filter and trim, whole batches; a row its filter's guard sent back (EPS_REDO) is
                # left out here)
                res, lat_rows = be.main.decode_lattice_pruned(
                    lp_gpu[s : s + B], lens, be._stream(), a.output_beam,
                    chunk=0 if eps else be.lattice_chunk_steps(int(lens.max()) + 1),
                    filter=eps_filter if eps else be.lattice_filter_on(), trim=be.lattice_trim_on() and not eps,
                    eps_trim=eps_filter and be.lattice_eps_trim_on())
                t1 = time.perf_counter()
                pm = be.main.last_prune_ms
                lat_rows = [None if r is EPS_REDO else r for r in lat_rows]
                built = iter(lattices_from_arrays(g, [r for r in lat_rows if r is not None], dec.num_threads))
                lats = [None if r is None else next(built) for r in lat_rows]
                t2 = time.perf_counter()
                hs = [None] * len(lens)
                be._collect(hs, range(len(lens)), res, dec)
                t3 = time.perf_counter()
                attach_all(g, [h for h, lat in zip(hs, lats) if lat is not None], [x for x in lats if x is not None],
                           dec.num_threads)
                t4 = time.perf_counter()
                for k in ("native", "device", "readback", "host", "rows"):
                    acc[k] += pm[k]
                acc["decode"] += pm["native"] - pm["device"] - pm["readback"] - pm["host"]
                acc["arrays"] += (t2 - t1) * 1000
                acc["collect"] += (t3 - t2) * 1000
                acc["attach"] += (t4 - t3) * 1000
                acc["sum"] += (t4 - t0) * 1000
            splits.append(acc)
        nb = (n + B - 1) // B
        prune_split = {k: statistics.median(x[k] for x in splits) / nb if splits else float("nan") for k in keys}
        prune_split["other"] = t_lat / nb * 1000 - prune_split["sum"]
        be.lattice_prune = None
        print(f"batch {B}: GPU pruning path split, ms per batch: decode with records {prune_split['decode']:.1f}, "
              f"pruning device passes {prune_split['device']:.1f}, readback {prune_split['readback']:.1f}, "
              f"numbering {prune_split['host']:.1f}, rows into numpy {prune_split['rows']:.1f}, Lattice objects "
              f"{prune_split['arrays']:.1f}, hypotheses {prune_split['collect']:.1f}, word times and confidences "
              f"{prune_split['attach']:.1f}; sum {prune_split['sum']:.1f} of {t_lat / nb * 1000:.1f} "
              f"(other: input checks, row selection, Python {prune_split['other']:.1f})")
        # the split: the device part (decode with records, readback) and the host part
        dev_t, host_t, attach_t = [], [], []
        for _ in range(0 if a.no_replay else a.reps):
            td = th = ta = 0.0
            for s in range(0, n, B):
                lens = np.ascontiguousarray(lens_all[s : s + B])
                sync()
                t0 = time.perf_counter()
                res, rec = be.main.decode_lattice(lp_gpu[s : s + B], lens, be._stream())
                t1 = time.perf_counter()
                lats, _ = lattices_from_records(be.reference_graph(), g, opts, be.main.eps_iterations, lens, rec,
                                                dec.num_threads)
                t2 = time.perf_counter()
                hs = [None] * len(lens)
                be._collect(hs, range(len(lens)), res, dec)
                for h, lat in zip(hs, lats):
                    if lat is not None:
                        attach(g, h, lat)
                t3 = time.perf_counter()
                td += t1 - t0
                th += t2 - t1
                ta += t3 - t2
            dev_t.append(td)
            host_t.append(th)
            attach_t.append(ta)
        frames = float((lens_all + 1).sum())
        arcs = sum(h.lattice.num_arcs for h in lat_hyps if h.lattice is not None)
        recorded = _recorded(lat_hyps)
        nb = (n + B - 1) // B
        row = dict(kind="gpu", batch=B, ms_per_batch_1best=t_best / nb * 1000, ms_per_batch_lattice=t_lat / nb * 1000,
                   ms_per_batch_lattice_replay=t_lat_replay / nb * 1000, replay_identical_rows=ab_identical,
                   last_prune_ms=prune_ms, prune_split_ms=prune_split, filter_ab=filter_ab, trim_ab=trim_ab,
                   number_ab=number_ab, code_ab=code_ab, overlap_ab=overlap_ab, eps_filter_ab=eps_filter_ab, pipeline_ab=pipeline_ab, finish_ab=finish_ab, trace=trace, captures=captures, prefilter_ab=prefilter_ab, cand_ab=cand_ab, walker=be.walker, one_call=a.one_call,
                   lattice_over_1best=t_lat / t_best,
                   # the calling thread's decode call a sub-batch (the steady state, without the call's tail)
                   # against the 1-best's batch
                   decode_call_over_1best=(trace.get("begin_ms", float("nan")) / (t_best / ((n + B - 1) // B) * 1000)
                                           if trace else float("nan")), rtfx_1best=audio_s / t_best, rtfx_lattice=audio_s / t_lat,
                   device_ms_per_batch=statistics.median(dev_t) / nb * 1000 if dev_t else float("nan"),
                   host_ms_per_batch=statistics.median(host_t) / nb * 1000 if host_t else float("nan"),
                   attach_ms_per_batch=statistics.median(attach_t) / nb * 1000 if attach_t else float("nan"),
                   lattice_arcs_per_frame=arcs / frames,
                   recorded_arcs_per_frame=None if recorded is None else recorded / frames,
                   no_lattice_rows=sum(h.lattice is None for h in lat_hyps),
                   overflow_rows=sum(1 for h in lat_hyps if h.overflow),
                   same_1best=sum(1 for x, y in zip(hyps, lat_hyps) if x.words == y.words and
                                  np.float32(x.score) == np.float32(y.score)),
                   mem_committed_mib=be.main.mem_stats()["committed"] / 2**20,
                   # the records the filter let through: the most held at once (a whole batch's in a one-run
                   # decode), the lane-steps recorded from ExpandKernel's candidates and those walked again
                   live_records_high=st_on.get("lattice_live_records", 0),
                   cand_steps=st_on.get("lattice_cand_steps", 0), cand_over=st_on.get("lattice_cand_over", 0),
                   cand_final_steps=st_on.get("lattice_cand_final_steps", 0),
                   frames_per_batch=frames / nb)
        results.append(row)
        print(f"batch {B}{tag}: records held at most {row['live_records_high']:,} "
              f"({row['live_records_high'] / max(row['frames_per_batch'], 1):.1f} a frame of a batch); candidate "
              f"lane-steps {row['cand_steps']:,}, walked after overflow {row['cand_over']:,}; final lane-steps from "
              f"candidates {row['cand_final_steps']:,}")
        print(json.dumps(row))
        # the replay path's split (not measured with --no-replay: NaN, left out of the line)
        split = "" if np.isnan(row["device_ms_per_batch"]) else (
            f" of a lattice decode: device {row['device_ms_per_batch']:.1f} ms (search + records + readback), host "
            f"replay and pruning {row['host_ms_per_batch']:.1f} ms, word times and confidences "
            f"{row['attach_ms_per_batch']:.1f} ms;")
        print(f"batch {B}{tag}: lattice {row['ms_per_batch_lattice']:.1f} ms vs 1-best {row['ms_per_batch_1best']:.1f} ms "
              f"per batch (x{row['lattice_over_1best']:.2f}; a sub-batch's decode call, the call's tail aside, "
              + (f"x{row['decode_call_over_1best']:.2f}" if not np.isnan(row['decode_call_over_1best'])
                 else "not timed on this path (the host replay: no pruning begin)")
              + f");{split} {row['lattice_arcs_per_frame']:.1f} "
              f"lattice arcs per frame "
              + (f"({row['recorded_arcs_per_frame']:.1f} recorded before output-beam pruning)"
                 if row["recorded_arcs_per_frame"] is not None else "(recorded arcs not counted: the lattice trim, or the records' filter on epsilon graphs)"))
        print(f"batch {B}: GPU pruning path, last batch: prune device passes {prune_ms.get('device', float('nan')):.1f} ms, "
              f"readback {prune_ms.get('readback', float('nan')):.1f} ms, numbering {prune_ms.get('host', float('nan')):.1f}"
              " ms (the split lines above are the replay path's)")
        if a.profile and B == max(a.batch):
            inst = be.main
            ms = _split(inst, lambda: run(True), nb)
            tot = sum(ms.values())
            be.lattice_prune = None
            print("kernel ms per lattice batch (launch by launch, CUDA events): " +
                  ", ".join(f"{k} {v:.2f} ({100 * v / tot:.0f}%)" for k, v in ms.items() if v > 0) + f"; sum {tot:.2f}")
            row["kernel_ms"] = ms
            # the 1-best decode's kernels, same rows, same decoder (issue 10's search band)
            ms1 = _split(inst, lambda: run(False), nb)
            print("kernel ms per 1-best batch (launch by launch, CUDA events): " +
                  ", ".join(f"{k} {v:.2f}" for k, v in ms1.items() if v > 0) + f"; sum {sum(ms1.values()):.2f}")
            row["kernel_ms_1best"] = ms1
        if a.paired:
            row["paired"] = _paired(run, sync, a.paired, nb)
            pr = row["paired"]
            print(f"batch {B}{tag}: paired passes (1-best then lattice, {a.paired} pairs, same decoder): lattice / "
                  f"1-best a pair median x{pr['median']:.3f}, range x{pr['min']:.3f}-x{pr['max']:.3f}, "
                  f"{pr['over']} of {a.paired} pairs above x1.5; ms a batch, medians: 1-best {pr['ms_1best']:.2f}, "
                  f"lattice {pr['ms_lattice']:.2f}")
        if a.anchor_ab:
            row["anchor_ab"] = _anchor_ab(a, g, opts, B, n, hyps, lat_hyps, t_best, t_lat, sync, run, dec)
        if a.env_ab:
            row["env_ab"] = _env_ab(a, g, opts, B, n, hyps, lat_hyps, t_best, t_lat, sync, run, dec,
                                    traced if a.trace_sides and a.one_call else None)
        del dec, be
    if a.check:
        m = min(a.check, n)
        cpu = Decoder(g, opts, num_threads=a.threads).decode(lp_all[:m], lens_all[:m], lattice=True)
        fields = ("src", "dst", "frame", "graph_arc", "score", "state_graph")
        same = sum(1 for c, h in zip(cpu, gpu_lats) if h.lattice is not None and c.lattice.num_states ==
                   h.lattice.num_states and all(np.array_equal(getattr(c.lattice, f), getattr(h.lattice, f))
                                                for f in fields))
        print(f"exactness: {same}/{m} GPU lattices identical to the CPU decoder's (arcs, frames, graph arcs, "
              "float32 scores, states)")
        results.append(dict(kind="check", rows=m, identical=same))
    if a.cpu_utts:
        m = min(a.cpu_utts, n)
        cdec = Decoder(g, opts, num_threads=a.threads)
        t_cpu, _ = _median_time(lambda: cdec.decode(lp_all[:m], lens_all[:m], lattice=True), max(1, a.reps - 1),
                                lambda: None)
        t_cpu1, _ = _median_time(lambda: cdec.decode(lp_all[:m], lens_all[:m]), max(1, a.reps - 1), lambda: None)
        cpu_audio = float(lens_all[:m].sum()) * 0.04
        row = dict(kind="cpu", utts=m, threads=cdec.num_threads, rtfx_lattice=cpu_audio / t_cpu, rtfx_1best=cpu_audio / t_cpu1,
                   lattice_over_1best=t_cpu / t_cpu1)
        results.append(row)
        print(json.dumps(row))
    if a.json:
        with open(a.json, "a") as f:
            for r in results:
                f.write(json.dumps(dict(r, graph=a.graph, commit=commit, device=dev, host=platform.node(),
                                        output_beam=a.output_beam)) + "\n")


def _split(inst, fn, nb) -> dict:
    """Kernel ms per batch of fn() on GPU instance inst (CUDA events, launch by launch)."""
    before = inst.profile(True)
    fn()
    after = inst.profile(False)
    return {k: (after[k] - before[k]) / nb for k in after}


def _time_side(a, run, dec, nb, sync, hyps, lat_hyps) -> tuple:
    """A decoder's 1-best and lattice passes (main's `run(lattice, dec=)`, a.reps each, median): ms a
    batch of each, and how many rows match the default's (words and float32 score; lattices)."""
    t_b, h_b = _median_time(lambda: run(False, dec=dec), a.reps, sync)
    t_l, h_l = _median_time(lambda: run(True, dec=dec), a.reps, sync)
    same_b = sum(1 for x, y in zip(hyps, h_b) if x.words == y.words and np.float32(x.score) == np.float32(y.score))
    _time_side.ties = _ties(lat_hyps, h_l)  # (the lattice pass's rows whose 1-best path differs: --env-ab prints it)
    return t_b / nb * 1000, t_l / nb * 1000, same_b, _same_lattices(lat_hyps, h_l)


def _anchor_ab(a, g, opts, B, n, hyps, lat_hyps, t_best, t_lat, sync, run, dec_on) -> dict:
    """Same run (`run(lattice, dec=)`: main's pass over the utterances): the default decoder (MaxKernel's running max from the trim's anchor, the lanes
    whose max is the anchor left out; timed above), one built with CUWFST_MAX_KNOWN=off (every
    lane walked from the anchor), one with CUWFST_MAX_ANCHOR=off (from -inf), then the default
    again; 1-best and lattice; identical words, scores and lattices required. (s71 timed a
    token-major kernel here, since removed: docs/speed-notes.md.)"""
    nb = (n + B - 1) // B
    inst_on = dec_on._gpu.main
    out = dict(ms_1best_on=t_best / nb * 1000, ms_lattice_on=t_lat / nb * 1000)
    same_1best = same_lat = n
    insts = {"on": inst_on}
    keep = []  # (every decoder alive until the end: memory is not what is compared)

    def timed(name, dec):  # 1-best and lattice on `dec` (run's own loop), each equal to the default's
        nonlocal same_1best, same_lat
        out[f"ms_1best_{name}"], out[f"ms_lattice_{name}"], sb, sl = _time_side(a, run, dec, nb, sync, hyps, lat_hyps)
        same_1best, same_lat = min(same_1best, sb), min(same_lat, sl)

    for mode, env in (("known_off", "CUWFST_MAX_KNOWN"), ("off", "CUWFST_MAX_ANCHOR")):
        other = _with_env(env, "off", lambda: Decoder(g, opts, device="cuda", max_lanes=B,
                                                      num_threads=a.threads, walker=a.walker))
        keep.append(other)
        timed(mode, other)
        insts[mode] = other._gpu.main
        if a.profile:
            out[f"kernel_ms_1best_{mode}"] = _split(other._gpu.main, lambda: run(False, dec=other), nb)
            out[f"kernel_ms_lattice_{mode}"] = _split(other._gpu.main, lambda: run(True, dec=other), nb)
    timed("on_again", dec_on)
    out["same_1best"], out["same_lattices"] = same_1best, same_lat
    if a.profile:
        out["kernel_ms_1best_on"] = _split(inst_on, lambda: run(False, dec=dec_on), nb)
        out["kernel_ms_lattice_on"] = _split(inst_on, lambda: run(True, dec=dec_on), nb)
    # the switch as each decoder's native side took it (MemStats "max_anchor": 1 on, 0 off) and the
    # slots MaxKernel left out as known lanes, of all the walkers' slots, over every pass so far
    out["max_anchor"] = {k: int(i.mem_stats().get("max_anchor", -1)) for k, i in insts.items()}
    out["max_known_slots"] = {k: (int(i.mem_stats().get("max_known_slots", -1)), int(i.mem_stats()["slots"]))
                              for k, i in insts.items()}
    print(f"batch {B}: max-anchor A/B {out['max_anchor']}, known slots {out['max_known_slots']}, ms a batch: 1-best "
          f"on {out['ms_1best_on']:.2f} / known off {out['ms_1best_known_off']:.2f} / off {out['ms_1best_off']:.2f} / "
          f"on again {out['ms_1best_on_again']:.2f}; lattice on {out['ms_lattice_on']:.2f} / known off "
          f"{out['ms_lattice_known_off']:.2f} / off {out['ms_lattice_off']:.2f} / on again {out['ms_lattice_on_again']:.2f}; "
          f"identical 1-best {same_1best}/{n}, lattices {out['same_lattices']}/{n}")
    for mode in ("on", "known_off", "off"):
        for kind in ("1best", "lattice"):
            k = f"kernel_ms_{kind}_{mode}"
            if k in out:
                print(f"  {k}: " + ", ".join(f"{kk} {v:.2f}" for kk, v in out[k].items() if v > 0) +
                      f"; sum {sum(out[k].values()):.2f}")
    return out


def _env_sides(specs) -> list:
    """--env-ab's sides: [(name, {VAR: VAL, ...})] from "NAME:VAR=VAL[,VAR=VAL]" (a clear error otherwise)."""
    sides = []
    for spec in specs:
        name, sep, rest = spec.partition(":")
        pairs = [x.partition("=") for x in rest.split(",")] if sep else []
        if not name or not pairs or any(not k or not eq for k, eq, _ in pairs):
            raise SystemExit(f"--env-ab: {spec!r} is not NAME:VAR=VAL[,VAR=VAL]")
        sides.append((name, {k: v for k, _, v in pairs}))
    return sides


def _env_ab(a, g, opts, B, n, hyps, lat_hyps, t_best, t_lat, sync, run, dec_on, traced=None) -> dict:
    """Same run: the default decoder (timed above), one decoder per --env-ab side built with its
    environment variables set (sides with the same variables share the first one's), then the
    default again; 1-best and lattice through main's pass (`run(lattice, dec=)`), identical words,
    scores and lattices required; --profile adds each side's kernel split; traced (--trace-sides:
    main's traced(label, dec)) each side's traced call after its timing. The sides' MemStats come
    back too (the grids as the native side took them)."""
    nb = (n + B - 1) // B
    out = dict(ms_1best_default=t_best / nb * 1000, ms_lattice_default=t_lat / nb * 1000, sides={})
    same_1best = same_lat = n
    keep = []  # (every decoder alive until the end: memory is not what is compared)

    def timed(name, dec):
        nonlocal same_1best, same_lat
        # (the side's name on stderr first: scripts/records_prof.py keeps each side's
        # CUWFST_LATTICE_AFTER_PROF lines apart by it)
        print(f"[records-prof] side {name}", file=sys.stderr, flush=True)
        ms_b, ms_l, sb, sl = _time_side(a, run, dec, nb, sync, hyps, lat_hyps)
        r = dict(ms_1best=ms_b, ms_lattice=ms_l, same_lattices=sl, ties=_time_side.ties)
        same_1best, same_lat = min(same_1best, sb), min(same_lat, sl)
        if a.profile:
            inst = dec._gpu.main
            r["kernel_ms_1best"] = _split(inst, lambda: run(False, dec=dec), nb)
            r["kernel_ms_lattice"] = _split(inst, lambda: run(True, dec=dec), nb)
        # the slots one pass walks, 1-best and lattice (MemStats "slots", over the same rows)
        for kind, lat in (("1best", False), ("lattice", True)):
            s0 = int(dec._gpu.main.mem_stats()["slots"])
            run(lat, dec=dec)
            r[f"slots_{kind}"] = int(dec._gpu.main.mem_stats()["slots"]) - s0
        st = dec._gpu.main.mem_stats()
        r["grids"] = {k: int(st.get(k, -1)) for k in ("max_blocks", "expand_blocks", "lat_blocks", "lat_append_block",
                                                        "lat_cand_final", "expand_min_blocks", "lat_min_blocks",
                                                        "label_bound", "lat_clear_keys", "lat_reserve", "lat_tab_packed", "lat_log_fold", "lat_one_grid",
                                                        "lat_c14_index", "lat_log_extra", "lat_chunk")}
        # the last lattice decode's record slots (its cursor; with CUWFST_LATTICE_RESERVE=chunk the holes too)
        r["record_slots"] = int(st.get("lattice_live_records", -1))
        if traced is not None:
            r["trace"] = traced(f"side {name}", dec)
        return r

    built = {}  # a side whose environment an earlier side had takes that side's decoder (a repeat
    # interleaves the timing, not the build; and on the model set each decoder commits ~20 GiB)
    for name, env in _env_sides(a.env_ab):
        def build():
            return Decoder(g, opts, device="cuda", max_lanes=B, num_threads=a.threads, walker=a.walker)
        for k, v in reversed(list(env.items())):
            build = (lambda k=k, v=v, f=build: _with_env(k, v, f))
        same = tuple(sorted(env.items()))
        if same not in built:
            built[same] = build()
            keep.append(built[same])
        out["sides"][name] = dict(timed(name, built[same]), env=env)
    out["sides"]["default_again"] = timed("default_again", dec_on)
    out["same_1best"], out["same_lattices"] = same_1best, same_lat
    print(f"batch {B}: env A/B, ms a batch (1-best / lattice): default {out['ms_1best_default']:.2f} / "
          f"{out['ms_lattice_default']:.2f}; " + "; ".join(
              f"{k} {v['ms_1best']:.2f} / {v['ms_lattice']:.2f}" for k, v in out["sides"].items()) +
          f"; identical 1-best {same_1best}/{n}, lattices {same_lat}/{n}")
    print(f"batch {B}: env A/B, lattice rows identical to the default's / of them 1-best paths of the same score "
          "that differ (exact-score ties: their word times and confidences may differ): " +
          "; ".join(f"{k} {v['same_lattices']} / {v['ties']}" for k, v in out["sides"].items()))
    print(f"batch {B}: env A/B, slots a pass over the {n} rows (1-best / lattice): " + "; ".join(
        f"{k} {v['slots_1best']:,} / {v['slots_lattice']:,}" for k, v in out["sides"].items()))
    for k, v in out["sides"].items():
        for kind in ("1best", "lattice"):
            ms = v.get(f"kernel_ms_{kind}")
            if ms:
                print(f"  {k} {kind} grids {v['grids']}: " + ", ".join(f"{kk} {x:.2f}" for kk, x in ms.items() if x > 0)
                      + f"; sum {sum(ms.values()):.2f}")
    return out


def long_main(a):
    """Lattice memory vs frames: for each T, a batch of rows of T frames (the shard's
    utterances concatenated in order), decoded with lattices by a fresh decoder in the
    bounded mode and in the whole-batch mode (one run; the path before the bound), same
    process: time, the most lattice records held on the device at once, the lattice buffers
    and the decoder's committed bytes, and whether the two modes' lattices are identical."""
    import torch

    from benchmarks.peers.measure import git_commit
    from cuwfst.decoder.gpu import LATTICE_CHUNK_DEFAULT

    g = Graph.load(a.graph)
    d = np.load(a.log_probs)
    lp_all, lens_all = d["log_probs"], d["lengths"].astype(np.int32)
    opts = DecoderOptions(output_beam=a.output_beam)
    commit = os.environ.get("CUWFST_COMMIT") or git_commit()
    dev = torch.cuda.get_device_name(0)
    B = a.batch[0]
    Ts = a.long or [1000, 2000, 4000, 8000]
    env = os.environ.get("CUWFST_LATTICE_CHUNK", "")
    chunk = int(env) if env.strip().lstrip("-").isdigit() else 0
    chunk = chunk or LATTICE_CHUNK_DEFAULT  # unset, "auto" or 0 here: the default chunk (this A/B is bounded vs whole)
    # one long stream of frames: every utterance's frames in order, repeated as needed
    frames = np.concatenate([lp_all[i, : lens_all[i]] for i in range(len(lens_all))])
    need = B * max(Ts)
    if len(frames) < need:
        frames = np.concatenate([frames] * (need // len(frames) + 1))
    print(f"graph {a.graph}: {g.num_states} states; long rows of {Ts} frames, batch {B}; output_beam "
          f"{a.output_beam}; bounded chunk {chunk} steps vs whole; {dev}; commit {commit}")
    results = []
    fields = ("src", "dst", "frame", "graph_arc", "score", "state_graph")
    for T in Ts:
        lp = torch.from_numpy(np.ascontiguousarray(frames[: B * T].reshape(B, T, -1))).cuda()
        lens = np.full(B, T, np.int32)
        lens[1::2] = T - T // 7  # lanes of two lengths
        hyps = {}
        for mode, c in (("bounded", chunk), ("whole", 0)):
            dec = Decoder(g, opts, device="cuda", max_lanes=B, num_threads=a.threads)
            dec._gpu.lattice_chunk = c
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            hyps[mode] = dec.decode(lp, lens, lattice=True)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            t1 = time.perf_counter()
            dec.decode(lp, lens, lattice=True)  # again, warm (grown buffers, captured graphs)
            torch.cuda.synchronize()
            warm = time.perf_counter() - t1
            st = dec._gpu.main.mem_stats()
            arcs = sum(h.lattice.num_arcs for h in hyps[mode] if h.lattice is not None)
            recorded = _recorded(hyps[mode])
            row = dict(kind="long", mode=mode, chunk=c, T=T, batch=B, first_s=dt, warm_s=warm,
                       live_records=st["lattice_live_records"], runs=st["lattice_runs"],
                       lattice_mib=st["lattice_bytes"] / 2**20, prune_mib=st["lattice_prune_bytes"] / 2**20,
                       committed_mib=st["committed"] / 2**20, recorded_arcs=recorded, lattice_arcs=arcs,
                       overflow_rows=sum(1 for h in hyps[mode] if h.overflow))
            results.append(row)
            print(json.dumps(row))
            del dec
            torch.cuda.empty_cache()
        same = sum(1 for x, y in zip(hyps["bounded"], hyps["whole"])
                   if (x.lattice is None) == (y.lattice is None) and
                   (x.lattice is None or (x.lattice.num_states == y.lattice.num_states and
                                          all(np.array_equal(getattr(x.lattice, f), getattr(y.lattice, f))
                                              for f in fields))))
        rb, rw = results[-2], results[-1]
        print(f"T {T}: bounded {rb['live_records']:,} records held at most, lattice buffers {rb['lattice_mib']:.0f} MiB, "
              f"committed {rb['committed_mib']:.0f} MiB, warm {rb['warm_s'] * 1000:.0f} ms ({rb['runs']} runs) | whole "
              f"{rw['live_records']:,} records, {rw['lattice_mib']:.0f} MiB, committed {rw['committed_mib']:.0f} MiB, "
              f"warm {rw['warm_s'] * 1000:.0f} ms | lattices identical on {same}/{B} rows")
        results.append(dict(kind="long_ab", T=T, identical=same, rows=B))
    if a.json:
        with open(a.json, "a") as f:
            for r in results:
                f.write(json.dumps(dict(r, graph=a.graph, commit=commit, device=dev, host=platform.node(),
                                        output_beam=a.output_beam)) + "\n")


if __name__ == "__main__":
    main()
