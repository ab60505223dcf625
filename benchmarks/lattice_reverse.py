"""What a destination-driven lattice pass would walk (issue 10), counted on the CPU against the
forward band the GPU walks now.

    python -m benchmarks.lattice_reverse GRAPH.img SHARD.npz [ROWS [OUTPUT_BEAM]]

The lattice stage today finds k2's records source-driven: every step walks the arcs of every token
whose bound reaches (cutoff - output_beam) - slack (the band), ~2.8x the 1-best's slots, and keeps
the ~0.5% of the band whose destination survives within output_beam of its score. The question
this answers is whether a pass driven by destinations instead (the 1-best search unchanged, its
frontiers kept, then k2's windows run backwards over reverse arcs: each window starts with every
state of its last frontier alive, and a state stays alive only through a kept arc) would walk
fewer arcs. For each of the first ROWS rows (default 3; -N: the N longest) it replays the reference
decoder's frontiers and counts, per real step t -> t + 1:
- `fwd_all`: every emitting arc of S_t (what an untrimmed walk reads), `fwd_band`: those ending at
  or above cutoff(t + 1) - output_beam (the candidates' rule without slack), `records`: those whose
  destination is in S_{t+1}, `kept_band`: of the records, those within output_beam of their
  destination's score (the filter's rule, no slack);
- `rev_end`: the graph in-degree (emitting arcs) summed over all of S_{t+1}, what a reverse pass
  reads at a window's last step, where every state is alive;
- `rev_alive`: the same summed over the states alive in k2's backward pass of each window that
  covers the step (windows b = -10, 10, 30, ...: frames [max(0, b), min(b + 30, n + 1)); each run
  here on all of the row's records, not on what earlier windows kept, so alive sets are an upper
  bound), and `alive` / `frontier`: those states and |S_{t+1}| summed the same way;
- `tok_walk_X` / `sorted_walk_X` (X = band: low = cutoff - output_beam; best: low = the cutoff):
  the arcs a walk reads that takes every arc of a token whose (score + best weight) + the frame's
  best log-prob reaches low, or only its arcs that reach it in weight order plus the first that
  does not (the frame's best log-prob as every arc's acoustic bound, looser than the GPU's).
Scores are the search's (float32 ends, fwd = the frontier's scores), not k2's forward: counts, not
a lattice. The in-degree's distribution over the graph is printed too (a reverse pass pays it per
alive state).
"""

import sys
import time

import numpy as np

from benchmarks.roofline import F32, _ragged, _snapshots, graph_tables
from cuwfst import Decoder, DecoderOptions, Graph


def windows(n_last: int):
    """k2's pruning windows of a row of n frames, n_last = n + 1 (times 0..n + 1): (B, E), frames
    [B, E) with B = max(0, b), E = min(b + 30, n + 1), b = -10, 10, 30, ..., the last the first
    with b + 30 >= n + 1; backward from S_E (docs/design.md, Lattices)."""
    out, b = [], -10
    while True:
        out.append((max(0, b), min(b + 30, n_last)))
        if b + 30 >= n_last:
            return out
        b += 20


