"""The CPU decoder's lattices against real k2's on the full tier's HLG (23 M arcs), on rows of a
shard (the acoustic model's posteriors or the simulated ones): the issue's contract at full scale.

Two halves, two environments:

    # this package's environment: the graph in k2's arc order, the rows, our lattices
    PYTHONPATH=$PWD python scripts/k2_full_check.py dump --graph /tmp/corpus-full/HLG.img \\
        --log-probs /tmp/corpus-full/model/shard-00000.npz --rows 0 5 9 --out /tmp/k2full.npz
    # the k2 environment (../shared/tools/k2-venv.sh: k2 1.23.4, which has no allow_partial)
    /opt/k2-venv/bin/python scripts/k2_full_check.py compare /tmp/k2full.npz

k2's graph is built from the image's arrays in the source graph's arc order (the image sorts each
state's arcs; `arc_id` maps them back), so k2's arc_map_a and our `graph_arc` name the same arcs.
Per row: the lattice's (frame, graph arc) pairs (equal as sets and in number), its state count,
get_tot_scores in both semirings (within 1e-4 relative) and shortest_path's words and score.
Settings: k2's (icefall's) defaults, allow_partial off (k2 1.23.4's behaviour).
"""
import argparse
import math
import sys
import time

import numpy as np

BEAMS = (20.0, 8.0, 30, 10000)  # search_beam, output_beam, min_active_states, max_active_states


def dump(a):
    from cuwfst import Decoder, DecoderOptions, Graph

    g = Graph.load(a.graph)
    ga = g.arrays
    rs = np.asarray(ga.row_splits, np.int64)
    src = np.repeat(np.arange(g.num_states, dtype=np.int64), np.diff(rs))
    ids = g._a.arc_id
    inv = np.arange(g.num_arcs) if ids is None else np.empty(g.num_arcs, np.int64)
    if ids is not None:
        inv[np.asarray(ids)] = np.arange(g.num_arcs)  # source arc j is image arc inv[j]
    if not np.all(np.diff(src[inv]) >= 0):
        raise SystemExit("the source arc order is not grouped by state: k2 needs that")
    n_words = np.diff(np.asarray(ga.aux_row_splits))
    if n_words.max(initial=0) > 1:
        raise SystemExit("an arc carries more than one word: this check handles one at most")
    word = np.zeros(g.num_arcs, np.int32)
    has = n_words > 0
    word[has] = np.asarray(ga.aux_pool)[np.asarray(ga.aux_row_splits)[:-1][has]]
    il = np.asarray(ga.ilabel)
    if (il == -2).any():
        raise SystemExit("epsilon arcs: k2's intersect_dense_pruned takes epsilon-free graphs")
    d = np.load(a.log_probs)
    rows = np.asarray(a.rows, np.int64)
    lp, lens = d["log_probs"][rows], d["lengths"][rows].astype(np.int32)
    lp = np.ascontiguousarray(lp[:, : int(lens.max())])
    s, o, mn, mx = BEAMS
    opts = DecoderOptions(search_beam=s, output_beam=o, min_active_states=mn, max_active_states=mx,
                          allow_partial=False)
    t0 = time.perf_counter()
    hyps = Decoder(g, opts).decode(lp, lens, lattice=True)
    print(f"ours: {len(rows)} rows decoded with lattices in {time.perf_counter() - t0:.1f} s", flush=True)
    out = dict(src=src[inv].astype(np.int32), dst=np.asarray(ga.dest)[inv].astype(np.int32),
               label=il[inv].astype(np.int32), score=np.asarray(ga.weight, np.float32)[inv], word=word[inv],
               num_states=np.int64(g.num_states), log_probs=lp, lens=lens, rows=rows, beams=np.asarray(BEAMS))
    for r, h in enumerate(hyps):
        lat = h.lattice
        order = np.lexsort((lat.graph_arc, lat.frame))
        path, score = lat.best_path()
        out[f"r{r}_frame"] = lat.frame[order].astype(np.int64)
        out[f"r{r}_arc"] = lat.graph_arc[order].astype(np.int64)
        out[f"r{r}_num_states"] = np.int64(lat.num_states)
        out[f"r{r}_tot"] = np.array([lat.tot_score(False), lat.tot_score(True)])
        out[f"r{r}_words"] = np.asarray(lat.path_words(path), np.int64)
        out[f"r{r}_best"] = np.float64(score)
        print(f"  row {int(rows[r])}: T {int(lens[r])}, {lat.num_arcs:,} lattice arcs, {lat.num_states:,} states, "
              f"reached final {h.reached_final}", flush=True)
    np.savez(a.out, **out)


