"""A quick check of every kernel variant before the long runs of scripts/device_speed_ab.sh:
each variant decodes a random epsilon graph and a random CTC graph (one of them with frontiers
of several scan rounds) and must give the CPU decoder's float32 scores and search statistics.
A hang in a new kernel shows here, under the caller's timeout, not in the test suite.

python3 scripts/speed_smoke.py
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers import random_ctc_graph, random_eps_graph_any, random_log_probs  # noqa: E402

from cuwfst import Decoder, DecoderOptions  # noqa: E402
from cuwfst.decoder.gpu import KERNEL_VARIANTS  # noqa: E402

rng = np.random.default_rng(123)
cases = [
    ("eps", random_eps_graph_any(rng, 300, 12, 4, 0.8, cycles=True, chain=3), DecoderOptions(search_beam=12.0)),
    ("ctc-large", random_ctc_graph(rng, 12000, 40, 8, 0.3),
     DecoderOptions(search_beam=1000.0, min_active_states=1, max_active_states=400)),
    ("eps-large", random_eps_graph_any(rng, 9000, 40, 6, 1.0, cycles=False, chain=3),
     DecoderOptions(search_beam=1000.0, min_active_states=1, max_active_states=400)),
]
bad = 0
for name, g, opts in cases:
    V = g.vocab_size
    lp = random_log_probs(rng, 3, 24, V, peaky=name == "eps")
    lens = np.array([24, 9, 0], np.int32)
    cpu = Decoder(g, opts).decode(lp, lens)
    for v, kw in KERNEL_VARIANTS.items():
        t0 = time.perf_counter()
        dec = Decoder(g, opts, device="cuda", max_lanes=4, **kw)
        gpu = dec.decode(lp, lens)
        st = dec._gpu.main.mem_stats()
        wrong = [b for b in range(3) if np.float32(cpu[b].score) != np.float32(gpu[b].score) or gpu[b].overflow
                 or (cpu[b].frontier_total, cpu[b].closure_added) != (gpu[b].frontier_total, gpu[b].closure_added)]
        bad += len(wrong)
        print(f"smoke {name:<9} {v:<6} scan_split {st['scan_split']:>2} closure_lists {st['closure_lists']} "
              f"fused_max {st['fused_max']} "
              f"max_frontier {max(h.max_frontier for h in gpu):>6}: {3 - len(wrong)}/3 rows as the CPU "
              f"({time.perf_counter() - t0:.2f} s){' WRONG rows ' + str(wrong) if wrong else ''}", flush=True)
print(f"smoke: {bad} wrong rows")
sys.exit(1 if bad else 0)
