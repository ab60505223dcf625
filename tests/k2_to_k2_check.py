"""Run in a k2 environment (tests/test_k2_lattice.py): our lattices through Lattice.to_k2 vs
the lattices k2 itself returns for the same golden cases, and whole-lattice rescoring with a
word LM, done as icefall's rescore_with_whole_lattice does it, on both.

    python k2_to_k2_check.py CASES.json OURS.npz [--no-structure]

--no-structure skips the arc-for-arc comparison (states numbered and arcs ordered as k2's) and
compares what does not depend on the numbering: the arcs as a multiset of (label, word, score
bits, lm_score bits), the total scores and the rescoring's result.
"""
import json
import sys

import numpy as np
import torch

import k2
from cuwfst.decoder.lattice import Lattice

Q = 64.0


def k2_lattice(case, graph_text):
    g = k2.Fsa.from_str(graph_text, acceptor=False)
    g = k2.arc_sort(g)
    g.lm_scores = g.scores.clone()  # icefall: HLG.lm_scores = HLG.scores.clone()
    lens, V = case["lens"], case["vocab"]
    lp = np.zeros((len(lens), max(lens), V), np.float32)
    for r, (n, q) in enumerate(zip(lens, case["lp_q"])):
        lp[r, :n] = (-np.asarray(q, np.float64) / Q).astype(np.float32).reshape(n, V)
    segs = torch.tensor([[i, 0, n] for i, n in enumerate(lens)], dtype=torch.int32)
    s, o, mn, mx = case["beams"]
    return k2.intersect_dense_pruned(g, k2.DenseFsaVec(torch.from_numpy(lp), segs), s, o, mn, mx)


def word_lm(num_words, seed):
    """A one-state word acceptor with a random score per word (a unigram LM), with
    epsilon self-loops, as icefall prepares G for whole-lattice rescoring."""
    rng = np.random.default_rng(seed)
    lines = [f"0 0 {w} {-float(rng.uniform(0, 3)):.4f}" for w in range(1, num_words + 1)]
    G = k2.Fsa.from_str("\n".join(lines + ["0 1 -1 0", "1"]), acceptor=True)
    G.lm_scores = G.scores.clone()
    return k2.create_fsa_vec([k2.arc_sort(k2.add_epsilon_self_loops(G))])


def rescore(lattice, G, lm_scale=0.7):
    """icefall's rescore_with_whole_lattice steps, written out."""
    lat = lattice.clone()
    lat.scores = lat.scores - lat.lm_scores  # acoustic scores only
    del lat.lm_scores
    inv = k2.arc_sort(k2.invert(lat))  # labels = words
    b_to_a = torch.zeros(inv.shape[0], dtype=torch.int32)
    res = k2.intersect_device(G, inv, b_to_a, sorted_match_a=True)
    res = k2.top_sort(k2.connect(res))
    res = k2.invert(res)
    res.scores = res.scores - res.lm_scores + lm_scale * res.lm_scores
    best = k2.shortest_path(res, use_double_scores=True)
    return best.get_tot_scores(use_double_scores=True, log_semiring=False), best


def main():
    cases = json.load(open(sys.argv[1]))
    ours = np.load(sys.argv[2])
    structure = "--no-structure" not in sys.argv[3:]
    rows = 0
    for i, case in enumerate(cases):
        theirs = k2_lattice(case, case["graph"])
        lats = []
        for r in range(len(case["lens"])):
            f = {k[len(f"c{i}_r{r}_"):]: ours[k] for k in ours.files if k.startswith(f"c{i}_r{r}_")}
            lats.append(Lattice(num_states=int(f.pop("num_states")), **f))
        mine = k2.create_fsa_vec([lat.to_k2()[0] for lat in lats])
        assert torch.equal(mine.arcs.shape().row_splits(1), theirs.arcs.shape().row_splits(1)), "states differ"
        if structure:
            assert torch.equal(mine.arcs.shape().row_splits(2), theirs.arcs.shape().row_splits(2)), "arcs per state"
            assert torch.equal(mine.arcs.values(), theirs.arcs.values()), "arcs differ (src, dst, label, score bits)"
            assert torch.equal(mine.aux_labels, theirs.aux_labels), "aux_labels differ"
            assert torch.equal(mine.lm_scores, theirs.lm_scores), "lm_scores differ"
        else:
            def multiset(f):
                v = f.arcs.values()
                rows = torch.stack([v[:, 2], f.aux_labels, v[:, 3], f.lm_scores.view(torch.int32)], 1).tolist()
                return sorted(map(tuple, rows))
            assert multiset(mine) == multiset(theirs), "arcs differ as a multiset (label, word, score bits, lm_score bits)"
        for log in (False, True):
            a = mine.get_tot_scores(use_double_scores=True, log_semiring=log)
            b = theirs.get_tot_scores(use_double_scores=True, log_semiring=log)
            if structure or not log:
                assert torch.equal(a, b), (log, a, b)
            else:  # (another state order sums the log semiring in another order: the last bits)
                assert torch.allclose(a, b, rtol=1e-12, atol=0.0), (log, a, b)
        n_words = int(max(1, theirs.aux_labels.max().item()))
        G = word_lm(n_words, i)
        ta, ba = rescore(mine, G)
        tb, bb = rescore(theirs, G)
        assert torch.equal(ta, tb), (ta, tb)
        assert torch.equal(ba.aux_labels, bb.aux_labels) and torch.equal(ba.labels, bb.labels)
        rows += len(case["lens"])
        print(f"case {case['name']}: {theirs.num_arcs} arcs identical; rescored best {ta.tolist()}")
    print(f"rows compared: {rows}")


if __name__ == "__main__":
    main()
