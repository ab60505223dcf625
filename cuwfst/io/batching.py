"""Utterances grouped into padded batches, so memory is bounded by one batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from .readers import Utterance


@dataclass
class Batch:
    ids: list[str]
    log_probs: np.ndarray  # [B, T_max, V], zero-padded (decoders never read past a length)
    lengths: np.ndarray  # int32 [B]


def batches(utterances: Iterable[Utterance], batch_size: int) -> Iterator[Batch]:
    """Consecutive groups of `batch_size` utterances; every utterance must have the same
    number of columns (one model's output)."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch size must be an int >= 1, got {batch_size!r}")
    width = None
    group: list[Utterance] = []

    def flush():
        T = max(u.log_probs.shape[0] for u in group)
        dtype = np.float16 if all(u.log_probs.dtype == np.float16 for u in group) else np.float32
        lp = np.zeros((len(group), T, width), dtype)
        for i, u in enumerate(group):
            lp[i, : u.log_probs.shape[0]] = u.log_probs
        return Batch([u.id for u in group], lp, np.array([u.log_probs.shape[0] for u in group], np.int32))

    for u in utterances:
        V = u.log_probs.shape[1]
        if width is None:
            width = V
        elif V != width:
            raise ValueError(f"utterance {u.id} has {V} columns, the ones before it {width}: "
                             "every input must come from one model")
        group.append(u)
        if len(group) == batch_size:
            yield flush()
            group = []
    if group:
        yield flush()
