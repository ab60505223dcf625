"""Time the CPU reference decoder on a random graph of a given size (issue: 1M arcs, T=250).

python -m benchmarks.reference_speed --arcs 1000000 --frames 250 --batch 4
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph


def random_ctc_graph(rng, num_states: int, degree: int, vocab: int) -> Graph:
    """Every state: a blank self-loop, `degree - 1` token arcs to random states; 10% final."""
    n = num_states
    d = degree
    src = np.repeat(np.arange(n), d)
    dest = rng.integers(0, n, size=n * d)
    dest[::d] = np.arange(n)  # blank self-loop first
    il = rng.integers(1, vocab, size=n * d)
    il[::d] = 0
    w = rng.uniform(-4, 0, size=n * d).astype(np.float32)
    fin = np.flatnonzero(rng.random(n) < 0.1)
    src = np.concatenate([src, fin])
    order = np.argsort(src, kind="stable")
    dest = np.concatenate([dest, np.full(fin.size, n)])[order]
    il = np.concatenate([il, np.full(fin.size, -1)])[order]
    w = np.concatenate([w, np.zeros(fin.size, np.float32)])[order]
    words = np.where((il > 0) & (rng.random(il.size) < 0.2), rng.integers(1, 5000, il.size), 0)
    return Graph.from_arcs(num_states=n + 1, start_state=0, src=src[order], dest=dest, ilabel=il,
                           weight=w, words=(np.arange(il.size + 1), words), vocab_size=vocab)


def peaky_log_probs(rng, batch: int, frames: int, vocab: int) -> np.ndarray:
    logits = rng.normal(size=(batch, frames, vocab)).astype(np.float32)
    blank = rng.random((batch, frames)) < 0.7
    logits[..., 0] += np.where(blank, 6.0, 0.0)
    tok = rng.integers(1, vocab, size=(batch, frames))
    np.put_along_axis(logits, tok[..., None], np.where(blank, 0.0, 6.0)[..., None] +
                      np.take_along_axis(logits, tok[..., None], 2), 2)
    m = logits.max(-1, keepdims=True)
    return (logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))).astype(np.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arcs", type=int, default=1_000_000)
    p.add_argument("--degree", type=int, default=8)
    p.add_argument("--vocab", type=int, default=500)
    p.add_argument("--frames", type=int, default=250)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    g = random_ctc_graph(rng, a.arcs // a.degree, a.degree, a.vocab)
    lp = peaky_log_probs(rng, a.batch, a.frames, a.vocab)
    dec = Decoder(g, DecoderOptions(), num_threads=a.threads)
    dec.decode(lp[:1, :10])  # build + warm
    t0 = time.perf_counter()
    hyps = dec.decode(lp)
    dt = time.perf_counter() - t0
    from benchmarks.peers.measure import git_commit
    commit = git_commit()
    print(f"graph: {g.num_states} states, {g.num_arcs} arcs, vocab {g.vocab_size}; T={a.frames}, batch {a.batch}, "
          f"threads {a.threads}; default options (beam 20, max_active 10000)")
    print(f"CPU reference: {dt / a.batch * 1000:.0f} ms per utterance, largest frontier "
          f"{max(h.max_frontier for h in hyps)}; RTFx {a.batch * a.frames * 0.04 / dt:.1f} "
          f"(40 ms frames) on {platform.node()} ({os.cpu_count()} cores), commit {commit}")


if __name__ == "__main__":
    main()
