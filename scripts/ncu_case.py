"""One decode for Nsight Compute (scripts/device_ncu.sh): GRAPH (HLG.img or TLG.img) with the
rows of LOG_PROBS laid end to end into 32 rows of 250 frames (gpu_speed --uniform 250), launch
by launch (use_cuda_graphs=False, so ncu sees every kernel), after one warm-up decode.
Usage: python3 scripts/ncu_case.py GRAPH LOG_PROBS [walk_blocks [MODE]]
MODE: a memory mode of benchmarks.memory (lazy, the default; pooled, pooled-late-defer, ...)."""
import sys

import numpy as np
import torch

from benchmarks.gpu_speed import uniform_rows
from benchmarks.memory import pool_env
from cuwfst import Decoder, DecoderOptions, Graph

graph = Graph.load(sys.argv[1])
d = np.load(sys.argv[2])
key = "log_probs" if "log_probs" in d else "log_probs_fp16"
lp, lens = uniform_rows(d[key], d["lengths"], 32, 250)
wb = int(sys.argv[3]) if len(sys.argv) > 3 else 0
mode = sys.argv[4] if len(sys.argv) > 4 else "lazy"
with pool_env(mode) as memory:
    dec = Decoder(graph, DecoderOptions(), device="cuda", max_lanes=32, use_cuda_graphs=False, walk_blocks=wb,
                  memory=memory)
x = torch.from_numpy(lp).cuda()
dec.decode(x, lens)  # warm-up
torch.cuda.synchronize()
with torch.cuda.nvtx.range("decode2"):  # (ncu --nvtx --nvtx-include decode2/: this decode's launches alone)
    hyps = dec.decode(x, lens)
    torch.cuda.synchronize()
print(f"ncu_case ({mode}): {len(hyps)} rows, {sum(len(h.words) for h in hyps)} words")
