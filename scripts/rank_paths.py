"""Which path would rank each time of the GPU lattice pruning, from the CPU decoder alone:
python3 scripts/rank_paths.py HLG.img shard.npz [utts [batch]] -- batches of `batch` rows in
stored order (as scripts/prune_split.py decodes them); per batch, how many times have every
lane at most C tokens (a time's tokens in a lane = the frontier that row's step expands,
ref_decode_step_sizes' first column), for the block rank's sizes C. The H200 run of 3701ccb
counted 739 times in shared memory over prune_split's warm-up and two batches: this script's
254 + 254 + 231 at C = 4,096."""
import sys

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph

g = Graph.load(sys.argv[1])
d = np.load(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 64
B = int(sys.argv[4]) if len(sys.argv) > 4 else 32
lp, lens = d["log_probs"][:n], d["lengths"][:n].astype(np.int32)
opts = DecoderOptions(output_beam=8.0)
ref = Decoder(g, opts)._ref
rows = []
for b, T in enumerate(lens):
    out = np.zeros((int(T) + 1, 8), np.int64)
    ref.mod.ref_decode_step_sizes(ref.handle, np.ascontiguousarray(lp[b], np.float32), int(T), opts.search_beam,
                                  opts.output_beam, opts.min_active_states, opts.max_active_states,
                                  opts.allow_partial, 0, out)
    rows.append(out[:, 0])
caps = (1024, 4096, 8192, 16384, 32768)
for s in range(0, n, B):
    batch = rows[s : s + B]
    most = np.zeros(max(len(r) for r in batch), np.int64)
    for r in batch:
        most[: len(r)] = np.maximum(most[: len(r)], r)
    print(f"batch {s // B + 1}: {most.size} times; times whose largest lane holds at most C tokens: " +
          ", ".join(f"C {c:,}: {int((most <= c).sum())}" for c in caps) + f"; largest {int(most.max()):,}")
