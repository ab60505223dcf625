"""A small GPU workload for compute-sanitizer (memcheck / racecheck):
compute-sanitizer --tool memcheck python3 scripts/sanitize_case.py [N] [--eps]

--eps decodes random graphs with epsilon arcs (natural arc order, cycles, chains), so the
closure kernels run; otherwise epsilon-free CTC graphs. --lanes adds continuous batching
and streams with a tiny arena (GC rounds and arena growth). --lattice adds GPU-pruned lattice
decodes (the records' filter on and off, whole and in 16-step runs, a guard re-run) compared
with the CPU's lattices; --lattice-wide one wide lattice decode whose lanes reach ~11,900 tokens
a time (every size of the pruning's block rank). --eps-blocks=N gives the
closure's expand kernels N CTAs (default: auto), e.g. 1 to shrink a racecheck run."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers import random_ctc_graph, random_eps_graph_any, random_log_probs  # noqa: E402

from cuwfst import Decoder, DecoderOptions, StreamingDecoder  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith("--")]
eps = "--eps" in sys.argv
kw = {}
for a in sys.argv[1:]:
    if a.startswith("--eps-blocks="):
        kw["eps_blocks"] = int(a.split("=", 1)[1])
bad = 0
for seed in range(int(args[0]) if args else 6):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([10, 200, 1500]))
    if eps:
        g = random_eps_graph_any(rng, n, 12, 4, 0.8, cycles=bool(seed % 2), chain=3)
    else:
        g = random_ctc_graph(rng, n, 12, 5, 0.2)
    lp = random_log_probs(rng, 4, 30, 12, peaky=bool(seed % 2))
    lens = np.array([30, 1, 0, 17], np.int32)
    opts = DecoderOptions(search_beam=12.0, min_active_states=2, max_active_states=50, allow_partial=True)
    cpu = Decoder(g, opts).decode(lp, lens)
    for graphs in (True, False):
        gpu = Decoder(g, opts, device="cuda", max_lanes=4, use_cuda_graphs=graphs, **kw).decode(lp, lens)
        bad += sum(np.float32(c.score) != np.float32(h.score) for c, h in zip(cpu, gpu))
    if "--lanes" in sys.argv:
        lp8 = random_log_probs(rng, 9, 30, 12, peaky=bool(seed % 2))
        lens8 = rng.integers(0, 31, size=9).astype(np.int32)
        cpu8 = Decoder(g, opts).decode(lp8, lens8)
        gpu8 = Decoder(g, opts, device="cuda", max_lanes=3, batching="continuous", segment=4,
                       arena_entries=2048, **kw).decode(lp8, lens8)
        bad += sum(np.float32(c.score) != np.float32(h.score) for c, h in zip(cpu8, gpu8))
        sd = StreamingDecoder(g, opts, device="cuda", max_streams=2, arena_entries=2048, **kw)
        s1, s2 = sd.open_stream(), sd.open_stream()
        for t in range(0, 30, 7):
            sd.advance([s1, s2], [lp8[0, t : t + 7], lp8[1, t : t + 3]])
            s1.partial()
        h1 = sd.finalize(s1)
        sd.release(s2)
        ref = Decoder(g, opts).decode(lp8[0:1], online=True)[0]
        bad += int(np.float32(ref.score) != np.float32(h1.score))
    if "--lattice" in sys.argv and not eps:
        # check_log_probs off: the guard case below is deliberately not log-probabilities (the input
        # check refused it, so this case never reached the GPU since that check landed)
        lo = DecoderOptions(search_beam=12.0, output_beam=3.0, max_active_states=200, allow_partial=True,
                            check_log_probs=False)
        lpl = random_log_probs(rng, 4, 60, 12, peaky=bool(seed % 2))
        if seed % 3 == 2:
            lpl[1, 20] -= 20000.0  # the filter's guard fires: decoded again without it
        lensl = np.array([60, 33, 0, 47], np.int32)
        want = Decoder(g, lo).decode(lpl, lensl, lattice=True)
        for filt, chunk in (("on", 0), ("on", 16), ("off", 0)):
            dl = Decoder(g, lo, device="cuda", max_lanes=4, **kw)
            dl._gpu.lattice_filter, dl._gpu.lattice_chunk = filt, chunk
            got = dl.decode(lpl, lensl, lattice=True)
            for c, h in zip(want, got):
                same = c.lattice.num_states == h.lattice.num_states and all(
                    np.array_equal(getattr(c.lattice, f), getattr(h.lattice, f)) for f in ("src", "dst", "frame", "graph_arc", "score"))
                bad += int(not same)
if "--lattice-wide" in sys.argv:
    # lanes of up to ~11,900 tokens a time: the pruning's block rank in all three sizes (up to
    # 1,024, 4,096 and 8,192 tokens a lane) and the device sort for the larger times
    rng = np.random.default_rng(6308)
    gw = random_ctc_graph(rng, 12000, 40, 8, 0.3)
    lpw = random_log_probs(rng, 2, 10, 40, peaky=False)
    lensw = np.array([10, 8], np.int32)
    ow = DecoderOptions(search_beam=1000.0, output_beam=2.0, min_active_states=1, max_active_states=400)
    want = Decoder(gw, ow).decode(lpw, lensw, lattice=True)
    got = Decoder(gw, ow, device="cuda", max_lanes=2, **kw).decode(lpw, lensw, lattice=True)
    for c, h in zip(want, got):
        bad += int(not (c.lattice.num_states == h.lattice.num_states and all(
            np.array_equal(getattr(c.lattice, f), getattr(h.lattice, f)) for f in ("src", "dst", "frame", "graph_arc", "score"))))
print(f"sanitize case done ({'epsilon' if eps else 'epsilon-free'} graphs{', lanes' if '--lanes' in sys.argv else ''}{', lattices' if '--lattice' in sys.argv else ''}): "
      f"{bad} score mismatches")
