"""The whole model pipeline in one command: sentences, synthetic speech, training, evaluation,
export and the benchmark set.

    python -m benchmarks.model.train --corpus DIR --out OUT [--scale tiny|cpu|base]
        [--set-corpus DIR2 ...] [--train-seconds S] [--finish-by UNIX_TIME] [--workers N]

1. Transcripts from the tier's LM (benchmarks.model.sentences): `train` rows of training
   sentences, `test` and `set` rows of held-out ones (the sentences are split by a hash).
2. espeak-ng speech (benchmarks.model.synth): training rows with training voices, speed
   perturbation and noise (as many as --synth-by allows); test and set rows with held-out
   voice variants and noise, made in the background while the model trains.
3. A conformer CTC model (benchmarks.model.net) trained with CTC on 80-dim fbank, bfloat16
   autocast on a GPU, for a wall-clock budget: the learning rate schedule runs on the
   fraction of the budget spent, so it anneals fully whatever the step time.
4. Greedy and HLG (cuwfst, GPU if it runs, else CPU) WER on the test rows.
5. OUT/model.npz (float16), OUT/model.int8.npz (int8 rows, float16 rest; small enough to
   ship), OUT/summary.json and OUT/summary.md.
6. The benchmark set: `set` rows (lengths like the simulator's) decoded by the model and
   written in the corpus shard format to DIR/model/ (and every --set-corpus DIR2/model/).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .audio import TEST_AUGMENT, TRAIN_AUGMENT, fbank_backend
from .decoding import decode_hlg
from .sentences import WORDS_PER_SECOND


@dataclass(frozen=True)
class Scale:
    model: str
    train_utts: int
    test_utts: int
    set_utts: int
    train_seconds: float
    max_steps: int | None = None
    batch_frames: int = 160_000  # fbank frames (10 ms) per batch, padding included
    peak_lr: float = 1.5e-3
    warmup: float = 0.08  # fraction of the budget
    specaug_below: float = 4.0  # SpecAugment starts when the loss per token falls below this


SCALES = {
    "tiny": Scale("tiny", train_utts=16, test_utts=6, set_utts=4, train_seconds=60, max_steps=3, batch_frames=4000),
    # a check that the model learns, on this 2-core machine: ~1 s a step
    "cpu": Scale("cpu", train_utts=2000, test_utts=100, set_utts=32, train_seconds=1500, batch_frames=8000),
    # the GPU run: as many of 48k rows as --synth-by allows (~30 rows/s a core measured here: 20k-40k on 16 cores)
    # 80k-frame batches (~190 rows): CTC's all-blank plateau lasted ~700 steps on the CPU, so
    # the run wants many steps more than big ones
    # (the 12-layer preset stayed on the plateau for 1,429 steps with an 8% warmup: mid, 15%)
    "base": Scale("mid", train_utts=48_000, test_utts=500, set_utts=256, train_seconds=300, batch_frames=80_000,
                  warmup=0.15),
}


def log(msg: str) -> None:
    print(f"[model {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ tokens
class Lexicon:
    """Words -> BPE token ids exactly as the graph spells them (lexicon.txt, tokens.txt)."""

    def __init__(self, corpus_dir):
        from benchmarks.corpus.units import NUM_IDS, read_table

        d = Path(corpus_dir)
        tokens = read_table(str(d / "tokens.txt"))
        self.pieces = [p for p, i in sorted(tokens.items(), key=lambda kv: kv[1]) if i < NUM_IDS]
        self.spell: dict[str, list[int]] = {}
        with open(d / "lexicon.txt", encoding="utf-8") as f:
            for line in f:
                w, *ps = line.split()
                self.spell[w] = [tokens[p] for p in ps]
        self.word_ids = read_table(str(d / "words.txt"))
        self.words = {i: w for w, i in self.word_ids.items()}

    def encode(self, words: list[str]) -> list[int]:
        return [t for w in words for t in self.spell[w]]


# ------------------------------------------------------------------ training
class GpuFeatures:
    """All utterances' fbank in one device tensor; padded batches gathered on the device."""

    def __init__(self, feats: list[np.ndarray], targets: list[list[int]], device):
        import torch

        self.lens = np.array([f.shape[0] for f in feats], np.int64)
        offs = np.concatenate([[0], np.cumsum(self.lens)])
        self.offs = offs[:-1]
        flat = np.concatenate(feats + [np.zeros((1, feats[0].shape[1]), feats[0].dtype)])  # last row: padding
        self.zero_row = int(offs[-1])
        self.data = torch.from_numpy(flat).to(device)
        U = max(max(len(t) for t in targets), 1)
        tg = np.zeros((len(targets), U), np.int64)
        for i, t in enumerate(targets):
            tg[i, : len(t)] = t
        self.targets = torch.from_numpy(tg).to(device)
        self.target_lens_np = np.array([len(t) for t in targets], np.int64)
        self.target_lens = torch.from_numpy(self.target_lens_np).to(device)
        self.device = device

    def batch(self, idx: np.ndarray):
        """(feats [B, T, 80], lengths, targets [B, U] on the device; lengths and target
        lengths on the host, so that nothing in a step waits for the device)."""
        import torch

        L = self.lens[idx]
        T = int(L.max())
        t = np.arange(T)[None, :]
        pos = np.where(t < L[:, None], self.offs[idx][:, None] + t, self.zero_row)
        x = self.data[torch.from_numpy(pos).to(self.device, non_blocking=True)]
        ti = torch.from_numpy(idx).to(self.device, non_blocking=True)
        return (x, torch.from_numpy(L).to(self.device, non_blocking=True), self.targets[ti], L,
                self.target_lens_np[idx])


