"""One decode for Nsight Systems (scripts/device_s32e.sh): GRAPH with the rows of LOG_PROBS laid
end to end into 32 rows of 250 frames (gpu_speed --uniform 250), as a user's decode runs it
(captured CUDA graphs), after two warm-up decodes and 0.1 s idle; the third inside the NVTX range "decode3".
Usage: python3 scripts/nsys_case.py GRAPH LOG_PROBS [MODE]
MODE: a memory mode of benchmarks.memory (lazy, the default; pooled, pooled-late-ahead, ...)."""
import sys
import time

import numpy as np
import torch

from benchmarks.gpu_speed import uniform_rows
from benchmarks.memory import pool_env
from cuwfst import Decoder, DecoderOptions, Graph

graph = Graph.load(sys.argv[1])
d = np.load(sys.argv[2])
key = "log_probs" if "log_probs" in d else "log_probs_fp16"
lp, lens = uniform_rows(d[key], d["lengths"], 32, 250)
mode = sys.argv[3] if len(sys.argv) > 3 else "lazy"
with pool_env(mode) as memory:
    dec = Decoder(graph, DecoderOptions(), device="cuda", max_lanes=32, memory=memory)
x = torch.from_numpy(lp).cuda()
for _ in range(2):
    dec.decode(x, lens)
torch.cuda.synchronize()
time.sleep(0.1)  # (nsys_gaps.py finds the last decode's kernels after this idle gap)
with torch.cuda.nvtx.range("decode3"):
    hyps = dec.decode(x, lens)
    torch.cuda.synchronize()
print(f"nsys_case ({mode}): {len(hyps)} rows, {sum(len(h.words) for h in hyps)} words")
