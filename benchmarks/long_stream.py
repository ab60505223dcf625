"""One long stream (issue 8's hour of audio): --frames frames (default 90,000: one hour at
40 ms) tiled from a shard's utterances, fed in --chunk-frame chunks to one stream of a
StreamingDecoder; memory sampled after every chunk; then the final result against the CPU
decoder's `decode(frames, online=True)` on the same frames.

python -m benchmarks.long_stream --graph HLG.img --log-probs shard.npz [--frames 90000] [--chunk 16] \\
    [--device cuda] [--max-seconds 60] [--csv memory.csv] [--md out.md] [--json out.jsonl]

Each chunk's row of the CSV: the advance's wall time (GPU synchronised), the stream's
memory_stats (frames, winners: the search-log entries held; GPU: committed_arcs, the final
arcs kept on the host), what the native decoder holds (committed and fixed bytes, arena
high water), cudaMemGetInfo's used bytes, the cuwfst module's live device and pinned
bytes, and the process's resident set. After the first --warmup-frac of the chunks
(CUDA-graph captures, arena sizing) device memory must not move: the summary gives each
series' min and max and says "constant" only when cudaMemGetInfo's used bytes, the
module's device bytes and the decoder's committed bytes are each the same in every sample.

--max-seconds stops feeding early (the report says so, and the check then covers the
frames fed), so the run fits a time budget; the CPU decode's time is printed.
Exit status 1 when the result differs from the CPU decoder's or GPU memory moved.

The CPU decode of an hour takes minutes; it need not spend GPU-machine time:
--result-out FILE (with --no-check) writes the stream's result with the SHA-256 of the
frames fed and of the graph image, and on any machine

    python -m benchmarks.long_stream --check-result FILE --graph HLG.img --log-probs shard.npz

tiles the same frames again, refuses if either hash differs (another shard or graph), runs
the CPU decoder's decode(frames, online=True) and compares words, arcs and the float32 score
bit for bit (exit status 1 when they differ).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.corpus.stats import sha256_file  # noqa: E402
from benchmarks.stream_tools import (DEMO_SHARD, TINY, DeviceMemory, add_option_flags, decoder_memory,  # noqa: E402
                                     is_gpu, load_shard, mib, online_reference, options_from, percentile,
                                     rss_bytes, same_result, torch_cuda)

COLUMNS = ("chunk", "frames", "elapsed_s", "advance_ms", "stream_winners", "committed_arcs", "decoder_committed",
           "decoder_fixed", "arena_high_water", "device_used", "module_device", "module_pinned", "torch_allocated",
           "rss")
# the series that must stay the same after warm-up on the GPU
CONSTANT = ("device_used", "module_device", "decoder_committed")


def tile_frames(lp: np.ndarray, lens: np.ndarray, total: int) -> np.ndarray:
    """[total, V] float32: the shard's utterances one after another (cycling), cut at `total`."""
    parts, n, i = [], 0, 0
    while n < total:
        u = i % len(lens)
        take = int(min(lens[u], total - n))
        parts.append(lp[u, :take])
        n += take
        i += 1
    return np.ascontiguousarray(np.concatenate(parts), np.float32)


def summarize(samples: list[dict], warmup: int) -> dict:
    """min, max, first and last of each series after the warm-up samples."""
    out = {}
    steady = samples[warmup:] or samples
    for k in COLUMNS[4:]:
        xs = [s[k] for s in steady if s.get(k) is not None]
        if xs:
            out[k] = {"min": int(min(xs)), "max": int(max(xs)), "first": int(xs[0]), "last": int(xs[-1])}
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", default=str(TINY / "HLG.img"))
    p.add_argument("--log-probs", default=str(DEMO_SHARD), help="shard .npz: log_probs (or log_probs_fp16), lengths")
    p.add_argument("--frames", type=int, default=90_000, help="frames in the stream (90,000: an hour at 40 ms)")
    p.add_argument("--chunk", type=int, default=16)
    p.add_argument("--frame-shift", type=float, default=0.04)
    p.add_argument("--device", default="auto")
    p.add_argument("--warmup-frac", type=float, default=0.05, help="share of the chunks left out of the summary")
    p.add_argument("--max-seconds", type=float, default=0.0, help="stop feeding after this long (0: never)")
    p.add_argument("--no-check", action="store_true", help="skip the CPU decode of the frames")
    p.add_argument("--result-out", help="write the stream's result and the hashes of its frames and graph here")
    p.add_argument("--check-result", help="instead of streaming: check a --result-out file with the CPU decoder")
    p.add_argument("--csv", help="one row per chunk")
    p.add_argument("--md", help="write the summary here (markdown)")
    p.add_argument("--json", help="append the summary as one JSON line here")
    add_option_flags(p)
    a = p.parse_args(argv)
    if a.frames < 1 or a.chunk < 1 or not 0 <= a.warmup_frac < 1:
        p.error("--frames and --chunk must be >= 1, --warmup-frac in [0, 1)")
    return a