def make_batches(lens: np.ndarray, batch_frames: int, rng: np.random.Generator,
                 shortest_first: bool = False) -> list[np.ndarray]:
    """Length-sorted batches of at most batch_frames padded frames, in random order; the sort
    is on a jittered length, so batches differ from epoch to epoch. shortest_first keeps
    them in length order (SortaGrad: CTC leaves its all-blank start sooner on short rows)."""
    order = np.argsort(lens * rng.uniform(0.9, 1.1, size=lens.shape[0]), kind="stable")
    batches, cur, longest = [], [], 0
    for i in order:
        longest2 = max(longest, int(lens[i]))
        if cur and longest2 * (len(cur) + 1) > batch_frames:
            batches.append(np.array(cur))
            cur, longest2 = [], int(lens[i])
        cur.append(int(i))
        longest = longest2
    if cur:
        batches.append(np.array(cur))
    if not shortest_first:
        rng.shuffle(batches)
    return batches


def spec_augment(x, lens, rng_t):
    """Two frequency masks (<= 10 bins) and one time mask (<= 20 frames) per second of
    speech, filled with each utterance's mean feature vector, in place on the device."""
    import torch

    B, T, Fq = x.shape
    dev = x.device
    mean = x.float().sum(1) / lens[:, None].clamp(min=1)
    f = torch.arange(Fq, device=dev)
    fw = torch.randint(0, 11, (B, 2), device=dev, generator=rng_t)
    fs = (torch.rand(B, 2, device=dev, generator=rng_t) * (Fq - fw)).long()
    fmask = ((f[None, None] >= fs[..., None]) & (f[None, None] < (fs + fw)[..., None])).any(1)  # [B, F]
    n = max(1, T // 100)
    tw = torch.randint(0, 21, (B, n), device=dev, generator=rng_t)
    ts = (torch.rand(B, n, device=dev, generator=rng_t) * (lens[:, None] - tw).clamp(min=1)).long()
    t = torch.arange(T, device=dev)
    tmask = ((t[None, None] >= ts[..., None]) & (t[None, None] < (ts + tw)[..., None])).any(1)  # [B, T]
    m = fmask[:, None, :] | tmask[:, :, None]
    return torch.where(m, mean[:, None, :].to(x.dtype), x)


def learning_rate(scale: Scale, progress: float, left_plateau_at: float | None) -> float:
    """Linear warmup over `scale.warmup` of the budget, then the peak held while every model
    is still on CTC's all-blank plateau (a schedule on wall time had annealed before the
    12-layer model left it, on the H200 and on slow CPU retries), then a cosine to 2% of the
    peak over what is left of the budget."""
    if progress < scale.warmup:
        return scale.peak_lr * progress / scale.warmup
    if left_plateau_at is None:
        return scale.peak_lr
    frac = min(1.0, (progress - left_plateau_at) / max(1.0 - left_plateau_at, 1e-9))
    return scale.peak_lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * frac)))


