"""The model benchmark set again, from saved weights: the `set` rows that benchmarks.model.train
made (same sentences, voices and noise), decoded by the model, written as CORPUS/model/.

    python -m benchmarks.model.make_set --weights OUT/model.npz --corpus TRAIN_TIER [--set-corpus DIR ...]
        [--set-utts N] [--workers N] [--device cuda]

TRAIN_TIER is the tier the model was trained on (its LM gives the sentences, as in training);
each --set-corpus gets DIR/model/shard-*.npz with its own words.txt ids (default: TRAIN_TIER).
A later GPU call, or this machine, remakes the set in a minute without training again.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.model.make_set", description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", required=True, help="model.npz or model.int8.npz from benchmarks.model.train")
    ap.add_argument("--corpus", required=True, help="the tier the model was trained on")
    ap.add_argument("--set-corpus", nargs="*", default=None, help="tiers to write DIR/model into")
    ap.add_argument("--set-utts", type=int, default=None, help="rows (default: as many as in training)")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--device", default=None)
    a = ap.parse_args(argv)
    import torch

    from .audio import TEST_AUGMENT
    from .net import load_npz, log_probs_of
    from .synth import synthesize
    from .train import log, write_model_sets

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, meta = load_npz(a.weights, device)
    seed = int(meta.get("seed", 0))
    n = a.set_utts if a.set_utts is not None else int(meta.get("set_utts", 256))
    if meta.get("corpus") and os.path.basename(os.path.abspath(a.corpus)) != meta["corpus"]:
        log(f"warning: the weights were trained on tier {meta['corpus']!r}, sentences now come from {a.corpus}")
    t = time.perf_counter()
    rows = synthesize(a.corpus, "set", range(n), seed, held_out_voices=True, aug=TEST_AUGMENT, workers=a.workers)
    log(f"{len(rows)} set rows synthesized in {time.perf_counter() - t:.1f} s")
    lps = log_probs_of(model, [r.feats for r in rows], device)
    info = {"weights": os.path.basename(a.weights), "voices": "held-out variants", "train_corpus": meta.get("corpus")}
    for cdir, paths in write_model_sets(lps, rows, a.set_corpus or [a.corpus], seed, info).items():
        for p in paths:
            print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