def count_row(tb, indeg, dec, lp_row: np.ndarray, length: int, ob: F32) -> dict:
    cnt, st_buf, sc_buf, _, step = _snapshots(dec, lp_row, length)
    fronts = [(st_buf[k, : int(cnt[k])].astype(np.int64), sc_buf[k, : int(cnt[k])].astype(F32))
              for k in range(length + 1)]
    tot = dict.fromkeys(("fwd_all", "fwd_band", "records", "kept_band", "rev_end", "rev_alive", "alive",
                         "frontier", "steps", "tok_walk_band", "sorted_walk_band", "tok_walk_best",
                         "sorted_walk_best"), 0)
    pos = np.full(tb.num_states, -1, np.int64)
    recs = []  # per step t: (src token, dst token, score) of the records t -> t + 1
    for k in range(length):
        s, sc = fronts[k]
        s1, sc1 = fronts[k + 1]
        deg = tb.emit_e[s] - tb.emit_b[s]
        own, a = _ragged(tb.emit_b[s], deg)
        lp = lp_row[k].astype(F32)
        wa, ac = tb.weight[a], lp[tb.ilabel[a]]
        score = wa + ac  # (k2's order: acoustic + weight)
        end = (sc[own] + wa) + ac  # (the search's)
        cutoff = F32(step[k + 1, 2])
        pos[s1] = np.arange(len(s1))
        dpos = pos[tb.dest[a]]
        pos[s1] = -1
        surv = dpos >= 0
        # a walk that reads a token's arcs best weight first and stops at the first whose
        # (score + weight) + the frame's best log-prob cannot reach low, against one that reads
        # every arc of a token whose (score + best weight) + best log-prob reaches it (both with
        # the frame's best log-prob as every arc's acoustic bound); low = cutoff - output_beam
        # (the band), or the cutoff (the 1-best's)
        lpmax = F32(lp.max())
        for name, low in (("band", cutoff - ob), ("best", cutoff)):
            reach = sc + (lpmax + tb.emit_maxw[s]) >= low
            tot[f"tok_walk_{name}"] += int(deg[reach].sum())
            ok = (sc[own] + wa) + lpmax >= low
            n_ok = np.bincount(own[ok], minlength=len(s))
            tot[f"sorted_walk_{name}"] += int((n_ok + (n_ok < deg))[reach].sum())
        tot["fwd_all"] += len(a)
        tot["fwd_band"] += int((end >= cutoff - ob).sum())
        tot["records"] += int(surv.sum())
        tot["kept_band"] += int((surv & (end >= sc1[np.maximum(dpos, 0)] - ob)).sum())
        tot["rev_end"] += int(indeg[s1].sum())
        tot["steps"] += 1
        recs.append((own[surv], dpos[surv], score[surv]))
    # k2's windows backwards (times 0..length: the frontiers; the final time is left out)
    for b, e in windows(length + 1):
        e = min(e, length)  # (E = n + 1 is the final state's time: its final arcs are left out)
        bwd = -fronts[e][1].astype(F32)  # every state of the window's last frontier alive
        for t in range(e - 1, b - 1, -1):
            src, dst, score = recs[t]
            alive_next = np.isfinite(bwd)
            s1 = fronts[t + 1][0]
            tot["rev_alive"] += int(indeg[s1[alive_next]].sum())
            tot["alive"] += int(alive_next.sum())
            tot["frontier"] += len(s1)
            fwd = fronts[t][1]
            ok = np.isfinite(bwd[dst])
            keep = ok.copy()
            keep[ok] = (score[ok] + bwd[dst[ok]]) + fwd[src[ok]] >= -ob
            nb = np.full(len(fwd), -np.inf, F32)
            np.maximum.at(nb, src[keep], score[keep] + bwd[dst[keep]])
            bwd = nb
    return tot


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    g = Graph.load(argv[0])
    d = np.load(argv[1])
    key = "log_probs" if "log_probs" in d else "log_probs_fp16"
    lp_all, lens = d[key], d["lengths"]
    rows = int(argv[2]) if len(argv) > 2 else 3
    ob = F32(argv[3]) if len(argv) > 3 else F32(8.0)
    ids = np.argsort(-lens)[: -rows] if rows < 0 else np.arange(rows)
    dec = Decoder(g, DecoderOptions(output_beam=float(ob)), num_threads=1)
    tb = graph_tables(g, dec.eps_iterations)
    deg = tb.emit_e - tb.emit_b
    _, arcs = _ragged(tb.emit_b, deg)
    indeg = np.bincount(tb.dest[arcs], minlength=g.num_states).astype(np.int64)
    q = np.percentile(indeg, [50, 90, 99, 99.9])
    print(f"graph {argv[0]}: {g.num_states:,} states, {len(arcs):,} emitting arcs; in-degree median {q[0]:.0f}, "
          f"p90 {q[1]:.0f}, p99 {q[2]:.0f}, p99.9 {q[3]:.0f}, max {indeg.max():,}")
    tot = None
    t0 = time.time()
    for r in ids:
        row = count_row(tb, indeg, dec, lp_all[r].astype(F32), int(lens[r]), ob)
        tot = row if tot is None else {k: tot[k] + row[k] for k in tot}
        print(f"row {r} (T {int(lens[r])}): " + ", ".join(f"{k} {v:,}" for k, v in row.items()), flush=True)
    s = max(tot["steps"], 1)
    print(f"{len(ids)} rows, {time.time() - t0:.0f} s; per step: forward arcs {tot['fwd_all'] / s:,.0f}, band "
          f"{tot['fwd_band'] / s:,.0f}, records {tot['records'] / s:,.0f}, kept by the filter {tot['kept_band'] / s:,.0f}; "
          f"reverse: all of S(t+1) {tot['rev_end'] / s:,.0f}, alive over the windows {tot['rev_alive'] / s:,.0f} "
          f"(alive states {tot['alive'] / s:,.0f} of {tot['frontier'] / s:,.0f} frontier tokens, window passes summed)")
    print({k: int(v) for k, v in tot.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
