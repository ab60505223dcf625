"""Results out, keyed by utterance id: Kaldi-style text, JSON lines, NIST CTM, n-best lists.

With lattices (decode(lattice=True)): CTM's sixth column and JSONL's `word_conf` carry each
word's posterior in the lattice, and `nbest` writes the n best distinct word sequences of
each utterance as `ID-K SCORE WORD...` lines (K from 1, the best first; SCORE the best
path's total score with those words), Kaldi's `utt-k` naming.

Times: frame f of the log-probs starts at f * frame_shift seconds. A word's arc is taken
at some frame (Hypothesis.timestamps); the word's span is the run of frames from there
to the next word's frame, trimmed to its non-blank frames: start = the first non-blank
frame, end = one past the last (a word whose span is all blank gets one frame). The blank
is column blank_id (0 in icefall, WeNet and sherpa models).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

FORMATS = ("text", "jsonl", "ctm", "nbest")


@dataclass
class Record:
    """What every format draws from: one utterance's result with symbols and times."""

    id: str
    words: list[str]  # symbols, or word ids as strings without a word table
    word_ids: list[int]
    tokens: list[int]  # CTC-collapsed: repeats merged, blanks dropped
    token_symbols: list[str] | None
    starts: list[float]
    ends: list[float]
    score: float
    reached_final: bool
    overflow: int
    num_frames: int
    confidences: list[float] | None = None  # each word's lattice posterior (with lattices)
    nbest: list[tuple[list[str], float]] | None = None  # (words, score), best first (with lattices)

    def to_json(self) -> dict:
        d = {"id": self.id, "text": " ".join(self.words), "words": self.words, "word_ids": self.word_ids,
             "tokens": self.tokens}
        if self.token_symbols is not None:
            d["token_symbols"] = self.token_symbols
        d.update({"word_start": self.starts, "word_end": self.ends,
                  "score": None if self.score == float("-inf") else self.score,
                  "reached_final": self.reached_final, "overflow": self.overflow, "num_frames": self.num_frames})
        if self.confidences is not None:
            d["word_conf"] = self.confidences
        return d


def word_spans(timestamps: list[int], frame_tokens: list[int], blank_id: int) -> list[tuple[int, int]]:
    """(start_frame, end_frame) per word: see the module notes."""
    spans = []
    n = len(frame_tokens)
    for i, s in enumerate(timestamps):
        e = timestamps[i + 1] if i + 1 < len(timestamps) else n
        frames = [f for f in range(s, max(s, e)) if f < n and frame_tokens[f] != blank_id]
        spans.append((frames[0], frames[-1] + 1) if frames else (s, s + 1))
    return spans


def collapse(frame_tokens: list[int], blank_id: int) -> list[int]:
    """CTC collapse: merge repeats, then drop blanks."""
    out, prev = [], None
    for t in frame_tokens:
        if t != prev and t != blank_id:
            out.append(t)
        prev = t
    return out


def make_record(utt_id: str, hyp, num_frames: int, *, words_table=None, tokens_table=None,
                frame_shift: float = 0.04, blank_id: int = 0, nbest: int = 0) -> Record:
    def symbols(ids):
        return [words_table[w] for w in ids] if words_table is not None else [str(w) for w in ids]

    words = hyp.word_symbols if hyp.word_symbols is not None else symbols(hyp.words)
    confidences = nbests = None
    if getattr(hyp, "lattice", None) is not None:
        confidences = [round(float(c), 4) for c in hyp.word_confidences]
        if nbest:
            nbests = [(symbols(b.words), float(b.score)) for b in hyp.lattice.nbest(nbest)]
    spans = word_spans(hyp.timestamps, hyp.tokens, blank_id)
    toks = collapse(hyp.tokens, blank_id)
    return Record(
        id=utt_id, words=words, word_ids=list(hyp.words), tokens=toks,
        token_symbols=[tokens_table.get(t, str(t)) for t in toks] if tokens_table is not None else None,
        starts=[round(s * frame_shift, 3) for s, _ in spans], ends=[round(e * frame_shift, 3) for _, e in spans],
        score=float(hyp.score), reached_final=bool(hyp.reached_final), overflow=int(hyp.overflow),
        num_frames=int(num_frames), confidences=confidences, nbest=nbests)


class Writer:
    def __init__(self, stream):
        self.stream = stream

    def write(self, rec: Record) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.stream.flush()


class TextWriter(Writer):
    """Kaldi/icefall text: `id word word ...` (just the id when nothing was recognised)."""

    def write(self, rec: Record) -> None:
        self.stream.write(" ".join([rec.id] + rec.words) + "\n")


class JsonlWriter(Writer):
    def write(self, rec: Record) -> None:
        self.stream.write(json.dumps(rec.to_json(), ensure_ascii=False) + "\n")


class CtmWriter(Writer):
    """NIST CTM: `id channel start duration word [confidence]`, channel 1, seconds; the
    confidence (the word's lattice posterior) when the record has them."""

    def write(self, rec: Record) -> None:
        conf = rec.confidences if rec.confidences is not None else [None] * len(rec.words)
        for w, s, e, c in zip(rec.words, rec.starts, rec.ends, conf):
            self.stream.write(f"{rec.id} 1 {s:.2f} {e - s:.2f} {w}" + (f" {c:.4f}" if c is not None else "") + "\n")


class NbestWriter(Writer):
    """`ID-K SCORE WORD...` per hypothesis, K = 1 (the best) .. n; an utterance without a
    path gets no line."""

    def write(self, rec: Record) -> None:
        if rec.nbest is None:
            raise ValueError("--format nbest needs the records' n-best lists (decode with lattices)")
        for k, (words, score) in enumerate(rec.nbest, 1):
            self.stream.write(" ".join([f"{rec.id}-{k}", f"{score:.4f}"] + words) + "\n")


def make_writer(fmt: str, stream) -> Writer:
    try:
        return {"text": TextWriter, "jsonl": JsonlWriter, "ctm": CtmWriter, "nbest": NbestWriter}[fmt](stream)
    except KeyError:
        raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}") from None
