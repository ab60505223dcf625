"""Roofline of the GPU decoder's kernels (issue 11): the work each kernel does, counted on the
CPU from the same inputs the device decoded, against the kernel times the device measured.

python -m benchmarks.roofline --corpus /tmp/corpus-small-96 --speed /work/.device/6/speed.jsonl \
    --utts 64 --batch 32 [--variants old new] [--graphs TLG HLG] [--md out.md]

Inputs: `--speed` is a `benchmarks.gpu_speed --json` file (rows per variant and batch, and the
`--profile` rows: kernel milliseconds per batch, launch by launch, at the largest batch);
`--corpus` the tier the device decoded (its `<graph>.img` and `sim/shard-00000.npz`); the first
`--utts` rows in stored order, in batches of `--batch`, as gpu_speed takes them.

Work, per row, from the CPU reference decoder's per-step snapshots (the frontier after every
step, exact: the GPU's rows equal the CPU's): each step's frontier is replayed through the
step's rule in numpy (float32, the kernels' arithmetic): emitting (or final) arcs of every
token, the exact maximum, admission against max - beam, recombination by destination, and on
epsilon graphs the closure passes (Jacobi order, as epsilon.cuh). The replay must land on the
next snapshot exactly (its states, scores and pre-closure size), and the rows' statistics must
equal the device's (max_frontier, mean_frontier, closure_growth of every speed row of the
graph); the script stops otherwise, since then the inputs differ.

Counts per batch (means over the batches of --batch rows):
  tokens      frontier tokens the step's Scan reads (the final step included)
  slots       arcs of those tokens in the step's phase: what Max and Expand walk
  read_slots  arcs of the tokens whose upper bound (score + max emitting weight + max log-prob)
              passes the cutoff: the arcs Expand reads (Max reads at most `slots`)
  admitted    arcs with end > cutoff: Expand's hash probes
  claims      distinct destinations = survivors = the next frontier before its closure
  closure (per pass, summed): EpsScan entries (pass 0: the whole frontier; later: the tokens
  the previous pass changed) and their epsilon arcs; list entries (closure="lists": tokens
  whose score + max epsilon weight passes the cutoff) and their epsilon arcs; epsilon arcs
  admitted (hash probes), touched slots (tokens the pass changes), new tokens; tokens whose
  hash slots ClearClaims clears.

Bytes: a model per kernel (BYTES below), from each kernel's reads and writes in
cuwfst/csrc/include/cuwfst/{scan,expand,finalize,epsilon}.cuh. Two totals: `useful` (the
elements' own bytes) and `sector` (a random 4- or 8-byte access costs a 32-byte sector;
contiguous accesses cost their bytes). Rates: work and bytes over the measured kernel time;
the bandwidth floor is sector bytes / 4.8 TB/s (H200 HBM3e), the random-sector bound
4.8 TB/s / 32 B = 150 G sectors/s. The launch floor is (kernels a step) x 2-4 us.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HBM_BYTES_S = 4.8e12  # H200 HBM3e peak
SECTOR = 32  # bytes per L2/DRAM sector
LAUNCH_US = (2.0, 4.0)  # assumed cost of one kernel launch inside a CUDA graph (not measured here)
F32 = np.float32
NEG_INF = F32(-np.inf)

EMIT_KEYS = ("tokens", "slots", "read_tokens", "read_slots", "admitted", "claims")
PASS_KEYS = ("scan_entries", "scan_slots", "list_entries", "list_arcs", "eps_admitted", "eps_touched", "eps_new")


class Mismatch(RuntimeError):
    """The replay or the inputs do not agree with the snapshots or the device's statistics."""


# --------------------------------------------------------------------------------------------
# The graph's per-state tables (as the GPU upload builds them, gpu_binding.cu)


@dataclass
class Tables:
    num_states: int
    vocab_size: int
    dest: np.ndarray
    ilabel: np.ndarray
    weight: np.ndarray
    row_splits: np.ndarray
    emit_b: np.ndarray
    emit_e: np.ndarray
    final_b: np.ndarray
    final_e: np.ndarray
    eps_b: np.ndarray
    eps_n: np.ndarray
    emit_maxw: np.ndarray
    eps_maxw: np.ndarray
    has_eps: bool
    eps_iterations: int
    max_eps_degree: int


