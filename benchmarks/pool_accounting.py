"""What the GPU decoder's lane pools must hold, counted on the CPU (issue 9).

python -m benchmarks.pool_accounting --graph HLG.img --log-probs shard.npz [--utts 256]
    [--batch 32 256] [--max-s 900] [--sizes sizes.npz] [--md out.md]

The CPU reference decoder reports, for every step of every row, the frontier the step
expanded (n), the arcs it offered (slots) and the frontier it built (its claims: the distinct
admitted destinations; ref_decode_step_sizes). From those the per-lane ask of each pooled
structure is computed two ways, and summed over the lanes of each batch (rows in stored
order, `batch` at a time, in lockstep as the GPU runs them):

* "slots" (the rule before this change, types.cuh PooledAskOf with bound = min(slots,
  claims_cap)): a claims list of the bound, a hash table of the power of two >= 2 x bound,
  a next frontier of min(bound, main_q) + 1 tokens (rounded to 32);
* "used" (what the step really writes): the same three structures sized by its claims.
* "admit" (the new rule, pool_at_max): bound = min(admissible, claims_cap), the arcs whose end
  passes L - beam (L: the best-scoring token's best arc end, the scan's lower bound of the
  max), which MaxKernel counts before its last block hands the regions out;
* "estimate" (rejected): bound = min(slots, claims_cap, max(floor, factor x n)); a step's
  frontier can grow 40-50x (spikes), so it overflows in most rows.

Per pool and in bytes: (a) what the pool commits (the growth rule replayed: 1.25 x a paused
step's need, at least doubling, pieces of 2 MiB per array), (b) the sum over lanes of each
lane's peak, (c) the peak over steps of the sum over lanes. Bytes per entry: tokens 52 (two
frontier buffers of state, score and winner, tok_begin, tok_ub, arc_offsets, 4 hint
entries), claims 8, hash 12 (key and payload).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

MiB = 2**20
TOKEN_BYTES, CLAIM_BYTES, HASH_BYTES = 52, 8, 12
# arrays of each pool (an epsilon-free graph): bytes per entry of each array
ARRAYS = {"tokens": [4] * 9 + [16], "claims": [8], "hash": [4, 8]}
PIECE = 2 * MiB
ALIGN = 32

_G = {}


def _init(graph_path, lp_path, opts):
    from cuwfst import Decoder, Graph

    g = Graph.load(graph_path)
    _G["dec"] = Decoder(g)
    _G["opts"] = opts
    d = np.load(lp_path)  # an npz decompresses an array on every access: once here
    _G["lp"] = {"log_probs": d["log_probs"], "lengths": d["lengths"]}


def step_sizes(dec, log_probs, length: int) -> np.ndarray:
    """One row's per-step sizes from the CPU decoder `dec` (a cuwfst.Decoder on the CPU, its
    options): [length + 1, 8] (ref_decode_step_sizes; collect's docstring names the columns)."""
    ref, o = dec._ref, dec.options
    out = np.zeros((int(length) + 1, 8), np.int64)
    ref.mod.ref_decode_step_sizes(ref.handle, np.ascontiguousarray(log_probs, np.float32), int(length),
                                  o.search_beam, o.output_beam, o.min_active_states, o.max_active_states,
                                  o.allow_partial, 0, out)
    return out


def _sizes(i):
    d = _G["lp"]
    return i, step_sizes(_G["dec"], d["log_probs"][i], int(d["lengths"][i]))


def collect(graph, lp_path, utts, max_s, workers):
    """Per-row [steps, 8] arrays (ref_decode_step_sizes: n, slots, claims, admitted, admissible,
    token-level slots against L - beam and against the cutoff, the bins bound; rows past the
    time cap: None)."""
    rows = [None] * utts
    t0 = time.time()
    with ProcessPoolExecutor(workers, initializer=_init, initargs=(graph, lp_path, None)) as ex:
        futs = [ex.submit(_sizes, i) for i in range(utts)]
        for f in futs:
            left = max_s - (time.time() - t0)
            try:
                i, out = f.result(timeout=max(left, 1))
            except Exception:
                break
            rows[i] = out
        for f in futs:
            f.cancel()
    return rows


def pow2_at_least(x):
    x = np.maximum(np.asarray(x, np.int64), 1)
    return np.left_shift(1, np.ceil(np.log2(x)).astype(np.int64))


def asks(bound, main_q, hash_cap):
    """Per lane-step entries {tokens, claims, hash} for the claims bounds `bound` of a row's
    steps (every one a step the lane takes: types.cuh PooledAskOf; a step without arcs still
    gets its next frontier's 32 tokens)."""
    b = np.asarray(bound, np.int64)
    live = b > 0
    tokens = (np.minimum(b, main_q) + 1 + ALIGN - 1) // ALIGN * ALIGN
    claims = (b + 15) // 16 * 16
    hash_ = np.where(live, np.minimum(np.maximum(pow2_at_least(2 * b), ALIGN), hash_cap), 0)
    return {"tokens": tokens, "claims": claims, "hash": hash_}


# rules whose bound is a column of the sizes (8-column rows)
COLUMN_RULES = {"slots": 1, "used": 2, "admit": 4, "tokens-L": 5, "tokens": 6, "bins": 7}


def bound_of(rule, r, claims_cap, factor=4, floor=1024):
    """Per step claims bounds of one row's sizes r [steps, 5 or 8] {n, slots, claims, admitted,
    admissible[, token slots vs L - beam, token slots vs the cutoff, bins]}; the last step is the
    final one (PooledClaimsBound: 1 where it has arcs). Rules: "slots" (CUWFST_POOL_BOUND=slots),
    "admit" (MaxKernel's count at L, the most the GPU's count can be), "bins" (the bins bound,
    exactly what CUWFST_POOL_BOUND=bins hands out by), "used" (the claims), "tokens" / "tokens-L"
    (the token-level bound against the exact cutoff / against L - beam, for comparison)."""
    n, slots = r[:, 0], r[:, 1]
    if rule in COLUMN_RULES:
        if COLUMN_RULES[rule] >= r.shape[1]:
            raise ValueError(f"rule {rule!r} needs the 8-column sizes (ref_decode_step_sizes with out [T + 1, 8])")
        b = np.minimum(r[:, COLUMN_RULES[rule]], claims_cap)
    else:  # a frontier estimate: factor x n, at least floor (not adopted: spikes outgrow it)
        b = np.minimum(np.minimum(slots, claims_cap), np.maximum(floor, factor * n))
    b = b.copy()
    b[-1] = 1 if slots[-1] > 0 else 0
    return b


def committed_bytes(cap):
    """Bytes the pool's arrays commit for `cap` entries (each array in 2 MiB pieces)."""
    total = 0
    for k, elems in ARRAYS.items():
        for e in elems:
            total += -(-cap[k] * e // PIECE) * PIECE
    return total


def replay_growth(per_step_need, first, most, growth="double"):
    """The pools' capacities after the batches' steps (a pause grows a pool short of a step's
    need to PoolGrowth: 1.25 x need, at least double, at most the static layout's size;
    growth="eighth": need + need / 8, at least 1.25 x, the rule now), and the grows."""
    cap = dict(first)
    grows = 0
    for need in per_step_need:
        short = {k: need[k] > cap[k] for k in cap}
        if any(short.values()):
            grows += 1
            for k in cap:
                if need[k] > cap[k]:
                    w = max(need[k] + need[k] // 4, 2 * cap[k]) if growth == "double" else \
                        max(need[k] + need[k] // 8, cap[k] + cap[k] // 4)
                    cap[k] = min(w, most[k])
    return cap, grows


def account(rows, batch, rule, main_q, claims_cap, hash_cap, factor=4, floor=1024, growth="double"):
    """(a) committed bytes, (b) sum of per-lane peaks, (c) peak of per-step sums, per pool."""
    bytes_per = {"tokens": TOKEN_BYTES, "claims": CLAIM_BYTES, "hash": HASH_BYTES}
    ids = [i for i in range(len(rows)) if rows[i] is not None]
    steps_needs = []
    lane_peak = {k: 0 for k in bytes_per}
    step_peak = {k: 0 for k in bytes_per}
    per_batch_lane_peaks = []
    est_fail = 0
    for s in range(0, len(ids), batch):
        group = [rows[i] for i in ids[s : s + batch]]
        T = max(len(r) for r in group)
        tot = {k: np.zeros(T, np.int64) for k in bytes_per}
        peaks = {k: 0 for k in bytes_per}
        for r in group:
            b = bound_of(rule, r, claims_cap, factor, floor)
            if rule == "estimate":
                est_fail += int(np.any(np.minimum(r[:-1, 2], claims_cap) > b[:-1]))
            a = asks(b, main_q, hash_cap)
            for k in bytes_per:
                tot[k][: len(r)] += a[k]
                peaks[k] += int(a[k].max())
        for t in range(T):
            steps_needs.append({k: int(tot[k][t]) for k in bytes_per})
        for k in bytes_per:
            step_peak[k] = max(step_peak[k], int(tot[k].max()))
            lane_peak[k] = max(lane_peak[k], peaks[k])
        per_batch_lane_peaks.append(peaks)
    first = {"tokens": ALIGN * batch, "claims": 1 << 12, "hash": 1 << 13}
    most = {"tokens": batch * (main_q + 1 + ALIGN), "claims": batch * (claims_cap + 16), "hash": batch * hash_cap}
    cap, grows = replay_growth(steps_needs, first, most, growth)
    out = {"rule": rule, "batch": batch, "rows": len(ids), "grows": grows, "cap_entries": cap,
           "a_committed_mib": committed_bytes(cap) / MiB,
           "b_lane_peaks_mib": sum(lane_peak[k] * bytes_per[k] for k in bytes_per) / MiB,
           "c_step_peak_mib": sum(step_peak[k] * bytes_per[k] for k in bytes_per) / MiB,
           "c_step_peak_entries": step_peak, "estimate_overflow_rows": est_fail}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graph", required=True)
    p.add_argument("--log-probs", required=True)
    p.add_argument("--utts", type=int, default=256)
    p.add_argument("--batch", type=int, nargs="+", default=[32, 256])
    p.add_argument("--max-s", type=float, default=900.0, help="cap on the CPU decoding time (rows past it: left out)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sizes", help="npz cache of the per-row sizes (read if present, else written)")
    p.add_argument("--main-q", type=int, default=320000, help="main_q (main_q_factor 32 x max_active 10000)")
    p.add_argument("--factor", type=int, nargs="+", default=[4, 64])
    p.add_argument("--floor", type=int, default=1024)
    a = p.parse_args(argv)
    d = np.load(a.log_probs, mmap_mode="r")
    utts = min(a.utts, len(d["lengths"]))
    if a.sizes and os.path.exists(a.sizes):
        z = np.load(a.sizes)
        rows = [z[f"r{i}"] if f"r{i}" in z else None for i in range(utts)]
    else:
        t = time.time()
        rows = collect(a.graph, a.log_probs, utts, a.max_s, a.workers)
        print(f"# CPU sizes of {sum(r is not None for r in rows)}/{utts} rows in {time.time() - t:.0f} s", file=sys.stderr)
        if a.sizes:
            np.savez_compressed(a.sizes, **{f"r{i}": r for i, r in enumerate(rows) if r is not None})
    main_q = a.main_q
    claims_cap = 2 * main_q
    hash_cap = int(pow2_at_least(2 * claims_cap))
    allr = [r for r in rows if r is not None]
    n = np.concatenate([r[:, 0] for r in allr])
    sl = np.concatenate([r[:, 1] for r in allr])
    cl = np.concatenate([r[:, 2] for r in allr])
    ad = np.concatenate([r[:, 3] for r in allr])
    ab = np.concatenate([r[:, 4] for r in allr])
    print(f"sums over lane-steps: slots {sl.sum()}, admissible (L - beam) {ab.sum()}, admitted {ad.sum()}, "
          f"claims {cl.sum()}; admissible / claims per step max {np.max(ab / np.maximum(cl, 1)):.1f}")
    big = [i for i, r in enumerate(rows) if r is not None and r[:, 2].max() > main_q]
    print(f"rows {len(allr)}, lane-steps {len(n)}: frontier max {n.max()}, slots max {sl.max()}, claims max {cl.max()};"
          f" mean slots/claims {sl.sum() / max(cl.sum(), 1):.1f}; rows whose frontier passes main_q: {big}")
    live = n > 0
    r = cl[live] / np.maximum(n[live], 1)
    print(f"claims / frontier per step: p50 {np.percentile(r, 50):.2f} p99 {np.percentile(r, 99):.2f} "
          f"p99.9 {np.percentile(r, 99.9):.2f} max {r.max():.2f}")
    lines = ["| batch | rule | (a) committed MiB | grows | (b) sum of lane peaks MiB | (c) peak of step sums MiB |"
             " (c) tokens / claims / hash entries | estimate-overflow rows |", "|---|---|---|---|---|---|---|---|"]
    for B in a.batch:
        rules = [("slots", None, "double"), ("admit", None, "double"), ("admit", None, "eighth"),
                 ("used", None, "eighth")] + [("estimate", f, "eighth") for f in a.factor]
        if all(r.shape[1] >= 8 for r in allr):  # the token-level bounds (8-column sizes)
            rules += [("bins", None, "eighth"), ("tokens", None, "eighth"), ("tokens-L", None, "eighth")]
        for rule, f, growth in rules:
            o = account(rows, B, rule, main_q, claims_cap, hash_cap, f or 4, a.floor, growth)
            name = (rule if f is None else f"estimate x{f} (floor {a.floor})") + \
                (", growth 1.25x / doubling (before)" if growth == "double" else ", growth 1.125x (now)")
            c = o["c_step_peak_entries"]
            lines.append(f"| {B} | {name} | {o['a_committed_mib']:.1f} | {o['grows']} | {o['b_lane_peaks_mib']:.1f} | "
                         f"{o['c_step_peak_mib']:.1f} | {c['tokens']} / {c['claims']} / {c['hash']} | "
                         f"{o['estimate_overflow_rows'] if rule == 'estimate' else '-'} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
