"""Modelling units and symbol tables, laid out as icefall's `lang_bpe_500` directory.

- `bpe.model`: sentencepiece BPE with 501 ids: `<blk>` 0, `<sos/eos>` 1, `<unk>` 2 (icefall's
  user-defined symbols and unk id) and 498 learned pieces; so a CTC model over it has 501
  outputs, blank = 0. Trained on sentences sampled from the LM plus every LM word once, so
  every word is spelled by learned pieces (never `<unk>`).
- `tokens.txt`: piece id -> piece, then the disambiguation symbols `#0`, `#1`, ... after them.
- `words.txt`: `<eps>` 0, the LM words sorted, then `#0`, `<s>`, `</s>`, so that "id >= id of
  #0" means "not a word" (kaldilm gives `#0` id 1 when it writes its own table; it must not).
- `lexicon.txt`: each word and its pieces; `lexicon_disambig.txt` with the `#k` that make
  L o G determinizable (a piece sequence that is a prefix of another or shared by two words
  gets `#1`, `#2`, ...), as Kaldi's add_lex_disambig.pl and icefall's prepare_lang do.
  The LM word `<unk>`, when the LM has one, is spelled `▁ <unk>` as icefall spells its OOV word.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .arpa import BOS, EOS, UNK, ArpaLM, NgramSampler

NUM_IDS = 501  # <blk> + 500 pieces (<sos/eos>, <unk> and 498 learned ones)
BLANK = "<blk>"


@dataclass
class Lang:
    """Symbol tables and the lexicon of one tier."""

    pieces: list[str]  # piece id -> piece; pieces[0] == "<blk>"
    words: list[str]  # word id -> word; words[0] == "<eps>", then words, "#0", "<s>", "</s>"
    lexicon: list[tuple[str, list[str]]]  # (word, pieces), in words.txt order
    lexicon_disambig: list[tuple[str, list[str]]]
    num_disambig: int  # disambiguation symbols #0 .. #(num_disambig - 1)

    @property
    def token_ids(self) -> dict[str, int]:
        """Pieces and disambiguation symbols -> token id (the tokens.txt mapping)."""
        t = {p: i for i, p in enumerate(self.pieces)}
        t.update({f"#{k}": len(self.pieces) + k for k in range(self.num_disambig)})
        return t

    @property
    def word_ids(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words)}

    @property
    def first_word_disambig(self) -> int:
        return self.words.index("#0")

    @property
    def first_token_disambig(self) -> int:
        return len(self.pieces)

    def write(self, out_dir: str) -> None:
        _write_table(os.path.join(out_dir, "tokens.txt"), self.token_ids)
        _write_table(os.path.join(out_dir, "words.txt"), self.word_ids)
        for name, lex in (("lexicon.txt", self.lexicon), ("lexicon_disambig.txt", self.lexicon_disambig)):
            with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
                f.writelines(f"{w} {' '.join(p)}\n" for w, p in lex)


def _write_table(path: str, table: dict[str, int]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{s} {i}\n" for s, i in sorted(table.items(), key=lambda kv: kv[1]))


def read_table(path: str) -> dict[str, int]:
    """A `symbol id` file (tokens.txt, words.txt)."""
    with open(path, encoding="utf-8") as f:
        return {s: int(i) for s, i in (ln.split() for ln in f if ln.strip())}


def train_bpe(lm: ArpaLM, model_path: str, *, num_sentences: int = 20000, seed: int = 0) -> None:
    """Train the BPE model on `num_sentences` sampled sentences plus every LM word once.

    The text goes to sentencepiece through an iterator, so the model holds no temporary
    path and the same inputs give the same bytes."""
    import io

    import sentencepiece as spm

    from tqdm import tqdm

    rng = np.random.default_rng(seed)
    sampler = NgramSampler(lm)
    sentences = (sampler.sentence(rng) for _ in tqdm(range(num_sentences), desc="BPE text", unit="sent",
                                                     disable=None, mininterval=2.0))
    lines = [" ".join(s) for s in sentences if s]
    lines += [w for w in lm.words() if w != UNK]
    model = io.BytesIO()
    with open(os.devnull, "w") as quiet:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=model, model_type="bpe", vocab_size=NUM_IDS,
            character_coverage=1.0, input_sentence_size=10_000_000, shuffle_input_sentence=False,
            user_defined_symbols=[BLANK, "<sos/eos>"], unk_id=2, bos_id=-1, eos_id=-1,
            normalization_rule_name="identity", num_threads=min(os.cpu_count() or 1, 16),
            logstream=quiet)
    with open(model_path, "wb") as f:
        f.write(model.getvalue())


def make_lang(lm: ArpaLM, model_path: str) -> Lang:
    """Symbol tables and lexicons for the LM's words with the BPE model at `model_path`."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=model_path)
    if sp.get_piece_size() != NUM_IDS or sp.id_to_piece(0) != BLANK:
        raise ValueError(f"{model_path}: expected {NUM_IDS} pieces with {BLANK} at id 0")
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    lm_words = sorted(w for w in lm.vocab if w not in (BOS, EOS))
    words = ["<eps>"] + lm_words + ["#0", BOS, EOS]
    unk = sp.id_to_piece(sp.unk_id())
    lexicon = []
    for w, ids in zip(lm_words, sp.encode(lm_words, out_type=int)):
        if w == UNK:
            lexicon.append((w, ["▁", unk]))
            continue
        if sp.unk_id() in ids:
            raise ValueError(f"word {w!r} needs <unk> in {model_path}: train on text that contains it")
        lexicon.append((w, [pieces[i] for i in ids]))
    lex_disambig, max_disambig = add_disambig(lexicon)
    return Lang(pieces=pieces, words=words, lexicon=lexicon, lexicon_disambig=lex_disambig,
                num_disambig=max_disambig + 1)


def add_disambig(lexicon: list[tuple[str, list[str]]]) -> tuple[list[tuple[str, list[str]]], int]:
    """Append `#k` (k >= 1) to every spelling that is a proper prefix of another spelling or is
    shared by several words; returns the new lexicon and the largest k used (0 if none)."""
    count: dict[tuple, int] = defaultdict(int)
    prefixes: set[tuple] = set()
    for _, p in lexicon:
        t = tuple(p)
        count[t] += 1
        prefixes.update(t[:i] for i in range(1, len(t)))
    last_used: dict[tuple, int] = defaultdict(int)
    out, max_k = [], 0
    for w, p in lexicon:
        t = tuple(p)
        if count[t] == 1 and t not in prefixes:
            out.append((w, list(p)))
            continue
        last_used[t] += 1
        max_k = max(max_k, last_used[t])
        out.append((w, list(p) + [f"#{last_used[t]}"]))
    return out, max_k