def _segment_max(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    out = np.full(len(starts), NEG_INF, F32)
    nz = counts > 0
    if nz.any():
        out[nz] = np.maximum.reduceat(values, starts[nz])
    return out


def graph_tables(graph, eps_iterations: int) -> Tables:
    a = graph.arrays
    rs = np.asarray(a.row_splits, np.int64)
    fc = np.asarray(a.final_count, np.int64)
    ec = np.asarray(a.eps_count, np.int64) if a.has_eps else np.zeros(a.num_states, np.int64)
    b, e = rs[:-1], rs[1:]
    eps_b = b if a.finals_at_end else b + fc
    emit_b = eps_b + ec
    emit_e = e - fc if a.finals_at_end else e
    final_b = e - fc if a.finals_at_end else b
    w = np.asarray(a.weight, F32)
    return Tables(
        num_states=a.num_states, vocab_size=a.vocab_size, dest=np.asarray(a.dest, np.int64),
        ilabel=np.asarray(a.ilabel, np.int64), weight=w, row_splits=rs, emit_b=emit_b, emit_e=emit_e,
        final_b=final_b, final_e=final_b + fc, eps_b=eps_b, eps_n=ec,
        emit_maxw=_segment_max(w, emit_b, emit_e - emit_b),
        eps_maxw=_segment_max(w, eps_b, ec) if a.has_eps else np.full(a.num_states, NEG_INF, F32),
        has_eps=bool(a.has_eps), eps_iterations=int(eps_iterations),
        max_eps_degree=int(ec.max()) if len(ec) else 0)


def _ragged(begin: np.ndarray, count: np.ndarray):
    """(owner index, element index) of the concatenated ranges [begin[i], begin[i] + count[i])."""
    total = int(count.sum())
    owner = np.repeat(np.arange(len(count)), count)
    if total == 0:
        return owner, np.zeros(0, np.int64)
    first = np.cumsum(count) - count
    return owner, np.repeat(begin - first, count) + np.arange(total)


def _best_per_key(keys: np.ndarray, vals: np.ndarray):
    """Distinct keys and the max value of each."""
    uniq, inv = np.unique(keys, return_inverse=True)
    best = np.full(len(uniq), NEG_INF, F32)
    np.maximum.at(best, inv, vals)
    return uniq, best


# --------------------------------------------------------------------------------------------
# Per-row counts from the CPU reference's snapshots


@dataclass
class RowWork:
    length: int
    emit: dict = field(default_factory=dict)     # key -> int64[length + 1] per step
    closure: dict = field(default_factory=dict)  # key -> int64[length + 1, passes]; row 0: the start
    clear: np.ndarray | None = None               # int64[length + 1]: hash slots cleared after closure c
    max_frontier: int = 0
    frontier_total: int = 0
    closure_added: int = 0


def _snapshots(decoder, lp_row: np.ndarray, length: int):
    """The reference decoder's snapshot buffers of one row (count, state, score, arc, step)."""
    from cuwfst.decoder.offline import snapshot_buffers

    o = decoder.options
    bufs = snapshot_buffers(length, decoder.graph.num_states)
    lp = np.ascontiguousarray(lp_row, F32)
    decoder._ref.mod.ref_decode_snapshots(decoder._ref.handle, lp, length, o.search_beam, o.output_beam,
                                          o.min_active_states, o.max_active_states, o.allow_partial,
                                          decoder.eps_iterations, False, *bufs)
    return bufs


def emitting_steps(tb, decoder, lp_row: np.ndarray, length: int):
    """Each real step of one row that has emitting arcs, from the reference decoder's snapshots:
    (k, states, scores, beam, cutoff, deg, own, arcs, lp, end) with every emitting arc of the
    frontier (own: its token, arcs: its id) and its end score + (log-prob + weight)."""
    cnt, st_buf, sc_buf, _, step = _snapshots(decoder, lp_row, length)
    for k in range(length):
        n = int(cnt[k])
        s, sc = st_buf[k, :n].astype(np.int64), sc_buf[k, :n]
        deg = tb.emit_e[s] - tb.emit_b[s]
        if not (deg > 0).any():
            continue
        own, a = _ragged(tb.emit_b[s], deg)
        lp = lp_row[k].astype(F32)
        end = sc[own] + (lp[tb.ilabel[a]] + tb.weight[a])  # (the search's order: k2's)
        yield k, s, sc, F32(step[k + 1, 1]), F32(step[k + 1, 2]), deg, own, a, lp, end


def _closure(tb: Tables, states: np.ndarray, scores: np.ndarray, cutoff: F32, pos_of: np.ndarray, out: dict,
             c: int):
    """The epsilon closure of a frontier (epsilon.cuh's rule, Jacobi passes), counting each pass's
    work into out[key][c, pass]. Returns the closed frontier (states, scores)."""
    st, sc = states.copy(), scores.astype(F32).copy()
    pos_of[st] = np.arange(len(st))
    changed = np.arange(len(st))
    for p in range(tb.eps_iterations):
        snap = sc.copy()
        es = st[changed]
        n_eps = tb.eps_n[es]
        out["scan_entries"][c, p] = len(changed)
        out["scan_slots"][c, p] = int(n_eps.sum())
        listed = (snap[changed] + tb.eps_maxw[es]) > cutoff
        out["list_entries"][c, p] = int(listed.sum())
        out["list_arcs"][c, p] = int(n_eps[listed].sum())
        if len(changed) == 0:
            continue
        owner, arcs = _ragged(tb.eps_b[es], n_eps)
        end = snap[changed[owner]] + tb.weight[arcs]
        adm = end > cutoff
        out["eps_admitted"][c, p] = int(adm.sum())
        d, e = tb.dest[arcs[adm]], end[adm]
        ex = pos_of[d]
        ok = (ex < 0) | (e > snap[np.maximum(ex, 0)])
        uniq, best = _best_per_key(d[ok], e[ok])
        out["eps_touched"][c, p] = len(uniq)
        where = pos_of[uniq]
        new = where < 0
        out["eps_new"][c, p] = int(new.sum())
        sc[where[~new]] = best[~new]
        first_new = len(st)
        st = np.concatenate([st, uniq[new]])
        sc = np.concatenate([sc, best[new]])
        pos_of[uniq[new]] = np.arange(first_new, len(st))
        changed = np.concatenate([where[~new], np.arange(first_new, len(st))])
    pos_of[st] = -1
    return st, sc


def _same_tokens(st, sc, snap_st, snap_sc) -> bool:
    if len(st) != len(snap_st):
        return False
    a, b = np.argsort(st), np.argsort(snap_st)
    return bool(np.array_equal(st[a], snap_st[b]) and np.array_equal(sc[a].view(np.int32), snap_sc[b].view(np.int32)))


def count_row(decoder, tb: Tables, lp_row: np.ndarray, length: int, pos_of: np.ndarray) -> RowWork:
    """Every step's work of one row, replayed from the reference decoder's snapshots and checked
    against them."""
    cnt, st_buf, sc_buf, _, step = _snapshots(decoder, lp_row, length)
    T = length
    w = RowWork(length=T)
    w.emit = {k: np.zeros(T + 1, np.int64) for k in EMIT_KEYS}
    P = tb.eps_iterations
    w.closure = {k: np.zeros((T + 1, max(P, 1)), np.int64) for k in PASS_KEYS}
    w.clear = np.zeros(T + 1, np.int64)
    final_state = tb.num_states - 1
    V = tb.vocab_size
    o = decoder.options
    if tb.has_eps and P > 0:  # the start closure (snapshot 0)
        s0, c0 = _closure(tb, np.array([decoder.graph.start_state], np.int64), np.zeros(1, F32),
                          F32(0.0) - F32(o.search_beam), pos_of, w.closure, 0)
        n0 = int(cnt[0])
        if not _same_tokens(s0, c0, st_buf[0, :n0].astype(np.int64), sc_buf[0, :n0]):
            raise Mismatch("start closure replay differs from snapshot 0")
        w.clear[0] = len(s0)
        w.closure_added += len(s0) - 1
    for k in range(T + 1):  # step k reads snapshot k and builds snapshot k + 1
        n = int(cnt[k])
        s = st_buf[k, :n].astype(np.int64)
        sc = sc_buf[k, :n]
        w.emit["tokens"][k] = n
        w.max_frontier = max(w.max_frontier, n)
        w.frontier_total += n
        phase, beam, cutoff, before = int(step[k + 1, 0]), F32(step[k + 1, 1]), F32(step[k + 1, 2]), int(step[k + 1, 3])
        if k < T:
            b, e = tb.emit_b[s], tb.emit_e[s]
        elif phase == 1:  # final
            b, e = tb.final_b[s], tb.final_e[s]
        else:  # redirect: every arc
            b, e = tb.row_splits[s], tb.row_splits[s + 1]
        deg = e - b
        owner, arcs = _ragged(b, deg)
        lp = lp_row[k, :V].astype(F32) if k < T else None
        if k < T:
            end = sc[owner] + (lp[tb.ilabel[arcs]] + tb.weight[arcs])
        else:
            end = sc[owner] + (F32(0.0) + tb.weight[arcs])
        mx = end.max() if len(end) else NEG_INF
        if len(end) and F32(mx - beam) != cutoff:
            raise Mismatch(f"step {k}: max {mx} - beam {beam} != the snapshot's cutoff {cutoff}")
        w.emit["slots"][k] = len(arcs)
        if k < T:
            passes = sc + (lp.max() + tb.emit_maxw[s]) > cutoff
        else:
            passes = np.ones(n, bool)  # final/redirect bounds are +inf
        w.emit["read_tokens"][k] = int((passes & (deg > 0)).sum())
        w.emit["read_slots"][k] = int(deg[passes].sum())
        adm = end > cutoff
        w.emit["admitted"][k] = int(adm.sum())
        d = tb.dest[arcs[adm]] if phase != 2 or k < T else np.full(int(adm.sum()), final_state, np.int64)
        uniq, best = _best_per_key(d, end[adm])
        w.emit["claims"][k] = len(uniq)
        if len(uniq) != before:
            raise Mismatch(f"step {k}: {len(uniq)} destinations, the snapshot says {before} before closure")
        n1 = int(cnt[k + 1])
        s1, c1 = st_buf[k + 1, :n1].astype(np.int64), sc_buf[k + 1, :n1]
        if k < T and tb.has_eps and P > 0:
            uniq, best = _closure(tb, uniq, best, cutoff, pos_of, w.closure, k + 1)
            w.clear[k + 1] = len(uniq)
            w.closure_added += len(uniq) - before
        if not _same_tokens(uniq, best, s1, c1):
            raise Mismatch(f"step {k}: replayed frontier differs from snapshot {k + 1}")
    return w


def count_rows(graph, lp: np.ndarray, lens: np.ndarray, options=None, progress=None) -> tuple[Tables, list[RowWork]]:
    """Work of every row (CPU reference decoder, one row at a time)."""
    from cuwfst import Decoder, DecoderOptions

    dec = Decoder(graph, options or DecoderOptions(), num_threads=1)
    tb = graph_tables(graph, dec.eps_iterations)
    pos_of = np.full(graph.num_states, -1, np.int64)
    rows = []
    for i in range(len(lens)):
        rows.append(count_row(dec, tb, lp[i], int(lens[i]), pos_of))
        if progress:
            progress(i)
    return tb, rows


# --------------------------------------------------------------------------------------------
# Batches


def batch_work(rows: list[RowWork], B: int, tb: Tables) -> dict:
    """Mean work per batch of B rows (rows in order), the steps a batch runs, and the hot lane
    (per step the largest lane's tokens and claims, averaged over the steps)."""
    nb = (len(rows) + B - 1) // B
    tot: dict[str, float] = {}
    steps = hot_tokens = hot_claims = 0.0

    def add(k, v):
        tot[k] = tot.get(k, 0.0) + float(v)

    for s0 in range(0, len(rows), B):
        group = rows[s0 : s0 + B]
        K = max(r.length for r in group) + 1
        steps += K
        tok = np.zeros((len(group), K), np.int64)
        clm = np.zeros((len(group), K), np.int64)
        for i, r in enumerate(group):
            tok[i, : r.length + 1] = r.emit["tokens"]
            clm[i, : r.length + 1] = r.emit["claims"]
            for k in EMIT_KEYS:
                add(k, r.emit[k].sum())
            add("lane_steps", r.length + 1)
            add("real_lane_steps", r.length)
            if tb.has_eps and tb.eps_iterations > 0:
                for k in PASS_KEYS:
                    add(k, r.closure[k].sum())
                add("scan_entries0", r.closure["scan_entries"][:, 0].sum())
                add("scan_entries_later", r.closure["scan_entries"][:, 1:].sum())
                add("clear", r.clear.sum())
                add("closures", r.length + 1)
        hot_tokens += tok.max(axis=0).sum()
        hot_claims += clm.max(axis=0).sum()
    out = {k: v / nb for k, v in tot.items()}
    out.update(batches=nb, steps=steps / nb, hot_tokens=hot_tokens / steps, hot_claims=hot_claims / steps)
    return out


# --------------------------------------------------------------------------------------------
# Byte model: (count, useful bytes per unit, sector bytes per unit, what). Sector bytes: a
# random access costs a 32-byte sector; contiguous accesses cost their bytes; a token's arc run
# (contiguous, starting anywhere) costs its bytes plus on average one partial sector per array
# (28 B for 4-byte, 30 B for 2-byte elements). Reads of a lane's log-prob row (V x 4 B, 2 KB at
# V = 501) are charged their bytes (the row stays on chip). A hash probe is one probe (on the
# small tier a lane's table, hash_cap = next_pow2(2 x claims_cap) = 524,288 slots, holds at most
# the largest frontier, 79,319 tokens: about 15% full).


def _scan_terms(eps: bool, V: int):
    t = [("tokens", 8, 8, "state, score (contiguous)"),
         ("tokens", 8, 32, "row_splits[s], [s+1] (random)"),
         ("tokens", 4, 32, "final_count[s] (random)"),
         ("tokens", 4, 32, "emit_maxw[s] (random)"),
         ("tokens", 12, 12, "write begin, ub, offsets (contiguous)"),
         ("slots", 0.125, 0.125, "write tok_hint, one int32 per 32 slots"),
         ("real_lane_steps", 4 * V, 4 * V, "the lane's log-prob row (max)")]
    if eps:
        t.insert(3, ("tokens", 4, 32, "eps_count[s] (random)"))
    return t


def _walk_terms():
    return [("slots", 4, 4, "token boundaries, 32 per 32-slot strip (contiguous)"),
            ("tokens", 16, 16, "ub, begin, offsets, score of the token (contiguous)")]


def _arc_terms(count, tokens):
    return [(count, 4 + 2 + 4, 4 + 2 + 4, "arc weight, ilabel, log-prob column"),
            (tokens, 0, 28 + 30, "partial sectors at the start of each token's arc run")]


def byte_model(eps: bool, V: int) -> dict:
    hash_probe = [("admitted", 4, 32, "hash key probe (random)"),
                  ("admitted", 8, 32, "payload read (random)"),
                  ("admitted", 8, 32, "payload atomicMax (random; upper bound: every admitted arc)"),
                  ("admitted", 4, 4, "arc_dest (in the arc run)"),
                  ("claims", 4, 32, "key CAS on the first claim (random)"),
                  ("claims", 8, 32, "claims list append (atomic slot)")]
    fin = [("claims", 8, 8, "claims list (contiguous)"),
           ("claims", 8, 32, "payload (random)"),
           ("claims", 4, 32, "tok_hint[slot >> 5] (random)"),
           ("claims", 8, 32, "offsets gallop (random, one sector)"),
           ("claims", 4, 32, "begin[tok] (random)"),
           ("claims", 4, 32, "winner[tok] (random)"),
           ("claims", 8, 8, "arena entry (contiguous)"),
           ("claims", 12, 12, "next frontier state, score, winner (contiguous)"),
           ("claims", 12, 64, "hash slot: clear key+payload, or baseline payload+hash_pos (random)")]
    m = {
        "scan": _scan_terms(eps, V),
        "max": _walk_terms() + _arc_terms("slots", "tokens"),
        "expand": _walk_terms() + _arc_terms("read_slots", "read_tokens") + hash_probe,
        "finalize": fin,
    }
    if eps:
        eps_probe = [("eps_admitted", 4, 32, "arc_dest (random)"),
                     ("eps_admitted", 4, 32, "hash key probe (random)"),
                     ("eps_admitted", 8, 32, "payload read (random)"),
                     ("eps_admitted", 8, 32, "payload atomicMax (random; upper bound)"),
                     ("eps_new", 4, 32, "key CAS of a new destination (random)"),
                     ("eps_new", 8, 32, "claims list append"),
                     ("eps_touched", 4, 32, "touched list append")]
        resolve = [("eps_touched", 4, 4, "touched list (contiguous)"),
                   ("eps_touched", 8, 32, "payload (random)"),
                   ("eps_touched", 4, 32, "hash_pos (random)"),
                   ("eps_touched", 8, 64, "begin[j], eps_winner[j] (random)"),
                   ("eps_touched", 8, 8, "arena entry (contiguous)"),
                   ("eps_touched", 8, 64, "token score, winner in place (random)"),
                   ("eps_touched", 4, 4, "next pass's list (contiguous)"),
                   ("eps_touched", 12, 64, "hash_pos, baseline payload (random)"),
                   ("eps_new", 8, 36, "key read (random), new token's state (contiguous)")]
        m["eps_scan"] = [("scan_entries0", 12, 12, "pass 0: state, score, winner (contiguous)"),
                         ("scan_entries_later", 16, 4 + 96, "later passes: eps_tok, then state, score, winner (random)"),
                         ("scan_entries", 16, 96, "row_splits, final_count, eps_count (random)"),
                         ("scan_entries", 16, 16, "write begin, snapshot score, eps_winner, offsets"),
                         ("scan_slots", 0.125, 0.125, "write tok_hint")]
        m["eps_expand:scan"] = [("scan_slots", 4, 4, "entry boundaries (contiguous)"),
                                ("scan_slots", 12, 12, "begin, offsets, snapshot score of the entry"),
                                ("scan_slots", 4, 32, "epsilon arc weight (random)")] + eps_probe
        m["eps_expand:lists"] = [("list_entries", 4, 4, "list entry (contiguous)"),
                                 ("list_entries", 12, 96, "token state, score, winner (random)"),
                                 ("list_entries", 16, 96, "row_splits, final_count, eps_count (random)"),
                                 ("list_entries", 8, 8, "write eps_winner, tok_begin"),
                                 ("list_arcs", 4, 32, "epsilon arc weight (random)")] + eps_probe
        m["eps_resolve:scan"] = resolve + [("eps_touched", 12, 64, "tok_hint and offsets: slot -> entry (random)")]
        m["eps_resolve:lists"] = resolve + [("eps_touched", 8, 64, "key, eps_maxw[key] (random)")]
        m["clear_claims"] = [("clear", 8, 8, "claims list (contiguous)"),
                             ("clear", 16, 96, "clear key, payload, hash_pos (random)")]
        m["finalize"] = fin + [("claims", 8, 36, "lists only: eps_maxw[state] (random), pass-0 list write")]
    return m


def model_key(kernel: str, closure_lists) -> str:
    """closure_lists: 0 scan, 1 (True) lists, 2 chain (no byte model: its kernels get no
    roofline row; eps_link neither)."""
    if kernel in ("eps_expand", "eps_resolve"):
        return f"{kernel}:{({0: 'scan', 1: 'lists', 2: 'chain'})[int(closure_lists)]}"
    return kernel


def kernel_bytes(terms, work: dict, closure_lists: bool, kernel: str) -> tuple[float, float]:
    useful = sector = 0.0
    for count, u, s, what in terms:
        if what.startswith("lists only") and not closure_lists:
            continue
        n = work.get(count, 0.0)
        useful += n * u
        sector += n * s
    return useful, sector


# the work unit each kernel's rate is quoted in
UNIT = {"scan": "tokens", "max": "slots", "expand": "slots", "finalize": "claims", "eps_scan": "scan_entries",
        "eps_expand:scan": "scan_slots", "eps_expand:lists": "list_arcs", "eps_resolve:scan": "eps_touched",
        "eps_resolve:lists": "eps_touched", "clear_claims": "clear"}
UNIT_NAME = {"tokens": "tokens", "slots": "arcs", "claims": "claims", "scan_entries": "entries",
             "scan_slots": "eps arcs", "list_arcs": "eps arcs", "eps_touched": "updates", "clear": "slots"}


def kernels_per_step(eps_iterations: int, closure_lists) -> int:
    """Launches per step (EnqueueStep): Scan, Max, Expand, Finalize, and on epsilon graphs
    eps_iterations closure passes (EpsScan, EpsExpand, EpsResolve; lists: no EpsScan; chain:
    EpsChainExpand, EpsChainResolve, EpsChainLink once) and ClearClaims."""
    if eps_iterations == 0:
        return 4
    if int(closure_lists) == 2:
        return 4 + 3 + 1
    return 4 + eps_iterations * (2 if closure_lists else 3) + 1


# --------------------------------------------------------------------------------------------
# The device's measurements


def load_speed(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def speed_for(rows: list[dict], graph: str) -> tuple[list[dict], list[dict]]:
    """(timed rows, profile rows) of a graph (`graph` field: file name, e.g. 'TLG.img')."""
    mine = [r for r in rows if r.get("graph") == graph]
    return [r for r in mine if "ms_per_batch" in r], [r for r in mine if "profile_ms" in r]


def row_stats(work: list[RowWork], lens: np.ndarray, has_eps: bool) -> dict:
    total = sum(w.frontier_total for w in work)
    added = sum(w.closure_added for w in work)
    steps = float((lens.astype(np.int64) + 1).sum())
    return dict(max_frontier=max(w.max_frontier for w in work), mean_frontier=total / steps,
                closure_growth=(total / (total - added)) if has_eps and total > added else 1.0)


def _same_stats(r: dict, stats: dict) -> bool:
    return all(np.isclose(r[k], stats[k], rtol=1e-12, atol=0)
               for k in ("max_frontier", "mean_frontier", "closure_growth") if k in r)


def verify(stats: dict, timed: list[dict], decoder_stats: dict | None = None) -> tuple[list[dict], list[dict]]:
    """The device rows whose statistics equal the counted rows' (max_frontier, mean_frontier,
    closure_growth: the same inputs), and the others (other inputs in the same file, e.g. the
    model's log-probs next to the simulated ones). None matching: Mismatch. The replay's
    statistics must also equal the reference decoder's."""
    if decoder_stats:
        for k, v in decoder_stats.items():
            if not np.isclose(v, stats[k], rtol=1e-12, atol=0):
                raise Mismatch(f"{k}: the replay says {stats[k]}, Decoder.decode {v}")
    if not timed:
        raise Mismatch("the speed file has no timed rows of this graph")
    same = [r for r in timed if _same_stats(r, stats)]
    if not same:
        r = timed[0]
        raise Mismatch("no device row has the counted rows' statistics, so the inputs differ: device "
                       + ", ".join(f"{k} {r.get(k)}" for k in stats) + "; CPU "
                       + ", ".join(f"{k} {v}" for k, v in stats.items()))
    return same, [r for r in timed if r not in same]


# --------------------------------------------------------------------------------------------
# The table


def roofline(work: dict, prof: dict, tb: Tables, variant: str, graph: str) -> list[dict]:
    """One row per kernel of a profile row: work, time, rates, bandwidth floor."""
    lists = int(prof.get("closure_lists", 0)) if "closure_lists" in prof else int(variant in ("new", "lists"))
    model = byte_model(tb.has_eps, tb.vocab_size)
    steps = work["steps"]
    out = []
    for kernel, ms in prof["profile_ms"].items():
        key = model_key(kernel, lists)
        if key not in model or ms <= 0:
            continue
        useful, sector = kernel_bytes(model[key], work, lists, key)
        unit = UNIT[key]
        n = work.get(unit, 0.0)
        s = ms / 1e3
        out.append(dict(graph=graph, variant=variant, kernel=kernel, unit=UNIT_NAME[unit], work=n, ms=ms,
                        us_step=ms * 1e3 / steps, rate=n / s, useful_gbs=useful / s / 1e9,
                        sector_gbs=sector / s / 1e9, hbm_pct=100 * sector / s / HBM_BYTES_S,
                        floor_us_step=sector / HBM_BYTES_S * 1e6 / steps,
                        useful_per_unit=useful / n if n else 0.0, sector_per_unit=sector / n if n else 0.0))
    return out


def variant_kernels(tb: Tables, lists: bool) -> list[str]:
    """The kernels a step launches (by profile name)."""
    k = ["scan", "max", "expand", "finalize"]
    if tb.has_eps and tb.eps_iterations > 0:
        k += (["eps_expand", "eps_resolve"] if lists else ["eps_scan", "eps_expand", "eps_resolve"]) + ["clear_claims"]
    return k


def bandwidth_floor_us_step(work: dict, tb: Tables, lists: bool) -> float:
    """Sector bytes of every kernel of a step at 4.8 TB/s, per step."""
    model = byte_model(tb.has_eps, tb.vocab_size)
    keys = [model_key(k, lists) for k in variant_kernels(tb, lists)]
    sector = sum(kernel_bytes(model[key], work, lists, key)[1] for key in keys if key in model)  # (chain: no model)
    return sector / HBM_BYTES_S * 1e6 / work["steps"]


def analyse_graph(graph, name: str, lp, lens, timed, profs, variants, B, progress=None) -> dict:
    from cuwfst import Decoder, DecoderOptions

    tb, rows = count_rows(graph, lp, lens, DecoderOptions(), progress)
    stats = row_stats(rows, lens, tb.has_eps)
    hs = Decoder(graph, DecoderOptions(), num_threads=2).decode(lp, lens)
    total = sum(h.frontier_total for h in hs)
    added = sum(h.closure_added for h in hs)
    dec_stats = dict(max_frontier=max(h.max_frontier for h in hs),
                     mean_frontier=total / float((lens.astype(np.int64) + 1).sum()),
                     closure_growth=(total / (total - added)) if tb.has_eps and total > added else 1.0)
    timed, other = verify(stats, timed, dec_stats)
    work = batch_work(rows, B, tb)
    # the device's steps a batch (us_per_step = ms / steps) must be the rows' (same batching)
    for r in timed:
        if r["batch"] == B and not np.isclose(r["ms_per_batch"] * 1e3 / r["us_per_step"], work["steps"], rtol=1e-9):
            raise Mismatch(f"the device ran {r['ms_per_batch'] * 1e3 / r['us_per_step']:.3f} steps a batch of {B}, "
                           f"the rows give {work['steps']:.3f}")
    for prof in profs:
        if prof.get("profile_batch") == B and prof["us_per_step"].get("scan"):
            dev_steps = prof["profile_ms"]["scan"] * 1e3 / prof["us_per_step"]["scan"]
            if not np.isclose(dev_steps, work["steps"], rtol=1e-9):
                raise Mismatch(f"the device ran {dev_steps:.3f} steps a batch of {B}, the rows give {work['steps']:.3f}")
    out_rows, steps, end = [], [], {}
    batches = sorted({r["batch"] for r in timed})
    work_of = {b: work if b == B else batch_work(rows, b, tb) for b in batches}
    for v in variants:
        vt = [r for r in timed if r["variant"] == v]
        if not vt:
            continue
        lists = int(vt[0]["closure_lists"])
        prof = next((p for p in profs if p["variant"] == v and p.get("profile_batch") == B), None)
        rr = roofline(work, dict(prof, closure_lists=lists), tb, v, name) if prof else []
        out_rows += rr
        k = kernels_per_step(tb.eps_iterations, lists)
        graphed = next((r for r in vt if r["batch"] == B), None)
        steps.append(dict(variant=v, kernels=k, launch_floor=(k * LAUNCH_US[0], k * LAUNCH_US[1]),
                          floor_us_step=bandwidth_floor_us_step(work, tb, lists),
                          floor_by_batch={b: bandwidth_floor_us_step(w, tb, lists) for b, w in work_of.items()},
                          kernel_us_step=sum(r["us_step"] for r in rr) if prof else None,
                          eager_minus_graph_ms=(prof["profile_sum_ms"] - graphed["ms_per_batch"])
                          if prof and graphed else None,
                          us_step_by_batch={r["batch"]: r["us_per_step"] for r in vt}))
        if graphed:
            arcs = work["slots"] + work.get("list_arcs" if lists else "scan_slots", 0.0)
            sec = graphed["ms_per_batch"] / 1e3
            end[v] = dict(arcs_s=arcs / sec, tokens_s=work["tokens"] / sec, ms=graphed["ms_per_batch"])
    n, m = graph.num_states, graph.num_arcs
    # what gpu_binding.cu uploads: row_splits, final_count, dest, ilabel (u16), weight, emit_maxw,
    # and on epsilon graphs eps_count and eps_maxw
    dev_bytes = (n + 1) * 4 + n * 4 + m * 10 + n * 4 + (2 * n * 4 if graph.has_epsilon else 0)
    return dict(graph=name, title=name, states=n, arcs=m, eps_arcs=graph.num_epsilon_arcs, graph_bytes=dev_bytes,
                eps_iterations=tb.eps_iterations, batch=B, batches=batches, work=work, stats=stats, rows=out_rows,
                steps=steps, end_to_end=end, other_rows=len(other))


def _fmt(x: float) -> str:
    if x >= 1e9:
        return f"{x / 1e9:.2f} G"
    if x >= 1e6:
        return f"{x / 1e6:.1f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def _kernel_table(rows: list[dict]) -> list[str]:
    L = ["| variant | kernel | work / batch | ms / batch | us / step | work / s | useful GB/s | "
         "sector GB/s | % of 4.8 TB/s | sector B / unit | bandwidth floor us / step | x floor |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        x = r["us_step"] / r["floor_us_step"] if r["floor_us_step"] > 0 else float("inf")
        L.append(f"| {r['variant']} | {r['kernel']} | {_fmt(r['work'])} {r['unit']} | {r['ms']:.2f} | "
                 f"{r['us_step']:.1f} | {_fmt(r['rate'])}/s | {r['useful_gbs']:.0f} | {r['sector_gbs']:.0f} | "
                 f"{r['hbm_pct']:.1f}% | {r['sector_per_unit']:.0f} | {r['floor_us_step']:.2f} | {x:.0f}x |")
    return L + [""]


def markdown(report: dict) -> str:
    L = []
    for g in report["graphs"]:
        w = g["work"]
        L.append(f"### {g['title']}: {g['states']:,} states, {g['arcs']:,} arcs, {g['eps_arcs']:,} epsilon arcs "
                 f"({g['graph_bytes'] / 2**20:.1f} MiB on the device), eps_iterations {g['eps_iterations']}; "
                 f"batch {g['batch']}, {w['batches']} batch{'es' if w['batches'] > 1 else ''}, "
                 f"{w['steps']:.0f} steps a batch")
        L.append("")
        L.append(f"Work per batch: {_fmt(w['tokens'])} tokens scanned, {_fmt(w['slots'])} arcs walked "
                 f"({_fmt(w['read_slots'])} read by Expand), {_fmt(w['admitted'])} admitted, "
                 f"{_fmt(w['claims'])} claims (survivors); the hot lane {w['hot_tokens']:.0f} tokens and "
                 f"{w['hot_claims']:.0f} claims a step (the whole batch {w['tokens'] / w['steps']:.0f} and "
                 f"{w['claims'] / w['steps']:.0f}).")
        if g["eps_iterations"]:
            L.append(f"Closure per batch, all passes: EpsScan entries {_fmt(w['scan_entries'])} "
                     f"({_fmt(w['scan_slots'])} epsilon arcs), list entries {_fmt(w['list_entries'])} "
                     f"({_fmt(w['list_arcs'])} epsilon arcs), {_fmt(w['eps_admitted'])} admitted, "
                     f"{_fmt(w['eps_touched'])} token updates ({_fmt(w['eps_new'])} new tokens), "
                     f"{_fmt(w['clear'])} hash slots cleared.")
        L.append("")
        if g["rows"]:
            L += _kernel_table(g["rows"])
        bs = " / ".join(str(b) for b in g["batches"])
        L.append(f"| variant | kernels / step | launch floor us / step (2-4 us each) | bandwidth floor us / step, "
                 f"B = {bs} | kernel us / step, launch by launch, B = {g['batch']} | eager - graphed ms / batch | "
                 f"us / step graphed, B = {bs} |")
        L.append("| --- | --- | --- | --- | --- | --- | --- |")
        for s in g["steps"]:
            per_b = " / ".join(f"{s['us_step_by_batch'][b]:.1f}" if b in s["us_step_by_batch"] else "-"
                               for b in g["batches"])
            floors = " / ".join(f"{s['floor_by_batch'][b]:.2f}" for b in g["batches"])
            ku = f"{s['kernel_us_step']:.1f}" if s["kernel_us_step"] is not None else "not profiled"
            eg = f"{s['eager_minus_graph_ms']:+.2f}" if s["eager_minus_graph_ms"] is not None else "-"
            L.append(f"| {s['variant']} | {s['kernels']} | {s['launch_floor'][0]:.0f}-{s['launch_floor'][1]:.0f} | "
                     f"{floors} | {ku} | {eg} | {per_b} |")
        L.append("")
        L.append(f"End to end (graphed, B = {g['batch']}; arcs: the emitting and epsilon arcs walked): " + "; ".join(
            f"{v} {x['ms']:.2f} ms a batch, {_fmt(x['arcs_s'])} arcs/s, {_fmt(x['tokens_s'])} tokens/s"
            for v, x in g["end_to_end"].items()) + ".")
        if g["other_rows"]:
            L.append(f"({g['other_rows']} rows of this graph in the speed file are of other inputs and are not used.)")
        L.append("")
    return "\n".join(L)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, help="the tier's folder: <graph>.img and sim/shard-00000.npz")
    p.add_argument("--log-probs", help="the .npz the device decoded (default: CORPUS/sim/shard-00000.npz)")
    p.add_argument("--speed", required=True, help="benchmarks.gpu_speed --json output (with --profile rows for "
                                                  "the per-kernel table)")
    p.add_argument("--utts", type=int, default=64)
    p.add_argument("--uniform", type=int, default=0,
                   help="rows of exactly this many frames, made as gpu_speed --uniform makes them")
    p.add_argument("--batch", type=int, default=32, help="the batch of the profile rows")
    p.add_argument("--graphs", nargs="+", default=["TLG", "HLG"])
    p.add_argument("--variants", nargs="+", default=["old", "new"])
    p.add_argument("--md", help="write the markdown tables here")
    p.add_argument("--json", help="write the report (counts, rows) here")
    a = p.parse_args(argv)
    from benchmarks.stream_tools import load_shard
    from cuwfst import Graph

    corpus = Path(a.corpus)
    lp, lens = load_shard(a.log_probs or corpus / "sim" / "shard-00000.npz")
    if a.uniform:
        from benchmarks.gpu_speed import uniform_rows

        lp, lens = uniform_rows(lp, lens, a.utts, a.uniform)
    lp, lens = np.ascontiguousarray(lp[: a.utts]), lens[: a.utts]
    speed = load_speed(a.speed)
    report = {"graphs": []}
    for name in a.graphs:
        fname = f"{name}.img"
        path = corpus / fname
        timed, profs = speed_for(speed, fname)
        if not path.exists() or not timed:
            print(f"{name}: no graph in {corpus} or no rows in {a.speed}; skipped", file=sys.stderr)
            continue
        g = Graph.load(path)
        try:
            res = analyse_graph(g, fname, lp, lens, timed, profs, a.variants, a.batch)
        except Mismatch as e:
            print(f"{name}: {e}", file=sys.stderr)
            return 1
        res["title"] = f"{fname}, {len(lens)} rows" + (f" of {a.uniform} frames" if a.uniform else "")
        report["graphs"].append(res)
        print(f"{name}: inputs match the device's rows (max_frontier {res['stats']['max_frontier']}, "
              f"mean_frontier {res['stats']['mean_frontier']:.4f}, closure_growth {res['stats']['closure_growth']:.4f})",
              file=sys.stderr)
    if not report["graphs"]:
        return 1
    used = [r for r in speed if r.get("graph") in {g["graph"] for g in report["graphs"]}]
    report["commit"] = sorted({r.get("commit", "?") for r in used})
    report["device"] = sorted({r.get("device", "?") for r in used})
    md = f"Measurements: commit {', '.join(report['commit'])} on {', '.join(report['device'])}.\n\n" + markdown(report)
    print(md)
    if a.md:
        Path(a.md).write_text(md)
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
