"""CPU microbenchmark of a lattice decode's host stages (old vs new), on the same lattices.

Decodes --utts utterances of a simulated shard with the CPU reference decoder (lattice=True)
once and caches each row's lattice arrays ({states, arcs, scores}, the arrays that
ref_lattice_row and gpu_lattice_pruned_rows hand over) and 1-best; then times, per stage,
the implementation before this change (tests/lattice_reference_impl.py keeps it, or the
old code path named below: Lattice._nbest_python for the n-best lists) against the current
one, checks that their outputs are bit-identical, and prints ms per lattice and the old/new
ratio.

    PYTHONPATH=$PWD python -m benchmarks.lattice_host --graph /tmp/corpus-full/HLG.img \
        --log-probs /tmp/corpus-full/sim/shard-00000.npz --utts 24
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph


def build_cache(a):
    g = Graph.load(a.graph)
    d = np.load(a.log_probs)
    lp, lens = d["log_probs"][: a.utts], d["lengths"][: a.utts].astype(np.int32)
    dec = Decoder(g, DecoderOptions(output_beam=a.output_beam), num_threads=a.threads)
    import cuwfst.decoder.lattice as L

    raw = []
    orig = L.lattices_from_arrays

    def spy(graph, rows, num_threads=1):
        rows = [tuple(r) for r in rows]
        raw.extend((s.copy(), a.copy(), c.copy(), int(n)) for s, a, c, n in rows)
        return orig(graph, rows, num_threads)

    L.lattices_from_arrays = spy
    rows = []
    t0 = time.perf_counter()
    try:
        for s in range(0, len(lens), 4):
            for h in dec.decode(lp[s: s + 4], lens[s: s + 4], lattice=True):
                h.lattice = None
                rows.append(dict(raw=raw.pop(0), hyp=h))
    finally:
        L.lattices_from_arrays = orig
    print(f"decoded {len(rows)} rows on the CPU in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", default="/tmp/corpus-full/HLG.img")
    p.add_argument("--log-probs", default="/tmp/corpus-full/sim/shard-00000.npz")
    p.add_argument("--utts", type=int, default=24)
    p.add_argument("--output-beam", type=float, default=8.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--cache", default="/tmp/lattice_host_cache.pkl")
    p.add_argument("--nbest", type=int, default=10, help="n of the n-best stage")
    a = p.parse_args()
    if os.path.exists(a.cache):
        with open(a.cache, "rb") as f:
            rows = pickle.load(f)
    else:
        rows = build_cache(a)
        with open(a.cache, "wb") as f:
            pickle.dump(rows, f)
    print(f"{len(rows)} lattices, {sum(r['raw'][1].shape[1] for r in rows)} arcs (dev-VM numbers: "
          f"CPU decoder lattices, output_beam {a.output_beam})")
    run_stages(a, rows)


def _bits(x):
    return np.asarray(x, np.float64).view(np.int64)


def _time(fn, reps):
    ts, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def run_stages(a, rows):
    from cuwfst.decoder import lattice as L
    from cuwfst.jit.reference import module

    module()  # built and loaded before any timing
    g = Graph.load(a.graph)
    n = len(rows)
    report = []

    def stage(name, old, new, same):
        t_old, o = _time(old, a.reps)
        t_new, w = _time(new, a.reps)
        ok = same(o, w)
        report.append((name, t_old, t_new, ok))
        print(f"{name}: old {t_old / n * 1000:.3f} ms, new {t_new / n * 1000:.3f} ms per lattice "
              f"(x{t_old / max(t_new, 1e-12):.1f}); identical: {ok}", flush=True)

    def fresh_lats():
        return L.lattices_from_arrays(g, [r["raw"] for r in rows], a.threads)

    def conf_old():
        out = []
        for r, lat in zip(rows, fresh_lats()):
            h = r["hyp"]
            t = L.word_times(g, h)
            out.append((t, lat._word_confidences_numpy([(w, s, e) for w, (s, e) in zip(h.words, t)])))
        return out

    def conf_new():
        out = []
        for r, lat in zip(rows, fresh_lats()):
            h = r["hyp"]
            L.attach(g, h, lat)
            out.append((h.word_times, h.word_confidences))
        h.lattice = None
        return out

    def conf_all():
        hs = [r["hyp"] for r in rows]
        L.attach_all(g, hs, fresh_lats(), a.threads)
        out = [(h.word_times, h.word_confidences) for h in hs]
        for h in hs:
            h.lattice = None
        return out

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from lattice_reference_impl import lattice_difference, ref_lattice_from_arrays

    raws = [r["raw"] for r in rows]
    same_lats = lambda o, w: len(o) == len(w) and all(lattice_difference(x, y) is None for x, y in zip(o, w))
    stage("Lattice objects (per row, lattice_from_arrays)", lambda: [ref_lattice_from_arrays(g, *r) for r in raws],
          lambda: [L.lattice_from_arrays(g, *r) for r in raws], same_lats)
    stage(f"Lattice objects (the batch, lattices_from_arrays, {a.threads} threads)",
          lambda: [ref_lattice_from_arrays(g, *r) for r in raws],
          lambda: L.lattices_from_arrays(g, raws, a.threads), same_lats)
    t_old_objs, t_new_objs = report[-1][1], report[-1][2]
    print(f"Lattice objects x32 rows: old {t_old_objs / n * 32000:.1f} ms, new {t_new_objs / n * 32000:.1f} ms per batch of 32")
    report.clear()
    t_lats, _ = _time(fresh_lats, a.reps)
    stage("word times and confidences (incl. Lattice objects "
          f"{t_lats / n * 1000:.3f} ms)", conf_old, conf_new,
          lambda o, w: all(x[0] == y[0] and np.array_equal(_bits(x[1]), _bits(y[1])) for x, y in zip(o, w)))
    stage(f"the same, batched (attach_all, {a.threads} threads)", conf_old, conf_all,
          lambda o, w: all(x[0] == y[0] and np.array_equal(_bits(x[1]), _bits(y[1])) for x, y in zip(o, w)))
    for name, t_old, t_new, _ in report:
        tot_old, tot_new = t_old - t_lats, t_new - t_lats
        print(f"{name.split(' (')[0]}, less the Lattice objects: old {tot_old / n * 1000:.3f} ms, new {tot_new / n * 1000:.3f} ms per lattice "
              f"(x{tot_old / max(tot_new, 1e-12):.1f}); x32 rows: old {tot_old / n * 32000:.1f} ms, "
              f"new {tot_new / n * 32000:.1f} ms per batch of 32")
    # n-best lists (fresh lattices: the backward scores inside the time): the Python A*
    # (Lattice._nbest_python) against the reference module's LatticeNBest, outputs compared as bits
    bits = lambda o: [[(b.words, b.score.hex()) for b in x] for x in o]  # noqa: E731
    stage(f"n-best ({a.nbest}), incl. Lattice objects {t_lats / n * 1000:.3f} ms",
          lambda: [lat._nbest_python(a.nbest) for lat in fresh_lats()],
          lambda: [lat.nbest(a.nbest) for lat in fresh_lats()], lambda o, w: bits(o) == bits(w))


if __name__ == "__main__":
    main()
