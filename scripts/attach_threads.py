"""Word times and confidences (decoder/lattice.py attach_all: ref_lattices_word_rests on
num_threads threads) on one batch's GPU lattices, by thread count: how the host part of a
lattice decode scales on the machine that runs it.

    python scripts/attach_threads.py GRAPH SHARD [ROWS] [THREADS ...]

Decodes the first ROWS (default 32) utterances of SHARD on the GPU with lattice=True, then for
each thread count (default 1 2 4 8 16) times attach_all on fresh copies of those lattices (no
cached scores), the native call alone too; medians of 5. Prints one line per count and checks
that every count gives the same confidences, bit for bit.
"""
from __future__ import annotations

import copy
import statistics
import sys
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph
from cuwfst.decoder import lattice as lat_mod


def main() -> None:
    graph, shard = sys.argv[1], sys.argv[2]
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    counts = [int(x) for x in sys.argv[4:]] or [1, 2, 4, 8, 16]
    g = Graph.load(graph)
    d = np.load(shard)
    lp, lens = d["log_probs"][:rows], d["lengths"][:rows].astype(np.int32)
    dec = Decoder(g, DecoderOptions(output_beam=8.0), device="cuda", max_lanes=rows)
    hyps = dec.decode(lp, lens, lattice=True)
    base = [copy.copy(h) for h in hyps]
    lats = [h.lattice for h in hyps]
    mod = lat_mod._reference_module()
    native_ms: list[float] = []

    class Timed:  # the reference module, its batch call timed
        def __getattr__(self, k):
            return getattr(mod, k)

        def ref_lattices_word_rests(self, *a):
            t0 = time.perf_counter()
            mod.ref_lattices_word_rests(*a)
            native_ms.append((time.perf_counter() - t0) * 1000)

    lat_mod._reference_module = lambda: Timed()
    want = None
    arcs = sum(x.num_arcs for x in lats)
    print(f"{rows} rows, {arcs} lattice arcs, {sum(len(h.words) for h in hyps)} words")
    for nt in counts:
        whole = []
        native_ms.clear()
        for _ in range(6):
            fresh = [copy.copy(x) for x in lats]
            for x in fresh:
                x.__dict__.pop("_derived", None)
            hs = [copy.copy(h) for h in base]
            t0 = time.perf_counter()
            lat_mod.attach_all(g, hs, fresh, nt)
            whole.append((time.perf_counter() - t0) * 1000)
        got = [h.word_confidences for h in hs]
        want = got if want is None else want
        print(f"threads {nt}: attach_all {statistics.median(whole[1:]):.1f} ms, of it the native call "
              f"{statistics.median(native_ms[1:]):.1f} ms; confidences {'the same' if got == want else 'DIFFER'}")


if __name__ == "__main__":
    main()
