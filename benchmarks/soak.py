"""Soak test of the GPU decoder (issue 14): many decodes of mixed lengths with periodic graph
reloads in one process; device memory and the CUDA-graph cache must stay bounded, and a
sample of results must equal the CPU decoder's.

python -m benchmarks.soak [--graph HLG.img] [--decodes 10000] [--max-len 20000] [--out soak.json]

Each decode is a batch of 1..--batch-max rows; a row's length is uniform in 1..--short-len,
or (with probability --long-frac) log-uniform up to --max-len, and every --long-every-th
decode holds one row of exactly --max-len frames. Log-probs are simulated CTC posteriors
(peaky: 70% blank frames) made on the GPU. Every --reload-every decodes the decoder and
the graph are dropped and the graph is loaded again from disk. Every --record-every
decodes one point of the curve is recorded: device memory (cudaMemGetInfo), PyTorch's
reserve, what the decoder module holds (device and pinned bytes, handles), graph uploads
alive, and the graph cache (size, captures, evictions). Every --check-every decodes one row
(at most --check-max-len frames) is kept and, at the end, decoded by the CPU reference with
all cores; words and float32 scores must match (an exact-score tie must rescore the same).
--max-seconds stops the loop early (the report says so) so the run fits a time budget.
Exit status 1 on a mismatch or when the module's own memory grows across reloads.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from cuwfst import Decoder, DecoderOptions, Graph  # noqa: E402


def peaky_log_probs_gpu(torch, gen, batch: int, frames: int, vocab: int):
    """CTC-like posteriors on the GPU: blank on 70% of frames, one strong token elsewhere."""
    logits = torch.randn(batch, frames, vocab, device="cuda", generator=gen)
    blank = torch.rand(batch, frames, device="cuda", generator=gen) < 0.7
    logits[..., 0] += blank.float() * 6.0
    tok = torch.randint(1, vocab, (batch, frames, 1), device="cuda", generator=gen)
    logits.scatter_add_(2, tok, (~blank).float().unsqueeze(-1) * 6.0)
    return logits.log_softmax(-1)


def draw_lengths(rng, batch: int, a) -> np.ndarray:
    lens = rng.integers(1, a.short_len + 1, batch)
    long = rng.random(batch) < a.long_frac
    lo, hi = math.log(a.short_len), math.log(a.max_len)
    lens[long] = np.exp(rng.uniform(lo, hi, int(long.sum()))).astype(np.int64)
    return np.clip(lens, 1, a.max_len).astype(np.int32)


def same(graph, lp_row, c, g) -> bool:
    from helpers import path_score_f32

    if g.overflow or c.empty != g.empty:
        return False
    if c.empty:
        return True
    if np.float32(c.score) != np.float32(g.score):
        return False
    if (c.arcs, c.redirect_arc) == (g.arcs, g.redirect_arc):
        return c.words == g.words
    return path_score_f32(graph, lp_row, g.arcs, g.redirect_arc) == np.float32(c.score)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", default=str(REPO / "cuwfst" / "data" / "tiny" / "HLG.img"))
    p.add_argument("--decodes", type=int, default=10_000)
    p.add_argument("--max-len", type=int, default=20_000)
    p.add_argument("--short-len", type=int, default=300)
    p.add_argument("--long-frac", type=float, default=0.01)
    p.add_argument("--long-every", type=int, default=500)
    p.add_argument("--batch-max", type=int, default=8)
    p.add_argument("--reload-every", type=int, default=1000)
    p.add_argument("--record-every", type=int, default=100)
    p.add_argument("--check-every", type=int, default=100)
    p.add_argument("--check-max-len", type=int, default=1500)
    p.add_argument("--search-beam", type=float, default=20.0)
    p.add_argument("--max-active", type=int, default=2000)
    p.add_argument("--max-seconds", type=float, default=220.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="soak.json", help="the curve and the summary (JSON)")
    p.add_argument("--csv", help="the curve as CSV too")
    a = p.parse_args(argv)
    for name in ("decodes", "max_len", "short_len", "batch_max", "reload_every", "record_every", "check_every"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.short_len > a.max_len:
        p.error("--short-len must not exceed --max-len")
    import torch

    from benchmarks.peers.measure import git_commit
    from cuwfst.decoder.gpu import live_uploads
    from cuwfst.jit.decoder import module

    mod = module(0)
    opts = DecoderOptions(search_beam=a.search_beam, max_active_states=a.max_active)
    rng = np.random.default_rng(a.seed)
    gen = torch.Generator(device="cuda").manual_seed(a.seed)
    total = torch.cuda.get_device_properties(0).total_memory

    def point(i, dec, elapsed):
        torch.cuda.synchronize()
        info = np.zeros(5, np.int64)
        mod.gpu_memory_info(0, info)
        st = dec._gpu.main.mem_stats()
        return {"decode": i, "seconds": round(elapsed, 2), "device_used_mib": (int(info[1]) - int(info[0])) / 2**20,
                "device_free_mib": int(info[0]) / 2**20, "torch_reserved_mib": torch.cuda.memory_reserved(0) / 2**20,
                "module_device_mib": int(info[2]) / 2**20, "module_pinned_mib": int(info[3]) / 2**20,
                "module_handles": int(info[4]), "uploads": live_uploads(), "cached_graphs": st["cached_graphs"],
                "graph_captures": st["graph_captures"], "graph_evictions": st["graph_evictions"],
                "decoder_committed_mib": st["committed"] / 2**20}

    curve, samples, at_reload = [], [], []
    graph = dec = None
    frames = rows = 0
    t0 = time.perf_counter()
    done = 0
    stopped_early = False
    for i in range(a.decodes):
        if time.perf_counter() - t0 > a.max_seconds:
            stopped_early = True
            break
        if i % a.reload_every == 0:
            dec = graph = None  # drop both, then load again: the old upload must go
            gc.collect()
            torch.cuda.synchronize()
            info = np.zeros(5, np.int64)
            mod.gpu_memory_info(0, info)
            at_reload.append({"decode": i, "module_device_mib": int(info[2]) / 2**20,
                              "module_pinned_mib": int(info[3]) / 2**20, "module_handles": int(info[4]),
                              "uploads": live_uploads()})
            graph = Graph.load(a.graph)
            dec = Decoder(graph, opts, device="cuda", max_lanes=a.batch_max)
        B = int(rng.integers(1, a.batch_max + 1))
        lens = draw_lengths(rng, B, a)
        if i % a.long_every == a.long_every - 1:
            lens[0] = a.max_len
        T = int(lens.max())
        lp = peaky_log_probs_gpu(torch, gen, B, T, graph.vocab_size)
        hyps = dec.decode(lp, lens)
        frames += int(lens.sum())
        rows += B
        if i % a.check_every == 0:
            cand = [k for k in range(B) if lens[k] <= a.check_max_len]
            if cand:
                b = int(rng.choice(cand))
                n = int(lens[b])
                samples.append((lp[b, :n].float().cpu().numpy(), hyps[b], i))
        if i % a.record_every == 0 or i == a.decodes - 1:
            curve.append(point(i, dec, time.perf_counter() - t0))
        done = i + 1
    loop_s = time.perf_counter() - t0
    if dec is None:
        p.error("no decode ran: raise --max-seconds")
    curve.append(point(done - 1, dec, loop_s))

    # exactness on the sample: the CPU reference on all cores, rows grouped to similar lengths
    ref = Decoder(Graph.load(a.graph), opts, num_threads=os.cpu_count() or 1)
    mismatches = []
    order = sorted(range(len(samples)), key=lambda k: samples[k][0].shape[0])
    for s in range(0, len(order), 16):
        group = [samples[k] for k in order[s : s + 16]]
        T = max(x[0].shape[0] for x in group)
        lp = np.zeros((len(group), T, group[0][0].shape[1]), np.float32)
        lens = np.array([x[0].shape[0] for x in group], np.int32)
        for k, x in enumerate(group):
            lp[k, : lens[k]] = x[0]
        for k, c in enumerate(ref.decode(lp, lens)):
            if not same(ref.graph, lp[k], c, group[k][1]):
                mismatches.append({"decode": group[k][2], "frames": int(lens[k]), "cpu": [c.words, c.score],
                                   "gpu": [group[k][1].words, group[k][1].score, group[k][1].overflow]})

    # bounded: what the module holds when nothing is alive (right before each reload) does not grow
    held = [r["module_device_mib"] for r in at_reload[1:]]
    steady = curve[len(curve) // 4 :] or curve
    summary = {
        "decodes": done, "requested": a.decodes, "stopped_early": stopped_early, "rows": rows, "frames": frames,
        "seconds": round(loop_s, 1), "ms_per_decode": round(1000 * loop_s / max(done, 1), 2),
        "reloads": len(at_reload), "checked_rows": len(samples), "mismatches": len(mismatches),
        "device_used_mib": [round(min(c["device_used_mib"] for c in curve), 1),
                            round(max(c["device_used_mib"] for c in curve), 1)],
        "device_used_steady_mib": [round(min(c["device_used_mib"] for c in steady), 1),
                                   round(max(c["device_used_mib"] for c in steady), 1)],
        "module_device_mib": [round(min(c["module_device_mib"] for c in curve), 1),
                              round(max(c["module_device_mib"] for c in curve), 1)],
        "module_device_mib_before_reloads": [round(x, 3) for x in held],
        "uploads_before_reloads": [r["uploads"] for r in at_reload[1:]],
        "cached_graphs_max": max(c["cached_graphs"] for c in curve),
        "graph_captures_last_decoder": curve[-1]["graph_captures"],
        "graph_evictions_last_decoder": curve[-1]["graph_evictions"],
        "longest_row": a.max_len,
    }
    grew = bool(held) and (max(held) - min(held) > 1.0 or any(u != 0 for u in summary["uploads_before_reloads"]))
    meta = {"commit": git_commit(), "device": torch.cuda.get_device_name(0), "total_mib": total / 2**20,
            "host": platform.node(), "graph": a.graph, "args": vars(a)}
    Path(a.out).write_text(json.dumps({"meta": meta, "summary": summary, "curve": curve, "at_reload": at_reload,
                                       "mismatches": mismatches[:20]}, indent=1))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(curve[0]))
            w.writeheader()
            w.writerows(curve)
    print(f"soak on {meta['device']}, commit {meta['commit']}: {done} decodes"
          f"{' (stopped early at --max-seconds)' if stopped_early else ''}, {rows} rows, {frames} frames "
          f"in {loop_s:.0f} s ({summary['ms_per_decode']} ms/decode), {len(at_reload)} graph loads")
    print("curve (every %d decodes): device used MiB %s; after the first quarter %s; module-held device MiB %s"
          % (a.record_every, summary["device_used_mib"], summary["device_used_steady_mib"], summary["module_device_mib"]))
    print(f"module-held device MiB with no decoder alive (before each reload): {summary['module_device_mib_before_reloads']}"
          f"; graph uploads then: {summary['uploads_before_reloads']}")
    print(f"graph cache: at most {summary['cached_graphs_max']} executables; the last decoder captured "
          f"{summary['graph_captures_last_decoder']} and evicted {summary['graph_evictions_last_decoder']}")
    print(f"exactness: {len(samples) - len(mismatches)}/{len(samples)} sampled rows equal to the CPU decoder")
    for m in mismatches[:5]:
        print("MISMATCH", m)
    if grew:
        print("FAIL: the module's memory grew across reloads")
    print(f"wrote {a.out}" + (f" and {a.csv}" if a.csv else ""))
    return 1 if mismatches or grew else 0


if __name__ == "__main__":
    sys.exit(main())
