"""The word confidences' native passes (csrc/reference/lattice_posteriors.cc, the batch call
ref_lattices_word_rests that attach_all makes) timed for two builds of the reference module on
the same lattices, in one process, with their outputs compared bit for bit.

    python -m benchmarks.word_rests --old OLD.so [--new NEW.so] [--cache LATS.pkl] \\
        [--graph /tmp/corpus-full/HLG.img --log-probs /tmp/corpus-full/sim/shard-00000.npz --utts 32]

OLD.so: a cuwfst_reference.so built from the commit to compare against (one whose
ref_lattices_word_rests takes each lattice's arrays, as this script passes them), e.g.
    git worktree add /tmp/old COMMIT && (cd /tmp/old && CUWFST_CACHE_DIR=/tmp/old-cache python -c \\
        "from cuwfst.jit.reference import module; module()") && ls /tmp/old-cache/cuwfst_reference-*/*.so
NEW.so: default, this checkout's module. The lattices: the CPU decoder's (lattice=True, output
beam 8) for the first --utts rows of the shard, pickled to --cache (reused when it exists). The
spans: each lattice's best-path words, a word from its arc's frame to the next word's frame - 1.
Each row: median ms of --reps calls, the two builds alternating; "passes" calls with no spans
(forward and backward alone), "one span" with one span of a word no lattice has (the passes and
the spans' set-up), "all" with every span.
"""
from __future__ import annotations

import argparse
import os
import pickle
import statistics
import time

import numpy as np


def load_lattices(a):
    if os.path.exists(a.cache):
        with open(a.cache, "rb") as f:
            return pickle.load(f)
    from cuwfst import Decoder, DecoderOptions, Graph

    g = Graph.load(a.graph)
    d = np.load(a.log_probs)
    lp, lens = d["log_probs"][: a.utts], d["lengths"][: a.utts].astype(np.int32)
    lats = [h.lattice for h in Decoder(g, DecoderOptions(output_beam=8.0), num_threads=max(a.threads)).decode(
        lp, lens, lattice=True)]
    with open(a.cache, "wb") as f:
        pickle.dump(lats, f)
    return lats


def best_path_spans(lat) -> np.ndarray:
    arcs, _ = lat.best_path()
    carriers = [(int(x), w) for x in arcs for w in lat.words(int(x))]
    frames = [int(lat.frame[x]) for x, _ in carriers]
    last = int(lat.frame.max()) if lat.num_arcs else 0
    sp = [(w, f, frames[i + 1] - 1 if i + 1 < len(frames) else last) for i, ((_, w), f) in enumerate(zip(carriers, frames))]
    return np.array(sp, np.int64).reshape(-1, 3)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old", required=True, help="the reference module (.so) to compare against")
    p.add_argument("--new", help="the module to time (default: this checkout's)")
    p.add_argument("--cache", default="/tmp/word_rests_lattices.pkl")
    p.add_argument("--graph", default="/tmp/corpus-full/HLG.img")
    p.add_argument("--log-probs", default="/tmp/corpus-full/sim/shard-00000.npz")
    p.add_argument("--utts", type=int, default=32)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args(argv)
    import tvm_ffi

    from cuwfst.decoder import lattice as lat_mod

    mods = {"old": tvm_ffi.load_module(a.old),
            "new": tvm_ffi.load_module(a.new) if a.new else lat_mod._reference_module()}
    lats = load_lattices(a)
    spans = [best_path_spans(x) for x in lats]

    def offsets(sizes):
        o = np.zeros(len(sizes) + 1, np.int64)
        np.cumsum(sizes, out=o[1:])
        return o

    so = offsets([x.num_states for x in lats])
    ao = offsets([x.num_arcs for x in lats])
    # each lattice's own eight arrays (the call's form since it stopped taking them concatenated)
    arrays = [np.ascontiguousarray(getattr(x, n), t) for x in lats
              for n, t in (("src", np.int32), ("dst", np.int32), ("score", np.float32), ("frame", np.int32),
                           ("word_splits", np.int32), ("word_ids", np.int32), ("state_frame", np.int32),
                           ("state_level", np.int32))]
    cases = {"passes": [s[:0] for s in spans], "one span": [np.array([[10**9, 0, 0]], np.int64) for _ in lats],
             "all": spans}

    def call(mod, sp, threads):
        rn = offsets([len(s) for s in sp])
        out = (np.empty(int(so[-1])), np.empty(int(so[-1])), np.empty(int(rn[-1])), np.empty(int(rn[-1]), np.int32))
        t0 = time.perf_counter()
        mod.ref_lattices_word_rests(arrays, so, rn, out[0], out[1], np.concatenate(sp), out[2], out[3], threads)
        return (time.perf_counter() - t0) * 1000, out

    print(f"{len(lats)} lattices, {int(ao[-1]):,} arcs, {int(so[-1]):,} states, {sum(len(s) for s in spans)} spans")
    ok = True
    for threads in a.threads:
        for case, sp in cases.items():
            ms = {n: [] for n in mods}
            outs = {}
            for _ in range(a.reps):
                for n, m in mods.items():
                    t, outs[n] = call(m, sp, threads)
                    ms[n].append(t)
            same = all(np.array_equal(x.view(np.uint8), y.view(np.uint8)) for x, y in zip(outs["old"], outs["new"]))
            ok &= same
            o, n = statistics.median(ms["old"]), statistics.median(ms["new"])
            print(f"threads {threads}, {case:8s}: old {o:7.1f} ms  new {n:7.1f} ms  old/new {o / n:5.2f}x  "
                  f"outputs {'identical' if same else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
