"""Simulated CTC log-probs for a corpus tier, deterministic from a seed.

    python -m benchmarks.corpus.simulate --corpus DIR --out SIMDIR --num-utts 200 [--seed 0] [--profile model]
    python -m benchmarks.corpus.simulate --corpus cuwfst/data/tiny --fixture --out tests/data/sim_tiny.npz --num-utts 4

Each utterance:

1. A length of 100-600 frames at 40 ms (4-24 s; 100 + Gamma(2, 80), mean about 250).
2. A reference: sentences sampled from the tier's LM at a raised temperature, cut to the
   length, with about 7% of the words replaced by uniformly drawn vocabulary words, so that
   the LM disagrees with the reference now and then.
3. An alignment: the words' pieces (lexicon.txt), each held 1-3 frames, blanks filling about
   70% of the frames (at least one between repeated pieces).
4. Logits: unit Gaussian noise on all 501 outputs, +PEAK on the frame's label (the piece, or
   blank), and per piece occurrence a competitor drawn among its confusable pieces (nearest by
   edit distance, ties to longer shared prefix/suffix) at PEAK - margin, margin ~ N(mean, sd):
   when the margin is negative the competitor wins the frames (a greedy substitution). Some
   pieces lose to blank (deletions) and some blank stretches hold a spurious piece
   (insertions). log_softmax gives the log-probs.

`--profile model` replaces the defaults with parameters fitted to a trained conformer's
log-probs on synthetic speech (benchmarks/corpus/profiles/model.json, written by
`python -m benchmarks.model.calibrate`): the noise's scale and the label's peak (blank and
token frames apart), the blank ratio, the piece durations and the competitor margins.
`noise_sd` scales the Gaussian noise; `blank_peak` is the peak on blank frames.

Greedy decoding then makes errors that the lexicon and the LM of HLG can often undo: the
margins are small when they are negative, and a misspelled word is not in the graph. The
defaults were calibrated on the small tier (see benchmarks/corpus/README.md for the numbers).

A shard is an .npz with log_probs [N, Tmax, 501] float32, log_probs_fp16 (the same, float16),
lengths [N], ref_word_ids [N, Wmax] (words.txt ids, -1 padded), ref_num_words [N],
ref_text [N] (str) and utt_seed [N, 2] (seed, index: what reproduces the row).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .arpa import NgramSampler, read_arpa
from .units import NUM_IDS, read_table

SPECIAL_PIECES = ("<blk>", "<sos/eos>", "<unk>")


@dataclass(frozen=True)
class SimConfig:
    """The simulator's knobs; the defaults give greedy WER ~15% on the small tier."""

    min_frames: int = 100
    max_frames: int = 600
    length_gamma: tuple = (2.0, 80.0)  # frames = min_frames + Gamma(shape, scale)
    blank_ratio: float = 0.7
    piece_frames_p: tuple = (0.5, 0.3, 0.2)  # P(a piece holds 1, 2, 3 frames)
    lm_temperature: float = 1.5
    replace_prob: float = 0.07  # reference words replaced by random vocabulary words
    peak: float = 12.0  # logit added to the frame's label
    blank_peak: float | None = None  # the same on frames labelled blank (None: peak)
    noise_sd: float = 1.0  # scale of the Gaussian noise on every output
    margin_mean: float = 4.0  # competitor margin below the label, per piece occurrence
    margin_sd: float = 2.2
    frame_jitter: float = 0.5  # per-frame noise on the margin
    num_confusable: int = 8
    deletion_prob: float = 0.02  # a piece whose frames blank outscores (margin ~ N(1.5, 1))
    insertion_prob: float = 0.01  # per blank gap, one frame with a spurious piece


