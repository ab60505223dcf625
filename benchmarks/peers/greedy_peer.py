"""Greedy CTC: argmax per frame, repeats collapsed, blank dropped, pieces joined into words."""

from __future__ import annotations

import numpy as np

from . import Peer


def greedy_tokens(log_probs_row: np.ndarray, length: int) -> np.ndarray:
    """Best token per frame over the first `length` frames, repeats merged, blanks (0) dropped."""
    best = log_probs_row[:length].argmax(-1)
    keep = np.ones(best.shape[0], bool)
    keep[1:] = best[1:] != best[:-1]
    best = best[keep]
    return best[best != 0]


class GreedyPeer(Peer):
    name = "greedy"
    device = "cpu"
    graph = "-"
    batched = False

    def __init__(self, corpus, batch, cfg):
        self.corpus = corpus

    def settings(self) -> str:
        return "argmax per frame (numpy), no LM; words from BPE pieces, unknown words are errors"

    def decode(self, log_probs, lengths):
        lp = np.asarray(log_probs)
        return [self.corpus.pieces_to_word_ids(greedy_tokens(lp[b], int(lengths[b])).tolist())
                for b in range(lp.shape[0])]