def md_summary(r: dict) -> str:
    mem = r["memory"]

    def rng(k, scale=2**20, unit=" MiB"):
        if k not in mem:
            return "-"
        nd = 1 if scale > 1 else 0
        lo, hi = mem[k]["min"] / scale, mem[k]["max"] / scale
        return f"{lo:,.{nd}f}{unit}" if lo == hi else f"{lo:,.{nd}f} .. {hi:,.{nd}f}{unit}"

    lines = [f"One stream of {r['frames_fed']:,} frames ({r['frames_fed'] * r['frame_shift'] / 3600:.2f} h) in "
             f"chunks of {r['chunk']}, {r['graph']}, device {r['device']} ({r['machine']}), commit {r['commit']}"
             + (f"; stopped early: {r['stopped']}" if r["stopped"] else ""), "",
             "| what | value |", "| --- | --- |",
             f"| advance p50 / p99 / max ms | {r['advance_p50_ms']} / {r['advance_p99_ms']} / {r['advance_max_ms']} |",
             f"| feeding time (advances) s | {r['advance_s']} (RTFx {r['rtfx']}) |",
             f"| finalize ms | {r['finalize_ms']} |",
             f"| device used after warm-up | {rng('device_used')} |",
             f"| cuwfst module device bytes | {rng('module_device')} |",
             f"| decoder committed bytes | {rng('decoder_committed')} |",
             f"| stream winners (search-log entries) | {rng('stream_winners', 1, '')} |",
             f"| committed arcs on the host | {rng('committed_arcs', 1, '')} |",
             f"| process RSS | {rng('rss')} |",
             f"| GPU memory constant after warm-up | {'n/a (CPU)' if r['constant'] is None else r['constant']} |",
             f"| CPU decode(online=True) s | {r.get('cpu_s', '-')} |",
             f"| identical to the CPU (words, score) | {r.get('identical', 'not checked')} |"]
    return "\n".join(lines) + "\n"


def sha256_frames(frames: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(frames, np.float32).tobytes()).hexdigest()


def result_record(a, hyp, frames_fed: np.ndarray, graph_sha: str) -> dict:
    """What --check-result needs: the hashes of the inputs and the result, the score as the
    bits of its float32."""
    return dict(bench="long_stream_result", graph_sha256=graph_sha, frames=int(frames_fed.shape[0]),
                frames_sha256=sha256_frames(frames_fed), options=dataclasses.asdict(options_from(a)), device=a.device,
                words=list(hyp.words), arcs=list(hyp.arcs), overflow=int(hyp.overflow),
                score=float(hyp.score), score_bits=int(np.float32(hyp.score).view(np.uint32)))


def check_result(a) -> int:
    """--check-result: the same frames through the CPU decoder, compared bit for bit."""
    from cuwfst import DecoderOptions, Graph

    rec = json.loads(Path(a.check_result).read_text())
    if rec.get("bench") != "long_stream_result":
        raise SystemExit(f"{a.check_result} is not a --result-out file")
    if sha256_file(a.graph) != rec["graph_sha256"]:
        raise SystemExit(f"{a.graph} is not the graph of {a.check_result} (SHA-256 differs)")
    lp, lens = load_shard(a.log_probs)
    frames = tile_frames(lp, lens, rec["frames"])
    del lp
    if sha256_frames(frames) != rec["frames_sha256"]:
        raise SystemExit(f"the frames tiled from {a.log_probs} are not those of {a.check_result} (SHA-256 differs)")
    options = DecoderOptions(**rec["options"])
    print(f"CPU decode(online=True) of {rec['frames']:,} frames (the {rec['device']} stream's result in "
          f"{a.check_result}) ...", flush=True)
    graph = Graph.load(a.graph)
    (ref,), cpu_s = online_reference(graph, options, [frames], num_threads=1)
    same_words_score = (ref.words == rec["words"] and rec["overflow"] == 0
                        and int(np.float32(ref.score).view(np.uint32)) == rec["score_bits"])
    same = same_words_score and ref.arcs == rec["arcs"]
    print(f"CPU decode took {cpu_s:.1f} s; words, arcs and float32 score identical: {same} "
          f"(stream {len(rec['words'])} words, {rec['score']!r}, overflow {rec['overflow']}; "
          f"CPU {len(ref.words)} words, {ref.score!r})", flush=True)
    if same_words_score and not same:
        print(arcs_difference(graph, rec["arcs"], ref.arcs, frames), flush=True)
    return 0 if same else 1


