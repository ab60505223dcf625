"""Transcripts for synthetic speech: LM sentences joined into utterances, reproducible from a seed.

Utterance `i` of split `split` and seed `seed` depends on (seed, split, i) only, so worker
processes draw their own rows, in any order. Sentences are split once and for all between
training and held-out use by a hash of their text (`held_out_sentence`): a training row
keeps only training sentences, a `test` or `set` row only held-out ones. So no held-out
utterance holds a sentence the model heard, whatever the number of training rows, and
nobody has to list the training sentences to check it.

`set` rows are sized like the simulator's utterances (100 + Gamma(2, 80) frames of 40 ms,
at most 600) at WORDS_PER_SECOND, so that model and simulated sets have similar lengths.

Words are the tier's LM words exactly (as words.txt spells them), so the reference of every
utterance is in the graph's vocabulary; espeak-ng reads them as written (`b.` as the letter,
`e-mail` as one word).
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SPLITS = {"train": 0, "test": 1, "set": 2}  # random stream of each split
HELD_OUT_ONE_IN = 10  # one sentence in ten (by hash) is kept for test and set rows
WORDS_PER_SECOND = 2.6  # espeak at rates 130-230 wpm with its pauses: sizes `set` rows


def held_out_sentence(words) -> bool:
    """Whether a sentence belongs to the held-out side (a stable hash: CRC-32 of its text)."""
    return zlib.crc32(" ".join(words).encode("utf-8")) % HELD_OUT_ONE_IN == 0


def set_target_words(seed: int, index: int) -> int:
    """Words wanted in `set` row `index`: the simulator's frame-length law at WORDS_PER_SECOND."""
    rng = np.random.default_rng([seed, SPLITS["set"], index, 3])
    frames = min(600.0, 100.0 + rng.gamma(2.0, 80.0))
    return max(1, int(round(frames * 0.04 * WORDS_PER_SECOND)))


@dataclass(frozen=True)
class Utterance:
    split: str
    index: int
    sentences: tuple[tuple[str, ...], ...]  # words of each sentence

    @property
    def words(self) -> list[str]:
        return [w for s in self.sentences for w in s]

    @property
    def text(self) -> str:
        """What espeak-ng reads: sentences end with a full stop, so it pauses between them."""
        return " ".join(" ".join(s) + "." for s in self.sentences)


class SentenceSource:
    """Draws utterances from one corpus tier's LM (`lm.arpa.gz`, else the ARPA its stats name).

    A train or test utterance holds whole sentences until it has at least `target_words`
    words, drawn per utterance from [min_words, max_words]; a set utterance's target is
    set_target_words."""

    def __init__(self, corpus_dir: str | os.PathLike, seed: int = 0, temperature: float = 1.2,
                 min_words: int = 4, max_words: int = 20, arpa: str | os.PathLike | None = None):
        from benchmarks.corpus.arpa import NgramSampler, read_arpa
        from benchmarks.corpus.simulate import _tier_arpa
        from benchmarks.corpus.units import read_table

        d = Path(corpus_dir)
        self.word_ids = read_table(str(d / "words.txt"))
        self.lm = read_arpa(arpa or _tier_arpa(d))
        self.sampler = NgramSampler(self.lm, temperature=temperature)
        self.seed, self.min_words, self.max_words = int(seed), int(min_words), int(max_words)
        if not 1 <= self.min_words <= self.max_words:
            raise ValueError(f"need 1 <= min_words <= max_words, got {min_words}, {max_words}")

    def utterance(self, split: str, index: int) -> Utterance:
        rng = np.random.default_rng([self.seed, SPLITS[split], index])
        if split == "set":
            want = set_target_words(self.seed, index)
        else:
            want = int(rng.integers(self.min_words, self.max_words + 1))
        held_out = split != "train"
        sentences: list[tuple[str, ...]] = []
        n = 0
        # an LM that keeps ending at once, or whose sentences all hash to one side, must not loop forever
        for _ in range(2000):
            s = tuple(w for w in self.sampler.sentence(rng, max_words=max(want, 1)) if w in self.word_ids)
            if not s or held_out_sentence(s) != held_out:
                continue
            sentences.append(s)
            n += len(s)
            if n >= want:
                break
        if not sentences:
            raise RuntimeError(f"no {'held-out' if held_out else 'training'} sentence drawn for {split} row {index}")
        return Utterance(split, index, tuple(sentences))

    def batch(self, split: str, start: int, num: int) -> list[Utterance]:
        return [self.utterance(split, i) for i in range(start, start + num)]
