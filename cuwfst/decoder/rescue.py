"""Overflow rescue for the GPU backend: which rows to decode again, where, and how many
together. Pure logic over overflow bits; the decoding itself is a callback, so the plan
is tested without a GPU (tests/test_reliability.py).

Two kinds of overflow need different cures:

* the winners arena (bit 4) is shared by the rows of one batch: the global cursor flags
  every row that appended after it filled, so a flagged row is not itself too big. The
  cure is fewer rows per batch on the same instance: the flagged rows are decoded again in
  batches half as large, halving again while any still overflows, and a row that overflows
  alone is decoded alone once more (the log has grown since).
* a row's own capacity (hash 2, claims 8, frontier 16, slots 64) needs a larger frontier:
  those rows go to the rescue instance (4x the frontier), several rows per batch, and
  arena overflow there is cured by halving as above.

Whatever still overflows is left flagged on its Hypothesis (`overflow`), never dropped.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from .result import OVERFLOW_ARENA, OVERFLOW_CLAIMS, OVERFLOW_HASH, OVERFLOW_KEPT, OVERFLOW_POOL

OVERFLOW_SLOTS = 64
CAPACITY_BITS = OVERFLOW_HASH | OVERFLOW_CLAIMS | OVERFLOW_KEPT | OVERFLOW_SLOTS
# A full pool (never reported: the decoder grows it and re-runs) would be cured like a full
# arena, by fewer rows per batch; it is listed so that a row carrying it is never left as is.
RESCUE_BITS = CAPACITY_BITS | OVERFLOW_ARENA | OVERFLOW_POOL

# decode(instance, rows) decodes `rows` as ONE batch on instance "main" or "rescue",
# stores their results and returns their overflow bits (one int per row, in order).
DecodeBatch = Callable[[str, list], Iterable[int]]


def batches(rows, lengths: np.ndarray, size: int) -> list[list[int]]:
    """`rows` in batches of at most `size`, longest first (a batch runs as many steps as
    its longest row, so similar lengths go together); ties keep the given order."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    rows = list(rows)
    order = np.argsort(-np.asarray([int(lengths[r]) for r in rows], np.int64), kind="stable")
    ranked = [rows[i] for i in order]
    return [ranked[i : i + size] for i in range(0, len(ranked), size)]


def _arena_only(rows, overflow: dict) -> list[int]:
    return [r for r in rows if overflow[r] & (OVERFLOW_ARENA | OVERFLOW_POOL) and not overflow[r] & CAPACITY_BITS]


def _halve_arena(instance: str, rows, overflow: dict, lengths, decode: DecodeBatch, batch: int,
                 stats: dict) -> None:
    """Re-decode arena-only rows on `instance` in ever smaller batches (from `batch`, the
    size they last ran in) until none overflows, then rows that still overflow alone once
    more: the log grows after every overflow, and where a run cannot be re-run inside the
    decoder (continuous batching, long-form GC segments: lanes live across segments) the
    second run has the room the first one showed it needed."""
    left = _arena_only(rows, overflow)
    alone_again = False
    while left and (batch > 1 or not alone_again):
        alone_again |= batch == 1
        batch = max(1, min(batch // 2, len(left)))
        for group in batches(left, lengths, batch):
            for r, bits in zip(group, decode(instance, group)):
                overflow[r] = int(bits)
            stats["arena_batches"] += 1
            stats["arena_rows"] += len(group)
        left = _arena_only(left, overflow)


def rescue(overflow: dict, lengths: np.ndarray, decode: DecodeBatch, *, main_batch: int,
           rescue_lanes: int, stats: dict | None = None) -> dict:
    """Absorb what can be absorbed of the rows flagged in `overflow` ({row: bits} after the
    main decode, which ran batches of `main_batch` rows). Updates and returns `overflow`."""
    if rescue_lanes < 1:
        raise ValueError(f"rescue_lanes must be >= 1, got {rescue_lanes}")
    stats = stats if stats is not None else {}
    for k in ("arena_batches", "arena_rows", "rescue_batches", "rescued_rows", "unabsorbed_rows", "flagged_rows",
              "flagged_bits"):
        stats.setdefault(k, 0)
    flagged = [r for r, bits in overflow.items() if bits & RESCUE_BITS]
    # what the main decode flagged: rows, and every bit any of them carried (OR)
    stats["flagged_rows"] += len(flagged)
    for r in flagged:
        stats["flagged_bits"] |= int(overflow[r])
    _halve_arena("main", flagged, overflow, lengths, decode, main_batch, stats)
    big = [r for r in flagged if overflow[r] & CAPACITY_BITS]
    if big:
        stats["rescued_rows"] += len(big)
        size = min(rescue_lanes, len(big))
        for group in batches(big, lengths, size):
            for r, bits in zip(group, decode("rescue", group)):
                overflow[r] = int(bits)
            stats["rescue_batches"] += 1
        _halve_arena("rescue", big, overflow, lengths, decode, size, stats)
    stats["unabsorbed_rows"] += sum(1 for r in flagged if overflow[r] & RESCUE_BITS)
    return overflow