def confusable_pieces(pieces: list[str], k: int) -> np.ndarray:
    """[V, k] ids of each piece's nearest pieces by edit distance (ties: longer shared
    prefix + suffix first); -1 rows for the special pieces."""
    V = len(pieces)
    ok = np.array([p not in SPECIAL_PIECES for p in pieces])
    L = max(len(p) for p in pieces)
    codes = np.zeros((V, L), np.int32)
    lens = np.array([len(p) for p in pieces])
    for i, p in enumerate(pieces):
        codes[i, : len(p)] = [ord(c) for c in p]
    # Levenshtein distance of every pair at once: D[a, b, j] over the rows i of piece a
    prev = np.broadcast_to(np.arange(L + 1, dtype=np.int32), (V, V, L + 1)).copy()
    dist = np.zeros((V, V), np.int32)
    for i in range(1, L + 1):
        cur = np.empty_like(prev)
        cur[..., 0] = i
        ca = codes[:, i - 1][:, None]
        for j in range(1, L + 1):
            sub = prev[..., j - 1] + (ca != codes[:, j - 1][None, :])
            cur[..., j] = np.minimum(np.minimum(prev[..., j], cur[..., j - 1]) + 1, sub)
        rows = lens == i
        dist[rows] = np.take_along_axis(cur[rows], np.broadcast_to(lens[None, :, None], (rows.sum(), V, 1)),
                                        axis=2)[..., 0]
        prev = cur
    shared = np.zeros((V, V), np.int32)
    for side in (slice(None), slice(None, None, -1)):  # common prefix, then common suffix
        same = np.ones((V, V), bool)
        for c in range(L):
            a = np.array([p[side][c] if c < len(p) else "\0" for p in pieces])
            b = np.array([p[side][c] if c < len(p) else "\1" for p in pieces])
            same &= a[:, None] == b[None, :]
            shared += same
    key = dist * 64 - np.minimum(shared, 63)
    key[:, ~ok] = 1 << 20
    np.fill_diagonal(key, 1 << 20)
    out = np.argsort(key, axis=1, kind="stable")[:, :k].astype(np.int32)
    out[~ok] = -1
    return out


