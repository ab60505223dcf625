#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 16:23, the last ~340 s of device time. compute-sanitizer memcheck
# over scripts/sanitize_case.py --lattice (random epsilon-free graphs, GPU-pruned lattice decodes compared with
# the CPU's) at the new defaults (the packed records walk, claimed tokens, the compacted walk), which have not
# run under memcheck. First a check that such a graph takes the packed walk (MemStats lat_packed_walk 1, one
# records-after decode). No full tier. Prediction: memcheck exit 0, 0 errors, every lattice equal to the CPU's.
# $OUT: s202.log, memcheck.log
. scripts/device_common.sh
NO_FULL=1 device_setup s202.log
python3 - <<'PY' 2>&1 | tail -3 | tee -a $L
import sys; sys.path.insert(0, "tests")
import numpy as np
from helpers import random_ctc_graph, random_log_probs
from cuwfst import Decoder, DecoderOptions
rng = np.random.default_rng(0)
g = random_ctc_graph(rng, 200, 12, 5, 0.2)
lp = random_log_probs(rng, 4, 30, 12, peaky=False)
d = Decoder(g, DecoderOptions(search_beam=12.0, min_active_states=2, max_active_states=50, allow_partial=True),
            device="cuda", max_lanes=4)
d.decode(lp, np.array([30, 1, 0, 17], np.int32), lattice=True)
st = d._gpu.main.mem_stats()
print("sanitize-like graph: lat_packed_walk", st["lat_packed_walk"], "lat_token_claims", st["lat_token_claims"],
      "lattice_after_decodes", st["lattice_after_decodes"])
PY
echo "[$(since) s] stats" | tee -a $L
SANITIZE_SEEDS=3 lattice_memcheck $(left 230)
echo "[$(since) s] end" | tee -a $L
