"""The records replay (`lattices_from_records`, the GPU lattice's host path on graphs with epsilon
arcs) timed on the host: the CPU decoder's records of the first --rows rows of a shard, shuffled
within each step as the GPU's atomics leave them, replayed on --threads threads (min of --reps),
with a digest of the lattices (equal digests across builds mean identical outputs) and the record
count. For A/B runs of the reference module (two worktrees, alternating).

    PYTHONPATH=$PWD python scripts/replay_time.py --graph /tmp/corpus-small/TLG.img \
        --log-probs /tmp/corpus-full/sim/shard-00000.npz --rows 8
"""
import argparse
import hashlib
import os
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph
from cuwfst.decoder.lattice_records import LatticeRecords, cpu_records, lattices_from_records

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--graph", default="/tmp/corpus-small/TLG.img")
p.add_argument("--log-probs", default="/tmp/corpus-full/sim/shard-00000.npz")
p.add_argument("--rows", type=int, default=8)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--cache", default="", help="an .npz to keep the shuffled records in (made when missing)")
p.add_argument("--filter", action="store_true",
               help="the records as the GPU's records filter on epsilon graphs leaves them (cpu_records' twin)")
a = p.parse_args()
g = Graph.load(a.graph)
d = np.load(a.log_probs)
lp = np.ascontiguousarray(d["log_probs"][: a.rows, :, : g.vocab_size])
lens = d["lengths"][: a.rows].astype(np.int32)
opts = DecoderOptions(output_beam=8.0)
dec = Decoder(g, opts, num_threads=a.threads)
if a.cache and os.path.exists(a.cache):
    rec = LatticeRecords(**{k: v for k, v in np.load(a.cache).items()})
else:
    rec = cpu_records(dec, lp, lens, filter=a.filter)
    rng = np.random.default_rng(0)
    steps = np.concatenate([np.repeat(np.arange(b * 100000, b * 100000 + int(lens[b]) + 1),
                                      rec.counts[b, : int(lens[b]) + 1]) for b in range(len(lens))])
    order = np.lexsort((rng.random(steps.size), steps))
    rec = LatticeRecords(rec.records[order], rec.counts, rec.cutoffs, rec.sizes, rec.producer_a)
    if a.cache:
        np.savez(a.cache, records=rec.records, counts=rec.counts, cutoffs=rec.cutoffs, sizes=rec.sizes,
                 **({} if rec.producer_a is None else dict(producer_a=rec.producer_a)))
times, lats = [], None
for _ in range(a.reps):
    t0 = time.perf_counter()
    redo = np.zeros(len(lens), np.uint8)
    lats, scores = lattices_from_records(dec._ref, g, opts, dec.eps_iterations, lens, rec, a.threads, redo=redo)
    times.append(time.perf_counter() - t0)
digest = hashlib.md5(repr([None if lat is None else (lat.num_arcs, lat.score.tobytes(), lat.src.tobytes(), lat.dst.tobytes(),
                            lat.graph_arc.tobytes(), s) for lat, s in zip(lats, scores.tolist())]).encode()).hexdigest()[:10]
print(f"{a.graph} / {a.log_probs}: {a.rows} rows, {len(rec.records):,} records, {a.threads} threads: "
      f"replay {min(times):.3f} s (min of {a.reps}); digest {digest}; rows sent back {int(redo.sum())}")
