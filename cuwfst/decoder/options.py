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
    """

    search_beam: float = 20.0
    output_beam: float = 8.0
    min_active_states: int = 30
    max_active_states: int = 10000
    allow_partial: bool = True
    eps_iterations: int | None = None

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

    def resolved_eps_iterations(self, graph) -> int:
        if not graph.has_epsilon:
            return 0
        if self.eps_iterations is not None:
            return self.eps_iterations
        chain = graph.max_epsilon_chain
        return min(chain, 64) if chain >= 0 else 8
