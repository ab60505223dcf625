"""The GPU lattice pruning's device passes phase by phase (gpu_lattice_prune.cu, CUWFST_PRUNE_SPLIT):
python3 scripts/prune_split.py HLG.img shard.npz [utts [FILTER,SORT,BUCKET ...]] -- batches of 32,
whole-batch path; by default the records' filter on (the rank sort radix, then segmented; "block":
the default, in shared memory where a time's lanes fit, else radix:
CUWFST_PRUNE_SORT), then off, each with the bucketing per warp group (CUWFST_PRUNE_BUCKET
"warp"; "atomic": per record); each decode prints one "prune split ms" line to stderr (after a
warm-up). E.g. `... 64 on,radix,warp on,radix,atomic on,radix,warp` for the bucketing's A/B;
"lanes" (the default): the forward, ranks and windows one CTA a lane, one launch each
(PrLaneForwardKernel, PrLaneWindowsKernel)."""
import os
import sys

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph

g = Graph.load(sys.argv[1])
d = np.load(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 64
lp, lens = d["log_probs"][:n], d["lengths"][:n].astype(np.int32)
configs = [c.split(",") for c in sys.argv[4:]] or [["on", "radix", "warp"], ["on", "segmented", "warp"],
                                                    ["off", "radix", "warp"]]
for filt, sort, bucket in configs:
    os.environ["CUWFST_PRUNE_SORT"] = sort
    os.environ["CUWFST_PRUNE_BUCKET"] = bucket
    dec = Decoder(g, DecoderOptions(output_beam=8.0), device="cuda", max_lanes=32)
    dec._gpu.lattice_filter, dec._gpu.lattice_chunk = filt, 0
    dec.decode(lp[:32], lens[:32], lattice=True)  # warm-up (growth, capture)
    print(f"filter {filt}, rank sort {sort}, bucketing {bucket}:", file=sys.stderr, flush=True)
    os.environ["CUWFST_PRUNE_SPLIT"] = "1"
    for s in range(0, n, 32):
        dec.decode(lp[s : s + 32], lens[s : s + 32], lattice=True)
    del os.environ["CUWFST_PRUNE_SPLIT"]
    st = dec._gpu.main.mem_stats()  # every decode above, the warm-up's included
    print(f"ranked times: per lane {st['prune_lane_times']}, by a block sort {st['prune_block_times']}, by a "
          f"device-wide sort {st['prune_sort_times']}", file=sys.stderr, flush=True)
    del dec
