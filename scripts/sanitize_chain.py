"""One decode with closure="chain" under compute-sanitizer (tools memcheck / racecheck): a random
chain graph (at most one epsilon arc a state, chains of several hops), float32 rows, 4 lanes,
launch by launch, then the same rows as streams; compared with the CPU. Exit 0 when every row
equals the CPU's (scores, and words or an exact-score tie)."""
import sys

import numpy as np

sys.path.insert(0, "tests")
from cuwfst import Decoder, DecoderOptions, StreamingDecoder  # noqa: E402
from helpers import path_score_f32, random_log_probs  # noqa: E402
from test_gpu_chain import chain_graph  # noqa: E402

rng = np.random.default_rng(12)
V = 12
graph = chain_graph(rng, 200, V, 4, 0.8, span=3)
opts = DecoderOptions(search_beam=12.0, max_active_states=500)
lp = random_log_probs(rng, 4, 10, V, peaky=True)
cpu = Decoder(graph, opts).decode(lp)
dec = Decoder(graph, opts, device="cuda", max_lanes=4, closure="chain", use_cuda_graphs=False)
assert dec._gpu.main.mem_stats()["closure_lists"] == 2


def differs(c, g, row) -> bool:
    if np.float32(c.score) != np.float32(g.score):
        return True
    return c.words != g.words and path_score_f32(graph, lp[row], g.arcs, g.redirect_arc) != np.float32(c.score)


bad = sum(differs(c, g, b) for b, (c, g) in enumerate(zip(cpu, dec.decode(lp))))
want = Decoder(graph, opts).decode(lp, online=True)
sd = StreamingDecoder(graph, opts, device="cuda", max_streams=4, closure="chain")
ss = [sd.open_stream() for _ in range(4)]
sd.advance(ss, [lp[b, :5] for b in range(4)])
sd.advance(ss, [lp[b, 5:] for b in range(4)])
bad += sum(differs(want[b], sd.finalize(ss[b]), b) for b in range(4))
print(f"sanitize_chain: {bad} rows differ from the CPU")
sys.exit(1 if bad else 0)