class Simulator:
    """Draws utterances for one corpus tier (a directory written by benchmarks.corpus.build)."""

    def __init__(self, corpus_dir: str | os.PathLike, config: SimConfig = SimConfig(),
                 arpa: str | os.PathLike | None = None):
        d = Path(corpus_dir)
        self.config = config
        tokens = read_table(str(d / "tokens.txt"))
        self.pieces = [p for p, i in sorted(tokens.items(), key=lambda kv: kv[1]) if i < NUM_IDS]
        self.word_ids = read_table(str(d / "words.txt"))
        self.spelling: dict[str, list[int]] = {}
        with open(d / "lexicon.txt", encoding="utf-8") as f:
            for line in f:
                w, *ps = line.split()
                self.spelling[w] = [tokens[p] for p in ps]
        self.vocab = [w for w in self.spelling if w != "<unk>"]
        self.lm = read_arpa(arpa or _tier_arpa(d))
        self.sampler = NgramSampler(self.lm, temperature=config.lm_temperature)
        self.confusable = confusable_pieces(self.pieces, config.num_confusable)

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    # ------------------------------------------------------------------ one utterance
    def utterance(self, seed: int, index: int) -> dict:
        """Row `index` of seed `seed`: depends on (seed, index) only."""
        rng = np.random.default_rng([seed, index])
        c = self.config
        target = int(min(c.max_frames, c.min_frames + rng.gamma(*c.length_gamma)))
        words, tokens, frames = self._reference(rng, target)
        labels = self._align(tokens, frames, rng)
        return {"log_probs": self._log_probs(labels, rng), "words": words}

    def _reference(self, rng, target: int):
        c = self.config
        per_token = 1.0 / (1.0 - c.blank_ratio)
        words: list[str] = []
        tokens: list[int] = []
        frames: list[int] = []
        used = 0.0
        while True:
            sentence = self.sampler.sentence(rng) or [self.vocab[int(rng.integers(len(self.vocab)))]]
            for w in sentence:
                if rng.random() < c.replace_prob:
                    w = self.vocab[int(rng.integers(len(self.vocab)))]
                sp = self.spelling[w]
                dur = rng.choice(len(c.piece_frames_p), size=len(sp), p=c.piece_frames_p) + 1
                need = used + float(dur.sum()) * per_token
                if words and need > target and need - target > target - used:
                    return words, tokens, frames  # stopping here lands closer to the target
                words.append(w)
                tokens += sp
                frames += dur.tolist()
                used = need
                if used >= target:
                    return words, tokens, frames

    def _align(self, tokens: list[int], frames: list[int], rng) -> np.ndarray:
        """Frame labels [T] (0 = blank): blanks spread over the gaps, one at least between repeats."""
        c = self.config
        n = len(tokens)
        speech = int(sum(frames))
        T = int(np.clip(round(speech / (1.0 - c.blank_ratio)), c.min_frames, c.max_frames))
        T = max(T, speech + n + 1)
        gaps = np.zeros(n + 1, np.int64)
        gaps[1:-1] = np.asarray(tokens[1:]) == np.asarray(tokens[:-1])  # CTC needs a blank here
        free = T - speech - int(gaps.sum())
        weights = rng.gamma(1.0, 1.0, size=n + 1)
        weights[[0, -1]] *= 4.0  # leading and trailing silence
        gaps += rng.multinomial(free, weights / weights.sum())
        labels = np.zeros(T, np.int32)
        t = int(gaps[0])
        for tok, d, g in zip(tokens, frames, gaps[1:]):
            labels[t : t + d] = tok
            t += d + int(g)
        return labels

    def _log_probs(self, labels: np.ndarray, rng) -> np.ndarray:
        c = self.config
        T, V = labels.shape[0], self.vocab_size
        z = rng.standard_normal((T, V), dtype=np.float32)
        if c.noise_sd != 1.0:
            z *= np.float32(c.noise_sd)
        rows = np.arange(T)
        if c.blank_peak is None:
            z[rows, labels] += c.peak
        else:
            z[rows, labels] += np.where(labels == 0, c.blank_peak, c.peak).astype(np.float32)
        # piece occurrences: runs of one non-blank label (repeats are split by a blank)
        edge = labels[1:] != labels[:-1]
        starts = np.flatnonzero((labels != 0) & np.r_[True, edge])
        ends = np.flatnonzero((labels != 0) & np.r_[edge, True]) + 1
        for s, e in zip(starts, ends):
            tok = int(labels[s])
            cand = self.confusable[tok]
            w = 1.0 / (1.0 + np.arange(cand.size))
            rival = int(cand[rng.choice(cand.size, p=w / w.sum())])
            margin = rng.normal(c.margin_mean, c.margin_sd) + c.frame_jitter * rng.standard_normal(e - s)
            z[s:e, rival] = z[s:e, tok] - margin
            if rng.random() < c.deletion_prob:
                z[s:e, 0] = z[s:e, tok] + np.abs(rng.normal(1.5, 1.0))
        # spurious pieces inside blank stretches
        blank_runs = np.flatnonzero(labels == 0)
        if blank_runs.size:
            n_ins = rng.binomial(starts.size + 1, c.insertion_prob)
            for t in rng.choice(blank_runs, size=min(n_ins, blank_runs.size), replace=False):
                z[t, int(rng.integers(3, V))] = z[t, 0] + rng.normal(0.5, 1.0)
        z -= z.max(axis=1, keepdims=True)
        return (z - np.log(np.exp(z).sum(axis=1, keepdims=True))).astype(np.float32)

    # ------------------------------------------------------------------ batches
    def batch(self, num: int, seed: int, start: int = 0) -> dict:
        """Rows start .. start+num-1 of `seed`, padded to the longest; padding frames are a
        certain blank (log-prob 0 for blank, -30 for the rest), never -inf."""
        utts = [self.utterance(seed, start + i) for i in range(num)]
        T = max(u["log_probs"].shape[0] for u in utts)
        W = max(len(u["words"]) for u in utts)
        lp = np.full((num, T, self.vocab_size), -30.0, np.float32)
        lp[:, :, 0] = 0.0
        ids = np.full((num, W), -1, np.int32)
        for i, u in enumerate(utts):
            lp[i, : u["log_probs"].shape[0]] = u["log_probs"]
            ids[i, : len(u["words"])] = [self.word_ids[w] for w in u["words"]]
        return {"log_probs": lp, "lengths": np.array([u["log_probs"].shape[0] for u in utts], np.int32),
                "ref_word_ids": ids, "ref_num_words": np.array([len(u["words"]) for u in utts], np.int32),
                "ref_text": np.array([" ".join(u["words"]) for u in utts]),
                "utt_seed": np.array([[seed, start + i] for i in range(num)], np.int64)}