def compare(a):
    import torch

    import k2

    z = np.load(a.file)
    A = int(z["src"].size)
    arcs = np.stack([z["src"], z["dst"], z["label"], z["score"].view(np.int32)], axis=1)
    t0 = time.perf_counter()
    g = k2.Fsa(torch.from_numpy(np.ascontiguousarray(arcs)))
    g.aux_labels = torch.from_numpy(z["word"].astype(np.int32))
    g.arc_id = torch.arange(1, A + 1, dtype=torch.int32)  # 0 = no graph arc
    g = k2.arc_sort(g)
    print(f"k2: the graph ({g.shape[0]:,} states, {g.num_arcs:,} arcs) in {time.perf_counter() - t0:.1f} s", flush=True)
    lens = z["lens"].tolist()
    s, o, mn, mx = z["beams"].tolist()
    bad = rows_done = arcs_done = 0
    for r, n in enumerate(lens):
        dense = k2.DenseFsaVec(torch.from_numpy(np.ascontiguousarray(z["log_probs"][r: r + 1])),
                               torch.tensor([[0, 0, n]], dtype=torch.int32))
        t0 = time.perf_counter()
        lat = k2.intersect_dense_pruned(g, dense, float(s), float(o), int(mn), int(mx), frame_idx_name="frame")
        t_k2 = time.perf_counter() - t0
        fsa = lat[0]
        frame = fsa.frame.numpy().astype(np.int64)
        arc = fsa.arc_id.numpy().astype(np.int64) - 1
        order = np.lexsort((arc, frame))
        theirs = np.stack([frame[order], arc[order]])
        ours = np.stack([z[f"r{r}_frame"], z[f"r{r}_arc"]])
        msgs = []
        if theirs.shape != ours.shape or not np.array_equal(theirs, ours):
            a_set = set(map(tuple, ours.T.tolist()))
            b_set = set(map(tuple, theirs.T.tolist()))
            msgs.append(f"(frame, arc) pairs: ours {ours.shape[1]:,}, k2's {theirs.shape[1]:,}, "
                        f"only ours {len(a_set - b_set):,}, only k2's {len(b_set - a_set):,}")
        if int(fsa.shape[0]) != int(z[f"r{r}_num_states"]):
            msgs.append(f"states: ours {int(z[f'r{r}_num_states']):,}, k2's {int(fsa.shape[0]):,}")
        tots = [lat.get_tot_scores(use_double_scores=True, log_semiring=x).item() for x in (False, True)]
        for k, (want, got) in enumerate(zip(tots, z[f"r{r}_tot"].tolist())):
            ok = (got == want == float("-inf")) or (math.isfinite(got) and abs(got - want) <= 1e-4 * abs(want))
            if not ok:
                msgs.append(f"tot_score(log={bool(k)}): ours {got!r}, k2's {want!r}")
        best = k2.shortest_path(lat, use_double_scores=True)
        words = [x for x in best[0].aux_labels.tolist() if x > 0]
        score = best.get_tot_scores(use_double_scores=True, log_semiring=False).item()
        ours_words, ours_score = z[f"r{r}_words"].tolist(), float(z[f"r{r}_best"])
        if math.isfinite(score) and (words != ours_words or abs(score - ours_score) > 1e-9 * abs(score)):
            msgs.append(f"best path: ours {len(ours_words)} words {ours_score!r}, k2's {len(words)} words {score!r}")
        rows_done += 1
        arcs_done += theirs.shape[1]
        bad += bool(msgs)
        print(f"row {int(z['rows'][r])}: T {n}, k2 {t_k2:.1f} s, {theirs.shape[1]:,} arcs, {int(fsa.shape[0]):,} states, "
              f"tot {tots[0]:.4f} / {tots[1]:.4f}: " + ("; ".join(msgs) if msgs else "identical"), flush=True)
    print(f"rows {rows_done}, arcs {arcs_done:,}: {bad} rows differ")
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--graph", default="/tmp/corpus-full/HLG.img")
    d.add_argument("--log-probs", default="/tmp/corpus-full/model/shard-00000.npz")
    d.add_argument("--rows", type=int, nargs="+", default=[0])
    d.add_argument("--out", default="/tmp/k2full.npz")
    c = sub.add_parser("compare")
    c.add_argument("file")
    a = p.parse_args()
    if a.cmd == "dump":
        dump(a)
        return 0
    return compare(a)


if __name__ == "__main__":
    sys.exit(main())
