"""Word error rate against reference transcripts, with kaldialign, and icefall-style
`recogs-*.txt` / `errs-*.txt` reports."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

EPS = "*"


def read_refs(path: str) -> dict[str, list[str]]:
    """Kaldi/icefall text: `id word word ...` per line (an id alone: an empty reference)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"references not found: {p}")
    refs = {}
    with open(p, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if parts[0] in refs:
                raise ValueError(f"{p} line {n}: utterance id {parts[0]} appears twice")
            refs[parts[0]] = parts[1:]
    if not refs:
        raise ValueError(f"{p} holds no reference line ('id word word ...')")
    return refs


@dataclass
class WerStats:
    ref_words: int = 0
    ins: int = 0
    dels: int = 0
    subs: int = 0
    utterances: int = 0
    sentence_errors: int = 0
    rows: list = field(default_factory=list)  # (id, ref, hyp, alignment)

    @property
    def errors(self) -> int:
        return self.ins + self.dels + self.subs

    @property
    def wer(self) -> float:
        return 100.0 * self.errors / max(1, self.ref_words)

    def summary(self) -> str:
        return (f"%WER {self.wer:.2f}% [ {self.errors} / {self.ref_words}, {self.ins} ins, {self.dels} del, "
                f"{self.subs} sub ] over {self.utterances} utterances ({self.sentence_errors} with errors)")


def score(pairs) -> WerStats:
    """pairs: (id, ref words, hyp words). Alignment by kaldialign."""
    from kaldialign import align

    st = WerStats()
    for utt, ref, hyp in pairs:
        ali = align(ref, hyp, EPS)
        st.utterances += 1
        st.ref_words += len(ref)
        ins = sum(r == EPS for r, _ in ali)
        dels = sum(h == EPS for _, h in ali)
        subs = sum(r != h and r != EPS and h != EPS for r, h in ali)
        st.ins, st.dels, st.subs = st.ins + ins, st.dels + dels, st.subs + subs
        st.sentence_errors += bool(ins + dels + subs)
        st.rows.append((utt, ref, hyp, ali))
    return st


def write_reports(st: WerStats, out_dir: str, name: str) -> tuple[Path, Path]:
    """`recogs-<name>.txt` (ref and hyp per utterance) and `errs-<name>.txt` (the WER,
    per-utterance alignments, the substitution/deletion/insertion counts and per-word
    statistics), the layout icefall's decode scripts write."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    recogs, errs = d / f"recogs-{name}.txt", d / f"errs-{name}.txt"
    rows = sorted(st.rows, key=lambda r: r[0])
    with open(recogs, "w", encoding="utf-8") as f:
        for utt, ref, hyp, _ in rows:
            f.write(f"{utt}:\tref={ref}\n{utt}:\thyp={hyp}\n")
    subs, dels, ins = Counter(), Counter(), Counter()
    corr, in_ref, in_hyp, word_errs = Counter(), Counter(), Counter(), Counter()
    with open(errs, "w", encoding="utf-8") as f:
        f.write(st.summary() + "\n\nPER-UTT DETAILS: corr or (ref->hyp)\n")
        for utt, _, _, ali in rows:
            parts = []
            for r, h in ali:
                if r == h:
                    parts.append(r)
                    corr[r] += 1
                else:
                    parts.append(f"({r}->{h})")
                    if r == EPS:
                        ins[h] += 1
                        word_errs[h] += 1
                    elif h == EPS:
                        dels[r] += 1
                        word_errs[r] += 1
                    else:
                        subs[(r, h)] += 1
                        word_errs[r] += 1
                        word_errs[h] += 1
                if r != EPS:
                    in_ref[r] += 1
                if h != EPS:
                    in_hyp[h] += 1
            f.write(f"{utt}:\t{' '.join(parts)}\n")
        f.write("\nSUBSTITUTIONS: count ref -> hyp\n")
        for (r, h), c in sorted(subs.items(), key=lambda x: (-x[1], x[0])):
            f.write(f"{c}   {r} -> {h}\n")
        f.write("\nDELETIONS: count ref\n")
        for w, c in sorted(dels.items(), key=lambda x: (-x[1], x[0])):
            f.write(f"{c}   {w}\n")
        f.write("\nINSERTIONS: count hyp\n")
        for w, c in sorted(ins.items(), key=lambda x: (-x[1], x[0])):
            f.write(f"{c}   {w}\n")
        f.write("\nPER-WORD STATS: word  corr tot_errs count_in_ref count_in_hyp\n")
        for w in sorted(set(in_ref) | set(in_hyp), key=lambda w: (-word_errs[w], w)):
            f.write(f"{w}   {corr[w]} {word_errs[w]} {in_ref[w]} {in_hyp[w]}\n")
    return recogs, errs