def train(model, data: GpuFeatures, scale: Scale, budget_s: float, seed: int, device: str) -> dict:
    """CTC training for budget_s seconds (or scale.max_steps). Returns the loss curve and counts."""
    return train_together([model], data, scale, budget_s, seed, device)[0]


def train_together(models: list, data: GpuFeatures, scale: Scale, budget_s: float, seed: int, device: str) -> list:
    """CTC training of several models on the same batches (each with its own optimizer) for
    budget_s seconds in all: a second, smaller candidate insures the run against the first
    one staying in CTC's all-blank plateau. Returns each model's loss curve and counts."""
    import torch
    import torch.nn.functional as F

    from .net import subsampled_lengths

    cuda = device.startswith("cuda")
    opts = [torch.optim.AdamW(m.parameters(), lr=scale.peak_lr, betas=(0.9, 0.98), weight_decay=1e-3,
                              **({"fused": True} if cuda else {})) for m in models]
    rng = np.random.default_rng([seed, 99])
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    for m in models:
        m.train()
    t0 = time.perf_counter()
    step, epoch, frames_seen = 0, 0, 0
    curves = [[] for _ in models]
    left_plateau_at = None  # progress when a model's loss left CTC's all-blank plateau
    done = False
    partial = 0.0
    augmenting = False
    specaug_step = None
    while not done:
        batches = make_batches(data.lens, scale.batch_frames, rng, shortest_first=epoch == 0)
        for k, idx in enumerate(batches):
            elapsed = time.perf_counter() - t0
            progress = elapsed / budget_s
            if scale.max_steps is not None:
                progress = max(progress, step / scale.max_steps)
            if progress >= 1.0:
                done, partial = True, k / len(batches)
                break
            lr = learning_rate(scale, progress, left_plateau_at)
            x, L, tg, L_host, tl_host = data.batch(idx)
            if augmenting:
                x = spec_augment(x, L, g)
            losses = []
            for model, opt in zip(models, opts):
                for grp in opt.param_groups:
                    grp["lr"] = lr
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
                    lp, _ = model(x, L)
                # lengths as host tensors: ctc_loss reads them on the host, and device ones would sync
                ol_host = torch.from_numpy(np.minimum(subsampled_lengths(L_host), lp.shape[1]))
                loss = F.ctc_loss(lp.transpose(0, 1), tg, ol_host, torch.from_numpy(tl_host), blank=0,
                                  reduction="sum", zero_infinity=True)
                loss = loss / max(int(tl_host.sum()), 1)  # per target token
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
                opt.step()
                losses.append(loss)
            step += 1
            frames_seen += int(L_host.sum())
            if step % 25 == 0 or step <= 3:
                lvs = [float(v.detach()) for v in losses]  # a device sync: only every 25 steps
                # CTC first learns to say blank everywhere; masking input on top of that stretches
                # the plateau (seen on the CPU: 750+ steps with SpecAugment, ~500 without), so
                # SpecAugment starts once a model's loss leaves it, or at 60% of the budget (at
                # 30% it came on the plateau in both H200 runs' worth of steps and CPU retries)
                if left_plateau_at is None and min(lvs) < scale.specaug_below:
                    left_plateau_at = max(progress, scale.warmup)
                    log(f"step {step}: the loss left the blank plateau ({min(lvs):.2f}); the learning rate "
                        "anneals from here")
                if not augmenting and (min(lvs) < scale.specaug_below or progress > 0.6):
                    augmenting, specaug_step = True, step
                    log(f"SpecAugment on from step {step} (loss/token {min(lvs):.2f})")
                for curve, lv in zip(curves, lvs):
                    curve.append({"step": step, "seconds": round(time.perf_counter() - t0, 1), "lr": round(lr, 6),
                                  "loss_per_token": round(lv, 4)})
                if step % 100 == 0 or step <= 3:
                    log(f"step {step} epoch {epoch} loss/token {' / '.join(f'{v:.3f}' for v in lvs)} lr {lr:.2e} "
                        f"{time.perf_counter() - t0:.0f}/{budget_s:.0f} s")
        else:
            epoch += 1
    if cuda:
        torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    return [{"steps": step, "epochs": round(epoch + partial, 2), "seconds": round(secs, 1),
             "specaug_from_step": specaug_step, "audio_hours_seen": round(frames_seen / 100 / 3600, 2),
             "steps_per_second": round(step / max(secs, 1e-9), 2),
             "final_loss_per_token": curve[-1]["loss_per_token"] if curve else None, "curve": curve}
            for curve in curves]


