"""Inputs that an older cuwfst (an earlier commit's package) can read, for same-run tables of
old against new (issue 11: the new table next to the old in one run).

python -m benchmarks.old_inputs --graph HLG.img --log-probs shard.npz --out DIR

Writes into DIR:
- the graph's image without the sections older readers refuse (FLAG_ARC_IDS, FLAG_SYMBOLS):
  same states, arcs, weights and aux labels, so the same decode; only the source arc ids
  and the symbol tables are gone (HLG.img -> DIR/HLG_old.img);
- uniform.npz: --rows rows of exactly --frames frames, as `gpu_speed --uniform` builds them
  (benchmarks.gpu_speed.uniform_rows), float32 `log_probs` and `lengths`;
- sorted.npz: every utterance of the shard, longest first, float32 (length-sorted batches).
Both the old and the new harness then read the same arrays.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from benchmarks.gpu_speed import uniform_rows
from cuwfst import Graph
from cuwfst.graph.image import write_image


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", required=True)
    p.add_argument("--log-probs", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--frames", type=int, default=250)
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    g = Graph.load(a.graph)
    arrays = dataclasses.replace(g.arrays, arc_id=None, symbols=None)
    img = out / (Path(a.graph).stem + "_old.img")
    write_image(img, arrays)
    d = np.load(a.log_probs)
    key = "log_probs" if "log_probs" in d else "log_probs_fp16"
    lp, lens = d[key], d["lengths"].astype(np.int32)
    u_lp, u_lens = uniform_rows(lp, lens, a.rows, a.frames)
    np.savez(out / "uniform.npz", log_probs=u_lp.astype(np.float32), lengths=u_lens)
    order = np.argsort(-lens, kind="stable")
    np.savez(out / "sorted.npz", log_probs=lp[order].astype(np.float32), lengths=lens[order])
    print(f"{img}: {arrays.num_states} states, {arrays.num_arcs} arcs; uniform {u_lp.shape}; sorted {lp.shape} "
          f"(lengths {int(lens.max())} .. {int(lens.min())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
