"""How many slots the trimmed scan leaves (docs/design.md, "Trimmed slots"), counted on the CPU.

    python -m benchmarks.trim_count GRAPH.img SHARD.npz [ROWS]

Replays the reference decoder's per-step snapshots of the first ROWS rows (default 3) and
counts, over all real steps: every emitting slot (untrimmed), the slots the walkers' upper-bound
skip reads, the slots kept by one bound with the row's max over every label (trimL), by the same
with the exact max instead of L (trimM), by the rule the GPU uses (label-0 arcs kept, the others
bounded with the row's max over labels >= 1: trimNB), and the admitted arcs. L here is the best
end over all arcs of the best-scoring token with arcs (the GPU takes its first 64 arcs).
"""

import sys
import time

import numpy as np

from benchmarks.roofline import F32, _ragged, emitting_steps, graph_tables
from cuwfst import Decoder, DecoderOptions, Graph


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    g = Graph.load(argv[0])
    z = np.load(argv[1])
    rows = int(argv[2]) if len(argv) > 2 else 3
    lp_all, lens = z["log_probs"], z["lengths"]
    dec = Decoder(g, DecoderOptions(), num_threads=1)
    tb = graph_tables(g, dec.eps_iterations)
    eb, ee, w = tb.emit_b, tb.emit_e, tb.weight
    deg_all = ee - eb
    owner, arcs = _ragged(eb, deg_all)
    order = np.lexsort((-w[arcs].astype(np.float64), owner))  # each state's arcs by weight, best first
    sw = w[arcs][order]
    nb_sorted_w = np.where(tb.ilabel[arcs] == 0, np.float32(np.inf), w[arcs])[order]
    cum = np.concatenate([[0], np.cumsum(deg_all)])
    tot = dict(slots=0, read=0, trimL=0, trimM=0, trimNB=0, adm=0, tokens=0)
    t0 = time.time()
    for i in range(rows):
        T, lp_row = int(lens[i]), lp_all[i]
        for k, s, sc, beam, cutoff, deg, own, a, lp, end in emitting_steps(tb, dec, lp_row, T):
            has = deg > 0
            bt = np.flatnonzero(has)[np.argmax(sc[has])]
            L = end[own == bt].max()
            posw = np.arange(len(a)) - np.repeat(np.cumsum(deg) - deg, deg)
            at = cum[s][own] + posw
            ub_sorted = sc[own] + (lp.max() + sw[at])
            nbw = nb_sorted_w[at]
            ubnb = np.where(np.isinf(nbw), np.float32(np.inf), sc[own] + (lp[1:].max() + nbw))
            tot["trimL"] += int((ub_sorted > F32(L - beam)).sum())
            tot["trimM"] += int((ub_sorted > cutoff).sum())
            tot["trimNB"] += int((ubnb > F32(L - beam)).sum())
            tot["slots"] += len(a)
            tot["read"] += int(deg[sc + (lp.max() + tb.emit_maxw[s]) > cutoff].sum())
            tot["adm"] += int((end > cutoff).sum())
            tot["tokens"] += len(s)
        print(i, T, tot, f"{time.time() - t0:.0f} s", flush=True)
    print({k: f"{v / max(tot['slots'], 1):.3f}" for k, v in tot.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
