"""How many of the records pass's token walks a per-state bound could skip (issue 10), counted on the CPU.

    python -m benchmarks.records_skip GRAPH.img SHARD.npz [ROWS [OUTPUT_BEAM]]

The records pass (lattice_after.cuh LatRecordsKernel) walks each token of S_t: its first round of 32
emitting arcs is loaded whatever they hold, and only then does the warp learn that no arc reaches the
filter's bound pre_low (a candidate: end = a + (acoustic + weight) >= pre_low). A token whose state's best
label-0 arc and best other arc both end below pre_low, taken with the frame's blank log-prob and best
non-blank log-prob (`rest`, as the walk takes it), has no candidate; with two per-state weights (the best
label-0 weight and the best other weight) loaded beside the arc range, which the walk already fetches a token
ahead, its walk could be skipped without loading an arc. This replays the reference decoder's snapshots
of the first ROWS rows (default 2) with the GPU's pre_low (benchmarks.lattice_post.filter_scalars, bit for
bit) and counts, over every filtered real step: the tokens, the rounds the walk takes (its read arcs: the
label-0 arcs, then the others while a + (rest + weight) >= pre_low, in 32s, at least one round a token
with arcs), the tokens with a candidate, and the tokens and rounds the bound would skip (never one with a
candidate: checked). Then where the rounds are: the non-blank arcs read and the candidates among them, and
for the tokens of heavy states (more than HEAVY = 32 emitting arcs) their rounds, reads and candidates, and
the (token, label) pairs a walk by label would test (the frame's non-blank labels best first, while lp + a +
the state's best non-blank weight reaches pre_low). Last, the packed walk's rounds counted exactly and the
octets' walk's (CUWFST_LATTICE_AFTER_OCTETS=on: a token's first 8 arcs an octet of lanes, four tokens a round)."""
import sys

import numpy as np

F32 = np.float32
HEAVY = 32  # a heavy state's emitting arcs: more than a round


