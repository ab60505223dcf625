"""attach_all (word times and confidences of a batch of lattices) timed in this checkout, with a
digest of its outputs, over the lattices benchmarks/lattice_host.py caches (--cache). For an
old/new A/B run it in two checkouts (a git worktree for the old one, each with its own
CUWFST_CACHE_DIR), alternating; equal digests mean bit-identical outputs.

    PYTHONPATH=$PWD python scripts/attach_time.py --threads 1
    PYTHONPATH=$PWD python scripts/attach_time.py --cache /tmp/lattice_host_model.pkl --native

--native adds each native call's time a lattice (ref_lattices_arcs and ref_lattices_word_ids, which
lattices_from_arrays makes, and ref_lattices_word_rests, attach_all's), summed over the timed runs.
"""
import argparse
import hashlib
import pickle
import statistics
import time

import numpy as np

from cuwfst import Graph
from cuwfst.decoder import lattice as L
from cuwfst.jit.reference import module

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--cache", default="/tmp/lattice_host_cache.pkl", help="benchmarks.lattice_host's cache")
p.add_argument("--graph", default="/tmp/corpus-full/HLG.img")
p.add_argument("--threads", type=int, default=1)
p.add_argument("--reps", type=int, default=11)
p.add_argument("--native", action="store_true", help="also each native call's time a lattice")
a = p.parse_args()
module()  # built and loaded before any timing
with open(a.cache, "rb") as f:
    rows = pickle.load(f)
g = Graph.load(a.graph)
raws = [r["raw"] for r in rows]
hyps = [r["hyp"] for r in rows]


def once():
    lats = L.lattices_from_arrays(g, raws, a.threads)
    t0 = time.perf_counter()
    L.attach_all(g, hyps, lats, a.threads)
    t = time.perf_counter() - t0
    out = [(tuple(h.word_times), np.asarray(h.word_confidences, np.float64).tobytes()) for h in hyps]
    for h in hyps:
        h.lattice = None
    return t, out


native = {}
if a.native:  # each of the reference module's calls timed where lattice.py makes it
    mod = L._reference_module()

    class _Timed:
        def __getattr__(self, name):
            f = getattr(mod, name)

            def call(*args):
                t0 = time.perf_counter()
                try:
                    return f(*args)
                finally:
                    native[name] = native.get(name, 0.0) + time.perf_counter() - t0
            return call

    L._reference_module = lambda: _Timed()
once()
native.clear()
ts, out = [], None
for _ in range(a.reps):
    t, out = once()
    ts.append(t)
print(f"{L.__file__}: threads {a.threads}, attach_all median {statistics.median(ts) * 1000:.2f} ms "
      f"({len(rows)} lattices), outputs {hashlib.md5(repr(out).encode()).hexdigest()[:10]}")
if native:
    print("native ms a lattice (lattices_from_arrays' and attach_all's): " + ", ".join(
        f"{k} {v / (a.reps * len(rows)) * 1000:.2f}" for k, v in native.items()))
