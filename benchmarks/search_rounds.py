"""The trim's search (scan.cuh TrimDegrees / TrimSearchWeights), replayed on the CPU: its rounds and
the chain of dependent round trips a scan step waits for (docs/speed-notes.md, "The trim's search,
weights only" and "A correction").

    python -m benchmarks.search_rounds GRAPH.img SHARD.npz [ROWS] [GRANULE]

Replays the reference decoder's per-step snapshots of the first ROWS rows (default 2) and, for
every token the trim searches (more than 8 emitting arcs), runs the GPU's 8-ary search over the
arcs' real keep decisions (TrimKeeps: a label-0 arc always, another while score + (the
row's best non-blank log-prob + weight) passes L - beam, L the best end over the anchor token's first
64 arcs), three ways:

- labelled: over all its emitting arcs, as with CUWFST_TRIM_WEIGHTS=off;
- weights: past its leading label-0 arcs (the default: DeviceGraph::emit_blank);
- first: weights, with round 0's probes moved down by len / 8 (s87's module, not kept).

Each search's end must be the first arc that fails (the prefix the trim keeps; a mismatch stops the
count). It counts the rounds summed over tokens (each a round trip for a token: its probes' loads)
and the chain: frontiers cut into GRANULE-token chunks (default 512, the default decoder's) striped
over 512 threads (token j of a chunk on thread j % 512, its k-th token j // 512), where a warp
waits, for each group of `group` token slots k, for the most rounds any of its threads needs, and a
step waits for its slowest warp over its chunks: summed over steps, for groups of 1, 2 and 4.
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.roofline import F32, emitting_steps, graph_tables
from cuwfst import Decoder, DecoderOptions, Graph

FAN = 8         # scan.cuh kTrimFan
MIN_DEGREE = 8  # scan.cuh kTrimMinDegree
ANCHOR = 64     # scan.cuh kTrimAnchorArcs
THREADS = 512   # kScanThreads
ITEMS = 4       # kScanItems
VARIANTS = ("labelled", "weights", "first")
GROUPS = (1, 2, 4)


class Mismatch(RuntimeError):
    pass


def search(lo: np.ndarray, hi: np.ndarray, keep_at, first: bool = False):
    """The 8-ary search over [lo, hi) of each token, keep_at(idx, pos) its arcs' decisions: the ends
    (the first arc that fails, if the passing arcs are a prefix) and the rounds each took."""
    lo, hi = lo.astype(np.int64).copy(), hi.astype(np.int64).copy()
    rounds = np.zeros(len(lo), np.int64)
    live = np.flatnonzero(lo < hi)
    r0 = True
    while len(live):
        rounds[live] += 1
        ln = hi[live] - lo[live]
        shift = (ln // FAN) * (ln >= FAN) if first and r0 else 0
        nlo, nhi = lo[live].copy(), hi[live].copy()
        failed = np.zeros(len(live), bool)
        for j in range(1, FAN):
            pos = lo[live] - shift + ln * j // FAN
            k = keep_at(live, pos)
            nlo = np.where(~failed & k, pos + 1, nlo)
            nhi = np.where(~failed & ~k, pos, nhi)
            failed |= ~k
        lo[live], hi[live] = nlo, nhi
        live = live[nlo < nhi]
        r0 = False
    return lo, rounds


def chain(rounds: np.ndarray, granule: int, group: int) -> int:
    """The step's slowest warp's dependent search round trips, its tokens in frontier order."""
    worst = 0
    for c0 in range(0, len(rounds), granule):
        j = np.arange(min(granule, len(rounds) - c0))
        per = np.zeros((THREADS // 32, ITEMS), np.int64)
        np.maximum.at(per, ((j % THREADS) // 32, j // THREADS), rounds[c0 + j])
        worst = max(worst, int(per.reshape(THREADS // 32, ITEMS // group, group).max(axis=2).sum(axis=1).max()))
    return worst


def count(g: Graph, lp_all: np.ndarray, lens: np.ndarray, rows: int, granule: int = 512) -> dict:
    dec = Decoder(g, DecoderOptions(), num_threads=1)
    tb = graph_tables(g, dec.eps_iterations)
    il, w = tb.ilabel, tb.weight
    tot = {"steps": 0, "tokens": 0, "searched": 0, "blank_states": 0}
    tot.update({f"rounds_{v}": 0 for v in VARIANTS})
    tot.update({f"chain_{v}_g{k}": 0 for v in VARIANTS for k in GROUPS})
    for i in range(rows):
        for _, s, sc, beam, _, deg, own, a, lp, end in emitting_steps(tb, dec, lp_all[i], int(lens[i])):
            has = deg > 0
            best = np.flatnonzero(has)[np.argmax(sc[has])]
            low = F32(end[own == best][:ANCHOR].max() - beam)
            keep = (il[a] == 0) | (sc[own] + (lp[1:].max() + w[a]) > low)
            start = np.cumsum(deg) - deg
            b = tb.emit_b[s]
            fails = np.where(~keep, a, np.iinfo(np.int64).max)
            first_fail = np.full(len(s), np.iinfo(np.int64).max)
            np.minimum.at(first_fail, own, fails)
            want = np.minimum(first_fail, tb.emit_e[s])
            t = np.flatnonzero((deg > MIN_DEGREE) & (sc + (lp.max() + tb.emit_maxw[s]) > low))
            n0 = np.zeros(len(t), np.int64)
            for q, tok in enumerate(t):  # the leading label-0 arcs
                row = il[b[tok]:tb.emit_e[s[tok]]]
                n0[q] = int(np.argmax(np.append(row, 1) != 0))
            keep_at = lambda idx, pos: keep[start[t[idx]] + pos - b[t[idx]]]
            rounds = {}
            for v in VARIANTS:
                lo0 = b[t] + (0 if v == "labelled" else n0)
                ends, rounds[v] = search(lo0, tb.emit_e[s[t]], keep_at, first=v == "first")
                if not (ends == want[t]).all():
                    raise Mismatch(f"row {i}: the {v} search ended off the first failing arc")
                tot[f"rounds_{v}"] += int(rounds[v].sum())
                full = np.zeros(len(s), np.int64)
                full[t] = rounds[v]
                for k in GROUPS:
                    tot[f"chain_{v}_g{k}"] += chain(full, granule, k)
            tot["steps"] += 1
            tot["tokens"] += len(s)
            tot["searched"] += len(t)
            tot["blank_states"] += int((n0 > 1).sum())
    return tot


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    g = Graph.load(argv[0])
    z = np.load(argv[1])
    rows = int(argv[2]) if len(argv) > 2 else 2
    granule = int(argv[3]) if len(argv) > 3 else 512
    tot = count(g, z["log_probs"], z["lengths"], rows, granule)
    print(tot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
