"""A tiny corpus in the benchmark corpus layout, for tests and local runs of the driver.

    python -m benchmarks.peers.toy --out /tmp/peers-toy [--utts 24]

Writes HLG.fst/HLG.img (epsilon-free), TLG.fst/TLG.img (the same language with epsilon
arcs), words.txt, tokens.txt and one shard `utts-000.npz` (log_probs, lengths, ref_word_ids).
The graph is a CTC word loop over a small lexicon in which no word's pieces are a prefix of
another's, so a peaky utterance has one best path: the reference.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

# pieces: id 0 blank, then icefall's <sos/eos> and <unk>, then BPE-like pieces
PIECES = ["<blk>", "<sos/eos>", "<unk>", "▁the", "▁c", "at", "▁d", "og", "▁s", "un", "▁a", "▁b",
          "ird", "s", "▁ran"]
LEXICON = {  # word -> pieces; no spelling is a prefix of another
    "the": ["▁the"], "cat": ["▁c", "at"], "dog": ["▁d", "og"], "sun": ["▁s", "un"], "a": ["▁a"],
    "bird": ["▁b", "ird"], "ran": ["▁ran"],
}
WORDS = ["<eps>"] + sorted(LEXICON) + ["#0", "<s>", "</s>"]


def word_arcs(word_cost: float = 2.0):
    """Arcs (src, dst, token, word_id, cost) of the epsilon-free CTC word loop, and its finals.

    State 0: between words after a blank (start, final). Per word w with pieces p1..pn:
    state s(w,i) = "p_i last emitted" (self-loop p_i) and b(w,i) = "blank after p_i" (i < n).
    s(w,n) is final and starts the next word directly when its first piece differs from p_n.
    The word id sits on the arc that emits the word's first piece."""
    tok = {p: i for i, p in enumerate(PIECES)}
    wid = {w: i for i, w in enumerate(WORDS)}
    arcs, finals, n = [(0, 0, 0, 0, 0.0)], [0], 1
    chains = {}  # word -> (s states, b states, token ids)
    for w, pieces in LEXICON.items():
        s = list(range(n, n + len(pieces)))
        b = list(range(n + len(pieces), n + 2 * len(pieces) - 1))
        n += 2 * len(pieces) - 1
        chains[w] = (s, b, [tok[p] for p in pieces])
        finals.append(s[-1])
    for s, b, t in chains.values():
        for i in range(len(t)):
            arcs.append((s[i], s[i], t[i], 0, 0.0))
            if i + 1 < len(t):
                arcs.append((s[i], b[i], 0, 0, 0.0))
                arcs.append((b[i], b[i], 0, 0, 0.0))
                arcs.append((b[i], s[i + 1], t[i + 1], 0, 0.0))
                if t[i + 1] != t[i]:
                    arcs.append((s[i], s[i + 1], t[i + 1], 0, 0.0))
        arcs.append((s[-1], 0, 0, 0, 0.0))
    # word starts: from state 0, and from each word's last state unless the pieces repeat
    for src, last_tok in [(0, None)] + [(s[-1], t[-1]) for s, _, t in chains.values()]:
        for w, (s, _, t) in chains.items():
            if t[0] != last_tok:
                arcs.append((src, s[0], t[0], wid[w], word_cost))
    return n, sorted(arcs, key=lambda a: a[0]), finals


def _write_fst(path: str, num_states: int, arcs, finals, token_offset: int = 1) -> None:
    import kaldifst

    fst = kaldifst.StdVectorFst()
    for _ in range(num_states):
        fst.add_state()
    fst.start = 0
    for src, dst, tok, word, cost in arcs:
        il = 0 if tok is None else tok + token_offset
        fst.add_arc(src, kaldifst.StdArc(il, word, cost, dst))
    for f in finals:
        fst.set_final(f, 0.0)
    fst.write(path)


def build_graphs(out: str) -> None:
    """HLG: the word loop as is. TLG: word starts from state 0 go through an epsilon arc that
    carries the word id (Kaldi puts olabels on epsilon arcs too), so the graph has epsilons."""
    from cuwfst import Graph

    n, arcs, finals = word_arcs()
    _write_fst(os.path.join(out, "HLG.fst"), n, arcs, finals)
    tl_arcs, extra = [], n
    for src, dst, tok, word, cost in arcs:
        if src == 0 and word:
            tl_arcs.append((0, extra, None, word, cost))  # epsilon arc with the word
            tl_arcs.append((extra, dst, tok, 0, 0.0))
            extra += 1
        else:
            tl_arcs.append((src, dst, tok, word, cost))
    _write_fst(os.path.join(out, "TLG.fst"), extra, sorted(tl_arcs, key=lambda a: a[0]), finals)
    for name in ("HLG", "TLG"):
        g = Graph.from_openfst(os.path.join(out, f"{name}.fst"), token_offset=1, vocab_size=len(PIECES))
        g.save(os.path.join(out, f"{name}.img"))


def simulate(rng, num_utts: int, max_words: int = 6, peak: float = 8.0):
    """Peaky log-probs for random word sequences: each piece 1-3 frames, blanks between."""
    tok = {p: i for i, p in enumerate(PIECES)}
    wid = {w: i for i, w in enumerate(WORDS)}
    vocab = list(LEXICON)
    utts = []
    for _ in range(num_utts):
        words = [vocab[i] for i in rng.integers(0, len(vocab), rng.integers(1, max_words + 1))]
        frames = [0] * int(rng.integers(0, 3))
        prev = None
        for w in words:
            for p in LEXICON[w]:
                t = tok[p]
                if t == prev or rng.random() < 0.5:
                    frames += [0] * int(rng.integers(1, 3))
                frames += [t] * int(rng.integers(1, 4))
                prev = t
        frames += [0] * int(rng.integers(0, 3))
        utts.append((frames, [wid[w] for w in words]))
    T = max(len(f) for f, _ in utts)
    V = len(PIECES)
    logits = rng.normal(scale=0.5, size=(num_utts, T, V)).astype(np.float32)
    lengths = np.array([len(f) for f, _ in utts], np.int32)
    for b, (frames, _) in enumerate(utts):
        logits[b, np.arange(len(frames)), frames] += peak
    lp = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    refs = np.full((num_utts, max(len(r) for _, r in utts)), -1, np.int32)
    for b, (_, r) in enumerate(utts):
        refs[b, : len(r)] = r
    return lp.astype(np.float32), lengths, refs


def write_toy_corpus(out: str, num_utts: int = 24, seed: int = 0) -> str:
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokens.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{p} {i}\n" for i, p in enumerate(PIECES))
        f.write(f"#0 {len(PIECES)}\n")
    with open(os.path.join(out, "words.txt"), "w", encoding="utf-8") as f:
        f.writelines(f"{w} {i}\n" for i, w in enumerate(WORDS))
    build_graphs(out)
    lp, lengths, refs = simulate(np.random.default_rng(seed), num_utts)
    np.savez(os.path.join(out, "utts-000.npz"), log_probs=lp, lengths=lengths, ref_word_ids=refs)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--utts", type=int, default=24)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    print(write_toy_corpus(a.out, a.utts, a.seed))


if __name__ == "__main__":
    main()
