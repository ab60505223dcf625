"""Trimmed decodes under compute-sanitizer (tools memcheck / racecheck): a wide graph whose states
have up to 200 sorted arcs (the 8-ary search runs, heavy states bound by their labels:
scan.cuh LabelBitLoads, LabelBound; the weights-only search past each state's label-0 arcs,
TrimSearchWeights), float32 and float16 rows, both scan kernels (scan_split 1 and auto), under
the walkers named in $SAN_WALKERS (default "warp"), compared with the CPU; then a graph of 700
labels (the label bitmaps fold: bit label % 512) the same way. Exit 0 when every row equals the
CPU's."""
import os
import sys

import numpy as np

sys.path.insert(0, "tests")
from cuwfst import Decoder, DecoderOptions  # noqa: E402
from test_gpu_trim import wide_graph  # noqa: E402
from helpers import random_log_probs  # noqa: E402

bad = 0
for seed, V, n, deg in ((11, 30, 40, 200), (12, 700, 30, 400)):
    rng = np.random.default_rng(seed)
    graph = wide_graph(rng, n, V, deg, blanks=2, inf_frac=0.05, tie_frac=0.3)
    opts = DecoderOptions(search_beam=10.0, output_beam=6.0, min_active_states=1, max_active_states=50)
    lp = random_log_probs(rng, 3, 8, V, peaky=True)
    for rows in (lp, lp.astype(np.float16)):
        cpu = Decoder(graph, opts).decode(rows)
        for split, walker in [(s, w) for s in (1, 0) for w in os.environ.get("SAN_WALKERS", "warp").split()]:
            dec = Decoder(graph, opts, device="cuda", max_lanes=4, scan_split=split, use_cuda_graphs=False,
                          walker=walker)
            st = dec._gpu.main.mem_stats()
            assert dec._gpu.trims_arcs and st["label_bound"] == 1 and st["trim_weights"] == 1
            for c, g in zip(cpu, dec.decode(rows)):
                bad += int(np.float32(c.score) != np.float32(g.score) or c.words != g.words)
print(f"sanitize_trim: {bad} rows differ from the CPU")
sys.exit(1 if bad else 0)
