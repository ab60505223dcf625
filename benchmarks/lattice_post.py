"""The lattice records as one bulk pass after the search, timed on the GPU (issue 10).

    python -m benchmarks.lattice_post GRAPH.img SHARD.npz [--utts N] [--batch B] [--reps R]
        [--check-batches K] [--procs P] [--variants V...] [--overlap V [--grid-caps N...]] [--json PATH]

Today a lattice decode finds its records inside every step: the scan, max and expand walk the band
below the cutoff as well, and LatPersistKernel / LatStepEndKernel probe, filter and write them,
~19.5 ms a batch of 32 on the full tier above the 1-best's kernels, in a loop that is latency-bound.
But a real step's records (lattice.cuh's rule: an emitting arc of a token of S_t whose destination
is in S_{t+1}, kept when admitted or within output_beam of its destination, plus the slack) depend
on S_t, S_{t+1} and the step's scalars alone, all of which the 1-best search computes anyway. So the
records of every step of a batch could be found at once, after the search, by one pass sized to the
whole batch (benchmarks/lattice_post.cu: a CTA a row-step and 1,024 tokens, S_{t+1} as a hash table
in shared memory, a warp a token walking its arcs best first).

This measures what that pass costs. The frontiers are the reference decoder's (equal to the GPU
search's: the GPU suite checks them), made in P worker processes; the step scalars are the
snapshots' cutoffs and the filter's slack as the decoder computes it (filter_scalars: float32,
upward-rounded; the calls of 2026-12-04 ran an earlier float64 version of it, within an ulp or two).
For the first K batches every count (arcs read, candidates, survivors, kept records) and an order-
free checksum of the kept records (row, step, arc, destination index) are computed again with numpy
from the same inputs, and must be equal; a writing variant's records are also read back and their
number and checksum compared (the lean variant, which keeps no counters, is checked by that alone).
--overlap V then runs passes of variant V in a loop beside the package's GPU decoder decoding the
same rows (1-best, batches of B), the decoder's streams at the default and at the greatest priority,
for each of --grid-caps (at most that many CTAs a launch of the pass): whether the pass could hide
beside the next batch's search (it does not: docs/benchmarks.md, session of 2026-12-04 17:08). Needs
nvcc and a GPU for the timing (torch for --overlap); `--cpu-only` does the numpy side alone; with
`--procs 1` the frontiers are made in this process (Nsight Compute hangs on forked workers).

twin_records is the pass's CPU twin (the data contract an integrated pass would rely on): a batch's
lattice records made from the search's frontiers and step scalars alone, which
tests/test_lattice_post.py shows are the CPU search's records and replay into its lattices.
"""

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from multiprocessing import get_context

import numpy as np

F32 = np.float32
ROWSTEP = np.dtype([("src_off", np.int64), ("dst_off", np.int64), ("lp_off", np.int64), ("tab_off", np.int64),
                    ("src_n", np.int32),
                    ("dst_n", np.int32), ("cutoff", F32), ("pre_low", F32), ("slack", F32), ("lp_rest", F32),
                    ("filter_on", np.int32), ("row", np.int32), ("t", np.int32), ("tab_bits", np.int32)])
REC = np.dtype([("state", np.int32), ("arc", np.int32), ("acoustic", F32), ("lane", np.int32), ("t", np.int32),
                ("tok", np.int32), ("dst_pos", np.int32), ("admitted", np.int32)])  # lattice_post.cu Rec
U = 2.0 ** -24
MODES = {"write": 1, "cursors": 1 | 4, "streams": 1 | 2 | 4, "count": 2 | 4, "pipe": 1 | 2 | 4 | 8,
         "pipe_count": 2 | 4 | 8, "flat": 1 | 2 | 4 | 16, "flat_count": 2 | 4 | 16,
         "flat2": 1 | 2 | 4 | 16 | 32, "flat4": 1 | 2 | 4 | 16 | 64, "flat4_count": 2 | 4 | 16 | 64,
         "lean": 1 | 2 | 4 | 8 | 128, "queue": 1 | 2 | 4 | 8 | 128 | 256}  # lp_pass: mode bits
LEAN = 128  # (no counters but tokens: checked by the records read back)
PHASE_REAL = 0


