"""Word error rate with kaldialign (Levenshtein over word ids, unit costs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WordErrors:
    errors: int  # substitutions + deletions + insertions
    ref_words: int
    subs: int = 0
    dels: int = 0
    ins: int = 0

    @property
    def rate(self) -> float:
        """Errors per reference word (0 when there are no reference words and no errors)."""
        if self.ref_words == 0:
            return 0.0 if self.errors == 0 else float("inf")
        return self.errors / self.ref_words

    def __str__(self) -> str:
        return f"{100 * self.rate:.2f}"


def word_errors(refs, hyps) -> WordErrors:
    """Summed edit distance of each hypothesis against its reference (sequences of ids)."""
    import kaldialign

    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    s = d = i = n = 0
    for r, h in zip(refs, hyps):
        e = kaldialign.edit_distance(list(r), list(h))
        s, d, i, n = s + e["sub"], d + e["del"], i + e["ins"], n + len(r)
    return WordErrors(errors=s + d + i, ref_words=n, subs=s, dels=d, ins=i)
