"""Decoder options, with k2's names and k2's checks."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class DecoderOptions:
    """k2 `intersect_dense_pruned` settings plus cuwfst's own.

    search_beam, output_beam, min_active_states, max_active_states, allow_partial: as in k2
    (allow_partial as in k2 >= 1.24). eps_iterations: epsilon-closure passes per frame on
    graphs with epsilon arcs; None uses the graph's longest epsilon chain (exact closure)
    when the epsilon arcs are acyclic, else 8. output_beam prunes lattices only.

    Input handling (decoder/prepare.py), neutral by default so results equal k2's:
    acoustic_scale multiplies every log-prob and blank_penalty is then subtracted from
    column blank_id (the CTC blank, column 0 in icefall/WeNet/sherpa models) before
    decoding. normalize applies log_softmax to each row first. check_log_probs refuses rows
    that are not log-probabilities (a sampled row's logsumexp farther than 0.1 from 0).
    allow_extra_columns accepts log-probs wider than the graph's vocab_size (the extra
    columns are never read).

    blank_skip (offline decoding only; 0 = off): a probability in (0, 1). A frame whose
    blank log-prob (column blank_id, after normalize, before acoustic_scale and
    blank_penalty) is >= log(blank_skip) is a blank frame; each run of consecutive blank
    frames is decoded as its first frame alone (decoder/blank_skip.py). It changes results:
    report its WER and speed apart from the exact decoder's. StreamingDecoder refuses it.
    """

    search_beam: float = 20.0
    output_beam: float = 8.0
    min_active_states: int = 30
    max_active_states: int = 10000
    allow_partial: bool = True
    eps_iterations: int | None = None
    acoustic_scale: float = 1.0
    blank_penalty: float = 0.0
    blank_id: int = 0
    normalize: bool = False
    check_log_probs: bool = True
    allow_extra_columns: bool = False
    blank_skip: float = 0.0

    def __post_init__(self):
        for name in ("search_beam", "output_beam"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        for name in ("min_active_states", "max_active_states"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        if self.max_active_states <= self.min_active_states:
            raise ValueError(
                f"max_active_states ({self.max_active_states}) must be greater than "
                f"min_active_states ({self.min_active_states}), as k2 requires")
        if self.max_active_states > 2**31 - 1:
            raise ValueError("max_active_states must fit in int32")
        if not isinstance(self.allow_partial, bool):
            raise ValueError(f"allow_partial must be a bool, got {self.allow_partial!r}")
        if self.eps_iterations is not None and (
                not isinstance(self.eps_iterations, int) or self.eps_iterations < 0 or self.eps_iterations > 64):
            raise ValueError(f"eps_iterations must be None or an int in [0, 64], got {self.eps_iterations!r}")
        for name in ("acoustic_scale", "blank_penalty"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if self.acoustic_scale <= 0:
            raise ValueError(f"acoustic_scale must be > 0, got {self.acoustic_scale!r}")
        if not isinstance(self.blank_id, int) or isinstance(self.blank_id, bool) or self.blank_id < 0:
            raise ValueError(f"blank_id must be an int >= 0, got {self.blank_id!r}")
        for name in ("normalize", "check_log_probs", "allow_extra_columns"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        v = self.blank_skip
        if (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
                or not (v == 0 or 0 < v < 1)):
            raise ValueError(f"blank_skip must be 0 (off) or a probability in (0, 1) (a frame whose blank "
                             f"probability is at least this is a blank frame), got {v!r}")

    def resolved_eps_iterations(self, graph) -> int:
        if not graph.has_epsilon:
            return 0
        if self.eps_iterations is not None:
            return self.eps_iterations
        chain = graph.max_epsilon_chain
        return min(chain, 64) if chain >= 0 else 8
