"""Cross-check a corpus tier against k2: build icefall's HLG with k2 from the tier's own
lexicon_disambig.txt, tokens.txt, words.txt and lm.arpa.gz, and compare it with our HLG.fst
(sizes, and 1-best words and scores of both under k2's intersect_dense_pruned).

Not part of the builders (they must run without k2). Run it with the k2 venv (k2 1.23.4,
Python 3.9, plus `pip install kaldilm`):

    /opt/k2-venv/bin/python benchmarks/corpus/k2_crosscheck.py cuwfst/data/tiny [tests/data/sim_tiny.npz]
"""

import gzip
import os
import sys
import tempfile

import numpy as np


def read_table(path):
    with open(path, encoding="utf-8") as f:
        return {s: int(i) for s, i in (ln.split() for ln in f if ln.strip())}


def lexicon_fst_text(lexicon_path, tokens, words):
    """L with disambiguation symbols in k2 text (labels = token ids, no offset)."""
    arcs, next_state = [], 1
    with open(lexicon_path, encoding="utf-8") as f:
        for line in f:
            w, *pieces = line.split()
            s = 0
            for i, p in enumerate(pieces):
                d = 0 if i == len(pieces) - 1 else next_state
                next_state += d != 0
                arcs.append((s, d, tokens[p], words[w] if i == 0 else 0))
                s = d
    arcs.append((0, 0, tokens["#0"], words["#0"]))
    final = next_state
    arcs.append((0, final, -1, -1))
    arcs.sort(key=lambda a: a[0])
    return "\n".join(f"{a} {b} {c} {d} 0.0" for a, b, c, d in arcs) + f"\n{final}"


def k2_hlg(tier):
    import k2
    import kaldilm

    tokens, words = read_table(os.path.join(tier, "tokens.txt")), read_table(os.path.join(tier, "words.txt"))
    with tempfile.TemporaryDirectory() as tmp:
        arpa = os.path.join(tmp, "lm.arpa")
        with gzip.open(os.path.join(tier, "lm.arpa.gz"), "rb") as src, open(arpa, "wb") as dst:
            dst.write(src.read())
        g_text = kaldilm.arpa2fst(arpa, disambig_symbol="#0", read_symbol_table=os.path.join(tier, "words.txt"),
                                  max_arpa_warnings=0)
    L = k2.arc_sort(k2.Fsa.from_str(lexicon_fst_text(os.path.join(tier, "lexicon_disambig.txt"), tokens, words),
                                    acceptor=False))
    G = k2.arc_sort(k2.Fsa.from_openfst(g_text, acceptor=False))
    LG = k2.connect(k2.compose(L, G))
    LG = k2.connect(k2.determinize(LG))
    LG.labels[LG.labels >= tokens["#0"]] = 0
    LG.__dict__["_properties"] = None
    LG.aux_labels.values[LG.aux_labels.values >= words["#0"]] = 0
    LG = k2.connect(k2.remove_epsilon(LG))
    LG.aux_labels = LG.aux_labels.remove_values_eq(0)
    LG = k2.arc_sort(LG)
    H = k2.ctc_topo(tokens["#0"] - 1)
    HLG = k2.arc_sort(k2.connect(k2.compose(H, LG, inner_labels="tokens")))
    return LG, HLG


def ours_as_k2(tier):
    """Our HLG.fst read as k2 text (ilabel - 1 = token; final weights -> final arcs)."""
    import k2
    import struct

    data = open(os.path.join(tier, "HLG.fst"), "rb").read()
    p = 4
    for _ in range(2):
        (n,) = struct.unpack_from("<i", data, p)
        p += 4 + n
    p += 8
    _props, start, num_states, _num_arcs = struct.unpack_from("<Qqqq", data, p)
    p += 32
    assert start == 0, "k2 wants the start state to be 0"
    lines, finals = [], []
    for s in range(num_states):
        fw, narcs = struct.unpack_from("<fq", data, p)
        p += 12
        for _ in range(narcs):
            il, ol, w, ns = struct.unpack_from("<iifi", data, p)
            p += 16
            lines.append(f"{s} {ns} {il - 1} {ol} {-w}")
        if np.isfinite(fw):
            finals.append((s, -fw))
    final = num_states
    lines += [f"{s} {final} -1 -1 {w}" for s, w in finals]
    lines.sort(key=lambda ln: int(ln.split()[0]))
    return k2.arc_sort(k2.Fsa.from_str("\n".join(lines) + f"\n{final}", acceptor=False))


def decode(graph, log_probs, lengths):
    import k2
    import torch

    lp = torch.from_numpy(log_probs.astype(np.float32))
    sup = torch.tensor([[i, 0, int(n)] for i, n in enumerate(lengths)], dtype=torch.int32)
    dense = k2.DenseFsaVec(lp, sup)
    lat = k2.intersect_dense_pruned(k2.create_fsa_vec([graph]), dense, search_beam=20.0, output_beam=8.0,
                                    min_active_states=30, max_active_states=10000)
    best = k2.shortest_path(lat, use_double_scores=True)
    scores = best.get_tot_scores(use_double_scores=True, log_semiring=False).tolist()
    out = []
    for i in range(len(lengths)):
        aux = best[i].aux_labels
        vals = aux if isinstance(aux, torch.Tensor) else aux.values  # a tensor or a k2.RaggedTensor
        out.append([int(x) for x in vals.tolist() if x > 0])
    return out, scores


def main(tier, sim=None):
    LG, HLG = k2_hlg(tier)
    ours = ours_as_k2(tier)
    print(f"k2 LG (epsilon-free): {LG.shape[0]} states, {LG.num_arcs} arcs")
    print(f"k2 HLG: {HLG.shape[0]} states, {HLG.num_arcs} arcs (final arcs included)")
    print(f"our HLG: {ours.shape[0]} states, {ours.num_arcs} arcs (final arcs included)")
    if sim:
        d = np.load(sim)
        lp = (d["log_probs"] if "log_probs" in d else d["log_probs_fp16"]).astype(np.float32)
        lens = d["lengths"]
        w1, s1 = decode(HLG, lp, lens)
        w2, s2 = decode(ours, lp, lens)
        same = sum(a == b for a, b in zip(w1, w2))
        diff = max(abs(a - b) for a, b in zip(s1, s2))
        print(f"{len(lens)} utterances: same words {same}/{len(lens)}, max |score difference| {diff:.5f}")
        for a, b, x, y in zip(w1, w2, s1, s2):
            if a != b:
                print(f"  k2 {x:.4f} {a}\n  us {y:.4f} {b}")


if __name__ == "__main__":
    main(*sys.argv[1:])
