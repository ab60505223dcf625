"""One lattice decode for Nsight Compute (scripts/device_s80.sh): GRAPH with the rows of LOG_PROBS
laid end to end into 32 rows of 250 frames (gpu_speed --uniform 250), launch by launch
(use_cuda_graphs=False, so ncu sees every kernel), after one warm-up lattice decode.
Usage: python3 scripts/ncu_lattice_case.py GRAPH LOG_PROBS [1best]  (1best: 1-best decodes instead)"""
import sys

import numpy as np
import torch

from benchmarks.gpu_speed import uniform_rows
from cuwfst import Decoder, DecoderOptions, Graph

graph = Graph.load(sys.argv[1])
d = np.load(sys.argv[2])
key = "log_probs" if "log_probs" in d else "log_probs_fp16"
lp, lens = uniform_rows(d[key], d["lengths"], 32, 250)
dec = Decoder(graph, DecoderOptions(), device="cuda", max_lanes=32, use_cuda_graphs=False)
x = torch.from_numpy(lp).cuda()
lattice = not (len(sys.argv) > 3 and sys.argv[3] == "1best")
dec.decode(x, lens, lattice=lattice)  # warm-up
torch.cuda.synchronize()
hyps = dec.decode(x, lens, lattice=lattice)
torch.cuda.synchronize()
print(f"ncu_lattice_case: {len(hyps)} rows, {sum(len(h.words) for h in hyps)} words, "
      f"{sum(h.lattice.num_arcs for h in hyps if h.lattice is not None)} lattice arcs")
