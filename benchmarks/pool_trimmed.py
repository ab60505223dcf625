"""What the pooled lanes would hold with regions sized by the trimmed slots, counted on the CPU
(issue 9; docs/speed-notes.md, "Issue 9 after s27").

    python -m benchmarks.pool_trimmed GRAPH.img SHARD.npz [--rows N] [--batch 32] [--sizes out.npz]

benchmarks/pool_accounting.py counts the pools' asks by the untrimmed slots, the admissible
arcs and the claims. The GPU's "slots" bound (CUWFST_POOL_BOUND=slots) hands out by the
trimmed slots (docs/design.md, "Trimmed slots"). This replays the reference decoder's per-step
snapshots (as benchmarks/trim_count.py) and counts per row and step the trimmed slots and the
claims (the distinct destinations of the admitted arcs). The trim is the GPU's rule: label-0
arcs kept, the others bounded with the row's max over labels >= 1, against L - beam, where L
is the best end over the first 64 arcs of the best-scoring token (the GPU's anchor); tokens of
at most 8 arcs keep them all; a token whose whole upper bound fails gets none. Then, per batch
of rows in lockstep, the pools' asks (types.cuh PooledAskOf) under two rules:

* "trimmed": claims lists, hash tables and next frontiers all by the trimmed slots (what
  pooled-slots does today; its committed figure checks the model against the H200's
  lanes_mib for pooled-slots);
* "trimmed+used": claims lists and hash tables by the trimmed slots, next frontiers by the
  claims (a hand-out after ExpandKernel: not built).

Prints each rule's committed MiB (pool_accounting's growth replay, the rule now) and the peak
over steps of the summed asks.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks import pool_accounting as pa
from benchmarks.roofline import F32, emitting_steps, graph_tables
from cuwfst import Decoder, DecoderOptions, Graph


def row_counts(dec, tb, lp_row, T):
    """[T + 1, 2] per step: trimmed slots, claims (the final step: 1 and 1, as PooledClaimsBound)."""
    w = tb.weight
    out = np.zeros((T + 1, 2), np.int64)
    for k, s, sc, beam, cutoff, deg, own, a, lp, end in emitting_steps(tb, dec, lp_row, T):
        n = len(s)
        out[k, 1] = len(np.unique(tb.dest[a[end > cutoff]]))
        # the anchor: the best-scoring token (the largest index among ties), its first 64 arcs
        bt = n - 1 - int(np.argmax(sc[::-1]))
        posw = np.arange(len(a)) - np.repeat(np.cumsum(deg) - deg, deg)
        first = (own == bt) & (posw < 64)
        L = end[first].max() if first.any() else F32(-np.inf)
        low = F32(L - beam)
        if not low < L:  # no anchor (or no room below it): the step is not trimmed
            out[k, 0] = len(a)
            continue
        tok_ok = sc + (lp.max() + tb.emit_maxw[s]) > low  # a token whose whole bound fails gets none
        small = deg <= 8  # tokens of at most 8 arcs keep them all
        blank = tb.ilabel[a] == 0
        arc_ok = blank | ((sc[own] + w[a]) + lp[1:].max() > low) | small[own]
        out[k, 0] = int((arc_ok & tok_ok[own]).sum())
    out[T] = 1
    return out


def account(rows, batch, rule, main_q, claims_cap, hash_cap):
    """pool_accounting.account's replay for a rule of this file: committed MiB, and the peak over
    steps of the summed asks (MiB and entries) per pool."""
    bytes_per = {"tokens": pa.TOKEN_BYTES, "claims": pa.CLAIM_BYTES, "hash": pa.HASH_BYTES}
    needs, peak = [], {k: 0 for k in bytes_per}
    for s in range(0, len(rows), batch):
        group = rows[s: s + batch]
        T = max(len(r) for r in group)
        tot = {k: np.zeros(T, np.int64) for k in bytes_per}
        for r in group:
            slots = np.minimum(r[:, 0], claims_cap)
            a = pa.asks(slots, main_q, hash_cap)
            if rule == "trimmed+used":
                a["tokens"] = pa.asks(np.minimum(r[:, 1], claims_cap), main_q, hash_cap)["tokens"]
            for k in bytes_per:
                tot[k][: len(r)] += a[k]
        needs += [{k: int(tot[k][t]) for k in bytes_per} for t in range(T)]
        for k in bytes_per:
            peak[k] = max(peak[k], int(tot[k].max()))
    first = {"tokens": pa.ALIGN * batch, "claims": 1 << 12, "hash": 1 << 13}
    most = {"tokens": batch * (main_q + 1 + pa.ALIGN), "claims": batch * (claims_cap + 16), "hash": batch * hash_cap}
    cap, grows = pa.replay_growth(needs, first, most, growth="eighth")
    return {"rule": rule, "batch": batch, "rows": len(rows), "grows": grows,
            "committed_mib": round(pa.committed_bytes(cap) / pa.MiB, 1),
            "step_peak_mib": {k: round(peak[k] * bytes_per[k] / pa.MiB, 1) for k in bytes_per},
            "step_peak_entries": peak}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("graph")
    p.add_argument("shard")
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--sizes", help="npz cache of the per-row counts (read if present, else written)")
    p.add_argument("--main-q", type=int, default=320000)
    args = p.parse_args(argv)
    rows = None
    if args.sizes:
        try:
            z = np.load(args.sizes)
            rows = [z[f"r{i}"] for i in range(len(z.files))][: args.rows]
        except FileNotFoundError:
            pass
    if rows is None or len(rows) < args.rows:
        g = Graph.load(args.graph)
        dec = Decoder(g, DecoderOptions(), num_threads=1)
        tb = graph_tables(g, dec.eps_iterations)
        z = np.load(args.shard)
        lp_all, lens = z["log_probs"], z["lengths"]
        rows, t0 = [], time.time()
        for i in range(args.rows):
            rows.append(row_counts(dec, tb, lp_all[i], int(lens[i])))
            print(f"row {i}: {len(rows[-1]) - 1} steps, {time.time() - t0:.0f} s", flush=True)
        if args.sizes:
            np.savez(args.sizes, **{f"r{i}": r for i, r in enumerate(rows)})
    claims_cap = args.main_q
    hash_cap = int(pa.pow2_at_least(2 * claims_cap))
    for rule in ("trimmed", "trimmed+used"):
        print(account(rows, args.batch, rule, args.main_q, claims_cap, hash_cap))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
