"""The model's log-probs as a benchmark set, in the corpus shard format of
benchmarks.corpus.simulate (so the peers harness and benchmarks.gpu_speed read it unchanged).

A shard is an .npz with log_probs [N, Tmax, 501] float32, log_probs_fp16 (the same, float16),
lengths [N], ref_word_ids [N, Wmax] (words.txt ids, -1 padded), ref_num_words [N],
ref_text [N] (str) and utt_seed [N, 2] (seed, row index). Padding frames are a certain
blank (0 for blank, -30 for the rest), as the simulator writes them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

PAD_LOG_PROB = -30.0


def pad(log_probs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """([N, Tmax, V] float32 with certain-blank padding, lengths [N] int32) of rows [T_i, V]."""
    V = log_probs[0].shape[1]
    T = max(max(lp.shape[0] for lp in log_probs), 1)
    out = np.full((len(log_probs), T, V), PAD_LOG_PROB, np.float32)
    out[:, :, 0] = 0.0
    for i, lp in enumerate(log_probs):
        if lp.shape[1] != V:
            raise ValueError(f"row {i} has {lp.shape[1]} log-prob columns, row 0 has {V}")
        out[i, : lp.shape[0]] = lp
    return out, np.array([lp.shape[0] for lp in log_probs], np.int32)


def pack(log_probs: list[np.ndarray], words: list[list[str]], word_ids: dict[str, int], seed: int,
         indices: list[int]) -> dict:
    """One shard's arrays from per-utterance log-probs [T_i, V] and reference words."""
    if not (len(log_probs) == len(words) == len(indices)):
        raise ValueError(f"{len(log_probs)} log-prob rows, {len(words)} references, {len(indices)} indices")
    if not log_probs:
        raise ValueError("an empty shard")
    lp_all, lengths = pad(log_probs)
    W = max(max(len(w) for w in words), 1)
    ids = np.full((len(words), W), -1, np.int32)
    for i, ws in enumerate(words):
        missing = [w for w in ws if w not in word_ids]
        if missing:
            raise KeyError(f"row {i}: words not in words.txt: {missing[:5]}")
        ids[i, : len(ws)] = [word_ids[w] for w in ws]
    return {"log_probs": lp_all, "log_probs_fp16": lp_all.astype(np.float16),
            "lengths": lengths,
            "ref_word_ids": ids, "ref_num_words": np.array([len(w) for w in words], np.int32),
            "ref_text": np.array([" ".join(w) for w in words]),
            "utt_seed": np.array([[seed, i] for i in indices], np.int64)}


def write_set(out_dir: str | os.PathLike, log_probs: list[np.ndarray], words: list[list[str]],
              word_ids: dict[str, int], seed: int, indices: list[int], shard_size: int = 256,
              info: dict | None = None) -> list[str]:
    """shard-00000.npz, ... (shard_size rows each) and set_config.json in out_dir."""
    missing = sorted({w for ws in words for w in ws if w not in word_ids})
    if missing:  # before anything is written: no half set, no empty folder
        raise KeyError(f"words not in words.txt: {missing[:5]}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("shard-*.npz"):  # a smaller rewrite must not leave stale shards behind
        old.unlink()
    paths = []
    for k, s in enumerate(range(0, len(log_probs), shard_size)):
        e = s + shard_size
        path = out / f"shard-{k:05d}.npz"
        np.savez(path, **pack(log_probs[s:e], words[s:e], word_ids, seed, indices[s:e]))
        paths.append(str(path))
    with open(out / "set_config.json", "w") as f:
        json.dump({"seed": seed, "num_utts": len(log_probs), "source": "model", **(info or {})}, f, indent=1)
    return paths