# ------------------------------------------------------------------ evaluation
def evaluate_rows(lps: list[np.ndarray], refs: list[list[str]], lex: Lexicon, graph_path) -> dict:
    from benchmarks.corpus.evaluate import greedy_words, wer

    greedy = [greedy_words(lp, lp.shape[0], lex.pieces) for lp in lps]
    hyps, dev, secs = decode_hlg(graph_path, lps, log=log)
    hlg = [[lex.words[w] for w in h.words] for h in hyps]
    frames = int(sum(lp.shape[0] for lp in lps))
    return {"utterances": len(lps), "frames": frames, "audio_seconds": round(frames * 0.04, 1),
            "greedy": wer(refs, greedy), "hlg": wer(refs, hlg), "hlg_device": dev,
            "hlg_decode_seconds": round(secs, 2), "not_final": sum(not h.reached_final for h in hyps),
            "max_frontier": {"mean": round(float(np.mean([h.max_frontier for h in hyps])), 1),
                             "max": int(max(h.max_frontier for h in hyps))},
            "examples": [{"ref": " ".join(r), "greedy": " ".join(g), "hlg": " ".join(h)}
                         for r, g, h in list(zip(refs, greedy, hlg))[:5]]}


# ------------------------------------------------------------------ the pipeline
def write_model_sets(set_lp: list[np.ndarray], set_rows, corpora: list[str], seed: int, info: dict) -> dict:
    """The set's log-probs as CORPUS/model/shard-*.npz for every corpus (ids of its words.txt)."""
    from benchmarks.corpus.units import read_table

    from .shards import write_set

    paths = {}
    for cdir in corpora:
        if not (Path(cdir) / "words.txt").exists():  # e.g. a tier still building beside this run
            log(f"no {Path(cdir) / 'words.txt'}: no model set written there")
            continue
        wid = read_table(str(Path(cdir) / "words.txt"))
        try:
            paths[cdir] = write_set(Path(cdir) / "model", set_lp, [r.words for r in set_rows], wid, seed,
                                    [r.index for r in set_rows], info=info)
        except KeyError as e:  # a tier whose vocabulary misses the training tier's words: the run goes on
            log(f"no model set in {cdir}: {e}")
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.model.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="tier directory: its LM, lexicon and HLG.img")
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", choices=sorted(SCALES), default="base")
    ap.add_argument("--set-corpus", nargs="*", default=[], help="also write the model set into DIR/model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None, help="synthesis processes (default: all cores)")
    ap.add_argument("--train-utts", type=int, default=None)
    ap.add_argument("--test-utts", type=int, default=None)
    ap.add_argument("--set-utts", type=int, default=None)
    ap.add_argument("--train-seconds", type=float, default=None)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--model", choices=None, default=None, help="model preset (net.PRESETS) instead of the scale's")
    ap.add_argument("--batch-frames", type=int, default=None)
    ap.add_argument("--peak-lr", type=float, default=None)
    ap.add_argument("--warmup", type=float, default=None, help="fraction of the budget")
    ap.add_argument("--fallback-model", default=None,
                    help="a second preset trained on the same batches; the lower held-out greedy WER goes on "
                         "(default: 'cpu' at the base scale, none otherwise; 'none' for none)")
    ap.add_argument("--finish-by", type=float, default=None, help="unix time by which training must end")
    ap.add_argument("--synth-by", type=float, default=None,
                    help="unix time by which training synthesis stops (the rows made by then are used)")
    ap.add_argument("--device", default=None, help="torch device (default: cuda if available)")
    a = ap.parse_args(argv)

    import torch

    from .net import PRESETS, ConformerCTC, describe, log_probs_of, save_npz
    from .synth import speed_report, synthesize

    t_start = time.perf_counter()
    scale = SCALES[a.scale]
    over = {k: getattr(a, k) for k in ("train_utts", "test_utts", "set_utts", "train_seconds", "max_steps",
                                        "batch_frames", "peak_lr", "warmup")
            if getattr(a, k) is not None}
    if a.fallback_model is None:
        a.fallback_model = "cpu" if a.scale == "base" else None
    elif a.fallback_model == "none":
        a.fallback_model = None
    elif a.fallback_model not in PRESETS:
        ap.error(f"--fallback-model must be one of {sorted(PRESETS)} or none")
    if a.model is not None:
        if a.model not in PRESETS:
            ap.error(f"--model must be one of {sorted(PRESETS)}")
        over["model"] = a.model
    scale = replace(scale, **over)
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    workers = a.workers or os.cpu_count() or 1
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(a.seed)
    stages: dict[str, float] = {}
    summary: dict = {"command": "python -m benchmarks.model.train " + " ".join(sys.argv[1:] if argv is None else argv),
                     "scale": asdict(scale), "seed": a.seed, "corpus": os.path.abspath(a.corpus),
                     "device": torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "cpu",
                     "cores": os.cpu_count(), "torch": torch.__version__, "fbank": fbank_backend(),
                     "commit": os.environ.get("CUWFST_COMMIT") or _git_commit()}

    lex = Lexicon(a.corpus)
    t = time.perf_counter()
    train_rows = synthesize(a.corpus, "train", range(scale.train_utts), a.seed, held_out_voices=False,
                            aug=TRAIN_AUGMENT, workers=workers, log=log, deadline=a.synth_by)
    stages["synth_train"] = time.perf_counter() - t
    summary["synthesis"] = speed_report(train_rows, stages["synth_train"], min(workers, len(train_rows)))
    log(f"synthesis: {json.dumps(summary['synthesis'])}")

    # held-out speech (unseen sentences, held-out voices) is made by other processes while the GPU trains
    import concurrent.futures as cf

    pool = cf.ThreadPoolExecutor(2)
    held = dict(held_out_voices=True, aug=TEST_AUGMENT, workers=max(1, workers - 1))
    test_future = pool.submit(synthesize, a.corpus, "test", range(scale.test_utts), a.seed, **held)
    set_future = pool.submit(synthesize, a.corpus, "set", range(scale.set_utts), a.seed, **held)

    t = time.perf_counter()
    presets = [scale.model] + ([a.fallback_model] if a.fallback_model and a.fallback_model != scale.model else [])
    models = [ConformerCTC(PRESETS[name]).to(device) for name in presets]
    feats = [r.feats for r in train_rows]
    sample = np.concatenate(feats[:: max(1, len(feats) // 2000)]).astype(np.float64)  # 2000 rows tell enough
    for m in models:
        m.feat_mean.copy_(torch.from_numpy(sample.mean(0)).float())
        m.feat_istd.copy_(torch.from_numpy(1.0 / np.maximum(sample.std(0), 1e-3)).float())
    del sample
    targets = [lex.encode(r.words) for r in train_rows]
    data = GpuFeatures(feats, targets, device)
    del feats
    budget = scale.train_seconds
    if a.finish_by is not None:
        budget = min(budget, a.finish_by - time.time())
    budget = max(budget, 5.0)
    log(f"{' and '.join(describe(PRESETS[n]) for n in presets)}; training on {device} for {budget:.0f} s "
        f"({data.lens.sum() / 100 / 3600:.2f} h of audio, {len(train_rows)} utterances)")
    stages["to_device"] = time.perf_counter() - t
    t = time.perf_counter()
    trainings = train_together(models, data, scale, budget, a.seed, device)
    stages["train"] = time.perf_counter() - t
    del data
    if device.startswith("cuda"):
        torch.cuda.empty_cache()

    t = time.perf_counter()
    test_rows, set_rows = test_future.result(), set_future.result()
    pool.shutdown()
    stages["wait_held_out_synth"] = time.perf_counter() - t

    # the candidate with the lower greedy WER on the held-out rows goes on
    from benchmarks.corpus.evaluate import greedy_words, wer

    refs = [r.words for r in test_rows]
    candidates = []
    for name, m, tr in zip(presets, models, trainings):
        lps = log_probs_of(m, [r.feats for r in test_rows], device)
        g = wer(refs, [greedy_words(lp, lp.shape[0], lex.pieces) for lp in lps])
        candidates.append({"preset": name, "parameters": m.num_params(), "steps": tr["steps"],
                           "final_loss_per_token": tr["final_loss_per_token"], "greedy_wer": g["wer"]})
        log(f"candidate {name}: greedy WER {100 * g['wer']:.2f}%, loss/token {tr['final_loss_per_token']}")
    best = min(range(len(models)), key=lambda i: candidates[i]["greedy_wer"])
    model, config, name = models[best], PRESETS[presets[best]], presets[best]
    summary["candidates"] = candidates
    summary["training"] = trainings[best]
    summary["model"] = {"preset": name, **asdict(config), "parameters": model.num_params(),
                        "description": describe(config)}
    del models

    t = time.perf_counter()
    meta = {"corpus": os.path.basename(os.path.abspath(a.corpus)), "seed": a.seed, "train_utts": len(train_rows),
            "set_utts": scale.set_utts, "test_utts": scale.test_utts, "fbank": fbank_backend(),
            "frame_seconds": 0.04, "words_per_second": WORDS_PER_SECOND}
    sizes = {"model.npz": save_npz(model, out / "model.npz", meta=meta),
             "model.int8.npz": save_npz(model, out / "model.int8.npz", int8=True, meta=meta)}
    summary["weights_bytes"] = sizes
    test_lp = log_probs_of(model, [r.feats for r in test_rows], device)
    summary["test"] = evaluate_rows(test_lp, [r.words for r in test_rows], lex, Path(a.corpus) / "HLG.img")
    # the shipped int8 weights on the same rows: what the example would decode
    from .net import load_npz

    q, _ = load_npz(out / "model.int8.npz", device)
    q_lp = log_probs_of(q, [r.feats for r in test_rows], device)
    from benchmarks.corpus.evaluate import greedy_words, wer

    summary["test_int8_greedy"] = wer([r.words for r in test_rows],
                                      [greedy_words(lp, lp.shape[0], lex.pieces) for lp in q_lp])
    del q
    stages["evaluate"] = time.perf_counter() - t
    log(f"test: greedy WER {100 * summary['test']['greedy']['wer']:.2f}%, HLG WER "
        f"{100 * summary['test']['hlg']['wer']:.2f}% ({summary['test']['hlg_device']}), "
        f"int8 greedy {100 * summary['test_int8_greedy']['wer']:.2f}%")

    t = time.perf_counter()
    set_lp = log_probs_of(model, [r.feats for r in set_rows], device)
    info = {"weights": "model.npz", "voices": "held-out variants", "augment": asdict(TEST_AUGMENT),
            "commit": summary["commit"], "train_corpus": meta["corpus"]}
    summary["sets"] = write_model_sets(set_lp, set_rows, [a.corpus] + list(a.set_corpus), a.seed, info)
    summary["set"] = {"utterances": len(set_rows), "frames": int(sum(x.shape[0] for x in set_lp)),
                      "mean_frames": round(float(np.mean([x.shape[0] for x in set_lp])), 1)}
    stages["write_set"] = time.perf_counter() - t
    stages["total"] = time.perf_counter() - t_start
    summary["stages_seconds"] = {k: round(v, 1) for k, v in stages.items()}
    with open(out / "summary.json", "w") as f:
        json.dump(summary, f, indent=1)
    (out / "summary.md").write_text(markdown(summary))
    log(f"done in {stages['total']:.0f} s: {out / 'summary.json'}")
    print(markdown(summary))
    return 0


def markdown(s: dict) -> str:
    te, tr, syn = s["test"], s["training"], s["synthesis"]
    m = s["model"]
    lines = [
        f"## Model on synthetic speech (commit {s['commit']})", "",
        f"{s['device']}, {s['cores']} cores, torch {s['torch']}, fbank by {s['fbank']}. "
        f"Command: `{s['command']}`", "",
        f"- Model: {m['description']}; 4x subsampling to 40 ms frames, {m['num_outputs']} outputs (blank 0).",
        f"- Synthesis: {syn['utterances']} training utterances, {syn['audio_hours']} h of audio in "
        f"{syn['wall_seconds']} s ({syn['utterances_per_second']} utt/s, {syn['audio_seconds_per_second']} "
        f"audio s/s, {syn['workers']} processes).",
        f"- Training: {tr['steps']} steps, {tr['epochs']} epochs, {tr['seconds']} s, final CTC loss "
        f"{tr['final_loss_per_token']} per token.",
        *([f"- Candidates trained on the same batches (the lower held-out greedy WER was kept): " + "; ".join(
            f"{c['preset']} ({c['parameters'] / 1e6:.2f} M): loss {c['final_loss_per_token']}, greedy WER "
            f"{100 * c['greedy_wer']:.2f}%" for c in s["candidates"])] if len(s.get("candidates", [])) > 1 else []),
        f"- Weights: model.npz {s['weights_bytes']['model.npz'] / 2**20:.1f} MiB, model.int8.npz "
        f"{s['weights_bytes']['model.int8.npz'] / 2**20:.1f} MiB.", "",
        f"Held-out: {te['utterances']} utterances ({te['audio_seconds']} s), unseen sentences, held-out voice "
        f"variants, noise at 15-40 dB SNR.", "",
        "| decoding | WER | sub / del / ins (of ref words) |", "| --- | --- | --- |",
    ]
    for name, key in (("greedy CTC", "greedy"), (f"HLG, cuwfst {te['hlg_device']} (beam 20, max_active 10000)", "hlg")):
        w = te[key]
        lines.append(f"| {name} | {100 * w['wer']:.2f}% | {w['sub']} / {w['del']} / {w['ins']} (of {w['ref_words']}) |")
    if "test_int8_greedy" in s:
        w = s["test_int8_greedy"]
        lines.append(f"| greedy CTC, int8 weights | {100 * w['wer']:.2f}% | {w['sub']} / {w['del']} / {w['ins']} "
                     f"(of {w['ref_words']}) |")
    lines += ["", f"HLG max frontier per utterance: mean {te['max_frontier']['mean']}, max {te['max_frontier']['max']}.",
              "", "Stages (s): " + ", ".join(f"{k} {v}" for k, v in s["stages_seconds"].items()), ""]
    return "\n".join(lines)


def _git_commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(__file__), timeout=5).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
