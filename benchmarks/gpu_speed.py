"""GPU decoder speed and exactness on one graph, measured in one run.

python -m benchmarks.gpu_speed [--graph HLG.img | --arcs 1000000] --batch 1 8 32 --utts 64
Times whole decodes (host to host: the transfer of results included) after warm-up and
reports medians; checks the first --check rows against the CPU reference decoder.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph


def uniform_rows(lp: np.ndarray, lengths: np.ndarray, n: int, T: int):
    """n rows of exactly T frames: the utterances' valid frames laid end to end in stored
    order (cycling when the set runs out), cut into rows of T."""
    frames = np.concatenate([lp[i, : int(lengths[i])] for i in range(len(lengths))]).astype(np.float32)
    need = n * T
    if len(frames) < need:
        frames = np.concatenate([frames] * (need // len(frames) + 1))
    return frames[:need].reshape(n, T, -1), np.full(n, T, np.int32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--graph")
    p.add_argument("--arcs", type=int, default=1_000_000)
    p.add_argument("--log-probs", help=".npz with log_probs [N, T, V] and lengths")
    p.add_argument("--frames", type=int, default=250)
    p.add_argument("--uniform", type=int, default=0,
                   help="with --log-probs: rows of exactly this many frames, each made of the set's utterances "
                        "laid end to end in stored order (e.g. 250: the design's 32 x 250-frame figure)")
    p.add_argument("--utts", type=int, default=64)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--check", type=int, default=16, help="rows compared with the CPU decoder")
    p.add_argument("--json", help="append results as JSON lines here")
    p.add_argument("--profile", action="store_true", help="kernel time breakdown at the largest batch")
    p.add_argument("--walkers", nargs="+", default=["warp"], help="slot walkers to time side by side")
    p.add_argument("--eps-iterations", type=int, default=None,
                   help="closure passes on graphs with epsilon arcs (default: the graph's longest chain)")
    p.add_argument("--walk-blocks", type=int, nargs="+", default=[0],
                   help="grids of the walker kernels to time side by side (0: the spec's formula)")
    a = p.parse_args()
    import torch

    rng = np.random.default_rng(0)
    if a.graph:
        g = Graph.load(a.graph)
    else:
        from benchmarks.reference_speed import random_ctc_graph
        g = random_ctc_graph(rng, a.arcs // 8, 8, 500)
    if a.log_probs:
        d = np.load(a.log_probs)
        key = "log_probs" if "log_probs" in d else "log_probs_fp16"
        if a.uniform:
            lp_all, lens_all = uniform_rows(d[key], d["lengths"], a.utts, a.uniform)
        else:
            lp_all, lens_all = d[key][: a.utts], d["lengths"][: a.utts].astype(np.int32)
    else:
        from benchmarks.reference_speed import peaky_log_probs
        lp_all = peaky_log_probs(rng, a.utts, a.frames, g.vocab_size)
        lens_all = np.full(a.utts, a.frames, np.int32)
    opts = DecoderOptions(eps_iterations=a.eps_iterations)
    from benchmarks.peers.measure import git_commit
    commit = git_commit()
    dev = torch.cuda.get_device_name(0)
    print(f"graph {a.graph or 'random'}: {g.num_states} states, {g.num_arcs} arcs, "
          f"{g.num_epsilon_arcs} epsilon arcs; {a.utts} utts, "
          f"mean T {lens_all.mean():.0f}; {dev}; commit {commit}")
    lp_gpu = torch.from_numpy(lp_all).cuda()
    audio_s = float(lens_all.sum()) * 0.04
    results = []
    hyps_gpu = None
    for walker, wb, B in [(w, wb, b) for w in a.walkers for wb in a.walk_blocks for b in a.batch]:
        dec = Decoder(g, opts, device="cuda", max_lanes=B, walker=walker, walk_blocks=wb)
        def run(dec=dec):
            out = []
            for s in range(0, a.utts, B):
                out += dec.decode(lp_gpu[s : s + B], lens_all[s : s + B])
            return out
        run()  # warm-up: build, capture
        times = []
        for _ in range(a.reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            hyps = run()
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        nb = (a.utts + B - 1) // B
        stats = dec._gpu.main.mem_stats()
        steps = float((lens_all + 1).sum())
        added = sum(h.closure_added for h in hyps)
        total = sum(h.frontier_total for h in hyps)
        row = dict(walker=walker, walk_blocks=wb, batch=B, ms_per_batch=med / nb * 1000, rtfx=audio_s / med,
                   max_frontier=max(h.max_frontier for h in hyps), mean_frontier=total / steps,
                   closure_growth=(total / (total - added)) if g.has_epsilon and total > added else 1.0,
                   overflow_rows=sum(1 for h in hyps if h.overflow), mem_fixed_mib=stats["fixed"] / 2**20,
                   arena_high_water=stats["arena_high_water"], peak_gpu_mib=torch.cuda.max_memory_allocated() / 2**20)
        results.append(row)
        print(json.dumps(row))
        hyps_gpu = hyps if hyps_gpu is None else hyps_gpu
        if a.profile and B == max(a.batch) and wb == a.walk_blocks[0]:
            inst = dec._gpu.main
            before = inst.profile(True)
            run()
            after = inst.profile(False)
            ms = {k: (after[k] - before[k]) / nb for k in after}
            tot = sum(ms.values())
            print("kernel ms per batch (launch by launch, CUDA events): " +
                  ", ".join(f"{k} {v:.2f} ({100 * v / tot:.0f}%)" for k, v in ms.items() if v > 0) + f"; sum {tot:.2f}")
            if g.has_epsilon:
                closure = sum(ms[k] for k in ("eps_scan", "eps_expand", "eps_resolve", "clear_claims"))
                steps_per_batch = float(np.mean([lens_all[s : s + B].max() + 1 for s in range(0, a.utts, B)]))
                print(f"per step (mean {steps_per_batch:.0f} steps per batch): emitting "
                      f"{(tot - closure) / steps_per_batch * 1000:.1f} us, closure passes "
                      f"{closure / steps_per_batch * 1000:.1f} us ({100 * closure / tot:.0f}% of kernel time); "
                      f"closure frontier growth x{row['closure_growth']:.3f}")
                row.update(emit_us_per_step=(tot - closure) / steps_per_batch * 1000,
                           closure_us_per_step=closure / steps_per_batch * 1000)
        del dec
    if a.check:
        cpu = Decoder(g, opts, num_threads=16).decode(lp_all[: a.check], lens_all[: a.check])
        same = sum(1 for c, h in zip(cpu, hyps_gpu) if np.float32(c.score) == np.float32(h.score) and c.words == h.words)
        stats_same = sum(1 for c, h in zip(cpu, hyps_gpu)
                         if (c.frontier_total, c.closure_added) == (h.frontier_total, h.closure_added))
        print(f"search statistics (frontier_total, closure_added) identical on {stats_same}/{a.check} rows")
        ties = sum(1 for c, h in zip(cpu, hyps_gpu) if np.float32(c.score) == np.float32(h.score) and c.words != h.words)
        print(f"exactness: {same}/{a.check} rows identical to the CPU decoder, {ties} exact-score ties, "
              f"{a.check - same - ties} mismatches")
    if a.json:
        with open(a.json, "a") as f:
            for r in results:
                f.write(json.dumps(dict(r, graph=a.graph or f"random{a.arcs}", commit=commit, device=dev,
                                        host=platform.node())) + "\n")


if __name__ == "__main__":
    main()
