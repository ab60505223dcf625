"""The CPU decoder's 1-best and lattice decodes of the first --rows rows of a shard, timed (min of
--reps) on --threads threads, with a digest of the lattice results (words, scores, lattice arcs and
scores, confidences): equal digests across builds mean identical outputs. For A/B runs of the
reference module (e.g. two cflags in cuwfst/jit/reference.py, alternating).

    PYTHONPATH=$PWD python scripts/cpu_lattice_time.py --log-probs /tmp/corpus-full/model/shard-00000.npz
"""
import argparse
import hashlib
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--graph", default="/tmp/corpus-full/HLG.img")
p.add_argument("--log-probs", default="/tmp/corpus-full/model/shard-00000.npz")
p.add_argument("--rows", type=int, default=4)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--reps", type=int, default=3)
a = p.parse_args()
g = Graph.load(a.graph)
d = np.load(a.log_probs)
lp, lens = d["log_probs"][: a.rows], d["lengths"][: a.rows].astype(np.int32)
dec = Decoder(g, DecoderOptions(output_beam=8.0), num_threads=a.threads)
dec.decode(lp[:1], lens[:1])  # (the module built and loaded)
best, lat, hyps = [], [], None
for _ in range(a.reps):
    t0 = time.perf_counter()
    dec.decode(lp, lens)
    t1 = time.perf_counter()
    hyps = dec.decode(lp, lens, lattice=True)
    t2 = time.perf_counter()
    best.append(t1 - t0)
    lat.append(t2 - t1)
digest = hashlib.md5(repr([(h.words, h.score, h.lattice.num_arcs, h.lattice.score.tobytes(), h.lattice.src.tobytes(),
                            tuple(h.word_confidences)) for h in hyps]).encode()).hexdigest()[:10]
print(f"{a.log_probs}: {a.rows} rows, {a.threads} threads: 1-best {min(best):.2f} s, lattice {min(lat):.2f} s "
      f"(min of {a.reps}); digest {digest}")
