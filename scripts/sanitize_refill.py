"""Continuous batching with refill="device" under compute-sanitizer (tools memcheck /
racecheck): 14 rows of 0 to 12 frames through 3 lanes in segments of 40 steps (so lanes take
their next rows inside a segment: in FinalizeKernel's last CTA of the lane, RefillBacktrackKernel), on a random epsilon
graph (the start closure of a refilled row runs in the step's closure) and on an epsilon-free
one, launch by launch; compared with the CPU. Exit 0 when every row equals the CPU's (scores,
and words or an exact-score tie) and the refill happened (argument "host": the host's refill
between segments instead, the same rows; exit 0 when they equal the CPU's). Progress lines go
to stderr."""
import sys

import numpy as np

sys.path.insert(0, "tests")
from cuwfst import Decoder, DecoderOptions  # noqa: E402
from helpers import path_score_f32, random_ctc_graph, random_eps_graph_any, random_log_probs  # noqa: E402

refill = {"host": "segment"}.get(sys.argv[1], sys.argv[1]) if len(sys.argv) > 1 else "device"
bad = refills = 0
for eps in (True, False):
    rng = np.random.default_rng(21 + eps)
    V = 10
    graph = (random_eps_graph_any(rng, 60, V, 4, 0.7, cycles=False, chain=2) if eps
             else random_ctc_graph(rng, 60, V, 5, 0.3))
    opts = DecoderOptions(search_beam=10.0, max_active_states=300)
    lens = np.array([12, 0, 1, 7, 12, 3, 9, 2, 12, 5, 0, 11, 4, 8], np.int32)
    lp = random_log_probs(rng, len(lens), 12, V, peaky=True)
    print(f"eps={eps}: CPU decode", file=sys.stderr, flush=True)
    cpu = Decoder(graph, opts).decode(lp, lens)
    print(f"eps={eps}: GPU decode, refill={refill}", file=sys.stderr, flush=True)
    dec = Decoder(graph, opts, device="cuda", max_lanes=3, batching="continuous", segment=40, refill=refill,
                  use_cuda_graphs=False)
    for b, (c, g) in enumerate(zip(cpu, dec.decode(lp, lens))):
        if np.float32(c.score) != np.float32(g.score) or (
                c.words != g.words and path_score_f32(graph, lp[b], g.arcs, g.redirect_arc) != np.float32(c.score)):
            bad += 1
    refills += dec._gpu.main.mem_stats()["refills"]
print(f"sanitize_refill: {bad} rows differ from the CPU, {refills} rows refilled on the device")
sys.exit(1 if bad or (refill == "device" and not refills) else 0)
