"""One batch of many rows (default 1024) in one decoder: it must decode without whole-batch
rescue (issue 14, finding 7), exactly on a sample; time and memory are reported.

python -m benchmarks.many_lanes --graph HLG.img [--log-probs shard.npz] --lanes 1024 --check 16

With --log-probs (an .npz of log_probs [N, T, V] and lengths, as benchmarks.corpus.simulate
writes), its rows are repeated to fill the lanes; without, peaky CTC posteriors of --frames
frames are simulated. The batch is decoded twice (the first decode grows the winners arena
and captures the CUDA graph; the second is the steady state), then --check rows are
compared with the CPU reference. Exit status 1 on a mismatch, on rows left with overflow
bits, or when the rescue re-decoded --max-rescued-frac of the batch or more.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from cuwfst import Decoder, DecoderOptions, Graph  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", default=str(REPO / "cuwfst" / "data" / "tiny" / "HLG.img"))
    p.add_argument("--log-probs", help=".npz with log_probs [N, T, V] and lengths")
    p.add_argument("--lanes", type=int, default=1024)
    p.add_argument("--frames", type=int, default=1000, help="frames per simulated row")
    p.add_argument("--main-q-factor", type=int, default=32)
    p.add_argument("--check", type=int, default=16, help="rows compared with the CPU decoder")
    p.add_argument("--max-rescued-frac", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="append the result as one JSON line here")
    a = p.parse_args(argv)
    if not 1 <= a.lanes <= 1024:
        p.error("--lanes must be in [1, 1024]")
    import torch

    from benchmarks.peers.measure import git_commit
    from benchmarks.soak import peaky_log_probs_gpu, same

    graph = Graph.load(a.graph)
    if a.log_probs:
        d = np.load(a.log_probs)
        src, src_lens = d["log_probs"], d["lengths"].astype(np.int32)
        pick = np.arange(a.lanes) % src.shape[0]
        lp = torch.from_numpy(np.ascontiguousarray(src[pick])).cuda()
        lens = src_lens[pick]
    else:
        gen = torch.Generator(device="cuda").manual_seed(a.seed)
        lp = peaky_log_probs_gpu(torch, gen, a.lanes, a.frames, graph.vocab_size)
        lens = np.full(a.lanes, a.frames, np.int32)
    opts = DecoderOptions()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    free0, total = torch.cuda.mem_get_info()
    t = time.perf_counter()
    dec = Decoder(graph, opts, device="cuda", max_lanes=a.lanes, main_q_factor=a.main_q_factor)
    build_s = time.perf_counter() - t
    times = []
    for _ in range(2):
        torch.cuda.synchronize()
        t = time.perf_counter()
        hyps = dec.decode(lp, lens)
        times.append(time.perf_counter() - t)
    free1, _ = torch.cuda.mem_get_info()
    gpu = dec._gpu
    st, stats = gpu.main.mem_stats(), dict(gpu.stats)
    rescue_mib = gpu._rescue.mem_stats()["committed"] / 2**20 if gpu._rescue is not None else 0.0
    # rows decoded again per batch (the counters cover both decodes)
    rescued = (stats["rescued_rows"] + stats["arena_rows"]) / 2
    overflow_rows = sum(1 for h in hyps if h.overflow)
    rng = np.random.default_rng(a.seed)
    sample = rng.choice(a.lanes, min(a.check, a.lanes), replace=False)
    host = lp[torch.from_numpy(sample).cuda()].float().cpu().numpy()
    cpu = Decoder(graph, opts, num_threads=os.cpu_count() or 1).decode(host, lens[sample])
    bad = [int(sample[k]) for k, c in enumerate(cpu) if not same(graph, host[k], c, hyps[sample[k]])]
    row = dict(lanes=a.lanes, frames_mean=float(lens.mean()), frames_max=int(lens.max()), build_s=round(build_s, 2),
               first_decode_s=round(times[0], 3), steady_decode_s=round(times[1], 3),
               rows_per_s=round(a.lanes / times[1], 1), arena_high_water=st["arena_high_water"],
               decoder_committed_mib=round(st["committed"] / 2**20, 1), decoder_fixed_mib=round(st["fixed"] / 2**20, 1),
               rescue_instance_mib=round(rescue_mib, 1), device_used_by_run_mib=round((free0 - free1) / 2**20, 1),
               torch_peak_mib=round(torch.cuda.max_memory_allocated() / 2**20, 1), rescue=stats,
               overflow_rows=overflow_rows, checked=len(sample), mismatches=bad,
               max_frontier=max(h.max_frontier for h in hyps), graph=a.graph, commit=git_commit(),
               device=torch.cuda.get_device_name(0), host=platform.node())
    print(json.dumps(row))
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    ok = not bad and overflow_rows == 0 and rescued < a.max_rescued_frac * a.lanes
    print(f"{a.lanes} lanes: steady decode {times[1]:.2f} s ({row['rows_per_s']} rows/s), first {times[0]:.2f} s; "
          f"decoder {row['decoder_committed_mib']} MiB (arena high water {st['arena_high_water']} entries); "
          f"rows re-decoded per batch {rescued:.0f}; {len(sample) - len(bad)}/{len(sample)} sampled rows exact"
          f"{'' if ok else '  FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