def emit_tables(graph):
    """(emit_b int64, emit_n int32, emit_n0 uint8) a state: its emitting arcs' range and how many
    label-0 arcs lead it; checks the image's order (label-0 first, then weights non-increasing)."""
    from benchmarks.roofline import graph_tables

    tb = graph_tables(graph, 0)
    if tb.has_eps:
        raise SystemExit("lattice_post: epsilon-free graphs only")
    n = (tb.emit_e - tb.emit_b).astype(np.int64)
    blank = (tb.ilabel == 0)
    owner = np.repeat(np.arange(len(n)), n)
    arcs = np.repeat(tb.emit_b - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
    b = blank[arcs]
    n0 = np.bincount(owner[b], minlength=len(n)).astype(np.int64)
    first = (np.cumsum(n) - n)
    # label-0 arcs lead: the k-th arc of a state is label-0 iff k < n0
    k = np.arange(len(arcs)) - np.repeat(first, n)
    if not np.array_equal(b, k < n0[owner]):
        raise SystemExit("lattice_post: label-0 arcs do not lead every state's emitting arcs")
    w = tb.weight[arcs]
    nb = ~b
    same = (owner[1:] == owner[:-1]) & nb[1:] & nb[:-1]
    if (w[1:][same] > w[:-1][same]).any():
        raise SystemExit("lattice_post: emitting arcs not sorted by weight, best first")
    if n0.max() > 255:
        raise SystemExit("lattice_post: a state with 255 or more label-0 arcs")
    return tb, tb.emit_b.astype(np.int64), n.astype(np.int32), n0.astype(np.uint8)


def _add_ru(a, b) -> np.float32:
    """__fadd_ru: the float32 sum rounded up (exact in float64 for float32 operands whose exponents
    differ by under 29, as the slack's terms do: magnitudes ~1e-5 to ~1e4)."""
    e = float(np.float32(a)) + float(np.float32(b))
    r = np.float32(e)
    return np.nextafter(r, np.float32(np.inf)) if float(r) < e else r


def _mul_ru(a, b) -> np.float32:
    """__fmul_ru: the float32 product rounded up (exact in float64: 24 + 24 bits)."""
    e = float(np.float32(a)) * float(np.float32(b))
    r = np.float32(e)
    return np.nextafter(r, np.float32(np.inf)) if float(r) < e else r


def filter_scalars(steps: np.ndarray, length: int, max_abs_weight: float, ob: float, maxes: np.ndarray):
    """Per step k -> k + 1 (k < length, and the final step k = length where steps has its row):
    (phase, cutoff, pre_low, slack, on) from the snapshots' step rows (phase, beam, cutoff, ...) and
    maxes[k], the best score of S_{k+1} (the step's max: its best end survives), by the filter's
    recursion as the GPU computes it, bit for bit: common.cuh LatSlackFor / LatFilterFor (float32,
    upward-rounded), lat_mag and lat_drift from 0 and updated every step (LatStepEndKernel), the
    prefilter's bound (LatPreLowFor) (cutoff - output_beam) - slack in float32, -inf off the filter."""
    u = F32(U)
    mw = F32(max_abs_weight)
    lat_mag, drift = F32(0), F32(0)
    out = []
    for k in range(min(length + 1, len(steps) - 1)):
        phase, beam, cutoff = int(steps[k + 1, 0]), F32(steps[k + 1, 1]), F32(steps[k + 1, 2])
        mx = F32(maxes[k]) if k < len(maxes) else F32(-np.inf)
        if mx == -np.inf:
            mag = F32(0)
        elif phase == PHASE_REAL:
            mag = max(abs(mx), abs(F32(mx - beam)))
        else:
            mag = abs(mx)
        h = _add_ru(_add_ru(_add_ru(lat_mag, mag), mw), F32(1))
        d = _add_ru(drift, _mul_ru(F32(16) * u, h))
        slack = _add_ru(_add_ru(_mul_ru(F32(2), d), F32(0.5)), _mul_ru(F32(32) * u, h))
        on = phase == PHASE_REAL and mag <= 8192 and mw <= 1024 and d <= 2
        lat_mag, drift = mag, d
        pre_low = F32(F32(cutoff - F32(ob)) - slack) if on else F32(-np.inf)
        out.append((phase, cutoff, pre_low, slack, on))
    return out


def frontier_maxes(n: np.ndarray, sc: np.ndarray) -> np.ndarray:
    """maxes[k] = the best score of snapshot k + 1 (-inf where it is empty), from a row's concatenated
    frontier scores sc and its snapshot sizes n (row_fronts)."""
    ends = np.cumsum(n)
    out = np.full(len(n) - 1, -np.inf, F32)
    for k in range(len(n) - 1):
        if n[k + 1] > 0:
            out[k] = sc[ends[k]: ends[k + 1]].max()
    return out


_W = {}


def _worker_init(ob: float):
    """A forked worker: the parent's graph and tables (_W["graph"], _W["tables"]), its own decoder."""
    from cuwfst import Decoder, DecoderOptions

    _W["dec"] = Decoder(_W["graph"], DecoderOptions(output_beam=ob), num_threads=1)
    _W["ob"] = ob


def row_fronts(decoder, lp_row: np.ndarray, length: int):
    """One row's search, from the reference decoder's snapshots: (n, states, scores, step rows) with
    n[k] the size of snapshot k (the frontier after step k - 1; k = 0..length + 1, the last after
    the final step), states / scores the snapshots back to back, step rows (phase, beam, cutoff, ...)."""
    from benchmarks.roofline import _snapshots

    cnt, st_buf, sc_buf, _, step = _snapshots(decoder, np.ascontiguousarray(lp_row, F32), length)
    K = length + 2
    n = cnt[:K].astype(np.int64)
    st = np.concatenate([st_buf[k, : n[k]] for k in range(K)]).astype(np.int32)
    sc = np.concatenate([sc_buf[k, : n[k]] for k in range(K)]).astype(F32)
    return n, st, sc, step[:K].copy()


def _worker_row(args):
    """One row's row_fronts and, where `check`, the kernel's counts for the row by numpy
    (expected_counts)."""
    r, lp_row, length, check = args
    front = row_fronts(_W["dec"], lp_row, length)
    exp = None
    if check:
        tb, emit_b, emit_n, emit_n0 = _W["tables"]
        steps, bst, bsc, blp = build_batch([r], {r: lp_row[None]}, {r: length}, {r: front},
                                           float(np.abs(tb.weight).max()), _W["ob"], row_index=False)
        steps["row"] = r
        exp = expected_counts(tb, emit_b, emit_n, emit_n0, steps, bst, bsc, blp, _W["ob"], tb.num_states)
    return front, exp


def build_batch(rows, lp_all, lens, fronts, max_abs_weight, ob, row_index=True):
    """The batch's RowStep array, frontier arrays and log-prob buffer (rows' frames back to back);
    lp_all[r] is row r's [T, V] log-probs (row_index False: lp_all[r][0])."""
    steps, sts, scs, lps = [], [], [], []
    tok_base, lp_base = 0, 0
    for r in rows:
        n, st, sc, step = fronts[r]
        T = int(lens[r])
        offs = tok_base + np.concatenate([[0], np.cumsum(n)[:-1]])
        lp = np.ascontiguousarray((lp_all[r] if row_index else lp_all[r][0])[:T], F32)
        V = lp.shape[1]
        rest = lp[:, 1:].max(axis=1)
        scal = filter_scalars(step, T, max_abs_weight, ob, frontier_maxes(n, sc))
        for k, (phase, cutoff, pre_low, slack, on) in enumerate(scal[:T]):
            if phase != PHASE_REAL:
                continue
            steps.append((offs[k], offs[k + 1], lp_base + k * V, 0, n[k], n[k + 1], cutoff, pre_low, slack, rest[k],
                          int(on), r, k, 0))
        sts.append(st)
        scs.append(sc)
        lps.append(lp.reshape(-1))
        tok_base += len(st)
        lp_base += T * V
    return (np.array(steps, ROWSTEP), np.concatenate(sts), np.concatenate(scs), np.concatenate(lps))


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def rec_key(row, t, arc, pos) -> np.ndarray:
    """lattice_post.cu RecKey, wrapping uint64 arithmetic."""
    with np.errstate(over="ignore"):
        x = np.asarray(row).astype(np.uint64)
        x = x * np.uint64(1000003) + np.asarray(t, np.uint64)
        x = x * np.uint64(2000003) + np.asarray(arc, np.uint64)
        x = x * np.uint64(3000017) + np.asarray(pos, np.uint64)
        return _mix(x)


def _step_arcs(tb, emit_b, emit_n, emit_n0, s, st, sc, lp, ob, pos_of) -> dict:
    """One row-step's emitting arcs under the pass's rule (numpy), every arc of every token of S_t:
    the tokens' states, scores and arc counts; each arc's token (own), arc id, index in its token's
    range (k), whether the walk reads it, its end, whether it is a candidate, its destination's index
    in S_{t+1} (p, -1 past the candidates or outside S_{t+1}) and whether it is kept; the frame's
    log-prob row. pos_of: a num_states array of -1 (left as it was found)."""
    from benchmarks.roofline import _ragged

    src_n, dst_n = int(s["src_n"]), int(s["dst_n"])
    states = st[int(s["src_off"]): int(s["src_off"]) + src_n].astype(np.int64)
    scores = sc[int(s["src_off"]): int(s["src_off"]) + src_n]
    n_all = emit_n[states].astype(np.int64)
    own, arcs = _ragged(emit_b[states], n_all)
    k = arcs - emit_b[states][own]
    row = lp[int(s["lp_off"]): int(s["lp_off"]) + tb.vocab_size]
    a = scores[own]
    w = tb.weight[arcs]
    end = a + (row[tb.ilabel[arcs]] + w)  # (the search's order, k2's: score + (acoustic + weight))
    read = (k < emit_n0[states][own]) | (a + (s["lp_rest"] + w) >= s["pre_low"])
    cand = end >= s["pre_low"]
    d_states = st[int(s["dst_off"]): int(s["dst_off"]) + dst_n].astype(np.int64)
    pos_of[d_states] = np.arange(dst_n)
    p = np.where(cand, pos_of[tb.dest[arcs]], -1)
    pos_of[d_states] = -1
    dsc = sc[int(s["dst_off"]): int(s["dst_off"]) + dst_n]
    keep = (p >= 0) & ((end > s["cutoff"]) | (s["filter_on"] == 0) |
                       ~(end < (dsc[np.maximum(p, 0)] - F32(ob)) - s["slack"]))
    return dict(states=states, scores=scores, n_all=n_all, own=own, arcs=arcs, k=k, row=row, end=end, read=read,
                cand=cand, p=p, keep=keep)


def expected_counts(tb, emit_b, emit_n, emit_n0, steps, st, sc, lp, ob, num_states) -> dict:
    """The kernel's counts from the same inputs, every emitting arc of every S_t tested (numpy)."""
    tot = dict(tokens=0, slots=0, cands=0, survived=0, kept=0, checksum=0)
    pos_of = np.full(num_states, -1, np.int64)
    chk = np.uint64(0)
    for s in steps:
        x = _step_arcs(tb, emit_b, emit_n, emit_n0, s, st, sc, lp, ob, pos_of)
        read, cand, p, keep = x["read"], x["cand"], x["p"], x["keep"]
        if (cand & ~read).any():
            raise AssertionError("a candidate the walk's bound would not read")
        tot["tokens"] += int(s["src_n"])
        tot["slots"] += int(read.sum())
        tot["cands"] += int(cand.sum())
        tot["survived"] += int((p >= 0).sum())
        tot["kept"] += int(keep.sum())
        if keep.any():
            with np.errstate(over="ignore"):
                chk = chk + rec_key(np.full(int(keep.sum()), s["row"]), np.full(int(keep.sum()), s["t"]),
                                    x["arcs"][keep], p[keep]).sum(dtype=np.uint64)
    tot["checksum"] = int(chk)
    return tot


CLASS_NAMES = ("c11", "c13", "c14", "global")  # lattice_post.cu kBitsOf: shared tables of 2^11/13/14, then global


def class_of(dst_n: np.ndarray) -> np.ndarray:
    """A row-step's table class (lp_prepare_batch's rule: the first whose table holds 2 |S_{t+1}|)."""
    c = np.full(len(dst_n), 3, np.int64)
    for i, bits in reversed(list(enumerate((11, 13, 14)))):
        c[2 * np.asarray(dst_n, np.int64) <= (1 << bits)] = i
    return c


def work_by_class(tb, emit_b, emit_n, emit_n0, steps, st, sc, lp, ob) -> dict:
    """What the pass does a table class (numpy, from the same inputs as expected_counts): row-steps,
    work items (1,024 tokens of S_t), tokens, the warp walk's chunks (a warp's 32-arc rounds; lanes
    used = arcs read / (chunks x 32)), arcs read, table probes (candidates), survivors, kept records,
    the rounds that keep one (keep_rounds), the destination scores the filter loads (dsc_loads: a
    survivor not admitted on a filtered step) and the rounds with one (dsc_rounds), and the table work: slots cleared and tokens inserted (a shared class rebuilds its row-step's
    whole table in every item; the global class once a row-step, BuildKernel). And, for a walk by
    label instead of by weight: label_probes, the non-blank labels l a token would look up, those
    with lp[l] >= pre_low - a - w_best (w_best its best non-blank arc's weight: no arc of another
    label can end above pre_low), and label_hits, its non-blank arcs with such a label."""
    keys = ("row_steps", "items", "tokens", "chunks", "read", "cands", "survived", "kept", "keep_rounds", "dsc_loads",
            "dsc_rounds", "cleared", "inserted", "label_probes", "label_hits", "dead", "dead_chunks", "bound_dead",
            "bound_dead_chunks")
    out = {c: dict.fromkeys(keys, 0) for c in CLASS_NAMES}
    pos_of = np.full(len(emit_b), -1, np.int64)
    cls = class_of(steps["dst_n"])
    for s, c in zip(steps, cls):
        o = out[CLASS_NAMES[c]]
        src_n, dst_n = int(s["src_n"]), int(s["dst_n"])
        items = -(-src_n // 1024)
        o["row_steps"] += 1
        o["items"] += items
        o["tokens"] += src_n
        o["cleared"] += items * (1 << (11, 13, 14)[c]) if c < 3 else 2 * dst_n
        o["inserted"] += items * dst_n if c < 3 else dst_n
        x = _step_arcs(tb, emit_b, emit_n, emit_n0, s, st, sc, lp, ob, pos_of)
        states, scores, n_all, own, k, row = x["states"], x["scores"], x["n_all"], x["own"], x["k"], x["row"]
        cand, p, keep = x["cand"], x["p"], x["keep"]
        cut = np.bincount(own, weights=x["read"], minlength=src_n).astype(np.int64)  # (read arcs: a prefix)
        chunks_t = np.where(n_all == 0, 0, np.where(cut >= n_all, (n_all + 31) // 32, cut // 32 + 1))
        o["chunks"] += int(chunks_t.sum())
        o["read"] += int(cut.sum())
        n0_t = emit_n0[states].astype(np.int64)
        has = n_all > n0_t  # (tokens with a non-blank arc; the first past the label-0 ones is the best)
        w_best = np.where(has, tb.weight[np.minimum(emit_b[states] + n0_t, len(tb.weight) - 1)], -np.inf)
        # tokens none of whose arcs ends at or above pre_low (dead), and those a bound a state could
        # give before any arc is read finds so (bound_dead, a subset: its label-0 arcs' best weight
        # with the blank's log-prob, its best non-blank weight with the row's best non-blank
        # log-prob, each in the search's order of addition), with the warp rounds each costs now
        dead = np.bincount(own, weights=x["cand"], minlength=src_n) == 0
        blank = k < n0_t[own]
        w0 = np.full(src_n, -np.inf, F32)
        np.maximum.at(w0, own[blank], tb.weight[x["arcs"][blank]].astype(F32))
        bound = np.maximum(scores + (row[0] + w0), scores + (F32(s["lp_rest"]) + w_best.astype(F32)))
        bound_dead = (bound < s["pre_low"]) & (n_all > 0)
        assert not (bound_dead & ~dead).any()  # (the bound is one: every arc of such a token ends below)
        o["dead"] += int((dead & (n_all > 0)).sum())
        o["dead_chunks"] += int(chunks_t[dead].sum())
        o["bound_dead"] += int(bound_dead.sum())
        o["bound_dead_chunks"] += int(chunks_t[bound_dead].sum())
        thr = (s["pre_low"] - scores) - w_best
        nb = np.sort(row[1:])
        o["label_probes"] += int(np.where(has, len(nb) - np.searchsorted(nb, thr, side="left"), 0).sum())
        o["label_hits"] += int(((k >= emit_n0[states][own]) & (row[tb.ilabel[x["arcs"]]] >= thr[own])).sum())
        o["cands"] += int(cand.sum())
        o["survived"] += int((p >= 0).sum())
        o["kept"] += int(keep.sum())
        # the warp rounds that keep a record (each an atomicAdd at the records' cursor, AfterWrite):
        # distinct (token, 32-arc chunk) among the kept arcs
        o["keep_rounds"] += int(np.unique(own[keep] * ((int(n_all.max(initial=0)) + 31) // 32) + k[keep] // 32).size)
        # the destination scores the filter reads (dsc[p], a global load after the probe: a survivor
        # not admitted on a filtered step), and the warp rounds that wait for at least one
        need = (p >= 0) & ~(x["end"] > s["cutoff"]) & (s["filter_on"] != 0)
        o["dsc_loads"] += int(need.sum())
        o["dsc_rounds"] += int(np.unique(own[need] * ((int(n_all.max(initial=0)) + 31) // 32) + k[need] // 32).size)
    return out


def gap_bound_counts(tb, emit_b, emit_n, emit_n0, steps, st, sc, lp, ob) -> dict:
    """An analysis, not a rule any decoder uses: how many of the pass's kept records a two-step bound
    would keep. Inside any k2 pruning window bwd(y) <= -fwd(y), so a token x of S_{t+1} has bwd(x) <=
    -fwd(x) - gap(x), gap(x) = min over its arcs into S_{t+2} of fwd(y) - (fwd(x) + score): an arc into
    x survives a window in which time t + 1 is not the end only if fwd(src) + score >= fwd(x) + gap(x)
    - output_beam. The kept records of step t + 1 hold every arc of deficit <= output_beam + slack, so
    gap_eff = min(gap over them, output_beam + slack) bounds gap from below. Counted per class:
    records kept (the filter), admitted, and kept under the two-step bound (admitted ones always, the
    rest where end >= (s(x) + gap_eff) - output_beam - 2 slack; x of a row's last real step: no bound).
    And admitted_needed: the admitted records a pruning would need if the filter could drop admitted
    arcs too, each destination's arcs that end at its search score (the forward's) and its
    first-admission arc, the least (source index, arc place): the frontiers here are the CPU
    decoder's, in first-admission order, so a source's index is its rank; admitted_at_score: the
    former alone. kept_one_step_all / kept_two_step_all: the records kept if admitted ones met the
    filter's bound (or the two-step bound) as the others do, those needed aside."""
    pos_of = np.full(len(emit_b), -1, np.int64)
    cls = class_of(steps["dst_n"])
    kept = {}  # (row, t) -> (own, p, end, admitted) of its kept records, and S_t's size
    for s in steps:
        x = _step_arcs(tb, emit_b, emit_n, emit_n0, s, st, sc, lp, ob, pos_of)
        keep = x["keep"]
        kept[(int(s["row"]), int(s["t"]))] = (x["own"][keep], x["p"][keep], x["end"][keep],
                                              x["end"][keep] > s["cutoff"], int(s["src_n"]), x["k"][keep])
    out = {c: dict(kept=0, admitted=0, kept_two_step=0, admitted_needed=0, admitted_at_score=0, kept_one_step_all=0,
                   kept_two_step_all=0) for c in CLASS_NAMES}
    for s, c in zip(steps, cls):
        r, t = int(s["row"]), int(s["t"])
        own, p, end, adm, _, k = kept[(r, t)]
        o = out[CLASS_NAMES[c]]
        o["kept"] += len(p)
        o["admitted"] += int(adm.sum())
        dsc0 = sc[int(s["dst_off"]): int(s["dst_off"]) + int(s["dst_n"])]
        a_p, a_own, a_k, a_end = p[adm], own[adm], k[adm], end[adm]
        viterbi = a_end == dsc0[a_p]
        first = np.zeros(len(a_p), bool)
        if len(a_p):  # each destination's least (source, place): sorted by (dst, source, place)
            order = np.lexsort((a_k, a_own, a_p))
            lead = np.ones(len(order), bool)
            lead[1:] = a_p[order][1:] != a_p[order][:-1]
            first[order[lead]] = True
        o["admitted_needed"] += int((viterbi | first).sum())
        o["admitted_at_score"] += int(viterbi.sum())  # (what a numbering without ranks would need)
        need = np.zeros(len(p), bool)  # (an admitted record the forward or the keys need)
        need[np.flatnonzero(adm)] = viterbi | first
        # the filter's own bound on admitted records too (non-admitted kept ones pass it already)
        one = need | ~adm | ~(end < (dsc0[p] - F32(ob)) - s["slack"])
        nxt = kept.get((r, t + 1))
        if nxt is None or s["filter_on"] == 0:
            o["kept_two_step"] += len(p)
            o["kept_one_step_all"] += len(p) if s["filter_on"] == 0 else int(one.sum())
            o["kept_two_step_all"] += len(p) if s["filter_on"] == 0 else int(one.sum())
            continue
        o["kept_one_step_all"] += int(one.sum())
        n_own, n_p, n_end, _, n_src, _ = nxt
        s1 = steps[(steps["row"] == r) & (steps["t"] == t + 1)][0]
        dsc1 = sc[int(s1["dst_off"]): int(s1["dst_off"]) + int(s1["dst_n"])]
        gap = np.full(n_src, np.float32(ob) + s1["slack"], F32)  # (no kept arc: more than ob + slack)
        if len(n_p):
            np.minimum.at(gap, n_own, (dsc1[n_p] - n_end).astype(F32))
        dsc = sc[int(s["dst_off"]): int(s["dst_off"]) + int(s["dst_n"])]
        bound = (dsc[p] + gap[p]) - F32(ob) - 2 * s["slack"]
        o["kept_two_step"] += int((adm | (end >= bound)).sum())
        o["kept_two_step_all"] += int((need | (end >= bound)).sum())
    return out


def twin_records(decoder, lp: np.ndarray, lens: np.ndarray, filter_output_beam: float | None = None):
    """The CPU twin of a records pass after the search: a batch's lattice records
    (cuwfst.decoder.lattice_records.LatticeRecords) made from the search's frontiers and step scalars
    alone (the reference decoder's snapshots of each row), never from inside a step. Real steps: every
    emitting arc of a token of S_t whose destination is in S_{t+1}, acoustic lp[t][label]; with
    filter_output_beam, a non-admitted one is dropped where end < (s(dst) - output_beam) - slack on a
    filtered step (filter_scalars: the GPU's slack, computed as the GPU computes it, so these should be
    the records a lattice == 2 decode writes, which no GPU run has compared yet; the pruned lattice is
    the same, since only arcs it prunes are dropped). The final step: the final arcs of S_length's
    tokens (acoustic 0) where the row has a final token; allow_partial's redirect step: every arc of
    them, marked REDIRECT_ARC_BIT (k2-facts: no acoustic). Epsilon-free graphs; offline decodes.
    `decoder`: a CPU cuwfst.Decoder; lp float32 [B, T, V]."""
    from benchmarks.roofline import _ragged, graph_tables
    from cuwfst.decoder.lattice_records import LatticeRecords
    from cuwfst.decoder.offline import REDIRECT_ARC_BIT

    graph = decoder.graph
    if graph.has_epsilon:
        raise ValueError("twin_records: epsilon-free graphs only")
    tb = graph_tables(graph, 0)
    B, T, _ = lp.shape
    S = T + 1
    counts, cutoffs, sizes = np.zeros((B, S), np.int32), np.zeros((B, S), F32), np.zeros((B, S), np.int32)
    out = []
    pos_of = np.full(tb.num_states, -1, np.int64)
    mw = float(np.abs(tb.weight).max()) if len(tb.weight) else 0.0
    for b in range(B):
        L = int(lens[b])
        row = np.ascontiguousarray(lp[b], F32)
        cnt, st_all, sc_all, step = row_fronts(decoder, row, L)
        off = np.concatenate([[0], np.cumsum(cnt)])
        maxes = frontier_maxes(cnt, sc_all)
        scal = filter_scalars(step, L, mw, filter_output_beam, maxes) if filter_output_beam is not None else None
        for k in range(L + 1):
            n0, n1 = int(cnt[k]), int(cnt[k + 1])
            s = st_all[off[k]: off[k + 1]].astype(np.int64)
            cutoffs[b, k], sizes[b, k] = step[k + 1, 2], n1
            phase = int(step[k + 1, 0])
            if phase == PHASE_REAL:
                if k == L:
                    raise AssertionError("a real step past the row's frames")
                own, arcs = _ragged(tb.emit_b[s], tb.emit_e[s] - tb.emit_b[s])
                s1 = st_all[off[k + 1]: off[k + 2]].astype(np.int64)
                pos_of[s1] = np.arange(n1)
                dpos = pos_of[tb.dest[arcs]]
                pos_of[s1] = -1
                ac = row[k][tb.ilabel[arcs]]
                keep = dpos >= 0
                if scal is not None and scal[k][4]:  # (a filtered step)
                    end = sc_all[off[k]: off[k + 1]][own] + (ac + tb.weight[arcs])
                    admitted = end > F32(step[k + 1, 2])
                    s_dst = sc_all[off[k + 1]: off[k + 2]][np.maximum(dpos, 0)]
                    keep &= admitted | ~(end < (s_dst - F32(filter_output_beam)) - scal[k][3])
                rec = np.stack([s[own][keep], arcs[keep], ac[keep].view(np.int32).astype(np.int64)], axis=1)
            elif n1 == 0:  # (no final token: nothing entered the final state)
                rec = np.zeros((0, 3), np.int64)
            elif phase == 1:  # final: the final arcs of the frontier's tokens
                own, arcs = _ragged(tb.final_b[s], tb.final_e[s] - tb.final_b[s])
                rec = np.stack([s[own], arcs, np.zeros_like(arcs)], axis=1)
            elif phase == 2:  # redirect: every arc of them, to the final state (their emitting arcs:
                # a redirect step is one where no token has a final arc, the final step's beam being 1e10)
                own, arcs = _ragged(tb.emit_b[s], tb.emit_e[s] - tb.emit_b[s])
                rec = np.stack([s[own], arcs | REDIRECT_ARC_BIT, np.zeros_like(arcs)], axis=1)
            else:
                raise AssertionError(f"step {k}: phase {phase}")
            counts[b, k] = len(rec)
            out.append(rec)
    records = np.concatenate(out).astype(np.int32) if out else np.zeros((0, 3), np.int32)
    return LatticeRecords(records, counts, cutoffs, sizes)


def build_library(out_dir: str) -> str:
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lattice_post.cu")
    so = os.path.join(out_dir, "lattice_post.so")
    subprocess.run(["nvcc", "-O3", "-lineinfo", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", src, "-o", so], check=True)
    return so


def load_library(so: str):
    lib = ctypes.CDLL(so)
    lib.lp_prepare_batch.restype = ctypes.c_void_p
    sizes = (ctypes.c_int32 * 3)()
    lib.lp_sizes(sizes)
    if sizes[0] != ROWSTEP.itemsize or sizes[1] != REC.itemsize or sizes[2] != 64:
        raise SystemExit(f"lattice_post: layout mismatch {list(sizes)}")
    return lib


def _p(a):
    return ctypes.c_void_p(a.ctypes.data)


def records_check(lib, h, cap: int) -> dict:
    """The last pass's records read back (lp_records, at most cap: the cursors' sum): how many the
    cursors counted, how many were read, and their order-free checksum (rec_key summed mod 2^64, the
    kernel's own term)."""
    out = np.empty(cap, REC)
    n = ctypes.c_int64(0)
    if lib.lp_records(ctypes.c_void_p(h), _p(out), ctypes.c_int64(cap), ctypes.byref(n)) != 0:
        raise SystemExit("lattice_post: the records' readback failed")
    r = out[: min(n.value, cap)]
    with np.errstate(over="ignore"):
        cs = int(rec_key(r["lane"], r["t"], r["arc"], r["dst_pos"]).sum(dtype=np.uint64))
    return dict(counted=int(n.value), read=len(r), checksum=cs)


REC_CAP = 48 << 20  # records a batch can hold (the first batch keeps ~26 M)


def _pass(lib, h, mode: int, ob: float, ms: np.ndarray, i: int) -> np.ndarray:
    """One pass over a prepared batch (lattice_post.cu lp_pass): its time into ms[i]; its parts."""
    t, split = ctypes.c_float(0.0), np.zeros(8, F32)
    if lib.lp_pass(ctypes.c_void_p(h), ctypes.c_int32(mode), ctypes.c_float(ob), ctypes.byref(t), _p(split)) != 0:
        raise SystemExit("lattice_post: a pass failed")
    ms[i] = t.value
    return split


def _counts(lib, h) -> tuple:
    cnt = np.zeros(8, np.uint64)
    if lib.lp_counts(ctypes.c_void_p(h), _p(cnt)) != 0:
        raise SystemExit("lattice_post: the counts' readback failed")
    return tuple(int(x) for x in cnt)


def overlap(lib, handles, mode: int, ob: float, graph, lp_all, lens, B: int, caps=(0,), reps: int = 3) -> dict:
    """The passes beside the GPU decoder's 1-best decode of the same rows (batches of B, one after
    another, as a decode call each): the decode's time alone and with a thread running passes over
    every batch in a loop on the passes' own streams (at the device's least priority), and the
    passes' rate alone and beside it; for a decoder whose own streams are at the default priority and
    one at the greatest (CUWFST_STREAM_PRIORITY=high when it is made), and for each grid cap (at most
    that many CTAs a launch of the pass, taking the work items in turn; 0: a CTA an item). Each cap's
    pass over the first batch must count what the uncapped one counts (records, checksum)."""
    import threading

    import torch

    from cuwfst import Decoder, DecoderOptions

    lp_gpu = torch.from_numpy(np.ascontiguousarray(lp_all, F32)).cuda()
    n, nb = len(lens), len(handles)
    ms = np.zeros(1, F32)

    def timed(fn):
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return float(np.median(ts)) * 1000

    def passes_all():
        for h in handles:
            _pass(lib, h, mode, ob, ms, 0)

    decs = {}
    for prio in ("default", "high"):
        old = os.environ.get("CUWFST_STREAM_PRIORITY")
        os.environ["CUWFST_STREAM_PRIORITY"] = prio
        try:
            decs[prio] = Decoder(graph, DecoderOptions(output_beam=ob), device="cuda", max_lanes=B)
        finally:
            if old is None:
                os.environ.pop("CUWFST_STREAM_PRIORITY")
            else:
                os.environ["CUWFST_STREAM_PRIORITY"] = old
    lib.lp_set_grid_cap(ctypes.c_int32(0))
    _pass(lib, handles[0], mode, ob, ms, 0)
    want = _counts(lib, handles[0])
    out = dict(mode=mode, caps={})
    for cap in caps:
        lib.lp_set_grid_cap(ctypes.c_int32(cap))
        _pass(lib, handles[0], mode, ob, ms, 0)
        res = dict(counts_equal=_counts(lib, handles[0]) == want, post_ms_alone=timed(passes_all) / nb)
        for prio, dec in decs.items():
            def decode_all():
                for s in range(0, n, B):
                    dec.decode(lp_gpu[s: s + B], lens[s: s + B])
                torch.cuda.synchronize()

            decode_all()
            decode_all()  # (warm: grown buffers, captured graphs)
            d_alone = timed(decode_all) / nb
            stop, done, span = threading.Event(), [0], [0.0, 0.0]

            def loop():
                span[0] = time.perf_counter()
                while not stop.is_set():
                    for h in handles:
                        if stop.is_set():
                            break
                        _pass(lib, h, mode, ob, ms, 0)
                        done[0] += 1
                        span[1] = time.perf_counter()

            th = threading.Thread(target=loop)
            th.start()
            time.sleep(0.05)  # (the passes running before the decode starts)
            d_beside = timed(decode_all) / nb
            stop.set()
            th.join()
            res[prio] = dict(decode_ms_alone=d_alone, decode_ms_beside=d_beside,
                             post_ms_beside=(span[1] - span[0]) * 1000 / max(done[0], 1), passes_beside=done[0])
        out["caps"][cap] = res
    lib.lp_set_grid_cap(ctypes.c_int32(0))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("shard")
    ap.add_argument("--utts", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--check-batches", type=int, default=1)
    ap.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--output-beam", type=float, default=8.0)
    ap.add_argument("--cpu-only", action="store_true")
    ap.add_argument("--work", action="store_true",
                    help="the first --check-batches batches' work a table class (work_by_class), on the CPU")
    ap.add_argument("--gap", action="store_true",
                    help="the first --check-batches batches' records under a two-step bound (gap_bound_counts: an "
                         "analysis of how many records a tighter exact filter would keep), on the CPU")
    ap.add_argument("--variants", nargs="+", default=list(MODES), choices=list(MODES),
                    help="write: the records stored at one cursor, the classes in turn; cursors: at 64 cursors; "
                         "streams: and the classes on streams of their own; count: the last, records counted only "
                         "(a diagnostic of the stores' share); pipe / pipe_count: streams / count with each warp's "
                         "next token's loads in flight during its walk; flat / flat_count: streams / count with a thread an "
                         "arc (FlatKernel) instead of a warp a token; flat2 / flat4 (/ flat4_count): two / four arcs a thread at once; "
                         "lean: pipe without counters or checksum (checked by its records read back); queue: lean "
                         "with each warp's candidates queued and probed and written 32 at a time")
    ap.add_argument("--grid-caps", type=int, nargs="+", default=[0],
                    help="--overlap: the pass's CTAs a launch, each cap in turn (0: one a work item)")
    ap.add_argument("--overlap", choices=list(MODES),
                    help="then time the passes (this variant) beside the GPU decoder's 1-best decode of the same rows")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    from cuwfst import Graph

    t0 = time.time()
    g = Graph.load(a.graph)
    tb, emit_b, emit_n, emit_n0 = emit_tables(g)
    d = np.load(a.shard)
    key = "log_probs" if "log_probs" in d else "log_probs_fp16"
    lp_all, lens = d[key][: a.utts], d["lengths"][: a.utts]
    mw = float(np.abs(tb.weight).max())
    n_check = min(a.check_batches * a.batch, len(lens))
    _W["graph"], _W["tables"] = g, (tb, emit_b, emit_n, emit_n0)
    jobs = [(r, np.ascontiguousarray(lp_all[r], F32), int(lens[r]), r < n_check) for r in range(len(lens))]
    if a.procs <= 1:  # in this process (no fork: forked workers hang under Nsight Compute, s118)
        _worker_init(a.output_beam)
        res = [_worker_row(j) for j in jobs]
    else:
        with get_context("fork").Pool(min(a.procs, len(lens)), _worker_init, (a.output_beam,)) as pool:
            res = pool.map(_worker_row, jobs, chunksize=1)
    fronts = {r: f for r, (f, _) in enumerate(res)}
    row_exp = {r: e for r, (_, e) in enumerate(res) if e is not None}
    print(f"graph {a.graph}: {g.num_states:,} states; {len(lens)} rows, mean T {lens.mean():.0f}; frontiers in "
          f"{time.time() - t0:.0f} s ({a.procs} processes)", flush=True)
    batches = [list(range(i, min(i + a.batch, len(lens)))) for i in range(0, len(lens), a.batch)]
    lib = None
    tmp = tempfile.mkdtemp(prefix="lattice_post_")
    if not a.cpu_only:
        lib = load_library(build_library(tmp))
        keep = [np.ascontiguousarray(tb.dest, np.int32), np.ascontiguousarray(tb.ilabel, np.int32),
                np.ascontiguousarray(tb.weight, F32)]  # (held until the copies are made)
        rc = lib.lp_upload_graph(_p(keep[0]), _p(keep[1]), _p(keep[2]),
                                 ctypes.c_int64(len(tb.weight)), _p(emit_b), _p(emit_n), _p(emit_n0),
                                 ctypes.c_int64(g.num_states), ctypes.c_int32(tb.vocab_size))
        if rc != 0:
            raise SystemExit("lattice_post: graph upload failed")
    rows_out, fails, handles = [], 0, []
    for bi, rows in enumerate(batches):
        steps, st, sc, lp = build_batch(rows, lp_all, lens, fronts, mw, a.output_beam)
        out = dict(batch=bi, rows=len(rows), row_steps=len(steps), tokens=int(steps["src_n"].sum()),
                   max_frontier=int(steps["dst_n"].max()), filtered=int(steps["filter_on"].sum()))
        if a.gap and bi < a.check_batches:  # (an analysis: the two-step bound's records, gap_bound_counts)
            out["gap"] = gap = gap_bound_counts(tb, emit_b, emit_n, emit_n0, steps, st, sc, lp, a.output_beam)
            tot = {k: sum(v[k] for v in gap.values()) for k in next(iter(gap.values()))}
            print(f"batch {bi}'s records under a two-step bound: " + "; ".join(
                f"{c}: " + ", ".join(f"{k} {v:,}" for k, v in w.items()) for c, w in gap.items()) +
                f"; all: {tot['kept']:,} kept, {tot['admitted']:,} admitted, {tot['kept_two_step']:,} under the bound "
                f"({tot['kept_two_step'] / max(tot['kept'], 1):.1%}); admitted ones a pruning needs for the forward "
                f"and the first-admission keys: {tot['admitted_needed']:,}, for the forward alone "
                f"{tot['admitted_at_score']:,}; every record under the filter's bound, those aside "
                f"{tot['kept_one_step_all']:,}, under the two-step bound {tot['kept_two_step_all']:,}", flush=True)
        if a.work and bi < a.check_batches:
            out["work"] = work = work_by_class(tb, emit_b, emit_n, emit_n0, steps, st, sc, lp, a.output_beam)
            print(f"batch {bi}'s work a class: " + "; ".join(
                f"{c}: " + ", ".join(f"{k} {v:,}" for k, v in w.items()) +
                f", lanes used {w['read'] / max(32 * w['chunks'], 1):.2f}" for c, w in work.items()), flush=True)
        if lib is not None:
            info = np.zeros(8, np.int64)
            h = lib.lp_prepare_batch(_p(steps), ctypes.c_int32(len(steps)), _p(st), _p(sc), ctypes.c_int64(len(st)),
                                     _p(lp), ctypes.c_int64(len(lp)), ctypes.c_int64(REC_CAP), _p(info))
            if not h:
                raise SystemExit("lattice_post: the batch's upload failed")
            handles.append(h)
            for variant in a.variants:
                ms = np.zeros(a.reps + 1, F32)
                for r in range(a.reps + 1):  # (the first: a warm-up)
                    split = _pass(lib, h, MODES[variant], a.output_beam, ms, r)
                cnt = np.zeros(8, np.uint64)
                if lib.lp_counts(ctypes.c_void_p(h), _p(cnt)) != 0:
                    raise SystemExit("lattice_post: the counts' readback failed")
                gpu = dict(zip(("tokens", "chunks", "slots", "cands", "survived", "kept", "checksum", "cursor"),
                               (int(x) for x in cnt)))
                if bi < a.check_batches and MODES[variant] & 1:  # (the records themselves, read back)
                    gpu["records"] = records_check(lib, h, max(gpu["cursor"], 1))
                ms = ms[1:]
                out[variant] = dict(ms_median=float(np.median(ms)), ms_min=float(ms.min()), ms_max=float(ms.max()),
                                    split_ms=dict(zip(("tables", "global", "c14", "c13", "c11"),  # (streams: ends)
                                                      (round(float(x), 3) for x in split[:5]))), gpu=gpu)
            out.update(items=[int(x) for x in info[:4]], global_steps=int(info[4]), global_entries=int(info[5]),
                       build_items=int(info[6]))
        if all(r in row_exp for r in rows):
            exp = {k: sum(row_exp[r][k] for r in rows) for k in row_exp[rows[0]]}
            exp["checksum"] %= 1 << 64
            out["numpy"] = exp
            if lib is not None:
                same = True
                for v in a.variants:
                    got = out[v]["gpu"]
                    keys = ("tokens",) if MODES[v] & LEAN else exp
                    same &= all(got[k] == exp[k] for k in keys)
                    if "records" in got:  # every kept record written, and the right ones
                        rc = got["records"]
                        same &= rc["counted"] == rc["read"] == exp["kept"] and rc["checksum"] == exp["checksum"]
                    elif MODES[v] & LEAN:
                        same = False  # (a lean pass is checked by its records alone)
                out["check"] = "equal" if same else "DIFFERENT"
                fails += not same
        rows_out.append(out)
        print(json.dumps(out), flush=True)
    if lib is not None:
        rs = sum(r["row_steps"] for r in rows_out)
        for v in a.variants:
            tot = np.array([r[v]["ms_median"] for r in rows_out])
            per = {k: sum(r[v]["gpu"][k] for r in rows_out) for k in ("tokens", "slots", "cands", "survived", "kept")}
            if MODES[v] & LEAN:  # (no counters: the kept records are the cursors')
                per["kept"] = sum(r[v]["gpu"]["cursor"] for r in rows_out)
            parts = {k: np.mean([r[v]["split_ms"][k] for r in rows_out]) for k in rows_out[0][v]["split_ms"]}
            print(f"post pass ({v}): {tot.mean():.3f} ms a batch of {a.batch} (medians of {a.reps}; batches "
                  f"{tot.min():.3f}-{tot.max():.3f}; parts " + ", ".join(f"{k} {x:.2f}" for k, x in parts.items()) +
                  f"); per row-step: tokens {per['tokens'] / rs:,.0f}, arcs read {per['slots'] / rs:,.0f}, candidates "
                  f"{per['cands'] / rs:,.0f}, survived {per['survived'] / rs:,.0f}, kept {per['kept'] / rs:,.0f}")
        print(f"checked batches: {min(a.check_batches, len(batches))}, "
              f"{'all equal' if fails == 0 else f'{fails} DIFFERENT'}")
    ov = None
    if lib is not None and a.overlap:
        ov = overlap(lib, handles, MODES[a.overlap], a.output_beam, g, lp_all, lens.astype(np.int32), a.batch,
                     caps=a.grid_caps)
        for cap, res in ov["caps"].items():
            for prio in ("default", "high"):
                o = res[prio]
                print(f"beside the decoder ({a.overlap}, grid cap {cap or 'none'}, counts "
                      f"{'equal' if res['counts_equal'] else 'DIFFERENT'}; the decoder's streams at priority {prio}), "
                      f"ms a batch of {a.batch}: 1-best decode alone {o['decode_ms_alone']:.2f}, with the passes "
                      f"beside it {o['decode_ms_beside']:.2f}; a pass alone {res['post_ms_alone']:.2f}, beside the "
                      f"decode {o['post_ms_beside']:.2f} ({o['passes_beside']} passes)", flush=True)
            fails += 0 if res["counts_equal"] else 1
    for h in handles:
        lib.lp_free(ctypes.c_void_p(h))
    shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(dict(graph=a.graph, utts=len(lens), batch=a.batch, reps=a.reps,
                                    commit=os.environ.get("CUWFST_COMMIT", "unknown"), batches=rows_out,
                                    overlap=ov)) + "\n")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
