"""The graph's footprint under the pruning's bucketing, counted on the CPU: the records a CPU twin makes
for a sub-batch (cuwfst.decoder.lattice_records.cpu_records, every scored arc: more than the GPU keeps)
and the distinct 32-byte sectors of each graph array PrBucketKernel reads for them (row splits by source
state, weights, destinations and source places by arc): a lower bound of its graph traffic when cold.
    python3 scripts/bucket_footprint.py [GRAPH] [SHARD] [--rows shortest|longest] [--n 32]
(the full tier's shortest 32 rows: 226 M records, ~11 GB of this VM's memory; the longest run out of 24 GB)."""
import argparse
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph
from cuwfst.decoder.lattice_records import cpu_records

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("graph", nargs="?", default="/tmp/corpus-full/HLG.img")
p.add_argument("shard", nargs="?", default="/tmp/corpus-full/sim/shard-00000.npz")
p.add_argument("--rows", choices=("shortest", "longest"), default="shortest")
p.add_argument("--n", type=int, default=32)
a = p.parse_args()
g = Graph.load(a.graph)
d = np.load(a.shard)
order = np.argsort(-d["lengths"], kind="stable")
rows = order[-a.n:] if a.rows == "shortest" else order[: a.n]
lp = np.ascontiguousarray(d["log_probs"][rows])
lens = d["lengths"][rows].astype(np.int32)
dec = Decoder(g, DecoderOptions(output_beam=8.0), num_threads=2)
t0 = time.time()
r = cpu_records(dec, lp, lens).records
t1 = time.time()
src = r[:, 0].astype(np.int64)
arc = (r[:, 1] & ~(1 << 30)).astype(np.int64)
ok = (r[:, 1] >= 0) & (src >= 0)
src, arc = src[ok], arc[ok]


def sectors(idx, elem):
    return np.unique(idx * elem // 32).size


rs, w, sp = sectors(src, 4), sectors(arc, 4), sectors(arc, 2)
print(f"{a.rows} {a.n} rows: {len(r):,} records ({t1 - t0:.1f} s), {int(lens.sum())} lane-frames; distinct source "
      f"states {np.unique(src).size:,}, arcs {np.unique(arc).size:,}; distinct 32-B sectors: row splits {rs:,}, "
      f"weights {w:,}, destinations {w:,}, source places {sp:,} -> {(rs + 2 * w + sp) * 32 / 1e6:.0f} MB")
