"""Word error rates on simulated log-probs: greedy CTC against decoding with the tier's HLG.

    python -m benchmarks.corpus.evaluate --corpus DIR --sim SHARD.npz [--limit 50] [--graph HLG.img]

Greedy: the argmax of every frame, repeats merged, blanks dropped, pieces joined into words
at "▁". HLG: cuwfst's CPU decoder (k2 intersect_dense_pruned semantics) with search_beam 20,
output_beam 8, min_active 30, max_active 10000. WER = (substitutions + deletions +
insertions) / reference words, summed over utterances (kaldialign).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from .units import NUM_IDS, read_table


def greedy_words(log_probs: np.ndarray, length: int, pieces: list[str]) -> list[str]:
    best = np.argmax(log_probs[:length], axis=1)
    keep = np.r_[True, best[1:] != best[:-1]] & (best != 0)
    return "".join(pieces[t] for t in best[keep]).replace("▁", " ").split()


def wer(refs: list[list[str]], hyps: list[list[str]]) -> dict:
    import kaldialign

    errs = {"sub": 0, "del": 0, "ins": 0}
    n = 0
    for r, h in zip(refs, hyps):
        e = kaldialign.edit_distance(r, h)
        for k in errs:
            errs[k] += int(e[k])
        n += len(r)
    return {"wer": sum(errs.values()) / max(n, 1), "ref_words": n, **errs}


def evaluate(corpus_dir: str, sim_path: str, limit: int | None = None, graph: str | None = None,
             num_threads: int | None = None) -> dict:
    from cuwfst import Decoder, DecoderOptions, Graph

    d = Path(corpus_dir)
    tokens = read_table(str(d / "tokens.txt"))
    pieces = [p for p, i in sorted(tokens.items(), key=lambda kv: kv[1]) if i < NUM_IDS]
    words = {i: w for w, i in read_table(str(d / "words.txt")).items()}
    data = np.load(sim_path)
    lp = data["log_probs"] if "log_probs" in data else data["log_probs_fp16"]
    n = lp.shape[0] if limit is None else min(limit, lp.shape[0])
    lp = np.ascontiguousarray(lp[:n], dtype=np.float32)
    lens = data["lengths"][:n]
    refs = [str(t).split() for t in data["ref_text"][:n]]
    greedy = [greedy_words(lp[i], int(lens[i]), pieces) for i in range(n)]
    g = Graph.load(graph or d / "HLG.img")
    dec = Decoder(g, DecoderOptions(search_beam=20.0, output_beam=8.0, min_active_states=30,
                                    max_active_states=10000), num_threads=num_threads)
    t = time.perf_counter()
    hyps = dec.decode(lp, lens)
    secs = time.perf_counter() - t
    graph_words = [[words[w] for w in h.words] for h in hyps]
    audio_s = float(lens.sum()) * 0.04
    return {"utterances": n, "frames": int(lens.sum()), "graph": str(graph or d / "HLG.img"),
            "greedy": wer(refs, greedy), "graph_decode": wer(refs, graph_words),
            "decode_seconds": round(secs, 2), "real_time_factor": round(secs / audio_s, 4),
            "not_final": sum(not h.reached_final for h in hyps)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.corpus.evaluate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--sim", required=True, help="a shard from benchmarks.corpus.simulate")
    ap.add_argument("--limit", type=int, default=None, help="first N utterances only")
    ap.add_argument("--graph", default=None, help="graph image (default: CORPUS/HLG.img)")
    args = ap.parse_args(argv)
    print(json.dumps(evaluate(args.corpus, args.sim, args.limit, args.graph), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