def walk_rounds(narcs: np.ndarray, nread: np.ndarray, first: int = 0) -> np.ndarray:
    """Rounds of 32 lanes a token's walk takes from its arc `first` on (lattice_after.cuh): narcs emitting
    arcs of which the first nread are read; arc nread (where nread < narcs) is the first past the
    sorted bound, and the round that holds it is the walk's last. 0 where no arc is left past `first`."""
    n = narcs.astype(np.int64) - first
    r = nread.astype(np.int64) - first
    out = np.where(r < n, r // 32 + 1, (n + 31) // 32)
    return np.where(n > 0, out, 0)


def octet_rounds(narcs: np.ndarray, nread: np.ndarray) -> int:
    """Rounds the octets' walk (CUWFST_LATTICE_AFTER_OCTETS=on) takes for one step's tokens: a round a
    group of four (their first 8 arcs, an octet of lanes a token), then, for a token with more than 8
    arcs and none of its first 8 past (nread >= 8), rounds of 32 from its 9th arc."""
    on = (narcs > 8) & (nread >= 8)
    return int((len(narcs) + 3) // 4 + walk_rounds(narcs[on], nread[on], 8).sum())


def count(graph, lp_all: np.ndarray, lens: np.ndarray, rows: int, ob: float = 8.0) -> dict:
    from benchmarks.lattice_post import PHASE_REAL, filter_scalars, frontier_maxes, row_fronts
    from benchmarks.roofline import _ragged, graph_tables
    from cuwfst import Decoder, DecoderOptions

    dec = Decoder(graph, DecoderOptions(output_beam=ob), num_threads=1)
    tb = graph_tables(graph, 0)
    w = tb.weight.astype(F32)
    lab0 = tb.ilabel == 0
    ns = tb.num_states
    # per state: the best label-0 emitting weight and the best other one (-inf where none)
    owner_all, arcs_all = _ragged(tb.emit_b[np.arange(ns)], tb.emit_e - tb.emit_b)
    w0 = np.full(ns, -np.inf, F32)
    wn = np.full(ns, -np.inf, F32)
    z = lab0[arcs_all]
    np.maximum.at(w0, owner_all[z], w[arcs_all[z]])
    np.maximum.at(wn, owner_all[~z], w[arcs_all[~z]])
    mw = float(np.abs(w).max()) if len(w) else 0.0
    tot = dict(rows=0, steps=0, tokens=0, rounds=0, cand_tokens=0, skip_tokens=0, skip_rounds=0, skip_with_cand=0,
               read_nonblank=0, cand_nonblank=0, heavy_tokens=0, heavy_rounds=0, heavy_read=0, heavy_cand=0,
               heavy_label_tests=0, packed_rounds=0, octet_rounds=0)
    for b in range(min(rows, len(lens))):
        L = int(lens[b])
        row = np.ascontiguousarray(lp_all[b], F32)
        cnt, st_all, sc_all, step = row_fronts(dec, row, L)
        off = np.concatenate([[0], np.cumsum(cnt)])
        scal = filter_scalars(step, L, mw, ob, frontier_maxes(cnt, sc_all))
        tot["rows"] += 1
        for k in range(L):
            if int(step[k + 1, 0]) != PHASE_REAL or not scal[k][4] or cnt[k] == 0 or cnt[k + 1] == 0:
                continue
            pre_low = F32(scal[k][2])
            s = st_all[off[k]: off[k + 1]].astype(np.int64)
            a = sc_all[off[k]: off[k + 1]].astype(F32)
            rest = F32(row[k][1:].max())
            narcs = (tb.emit_e[s] - tb.emit_b[s]).astype(np.int64)
            own, arcs = _ragged(tb.emit_b[s], narcs)
            aw = w[arcs]
            nb = ~lab0[arcs]
            # the walk's reads (a prefix of the sorted arcs): label-0 arcs, then the others while
            # a + (rest + weight) >= pre_low; its rounds about the reads in 32s
            read = ~nb | ((a[own] + (rest + aw)) >= pre_low)
            nread = np.bincount(own, weights=read, minlength=len(s)).astype(np.int64)
            rounds = np.where(narcs > 0, np.maximum(1, (nread + 31) // 32), 0)
            end = a[own] + (row[k][tb.ilabel[arcs]].astype(F32) + aw)
            cand_arc = read & (end >= pre_low)
            cand = np.bincount(own, weights=cand_arc, minlength=len(s)) > 0
            # the bound: the state's best label-0 and best other arc, with blank's and rest's log-probs
            bound = np.maximum(a + (F32(row[k][0]) + w0[s]), a + (rest + wn[s]))
            skip = (narcs > 0) & (bound < pre_low)
            tot["steps"] += 1
            tot["tokens"] += len(s)
            tot["rounds"] += int(rounds.sum())
            tot["cand_tokens"] += int(cand.sum())
            tot["packed_rounds"] += int(walk_rounds(narcs, nread).sum())
            tot["octet_rounds"] += octet_rounds(narcs, nread)
            tot["skip_tokens"] += int(skip.sum())
            tot["skip_rounds"] += int(rounds[skip].sum())
            tot["skip_with_cand"] += int((skip & cand).sum())
            tot["read_nonblank"] += int((read & nb).sum())
            tot["cand_nonblank"] += int((cand_arc & nb).sum())
            heavy = narcs > HEAVY
            hv = heavy[own] & nb
            tot["heavy_tokens"] += int(heavy.sum())
            tot["heavy_rounds"] += int(rounds[heavy].sum())
            tot["heavy_read"] += int((read & hv).sum())
            tot["heavy_cand"] += int((cand_arc & hv).sum())
            # a walk by label: the frame's non-blank labels best first, tested while lp >= pre_low - a - wn
            best_first = -np.sort(row[k][1:].astype(F32))[::-1]
            need = -(pre_low - a[heavy] - wn[s[heavy]])
            tot["heavy_label_tests"] += int(np.searchsorted(best_first, need, side="right").sum())
    return tot


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from cuwfst import Graph

    g = Graph.load(argv[0])
    d = np.load(argv[1])
    rows = int(argv[2]) if len(argv) > 2 else 2
    ob = float(argv[3]) if len(argv) > 3 else 8.0
    t = count(g, d["log_probs"], d["lengths"].astype(np.int32), rows, ob)
    print(t)
    print(f"tokens {t['tokens']:,}, rounds {t['rounds']:,} ({t['rounds'] / max(t['tokens'], 1):.2f} a token); with a "
          f"candidate {t['cand_tokens']:,}; skipped by the bound {t['skip_tokens']:,} tokens "
          f"({100 * t['skip_tokens'] / max(t['tokens'], 1):.1f} %), {t['skip_rounds']:,} rounds "
          f"({100 * t['skip_rounds'] / max(t['rounds'], 1):.1f} %); skipped with a candidate {t['skip_with_cand']}")
    print(f"non-blank arcs read {t['read_nonblank']:,} ({t['read_nonblank'] / max(t['tokens'], 1):.1f} a token), candidates "
          f"{t['cand_nonblank']:,}; heavy states' tokens (> {HEAVY} arcs) {t['heavy_tokens']:,}, their rounds "
          f"{t['heavy_rounds']:,} ({100 * t['heavy_rounds'] / max(t['rounds'], 1):.1f} %), non-blank reads {t['heavy_read']:,}, "
          f"candidates {t['heavy_cand']:,}; a walk by label would test {t['heavy_label_tests']:,} (token, label) pairs")
    print(f"the packed walk's rounds counted exactly (the round that holds the first past arc included) "
          f"{t['packed_rounds']:,}; the octets' walk's {t['octet_rounds']:,} "
          f"({100 * t['octet_rounds'] / max(t['packed_rounds'], 1):.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