def arcs_difference(graph, got: list, want: list, frames: np.ndarray) -> str:
    """Where two paths of equal words and equal float32 score part: each run of differing arc
    positions and, where the paths meet again (the same arc after the run, so the same state
    on the same frame), whether their float32 scores there are equal bit for bit (an
    exact-score tie, which either decoder may break its own way) or which path is better."""
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    if tests not in sys.path:  # (tests/helpers.py: the float32 path score the tests compare with)
        sys.path.insert(0, tests)
    from helpers import path_scores_f32

    n = min(len(got), len(want))
    diff = [k for k in range(n) if got[k] != want[k]]
    runs, k = [], 0
    while k < len(diff):
        a = diff[k]
        while k + 1 < len(diff) and diff[k + 1] == diff[k] + 1:
            k += 1
        runs.append((a, diff[k] + 1))
        k += 1
    pg, pw = path_scores_f32(graph, frames, got), path_scores_f32(graph, frames, want)
    ties = better = worse = 0
    lines = []
    for a, b in runs:
        at = b - 1  # both paths' score after the run's last arc, entering the same arc b
        x, y = pg[at], pw[at]
        if x.view(np.uint32) == y.view(np.uint32):
            ties += 1
        elif x > y:
            better += 1
        else:
            worse += 1
        if len(lines) < 6:
            lines.append(f"  positions {a}..{b - 1}: stream {x!r} / CPU {y!r} at the merge")
    head = (f"arcs differ: {len(diff)} of {n} positions in {len(runs)} runs (lengths {len(got)} / {len(want)}); "
            f"at the merges the float32 scores are equal in {ties}, the stream's higher in {better}, "
            f"the CPU's higher in {worse}")
    return "\n".join([head] + lines)


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.check_result:
        return check_result(a)
    from benchmarks.peers.measure import git_commit, machine
    from cuwfst import Graph, StreamingDecoder
    from cuwfst.cuda import resolve_device

    a.device = resolve_device(a.device)
    graph = Graph.load(a.graph)
    options = options_from(a)
    lp, lens = load_shard(a.log_probs)
    frames = tile_frames(lp, lens, a.frames)
    del lp
    torch = torch_cuda() if is_gpu(a.device) else None
    src = torch.from_numpy(frames).cuda() if torch is not None else frames

    def sync():
        if torch is not None:
            torch.cuda.synchronize()

    mach = machine()
    probe = DeviceMemory(a.device)
    sd = StreamingDecoder(graph, options, device=a.device, max_streams=1, num_threads=1,
                          main_q_factor=a.main_q_factor, arena_entries=a.arena_entries)
    s = sd.open_stream()
    caps = {k: v for k, v in decoder_memory(sd).items() if k in ("main_q", "claims_cap", "hash_cap", "arena_max")}
    print(f"{a.graph}: one stream of {a.frames:,} frames in chunks of {a.chunk} on {a.device} "
          f"({mach['gpu'] or mach['cpu']}); lane capacities {caps or 'n/a (CPU)'}", flush=True)
    out = open(a.csv, "w", newline="") if a.csv else None
    writer = csv.DictWriter(out, fieldnames=COLUMNS) if out else None
    if writer:
        writer.writeheader()
    samples, times = [], []
    stopped = None
    fed = 0
    t_start = time.perf_counter()
    try:
        for i, t in enumerate(range(0, a.frames, a.chunk)):
            chunk = src[t : t + a.chunk]
            sync()
            t0 = time.perf_counter()
            sd.advance([s], [chunk])
            sync()
            dt = time.perf_counter() - t0
            times.append(dt)
            fed = t + int(chunk.shape[0])
            st, dm, dev = sd.memory_stats(s), decoder_memory(sd), probe.sample()
            row = {"chunk": i, "frames": fed, "elapsed_s": round(time.perf_counter() - t_start, 4),
                   "advance_ms": round(1000 * dt, 4), "stream_winners": st["winners"],
                   "committed_arcs": st.get("committed_arcs"), "decoder_committed": dm.get("committed"),
                   "decoder_fixed": dm.get("fixed"), "arena_high_water": dm.get("arena_high_water"),
                   "device_used": dev["device_used"], "module_device": dev["module_device"],
                   "module_pinned": dev["module_pinned"],
                   "torch_allocated": torch.cuda.memory_allocated() if torch is not None else None, "rss": rss_bytes()}
            samples.append(row)
            if writer:
                writer.writerow(row)
            if a.max_seconds and time.perf_counter() - t_start > a.max_seconds and fed < a.frames:
                stopped = f"--max-seconds {a.max_seconds:g} reached after {fed:,} of {a.frames:,} frames"
                break
        t0 = time.perf_counter()
        hyp = sd.finalize(s)
        finalize_s = time.perf_counter() - t0
    finally:
        if out:
            out.close()
    advance_s = float(sum(times))
    memory = summarize(samples, int(len(samples) * a.warmup_frac))
    constant = None
    if is_gpu(a.device):
        constant = all(k in memory and memory[k]["min"] == memory[k]["max"] for k in CONSTANT)
    r = dict(bench="long_stream", graph=a.graph, log_probs=a.log_probs, device=a.device, commit=git_commit(),
             machine=mach["gpu"] or mach["cpu"], frames_requested=a.frames, frames_fed=fed, chunk=a.chunk,
             frame_shift=a.frame_shift, chunks=len(times), stopped=stopped, capacities=caps,
             main_q_factor=a.main_q_factor, max_active_states=a.max_active_states,
             advance_s=round(advance_s, 2), rtfx=round(fed * a.frame_shift / advance_s, 1) if advance_s else None,
             advance_p50_ms=_ms(percentile(times, 50)), advance_p99_ms=_ms(percentile(times, 99)),
             advance_max_ms=_ms(max(times) if times else None), finalize_ms=_ms(finalize_s),
             warmup_chunks=int(len(samples) * a.warmup_frac), memory=memory, constant=constant,
             words=len(hyp.words), score=float(hyp.score), overflow=int(hyp.overflow))
    print(f"fed {fed:,} frames in {advance_s:.1f} s of advances (RTFx {r['rtfx']}), p99 {r['advance_p99_ms']} ms; "
          f"device memory after warm-up: {_range_text(memory, 'device_used')}, module {_range_text(memory, 'module_device')}, "
          f"decoder {_range_text(memory, 'decoder_committed')}; constant: {constant}", flush=True)
    _write(a, r)  # the GPU part is on disk before the CPU decode starts
    if a.result_out:
        Path(a.result_out).write_text(json.dumps(result_record(a, hyp, frames[:fed], sha256_file(a.graph))) + "\n")
    ok = constant is not False
    if not a.no_check:
        print(f"CPU decode(online=True) of {fed:,} frames ...", flush=True)
        (ref,), cpu_s = online_reference(graph, options, [frames[:fed]], num_threads=1)
        r.update(cpu_s=round(cpu_s, 2), identical=bool(same_result(ref, hyp) and not hyp.overflow),
                 same_arcs=ref.arcs == hyp.arcs, cpu_words=len(ref.words), cpu_score=float(ref.score))
        print(f"CPU decode took {cpu_s:.1f} s; words and score identical: {r['identical']} "
              f"(stream {len(hyp.words)} words, {hyp.score!r}; CPU {len(ref.words)} words, {ref.score!r})", flush=True)
        ok = ok and r["identical"]
        _write(a, r, replace_last=True)
    print(md_summary(r))
    return 0 if ok else 1


def _ms(s):
    return None if s is None else round(1000.0 * s, 3)


def _range_text(memory: dict, k: str) -> str:
    if k not in memory:
        return "n/a"
    lo, hi = mib(memory[k]["min"]), mib(memory[k]["max"])
    return f"{lo} MiB" if lo == hi else f"{lo}..{hi} MiB"


def _write(a, r: dict, replace_last: bool = False) -> None:
    if a.md:
        Path(a.md).write_text(md_summary(r))
    if a.json:
        path = Path(a.json)
        lines = path.read_text().splitlines(keepends=True) if path.exists() else []
        if replace_last and lines:
            lines = lines[:-1]
        path.write_text("".join(lines) + json.dumps(r) + "\n")


if __name__ == "__main__":
    sys.exit(main())
