"""Which path would rank each time of the GPU lattice pruning, from the CPU decoder alone:
python3 scripts/rank_paths.py HLG.img shard.npz [utts [batch]] -- batches of `batch` rows in
stored order (as scripts/prune_split.py decodes them); per batch, how many times have every
lane at most C tokens (a time's tokens in a lane = the frontier that row's step expands,
ref_decode_step_sizes' first column), for the block rank's sizes C. The H200 run of 3701ccb
counted 739 times in shared memory over prune_split's warm-up and two batches: this script's
254 + 254 + 231 at C = 4,096."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: benchmarks
from benchmarks.pool_accounting import step_sizes  # noqa: E402
from cuwfst import Decoder, DecoderOptions, Graph  # noqa: E402

g = Graph.load(sys.argv[1])
d = np.load(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 64
B = int(sys.argv[4]) if len(sys.argv) > 4 else 32
lp, lens = d["log_probs"][:n], d["lengths"][:n].astype(np.int32)
dec = Decoder(g, DecoderOptions(output_beam=8.0))
rows = [step_sizes(dec, lp[b], T)[:, 0] for b, T in enumerate(lens)]
caps = (1024, 4096, 8192, 16384, 32768)
for s in range(0, n, B):
    batch = rows[s : s + B]
    most = np.zeros(max(len(r) for r in batch), np.int64)
    for r in batch:
        most[: len(r)] = np.maximum(most[: len(r)], r)
    print(f"batch {s // B + 1}: {most.size} times; times whose largest lane holds at most C tokens: " +
          ", ".join(f"C {c:,}: {int((most <= c).sum())}" for c in caps) + f"; largest {int(most.max()):,}")
