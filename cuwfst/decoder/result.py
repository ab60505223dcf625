"""Decoding results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .lattice import Lattice

# Overflow bits (GPU decoder; the CPU decoder has no capacity limits and reports 0).
OVERFLOW_CAND = 1  # candidate buffer full
OVERFLOW_HASH = 2  # hash probe bound exceeded
OVERFLOW_ARENA = 4  # winners arena full
OVERFLOW_CLAIMS = 8  # distinct-state claims list full
OVERFLOW_KEPT = 16  # surviving frontier larger than the frontier capacity
OVERFLOW_PATH = 32  # best path longer than the path buffer: its oldest arcs are missing
# 64: one lane's step passed 2^31 slots (decoder/rescue.py). 128: the lane pools of an
# offline batch were full; the decoder grows them and runs the batch again, so a result
# never carries it (decoder/memory.py).
OVERFLOW_POOL = 128


@dataclass
class Hypothesis:
    """The best path of one row.

    words: word ids along the path. score: its float32 total score (graph + acoustic),
    -inf when no path survived. arcs: graph arc ids of the path (the allow_partial
    redirected arc excluded; it is `redirect_arc`). tokens: the ilabel of each emitting
    arc (one per frame). timestamps: the frame index of the arc carrying each word.
    reached_final: the path ends in a real final arc. overflow: GPU capacity bits.
    word_symbols: the words as strings and text: them joined by single spaces (sherpa's
    `result.text`), both from the graph's word table; None when the graph has none.
    Search statistics (identical on the CPU and the GPU): max_frontier, the largest
    frontier a step expanded; frontier_total, the sum over steps of the frontiers expanded
    (divide by the frames + 1 for the mean); closure_added, the tokens epsilon closures
    added to frontiers (0 on epsilon-free graphs).
    With decode(lattice=True): lattice, the row's pruned lattice (cuwfst.Lattice);
    word_times, each word's (first, last) frame; word_confidences, each word's posterior
    probability in the lattice (Lattice.word_confidence over the word's frames).
    frames_decoded (offline Decoder; None from streams): the frames the search consumed,
    the row's length unless DecoderOptions.blank_skip dropped some. Frame indices
    (timestamps, tokens' positions, word_times, lattice frames) always count the row's
    original frames; with blank_skip, a dropped frame's token repeats the kept frame's
    before it (decoder/blank_skip.py).
    """

    words: list[int]
    score: float
    arcs: list[int]
    reached_final: bool
    overflow: int = 0
    tokens: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    redirect_arc: int = -1
    max_frontier: int = 0
    final_words: int | None = None  # streaming: leading words that can no longer change
    frontier_total: int = 0
    closure_added: int = 0
    word_symbols: list[str] | None = None
    text: str | None = None
    lattice: Lattice | None = None
    word_times: list[tuple[int, int]] | None = None
    word_confidences: list[float] | None = None
    frames_decoded: int | None = None

    @property
    def empty(self) -> bool:
        return self.score == float("-inf")
