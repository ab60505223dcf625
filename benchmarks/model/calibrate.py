"""How far the simulator's log-probs are from a trained model's, and simulator settings fitted
to the model (the `model` profile of benchmarks.corpus.simulate).

    python -m benchmarks.model.calibrate --corpus DIR [--set model] [--profile-out P.json]
        [--check 64] [--md report.md] [--json report.json]

Statistics of a set of log-probs (rows [T, V]), per frame kind (argmax blank / argmax token):
entropy, the best log-prob, the gap to the runner-up, quantiles of the off-argmax log-probs,
and how many outputs lie within 5, 10 and 20 nats of the best (what a beam of that width
lets through); over all frames, the blank fraction and the lengths of token runs.

The fit: the simulator draws off-label logits as noise_sd * N(0, 1) under a peak, so an
off-label log-prob is about noise_sd * (n_j - n_label) - peak: its quantiles are linear in
the normal quantiles, with slope noise_sd * sqrt(2) and intercept -peak. A least-squares line
through the model's 50/90/99% quantiles gives noise_sd and the peaks (blank frames and token
frames apart). blank_ratio and piece_frames_p come from the argmax runs, the competitor
margin's spread from the gap to the best other piece, its mean from how often greedy
decoding substitutes a piece (margin ~ N(mean, sd) is negative that often), and the
deletion and insertion rates from greedy's piece errors against the references. The
simulator breaks those approximations (competitors, deletions, the normalizer), so the
fit then iterates: simulate with the current settings, measure the same statistics, move
each setting by the target's estimate minus the simulation's estimate.

--check N decodes the model set, the default simulator and the fitted simulator (N rows
each) with cuwfst on the tier's HLG and reports WERs and frontier sizes side by side.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
from dataclasses import asdict, replace
from pathlib import Path
from statistics import NormalDist

import numpy as np

FIT_Q = (0.5, 0.9, 0.99)  # off-argmax quantiles the line is fitted through (the upper part: what beams see)
REPORT_Q = (0.01, 0.1, 0.5, 0.9, 0.99, 0.999)
WITHIN = (5, 10, 20)
GROUPS = ("blank", "token")


# ------------------------------------------------------------------ statistics
def greedy_tokens(lp: np.ndarray) -> list[int]:
    am = lp.argmax(1)
    keep = np.r_[True, am[1:] != am[:-1]] & (am != 0)
    return am[keep].tolist()


def token_errors(lps: list[np.ndarray], ref_tokens: list[list[int]]) -> dict:
    """Greedy CTC against the reference pieces: substitutions, deletions and insertions
    per reference piece (kaldialign's edit distance)."""
    import kaldialign

    e = {"sub": 0, "del": 0, "ins": 0}
    n = 0
    for lp, ref in zip(lps, ref_tokens):
        d = kaldialign.edit_distance(list(ref), greedy_tokens(lp))
        for k in e:
            e[k] += int(d[k])
        n += len(ref)
    return {k: v / max(n, 1) for k, v in e.items()} | {"ref_tokens": n}


def posterior_stats(lps: list[np.ndarray], ref_tokens: list[list[int]] | None = None, max_frames: int = 20000,
                    seed: int = 0) -> dict:
    """Statistics of log-prob rows [T_i, V] (see the module doc); with the rows' reference
    pieces, greedy CTC's piece error rates too. Value quantiles use at most max_frames
    frames drawn at random; argmax statistics use every frame."""
    keep = [i for i, lp in enumerate(lps) if lp.shape[0]]
    rows = [np.asarray(lps[i], np.float32) for i in keep]
    if not rows:
        raise ValueError("no frames")
    runs = []
    blank = total = 0
    for lp in rows:
        am = lp.argmax(1)
        blank += int((am == 0).sum())
        total += am.shape[0]
        edge = np.r_[True, am[1:] != am[:-1]]
        starts = np.flatnonzero(edge)
        lengths = np.diff(np.r_[starts, am.shape[0]])
        runs.append(lengths[am[starts] != 0])
    runs = np.concatenate(runs) if runs else np.zeros(0, int)
    run_p = [float(np.mean(runs == 1)), float(np.mean(runs == 2)), float(np.mean(runs >= 3))] if runs.size else [1.0, 0.0, 0.0]
    X = np.concatenate(rows)
    if X.shape[0] > max_frames:
        X = X[np.sort(np.random.default_rng(seed).choice(X.shape[0], max_frames, replace=False))]
    am = X.argmax(1)
    srt = np.sort(X, axis=1)
    top1, top2 = srt[:, -1], srt[:, -2]
    ent = -(np.exp(X) * X).sum(1)
    out: dict = {"frames": int(total), "blank_fraction": blank / total, "run_p": run_p,
                 "mean_run": float(runs.mean()) if runs.size else 0.0}
    if ref_tokens is not None:
        out["token_errors"] = token_errors(rows, [ref_tokens[i] for i in keep])
    for g, sel in (("blank", am == 0), ("token", am != 0)):
        if not sel.any():
            out[g] = None
            continue
        off = srt[sel, :-1].ravel()  # every output but the best one
        lead = top1[sel][:, None]
        others = X[sel].copy()
        others[np.arange(others.shape[0]), am[sel]] = -np.inf
        others[:, 0] = -np.inf  # the best piece that is neither the argmax nor blank
        out[g] = {
            "frames": int(sel.sum()),
            "gap_piece": _q(top1[sel] - others.max(1), (0.1, 0.25, 0.5, 0.75, 0.9)),
            "gap_blank": _q(top1[sel] - X[sel][:, 0], (0.1, 0.5, 0.9)) if g == "token" else None,
            "entropy": _q(ent[sel], (0.5, 0.9, 0.99)) | {"mean": float(ent[sel].mean())},
            "top1": _q(top1[sel], (0.01, 0.1, 0.5)),
            "gap": _q(top1[sel] - top2[sel], (0.1, 0.25, 0.5, 0.75, 0.9)),
            "off": _q(off, sorted(set(REPORT_Q) | set(FIT_Q))),
            "within": {str(k): float(((X[sel] > lead - k).sum(1) - 1).mean()) for k in WITHIN},
        }
    return out


def _q(x: np.ndarray, levels) -> dict:
    return {f"p{100 * q:g}": float(v) for q, v in zip(levels, np.quantile(x, levels))}


# ------------------------------------------------------------------ the fit
def estimates(stats: dict) -> dict:
    """Simulator settings read off statistics by the simulator's approximate law (module doc)."""
    z = np.array([NormalDist().inv_cdf(q) for q in FIT_Q])
    lines, weights = {}, {}
    for g in GROUPS:
        if stats.get(g) is None:
            continue
        y = np.array([stats[g]["off"][f"p{100 * q:g}"] for q in FIT_Q])
        slope, intercept = np.polyfit(z, y, 1)
        lines[g], weights[g] = (float(slope), float(intercept)), stats[g]["frames"]
    if not lines:
        raise ValueError("statistics without frames")
    slope = sum(lines[g][0] * weights[g] for g in lines) / sum(weights.values())
    est = {"noise_sd": max(slope, 1e-3) / math.sqrt(2.0), "blank_ratio": stats["blank_fraction"],
           "piece_frames_p": list(stats["run_p"])}
    if "token" in lines:
        est["peak"] = -lines["token"][1]
        # the competitor's margin: its spread from the gap to the best other piece; its mean from
        # how often a competitor wins (greedy substitutions), margin ~ N(mean, sd) < 0 that often
        gap = stats["token"]["gap_piece"]
        est["margin_sd"] = max((gap["p75"] - gap["p25"]) / 1.349, 0.05)
        if "token_errors" in stats:
            te = stats["token_errors"]
            sub = float(np.clip(te["sub"], 1e-4, 0.5))
            est["margin_mean"] = -est["margin_sd"] * NormalDist().inv_cdf(sub)
            est["deletion_prob"] = float(te["del"])
            est["insertion_prob"] = float(te["ins"])
        else:
            est["margin_mean"] = gap["p50"]
    if "blank" in lines:
        est["blank_peak"] = -lines["blank"][1]
    est.setdefault("peak", est.get("blank_peak"))
    est.setdefault("blank_peak", est["peak"])
    return est


def _apply(cfg, est: dict):
    """cfg with the estimated fields, clipped to what the simulator accepts."""
    p = np.clip(np.asarray(est["piece_frames_p"], float), 1e-3, None)
    return replace(cfg, noise_sd=float(max(est["noise_sd"], 0.05)), peak=float(est["peak"]),
                   blank_peak=float(est["blank_peak"]), blank_ratio=float(np.clip(est["blank_ratio"], 0.05, 0.95)),
                   piece_frames_p=tuple(float(x) for x in p / p.sum()),
                   margin_mean=float(est.get("margin_mean", cfg.margin_mean)),
                   margin_sd=float(max(est.get("margin_sd", cfg.margin_sd), 0.05)),
                   deletion_prob=float(np.clip(est.get("deletion_prob", cfg.deletion_prob), 0.0, 0.5)),
                   insertion_prob=float(np.clip(est.get("insertion_prob", cfg.insertion_prob), 0.0, 0.5)))


def fit(target: dict, simulate_stats, base=None, iterations: int = 5, log=None, damping: float = 0.8):
    """Settings whose simulated statistics match `target`: closed-form estimates, then
    `iterations` corrections setting += damping * (estimate(target) - estimate(simulated))
    (damped: the simulated estimates are noisy and some settings move several statistics).
    simulate_stats(config) -> statistics of log-probs simulated with config.
    Returns (SimConfig, history of (config fields, distance) per round)."""
    from benchmarks.corpus.simulate import SimConfig

    want = estimates(target)
    cfg = _apply(base or SimConfig(), want)
    history = []
    for it in range(iterations + 1):
        got = estimates(simulate_stats(cfg))
        dist = distance(want, got)
        history.append({"round": it, "distance": dist, "config": _fitted_fields(cfg)})
        if log:
            log(f"fit round {it}: distance {dist:.4f}")
        if it == iterations:
            break
        step = {k: damping * (np.asarray(want[k]) - np.asarray(got[k])) for k in want}
        cur = _fitted_fields(cfg)
        nxt = {k: (np.asarray(cur[k]) + step[k]).tolist() for k in want if k in cur}
        cfg = _apply(cfg, {**cur, **nxt})
    best = min(history, key=lambda h: h["distance"])
    return _apply(SimConfig() if base is None else base, best["config"]), history


def distance(a: dict, b: dict) -> float:
    """Relative distance between two estimate dicts (mean over fields of |a - b| / scale)."""
    scale = {"noise_sd": 1.0, "peak": 5.0, "blank_peak": 5.0, "blank_ratio": 0.1, "piece_frames_p": 0.1,
             "margin_mean": 2.0, "margin_sd": 1.0, "deletion_prob": 0.05, "insertion_prob": 0.05}
    d = [float(np.abs(np.asarray(a[k]) - np.asarray(b[k])).mean()) / scale[k] for k in scale if k in a and k in b]
    return float(np.mean(d))


def _fitted_fields(cfg) -> dict:
    return {"noise_sd": cfg.noise_sd, "peak": cfg.peak, "blank_peak": cfg.blank_peak if cfg.blank_peak is not None
            else cfg.peak, "blank_ratio": cfg.blank_ratio, "piece_frames_p": list(cfg.piece_frames_p),
            "margin_mean": cfg.margin_mean, "margin_sd": cfg.margin_sd, "deletion_prob": cfg.deletion_prob,
            "insertion_prob": cfg.insertion_prob}


def sim_rows(sim, num: int, seed: int) -> tuple[list[np.ndarray], list[list[str]]]:
    us = [sim.utterance(seed, i) for i in range(num)]
    return [u["log_probs"] for u in us], [u["words"] for u in us]


def spell(sim, refs: list[list[str]]) -> list[list[int]]:
    """Reference words -> their pieces (the tier's lexicon, as the simulator reads it)."""
    return [[t for w in r for t in sim.spelling[w]] for r in refs]


# ------------------------------------------------------------------ sets on disk
def load_set(corpus: str, set_name: str = "model", limit: int | None = None):
    """(log-prob rows, reference words) of CORPUS/SET/shard-*.npz."""
    shards = sorted(glob.glob(os.path.join(corpus, set_name, "*.npz")))
    if not shards:
        raise FileNotFoundError(f"no shards in {os.path.join(corpus, set_name)}")
    lps, refs = [], []
    for s in shards:
        with np.load(s) as z:
            lp = z["log_probs"] if "log_probs" in z.files else z["log_probs_fp16"]
            for i, n in enumerate(z["lengths"]):
                lps.append(np.asarray(lp[i, : int(n)], np.float32))
                refs.append(str(z["ref_text"][i]).split())
        if limit is not None and len(lps) >= limit:
            break
    return (lps[:limit], refs[:limit]) if limit is not None else (lps, refs)


# ------------------------------------------------------------------ the report
def compare(corpus: str, named_rows: dict, graph: str | None = None, log=print, speller=None) -> dict:
    """Per named set (rows, refs): statistics, greedy and HLG WER, the decoder's frontiers."""
    from benchmarks.corpus.evaluate import greedy_words, wer
    from benchmarks.corpus.units import NUM_IDS, read_table

    from .decoding import decode_hlg

    tokens = read_table(os.path.join(corpus, "tokens.txt"))
    pieces = [p for p, i in sorted(tokens.items(), key=lambda kv: kv[1]) if i < NUM_IDS]
    words = {i: w for w, i in read_table(os.path.join(corpus, "words.txt")).items()}
    out = {}
    for name, (lps, refs) in named_rows.items():
        hyps, dev, secs = decode_hlg(graph or os.path.join(corpus, "HLG.img"), lps, log=log)
        fr = np.array([h.max_frontier for h in hyps])
        out[name] = {"stats": posterior_stats(lps, speller(refs) if speller else None), "utterances": len(lps),
                     "greedy": wer(refs, [greedy_words(lp, lp.shape[0], pieces) for lp in lps]),
                     "hlg": wer(refs, [[words[w] for w in h.words] for h in hyps]),
                     "max_frontier": {"mean": float(fr.mean()), "p50": float(np.median(fr)), "max": int(fr.max())},
                     "decode_device": dev, "decode_seconds": round(secs, 2),
                     "frames_per_second": round(sum(lp.shape[0] for lp in lps) / max(secs, 1e-9), 1)}
        log(f"{name}: greedy {100 * out[name]['greedy']['wer']:.2f}% HLG {100 * out[name]['hlg']['wer']:.2f}% "
            f"max frontier mean {fr.mean():.0f} max {fr.max()} ({dev}, {secs:.1f} s)")
    return out


def markdown(report: dict, graph_name: str) -> str:
    names = list(report)
    head = "| | " + " | ".join(names) + " |\n| --- |" + " --- |" * len(names)
    def row(label, f):
        vals = []
        for n in names:
            try:
                vals.append(f(report[n]))
            except (KeyError, TypeError):
                vals.append("-")
        return f"| {label} | " + " | ".join(vals) + " |"
    lines = [head,
             row("utterances / frames", lambda r: f"{r['utterances']} / {r['stats']['frames']:,}"),
             row("argmax blank", lambda r: f"{100 * r['stats']['blank_fraction']:.1f}%"),
             row("token runs of 1 / 2 / 3+ frames", lambda r: " / ".join(f"{100 * p:.0f}%" for p in r['stats']['run_p'])),
             row("entropy, blank frames (mean / p99, nats)",
                 lambda r: f"{r['stats']['blank']['entropy']['mean']:.3f} / {r['stats']['blank']['entropy']['p99']:.2f}"),
             row("entropy, token frames (mean / p99)",
                 lambda r: f"{r['stats']['token']['entropy']['mean']:.3f} / {r['stats']['token']['entropy']['p99']:.2f}"),
             row("off-argmax log-prob p50 / p99 / p99.9, blank frames",
                 lambda r: " / ".join(f"{r['stats']['blank']['off'][k]:.1f}" for k in ("p50", "p99", "p99.9"))),
             row("off-argmax log-prob p50 / p99 / p99.9, token frames",
                 lambda r: " / ".join(f"{r['stats']['token']['off'][k]:.1f}" for k in ("p50", "p99", "p99.9"))),
             row("token frames: gap to the best other piece p10 / p50",
                 lambda r: f"{r['stats']['token']['gap_piece']['p10']:.1f} / {r['stats']['token']['gap_piece']['p50']:.1f}"),
             row("token frames: gap to blank p10 / p50",
                 lambda r: f"{r['stats']['token']['gap_blank']['p10']:.1f} / {r['stats']['token']['gap_blank']['p50']:.1f}"),
             row("greedy piece errors sub / del / ins",
                 lambda r: " / ".join(f"{100 * r['stats']['token_errors'][k]:.1f}%" for k in ("sub", "del", "ins"))),
             row("outputs within 10 / 20 nats of the best, blank frames",
                 lambda r: " / ".join(f"{r['stats']['blank']['within'][k]:.1f}" for k in ("10", "20"))),
             row("outputs within 10 / 20 nats of the best, token frames",
                 lambda r: " / ".join(f"{r['stats']['token']['within'][k]:.1f}" for k in ("10", "20"))),
             row("greedy WER", lambda r: f"{100 * r['greedy']['wer']:.2f}%"),
             row(f"{graph_name} WER (cuwfst, beam 20)", lambda r: f"{100 * r['hlg']['wer']:.2f}%"),
             row("max frontier per utterance: mean / median / max",
                 lambda r: f"{r['max_frontier']['mean']:.0f} / {r['max_frontier']['p50']:.0f} / {r['max_frontier']['max']:,}"),
             ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.model.calibrate", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="tier directory holding the model set and HLG.img")
    ap.add_argument("--set", dest="set_name", default="model", help="the model's shards: CORPUS/SET (default model)")
    ap.add_argument("--limit", type=int, default=None, help="first N utterances of the set")
    ap.add_argument("--fit-utts", type=int, default=48, help="simulated utterances per fit round")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--profile-out", default=None, help="write the fitted profile JSON here")
    ap.add_argument("--use-profile", default=None,
                    help="no fit: compare with this profile (a name of benchmarks/corpus/profiles or a .json path)")
    ap.add_argument("--check", type=int, default=0, help="decode N rows of each: model, default sim, fitted sim")
    ap.add_argument("--md", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    from benchmarks.corpus.simulate import SimConfig, Simulator, load_profile

    def log(m):
        print(f"[calibrate] {m}", file=sys.stderr, flush=True)

    lps, refs = load_set(a.corpus, a.set_name, a.limit)
    sim = Simulator(a.corpus)
    target = posterior_stats(lps, spell(sim, refs), seed=a.seed)
    log(f"{len(lps)} model rows, {target['frames']} frames, argmax blank {100 * target['blank_fraction']:.1f}%, "
        f"greedy piece errors {json.dumps({k: round(v, 4) for k, v in target['token_errors'].items()})}")

    def simulate_stats(cfg):
        sim.config = cfg
        rows, words = sim_rows(sim, a.fit_utts, a.seed + 1000)
        return posterior_stats(rows, spell(sim, words), seed=a.seed)

    if a.use_profile:
        cfg, history = load_profile(a.use_profile), []
    else:
        cfg, history = fit(target, simulate_stats, iterations=a.iterations, log=log)
    sim.config = SimConfig()
    fields = {k: v for k, v in asdict(cfg).items() if v != getattr(SimConfig(), k)}
    fields = {k: (list(v) if isinstance(v, tuple) else v) for k, v in fields.items()}
    fields = {k: (round(v, 4) if isinstance(v, float) else [round(x, 4) for x in v] if isinstance(v, list) else v)
              for k, v in fields.items()}
    set_cfg = os.path.join(a.corpus, a.set_name, "set_config.json")
    profile = {"name": "model", "config": fields,
               "fitted_from": {"corpus": os.path.basename(os.path.abspath(a.corpus)), "set": a.set_name,
                               "utterances": len(lps), "frames": target["frames"],
                               "set_config": json.load(open(set_cfg)) if os.path.exists(set_cfg) else None},
               "fit_history": history}
    log(f"{'profile' if a.use_profile else 'fitted'}: {json.dumps(fields)}")
    if a.profile_out and not a.use_profile:
        with open(a.profile_out, "w") as f:
            json.dump(profile, f, indent=1)
    report = {"profile": profile, "target": target}
    if a.check:
        n = a.check
        named = {"model": (lps[:n], refs[:n])}
        named["sim default"] = sim_rows(sim, n, a.seed)
        sim.config = cfg
        named["sim --profile model"] = sim_rows(sim, n, a.seed)
        report["compare"] = compare(a.corpus, named, log=log, speller=lambda r: spell(sim, r))
        md = markdown(report["compare"], "HLG")
        print(md)
        if a.md:
            Path(a.md).write_text(f"Tier `{os.path.basename(os.path.abspath(a.corpus))}`, {n} utterances each.\n\n" + md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
