"""ARPA n-gram LMs as numpy arrays: read, prune to a smaller consistent ARPA, write, sample.

The corpus tiers are cut from one real trigram LM. Pruning keeps the most probable words,
then the most probable bigrams and trigrams (by joint probability) whose history and suffix
survive, and recomputes every backoff weight so that each history's distribution still sums
to one. Sampling (for BPE training text and for simulated references) walks the backoff
structure exactly, with an optional temperature.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import lzma
import math
import os
from dataclasses import dataclass

import numpy as np

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


@dataclass
class ArpaLM:
    """An n-gram LM. `vocab[i]` is word i; `ngrams[n-1]` = (ids [N, n] int32, log10 prob [N],
    log10 backoff [N]) for order n, rows sorted by their ids."""

    vocab: list[str]
    ngrams: list[tuple[np.ndarray, np.ndarray, np.ndarray]]

    @property
    def order(self) -> int:
        return len(self.ngrams)

    @property
    def counts(self) -> list[int]:
        return [int(ids.shape[0]) for ids, _, _ in self.ngrams]

    def word_id(self, word: str) -> int:
        if not hasattr(self, "_index"):
            self._index = {w: i for i, w in enumerate(self.vocab)}
        return self._index[word]

    def words(self) -> list[str]:
        """The vocabulary without the sentence markers <s> and </s>."""
        return [w for w in self.vocab if w not in (BOS, EOS)]


def open_text(path: str | os.PathLike):
    """Plain, .xz or .gz text."""
    p = os.fspath(path)
    if p.endswith(".xz"):
        return io.TextIOWrapper(lzma.open(p, "rb"), encoding="utf-8")
    if p.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8")
    return open(p, encoding="utf-8")


def _keys(ids: np.ndarray, base: int) -> np.ndarray:
    """One int64 per row of word ids (base = vocabulary size), for sorting and look-ups."""
    k = np.zeros(ids.shape[0], np.int64)
    for c in range(ids.shape[1]):
        k = k * base + ids[:, c].astype(np.int64)
    return k


def read_arpa(path: str | os.PathLike) -> ArpaLM:
    """Parse an ARPA file (plain, .xz or .gz). Orders up to 3 fit the int64 keys used here."""
    with open_text(path) as f:
        text = f.read()
    head_end = text.find("\\1-grams:")
    if head_end < 0 or "\\data\\" not in text[:head_end]:
        raise ValueError(f"{path}: not an ARPA file (no \\data\\ and \\1-grams: sections)")
    counts = [int(ln.split("=")[1]) for ln in text[:head_end].splitlines() if ln.strip().startswith("ngram ")]
    if not 1 <= len(counts) <= 3:
        raise ValueError(f"{path}: {len(counts)} orders; 1 to 3 are supported")
    bodies = []
    for n in range(1, len(counts) + 1):
        a = text.index(f"\\{n}-grams:") + len(f"\\{n}-grams:")
        b = text.find(f"\\{n + 1}-grams:", a) if n < len(counts) else text.find("\\end\\", a)
        bodies.append(text[a : b if b >= 0 else len(text)])
    del text
    vocab: list[str] | None = None
    index: dict[str, int] = {}
    ngrams = []
    for n, body in enumerate(bodies, start=1):
        fields = body.split()
        rows = counts[n - 1]
        # each line is "logprob w1 .. wn [backoff]"; a uniform width parses as one flat list
        if len(fields) == rows * (n + 2):
            width = n + 2
        elif len(fields) == rows * (n + 1):
            width = n + 1
        else:
            width = None
        if width is None:  # mixed lines with and without backoffs
            lines = [ln.split() for ln in body.splitlines() if ln.strip()]
            if len(lines) != rows:
                raise ValueError(f"{path}: {n}-grams: header says {rows}, found {len(lines)}")
            lp_s = [ln[0] for ln in lines]
            cols = [[ln[1 + k] for ln in lines] for k in range(n)]
            bo_s = [ln[1 + n] if len(ln) > 1 + n else "0" for ln in lines]
        else:
            lp_s = fields[0::width]
            cols = [fields[1 + k :: width] for k in range(n)]
            bo_s = fields[n + 1 :: width] if width == n + 2 else ["0"] * rows
        if n == 1:
            vocab = list(cols[0])
            index = {w: i for i, w in enumerate(vocab)}
        try:
            ids = np.stack([np.array([index[w] for w in col], np.int32) for col in cols], axis=1)
        except KeyError as e:
            raise ValueError(f"{path}: {n}-gram word {e} is not a unigram") from None
        lp = np.array(lp_s, dtype=np.float64)
        bo = np.array(bo_s, dtype=np.float64)
        order = np.argsort(_keys(ids, len(vocab)), kind="stable")
        ngrams.append((ids[order], lp[order], bo[order]))
    return ArpaLM(vocab=vocab, ngrams=ngrams)


def write_arpa(lm: ArpaLM, path: str | os.PathLike) -> None:
    """Write ARPA text (gzip when the name ends in .gz, with no name or time in the gzip
    header, so the same LM gives the same bytes)."""
    p = os.fspath(path)
    with contextlib.ExitStack() as stack:
        if p.endswith(".gz"):
            raw = stack.enter_context(open(p, "wb"))
            gz = stack.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0))
            f = stack.enter_context(io.TextIOWrapper(gz, encoding="utf-8"))
        else:
            f = stack.enter_context(open(p, "w", encoding="utf-8"))
        f.write("\\data\\\n")
        for n, c in enumerate(lm.counts, start=1):
            f.write(f"ngram {n}={c}\n")
        for n, (ids, lp, bo) in enumerate(lm.ngrams, start=1):
            f.write(f"\n\\{n}-grams:\n")
            words = [" ".join(lm.vocab[i] for i in row) for row in ids.tolist()]
            if n < lm.order:
                f.writelines(f"{x:.6f}\t{w}\t{b:.6f}\n" for x, w, b in zip(lp.tolist(), words, bo.tolist()))
            else:
                f.writelines(f"{x:.6f}\t{w}\n" for x, w in zip(lp.tolist(), words))
        f.write("\n\\end\\\n")


def prune(lm: ArpaLM, num_words: int, num_ngrams: list[int]) -> ArpaLM:
    """Keep the `num_words` most probable words and, for order n >= 2, the `num_ngrams[n-2]`
    n-grams of highest joint probability whose history and suffix (n-1)-grams were kept.

    Explicit conditional probabilities are kept as they are; unigrams are renormalized over
    the kept words; every backoff weight is recomputed as
    (1 - sum of explicit P(w|h)) / (1 - sum over the same w of the lower-order P(w|h')),
    clipped to [-10, +1] (log10) so that a history whose explicit successors take almost all
    of the lower-order mass cannot make backoff paths more probable than the explicit ones.
    """
    if len(num_ngrams) != lm.order - 1:
        raise ValueError(f"give one count per order 2..{lm.order}, got {num_ngrams}")
    V = len(lm.vocab)
    bos, eos = lm.word_id(BOS), lm.word_id(EOS)
    uid, ulp, _ = lm.ngrams[0]
    specials = {bos, eos} | ({lm.word_id(UNK)} if UNK in lm.vocab else set())
    ranked = [int(i) for i in uid[np.argsort(-ulp, kind="stable"), 0] if int(i) not in specials]
    keep_words = np.zeros(V, bool)
    keep_words[ranked[:num_words]] = True
    keep_words[list(specials)] = True
    # joint log10 probability of each kept n-gram; <s> gets P(</s>) as its unigram weight
    joint_uni = ulp.copy()
    joint_uni[uid[:, 0] == bos] = ulp[uid[:, 0] == eos][0]
    kept = [(uid[keep_words[uid[:, 0]]], ulp[keep_words[uid[:, 0]]], joint_uni[keep_words[uid[:, 0]]])]
    for n in range(2, lm.order + 1):
        ids, lp, _ = lm.ngrams[n - 1]
        prev_ids, _, prev_joint = kept[-1]
        prev_keys = _keys(prev_ids, V)
        hist_keys, suff_keys = _keys(ids[:, :-1], V), _keys(ids[:, 1:], V)
        hist_c = np.minimum(np.searchsorted(prev_keys, hist_keys), len(prev_keys) - 1)
        suff_c = np.minimum(np.searchsorted(prev_keys, suff_keys), len(prev_keys) - 1)
        ok = keep_words[ids].all(axis=1) & (prev_keys[hist_c] == hist_keys) & (prev_keys[suff_c] == suff_keys)
        cand = np.flatnonzero(ok)
        joint = prev_joint[hist_c[cand]] + lp[cand]
        top = cand[np.argsort(-joint, kind="stable")[: num_ngrams[n - 2]]]
        top.sort()
        kept.append((ids[top], lp[top], prev_joint[hist_c[top]] + lp[top]))
    # renormalize unigrams over the kept words (<s> keeps its -99)
    uids, ulp_k, _ = kept[0]
    real = uids[:, 0] != bos
    ulp_k = ulp_k.copy()
    ulp_k[real] -= math.log10(float(np.sum(10.0 ** ulp_k[real])))
    # renumber the kept words 0.. in their old order, so every table stays sorted
    new_id = np.cumsum(keep_words) - 1
    out = [(new_id[uids].astype(np.int32), ulp_k)] + [(new_id[ids].astype(np.int32), lp) for ids, lp, _ in kept[1:]]
    vocab = [w for w, k in zip(lm.vocab, keep_words) if k]
    return ArpaLM(vocab=vocab, ngrams=_with_backoffs(out, len(vocab)))


def _with_backoffs(tables: list[tuple[np.ndarray, np.ndarray]], V: int):
    """Recompute log10 backoffs of every (n-1)-gram history from the n-grams (see prune)."""
    result = []
    for n, (ids, lp) in enumerate(tables, start=1):
        bo = np.zeros(ids.shape[0])
        if n < len(tables):
            nxt_ids, nxt_lp = tables[n]
            keys = _keys(ids, V)
            h = np.searchsorted(keys, _keys(nxt_ids[:, :-1], V))
            if n == 1:
                lower = 10.0 ** lp[np.searchsorted(keys, nxt_ids[:, -1].astype(np.int64))]
            else:
                lower_ids, lower_lp = tables[n - 1]
                lower = 10.0 ** lower_lp[np.searchsorted(_keys(lower_ids, V), _keys(nxt_ids[:, 1:], V))]
            num = 1.0 - np.bincount(h, weights=10.0 ** nxt_lp, minlength=ids.shape[0])
            den = 1.0 - np.bincount(h, weights=lower, minlength=ids.shape[0])
            has = np.bincount(h, minlength=ids.shape[0]) > 0
            bo[has] = np.clip(np.log10(np.maximum(num[has], 1e-9) / np.maximum(den[has], 1e-9)), -10.0, 1.0)
        result.append((ids, lp, bo))
    return result


class NgramSampler:
    """Draws sentences from an ArpaLM by walking its backoff structure.

    At history h the choices are h's explicit successors (P(w|h)) and "back off" (the
    remaining mass); a temperature t > 1 flattens that choice (weights ** (1/t)). After
    backing off, words explicit at the higher order are rejected, as the backoff model means.
    """

    def __init__(self, lm: ArpaLM, temperature: float = 1.0, exclude: tuple[str, ...] = (UNK,)):
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.lm, self.t = lm, float(temperature)
        self.V = len(lm.vocab)
        self.bos, self.eos = lm.word_id(BOS), lm.word_id(EOS)
        self.tables = []  # per order n >= 2: (sorted unique history keys, offsets, successors, probs)
        for ids, lp, _ in lm.ngrams[1:]:
            hk = _keys(ids[:, :-1], self.V)
            uniq, start = np.unique(hk, return_index=True)
            self.tables.append((uniq, np.append(start, len(hk)), ids[:, -1].copy(), 10.0 ** lp))
        uid, ulp, _ = lm.ngrams[0]
        bad = {self.bos} | {lm.word_id(w) for w in exclude if w in lm.vocab}
        okw = np.array([int(i) not in bad for i in uid[:, 0]])
        self.uni_words = uid[okw, 0].copy()
        w = (10.0 ** ulp[okw]) ** (1.0 / self.t)
        self.uni_cum = np.cumsum(w / w.sum())
        self.exclude = bad
        self._cache: dict = {}

    def _choices(self, order_idx: int, key: int):
        """(successors, cumulative choice probs incl. a final 'back off' entry) or None."""
        ck = (order_idx, key)
        if ck in self._cache:
            return self._cache[ck]
        uniq, offs, succ, prob = self.tables[order_idx]
        i = int(np.searchsorted(uniq, key))
        res = None
        if i < len(uniq) and uniq[i] == key:
            s, p = succ[offs[i] : offs[i + 1]], prob[offs[i] : offs[i + 1]]
            w = np.append(p, max(1.0 - p.sum(), 0.0)) ** (1.0 / self.t)
            res = (s, np.cumsum(w / w.sum()))
        if len(self._cache) < 2_000_000:
            self._cache[ck] = res
        return res

    def next_word(self, history: list[int], rng: np.random.Generator) -> int:
        banned: list[np.ndarray] = []  # sorted successors of the histories backed off from

        def allowed(w: int) -> bool:
            if w in self.exclude:
                return False
            for arr in banned:
                i = int(arr.searchsorted(w))
                if i < arr.size and arr[i] == w:
                    return False
            return True

        for n in range(min(len(history), len(self.tables)), 0, -1):
            key = 0
            for w in history[-n:]:
                key = key * self.V + w
            ch = self._choices(n - 1, key)
            if ch is None:
                continue
            s, cum = ch
            for _ in range(20):
                j = int(cum.searchsorted(rng.random() * cum[-1], side="right"))
                if j >= len(s):  # back off
                    break
                if allowed(int(s[j])):
                    return int(s[j])
            banned.append(s)
        for _ in range(50):
            w = int(self.uni_words[self.uni_cum.searchsorted(rng.random() * self.uni_cum[-1], side="right")])
            if allowed(w):
                return w
        return w

    def sentence(self, rng: np.random.Generator, max_words: int = 40) -> list[str]:
        """One sentence (without <s>, </s>), at most max_words words."""
        hist = [self.bos]
        out = []
        while len(out) < max_words:
            w = self.next_word(hist[-(len(self.tables)):], rng)
            if w == self.eos:
                break
            out.append(self.lm.vocab[w])
            hist.append(w)
        return out
