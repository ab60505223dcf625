"""The benchmark corpus as the peers see it: symbol tables, graphs' paths and utterances.

Layout of a corpus directory: HLG.img, HLG.fst, TLG.fst, TLG.img, words.txt, tokens.txt and
`.npz` shards holding `log_probs` [N, Tmax, V] float32, `lengths` [N] and the reference
words (see `load_shard`, the one place that knows the shards' reference keys).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field

import numpy as np

UNKNOWN_HYP = -1  # a hypothesis word missing from words.txt: never matches a reference
UNKNOWN_REF = -2  # a reference word missing from words.txt (ref_text only)
SILENT_WORDS = ("<eps>", "<s>", "</s>")  # with every `#k`: not scored


def read_table(path: str) -> dict[str, int]:
    """A `symbol id` file (words.txt, tokens.txt)."""
    table = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2:
                raise ValueError(f"{path}:{n}: expected 'symbol id', got {line.rstrip()!r}")
            table[parts[0]] = int(parts[1])
    return table


def load_shard(path: str, word_ids: dict[str, int]):
    """(log_probs [n, T, V] float32, lengths [n] int32, references as word-id lists) from a
    shard of benchmarks.corpus.simulate: log_probs (or log_probs_fp16), lengths,
    ref_word_ids [n, Wmax] padded with -1 (or ref_text, words looked up in words.txt)."""
    with np.load(path) as z:
        keys = set(z.files)
        lp_key = "log_probs" if "log_probs" in keys else "log_probs_fp16"
        if lp_key not in keys or "lengths" not in keys:
            raise KeyError(f"{path}: needs log_probs (or log_probs_fp16) and lengths (has {sorted(keys)})")
        lp = np.asarray(z[lp_key], np.float32)
        lengths = np.asarray(z["lengths"]).astype(np.int32)
        n = lp.shape[0]
        if "ref_word_ids" in keys:
            refs = [[int(w) for w in r if w >= 0] for r in z["ref_word_ids"]]
        elif "ref_text" in keys:
            refs = [[word_ids.get(w, UNKNOWN_REF) for w in str(t).split()] for t in z["ref_text"]]
        else:
            raise KeyError(f"{path}: no references: expected ref_word_ids or ref_text (has {sorted(keys)})")
    if lp.ndim != 3 or lengths.shape != (n,) or len(refs) != n:
        raise ValueError(f"{path}: log_probs {lp.shape}, lengths {lengths.shape}, {len(refs)} references disagree")
    return lp, lengths, refs


@dataclass
class Corpus:
    root: str
    log_probs: np.ndarray  # [N, T, V] float32, padded to the longest utterance
    lengths: np.ndarray  # [N] int32
    refs: list[list[int]]  # word ids
    words: list[str]  # word id -> word
    word_ids: dict[str, int]
    pieces: list[str]  # token id -> BPE piece, V entries
    frame_shift: float = 0.04
    _cuda: object = field(default=None, repr=False)

    @property
    def num_utts(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def vocab_size(self) -> int:
        return int(self.log_probs.shape[2])

    def path(self, name: str) -> str:
        p = os.path.join(self.root, name)
        if not os.path.exists(p):
            raise FileNotFoundError(f"{name} is not in the corpus directory {self.root}")
        return p

    def audio_seconds(self, n: int) -> float:
        return float(self.lengths[:n].sum()) * self.frame_shift

    def cuda_log_probs(self):
        """The log-probs as one torch CUDA tensor, copied once and shared by the GPU peers."""
        if self._cuda is None:
            import torch

            self._cuda = torch.from_numpy(self.log_probs).cuda()
            torch.cuda.synchronize()
        return self._cuda

    def is_scored(self, word_id: int) -> bool:
        return word_id < 0 or (0 < word_id < len(self.words) and self.words[word_id] not in SILENT_WORDS
                               and not self.words[word_id].startswith("#"))

    def scored(self, ids) -> list[int]:
        """The words that count in WER: unknown words stay (as errors), <eps>, <s>, </s>, #k go."""
        return [int(w) for w in ids if self.is_scored(int(w))]

    def pieces_to_word_ids(self, tokens) -> list[int]:
        """BPE token ids (blank and repeats already removed) -> word ids; `▁` starts a word.
        Blank and `<sos/eos>`-like pieces are skipped; words missing from words.txt give -1."""
        text = "".join(self.pieces[t] for t in tokens
                       if t != 0 and not (self.pieces[t].startswith("<") and self.pieces[t] != "<unk>"))
        return [self.word_ids.get(w, UNKNOWN_HYP) for w in text.replace("▁", " ").split()]


def find_shards(root: str, set_name: str | None = None) -> list[str]:
    """The .npz shards of one set: those under root/set_name, or (set_name None) all under
    root, which must then be one set: shards in two folders (`sim/` and `model/`, say) would
    mix two sets of log-probs into one table, so that is refused."""
    base = os.path.join(root, set_name) if set_name else root
    if set_name and not os.path.isdir(base):
        raise FileNotFoundError(f"no set {set_name!r}: {base} does not exist")
    shards = sorted(glob.glob(os.path.join(base, "**", "*.npz"), recursive=True))
    if not shards:
        raise FileNotFoundError(f"no .npz shards under {base}")
    folders = sorted({os.path.relpath(os.path.dirname(s), root) for s in shards})
    if set_name is None and len(folders) > 1:
        raise ValueError(f"shards of several sets under {root} ({', '.join(folders)}): choose one with --set")
    return shards


def load_corpus(root: str, max_utts: int | None = None, frame_shift: float = 0.04,
                set_name: str | None = None) -> Corpus:
    """The first `max_utts` utterances of the shards (sorted by path) of one set (the
    folder root/set_name, e.g. `sim` or `model`; None: the only set under root) and the
    symbol tables."""
    if not os.path.isdir(root):
        raise FileNotFoundError(f"corpus directory {root} does not exist")
    word_ids = read_table(os.path.join(root, "words.txt"))
    words = [""] * (max(word_ids.values()) + 1)
    for w, i in word_ids.items():
        words[i] = w
    shards = find_shards(root, set_name)
    lps, lens, refs = [], [], []
    have = 0
    for s in shards:
        lp, ln, rf = load_shard(s, word_ids)
        take = lp.shape[0] if max_utts is None else min(lp.shape[0], max_utts - have)
        lps.append(lp[:take])
        lens.append(ln[:take])
        refs += rf[:take]
        have += take
        if max_utts is not None and have >= max_utts:
            break
    V = lps[0].shape[2]
    if any(lp.shape[2] != V for lp in lps):
        raise ValueError("shards disagree on the number of log-prob columns")
    T = max(int(ln.max()) if ln.size else 1 for ln in lens)
    # padding frames are never read (every peer takes lengths); uniform log-probs if one did
    out = np.full((have, T, V), -np.log(V), np.float32)
    b = 0
    for lp, ln in zip(lps, lens):
        t = min(T, lp.shape[1])
        out[b : b + lp.shape[0], :t] = lp[:, :t]
        b += lp.shape[0]
    lengths = np.concatenate(lens).astype(np.int32)
    if (lengths > T).any() or (lengths < 0).any():
        raise ValueError("a length is outside [0, Tmax]")
    tok = read_table(os.path.join(root, "tokens.txt"))
    pieces = [""] * V
    for p, i in tok.items():
        if i < V:
            pieces[i] = p
    return Corpus(root=root, log_probs=out, lengths=lengths, refs=refs, words=words, word_ids=word_ids,
                  pieces=pieces, frame_shift=frame_shift)
