"""Continuous batching against padded batches, same run: every utterance of a shard through
32 lanes in stored order, as padded sub-batches (each runs as many steps as its longest
row) and continuously (the next utterance enters a lane the moment one finishes).

python -m benchmarks.continuous --graph HLG.img --log-probs shard.npz [--lanes 32] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--graph", required=True)
    p.add_argument("--log-probs", required=True)
    p.add_argument("--lanes", type=int, nargs="+", default=[32])
    p.add_argument("--utts", type=int, default=None)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--segment", type=int, default=32)
    p.add_argument("--check", type=int, default=8, help="rows also compared with the CPU decoder")
    p.add_argument("--json")
    a = p.parse_args()
    import torch

    from benchmarks.peers.measure import git_commit

    g = Graph.load(a.graph)
    d = np.load(a.log_probs)
    key = "log_probs" if "log_probs" in d else "log_probs_fp16"
    lp, lens = d[key], d["lengths"].astype(np.int32)
    if a.utts:
        lp, lens = lp[: a.utts], lens[: a.utts]
    lp_gpu = torch.from_numpy(np.ascontiguousarray(lp, np.float32)).cuda()
    audio_s = float(lens.sum()) * 0.04
    opts = DecoderOptions()
    print(f"{a.graph}: {lp.shape[0]} utts, mean T {lens.mean():.0f}, max {lens.max()}; "
          f"{torch.cuda.get_device_name(0)}; commit {git_commit()}")
    rows, results = [], {}
    for L in a.lanes:
        for mode in ("padded", "continuous"):
            dec = Decoder(g, opts, device="cuda", max_lanes=L, batching=mode, segment=a.segment)
            dec.decode(lp_gpu, lens)  # warm-up: build, capture
            times = []
            for _ in range(a.reps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                hyps = dec.decode(lp_gpu, lens)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            results[(L, mode)] = hyps
            row = dict(lanes=L, batching=mode, seconds=med, rtfx=audio_s / med,
                       overflow_rows=sum(1 for h in hyps if h.overflow))
            rows.append(row)
            print(json.dumps(row))
            del dec
        same = sum(1 for x, y in zip(results[(L, "padded")], results[(L, "continuous")])
                   if np.float32(x.score) == np.float32(y.score) and x.words == y.words)
        print(f"lanes {L}: continuous / padded speed {rows[-1]['rtfx'] / rows[-2]['rtfx']:.2f}x; "
              f"{same}/{lp.shape[0]} rows identical in words and score")
    if a.check:
        cpu = Decoder(g, opts, num_threads=16).decode(lp[: a.check].astype(np.float32), lens[: a.check])
        ok = sum(1 for c, h in zip(cpu, results[(a.lanes[0], "continuous")])
                 if np.float32(c.score) == np.float32(h.score) and c.words == h.words)
        print(f"exactness: {ok}/{a.check} continuous rows identical to the CPU decoder")
    if a.json:
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps(dict(r, graph=a.graph, commit=git_commit())) + "\n")


if __name__ == "__main__":
    main()
