"""benchmarks/records_skip.py's counts (CPU only): on the shipped tiny HLG and demo rows, every filtered
real step's tokens and rounds are counted, a token the per-state bound skips never has a candidate, and
at a small output beam (a higher pre_low) the bound skips at least as many tokens as at a large one; the
reads, candidates and heavy states' counts are nested as they must be. The rounds' formulas (the packed
walk's, the octets' walk's) against a literal walk of random tokens."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.records_skip import count, octet_rounds, walk_rounds  # noqa: E402
from conftest_data import TINY, demo_arrays  # noqa: E402
from cuwfst import Graph  # noqa: E402


def test_records_skip_counts():
    g = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    lp = lp[:2].astype(np.float32)
    wide = count(g, lp, lens[:2], 2, ob=8.0)
    narrow = count(g, lp, lens[:2], 2, ob=0.5)
    for t in (wide, narrow):
        assert t["rows"] == 2 and t["steps"] > 0 and t["tokens"] > 0
        assert t["rounds"] >= t["cand_tokens"] > 0  # (a token with a candidate has arcs: a round at least)
        assert t["skip_with_cand"] == 0 and t["cand_tokens"] <= t["tokens"] - t["skip_tokens"]
        # where the rounds are: candidates among the reads, heavy states' share of both
        assert t["cand_nonblank"] <= t["read_nonblank"] and t["heavy_cand"] <= t["heavy_read"] <= t["read_nonblank"]
        assert t["heavy_cand"] <= t["cand_nonblank"] and t["heavy_rounds"] <= t["rounds"]
        assert t["heavy_tokens"] <= t["tokens"]
        assert t["octet_rounds"] > 0 and t["packed_rounds"] >= t["cand_tokens"]
    assert narrow["skip_tokens"] >= wide["skip_tokens"]
    assert narrow["cand_tokens"] <= wide["cand_tokens"]


def _literal(n: int, r: int, first: int, width: int) -> int:
    """A token's rounds walked literally from arc `first`, `width` arcs a round: it stops after the round
    holding arc r (the first past one) or at its last arc."""
    rounds, j0 = 0, first
    while j0 < n:
        rounds += 1
        if r < min(n, j0 + width):
            break
        j0 += width
    return rounds


def test_rounds_formulas_against_a_literal_walk():
    rng = np.random.default_rng(7)
    for _ in range(200):
        k = int(rng.integers(1, 40))
        narcs = rng.integers(0, 150, k)
        nread = np.minimum(narcs, rng.integers(0, 150, k))  # (nread == narcs: no arc past the bound)
        packed = sum(_literal(int(n), int(r), 0, 32) for n, r in zip(narcs, nread))
        assert int(walk_rounds(narcs, nread).sum()) == packed
        octs = (k + 3) // 4  # a group of four a round, its tokens' first 8 arcs
        for n, r in zip(narcs, nread):
            if n > 8 and r >= 8:  # none of the first 8 past: walked on from arc 8
                octs += _literal(int(n), int(r), 8, 32)
            else:
                assert _literal(int(n), int(r), 0, 8) <= 1
        assert octet_rounds(narcs, nread) == octs