PROFILES_DIR = Path(__file__).resolve().parent / "profiles"


def load_profile(name: str | os.PathLike | None) -> SimConfig:
    """SimConfig of a profile: None or "default" for the defaults, a name of
    benchmarks/corpus/profiles/NAME.json (`model`: fitted to a trained CTC model's
    log-probs by benchmarks.model.calibrate), or a path to such a JSON file. The file's
    "config" holds the fields that differ from the defaults."""
    if name is None or str(name) == "default":
        return SimConfig()
    path = Path(name)
    if not path.suffix:
        path = PROFILES_DIR / f"{name}.json"
    if not path.exists():
        known = sorted(p.stem for p in PROFILES_DIR.glob("*.json"))
        raise FileNotFoundError(f"no simulator profile {name!r} (known: default, {', '.join(known)}; or a .json path)")
    fields = json.loads(path.read_text())["config"]
    unknown = set(fields) - set(SimConfig.__dataclass_fields__)
    if unknown:
        raise ValueError(f"{path}: unknown SimConfig fields {sorted(unknown)}")
    tuples = {k: tuple(v) for k, v in fields.items() if isinstance(v, list)}
    return SimConfig(**{**fields, **tuples})


def _tier_arpa(d: Path) -> str:
    """The tier's own LM: lm.arpa.gz for pruned tiers, else the source recorded in stats.json."""
    if (d / "lm.arpa.gz").exists():
        return str(d / "lm.arpa.gz")
    stats = d / "stats.json"
    if stats.exists():
        src = json.loads(stats.read_text()).get("arpa")
        if src and os.path.exists(src):
            return src
    from .build import default_arpa

    return str(default_arpa())


def write_shards(sim: Simulator, out_dir: str | os.PathLike, num_utts: int, seed: int,
                 shard_size: int = 100, fp16_only: bool = False) -> list[str]:
    """Shards shard-00000.npz, ... of `shard_size` rows each; returns their paths."""
    from tqdm import tqdm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for start in tqdm(range(0, num_utts, shard_size), desc="shards", unit="shard"):
        b = sim.batch(min(shard_size, num_utts - start), seed, start)
        b["log_probs_fp16"] = b["log_probs"].astype(np.float16)
        if fp16_only:
            del b["log_probs"]
        path = out / f"shard-{start // shard_size:05d}.npz"
        np.savez(path, **b)
        paths.append(str(path))
    with open(out / "sim_config.json", "w") as f:
        json.dump({"seed": seed, "num_utts": num_utts, "config": asdict(sim.config)}, f, indent=1)
    return paths


def write_fixture(sim: Simulator, path: str | os.PathLike, num_utts: int, seed: int) -> None:
    """One small compressed .npz for tests: like a shard, with float16 log-probs only
    (`log_probs_fp16`; widening to float32 is exact)."""
    b = sim.batch(num_utts, seed)
    b["log_probs_fp16"] = b.pop("log_probs").astype(np.float16)
    np.savez_compressed(path, **b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.corpus.simulate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="a tier directory from benchmarks.corpus.build")
    ap.add_argument("--out", required=True)
    ap.add_argument("--num-utts", type=int, default=100)
    ap.add_argument("--shard-size", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arpa", default=None, help="LM for the references (default: the tier's)")
    ap.add_argument("--fixture", action="store_true", help="write one compressed float16 file, OUT, for tests")
    ap.add_argument("--profile", default=None,
                    help="default, model (fitted to a trained model's log-probs), or a profile .json path")
    args = ap.parse_args(argv)
    sim = Simulator(args.corpus, config=load_profile(args.profile), arpa=args.arpa)
    if args.fixture:
        write_fixture(sim, args.out, args.num_utts, args.seed)
        print(args.out)
        return 0
    for p in write_shards(sim, args.out, args.num_utts, args.seed, args.shard_size):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
