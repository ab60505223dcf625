"""`cuwfst demo`: decode the shipped simulated utterances against the shipped tiny HLG.

The tiny tier (cuwfst/data/tiny) is a 300-word trigram HLG with BPE-500 units built by
benchmarks/corpus from the shared English LM; 8 simulated CTC utterances
(cuwfst/data/demo/tiny_utts.npz, benchmarks/corpus/simulate.py --fixture, seed 1). Runs on the GPU
when the CUDA driver reports one (torch is not needed), else on the CPU, and prints
hypotheses next to references, greedy-vs-graph WER and speed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

TINY = Path(__file__).resolve().parent / "data" / "tiny"


def _words(path: Path) -> list[str]:
    table = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 2:
            table[int(parts[1])] = parts[0]
    out = [""] * (max(table) + 1)
    for i, w in table.items():
        out[i] = w
    return out


def _pieces(path: Path) -> list[str]:
    return [line.split()[0] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _greedy(lp: np.ndarray, length: int, pieces: list[str]) -> list[str]:
    best = lp[:length].argmax(-1)
    toks = [int(t) for i, t in enumerate(best) if t != 0 and (i == 0 or t != best[i - 1])]
    text = "".join(pieces[t] for t in toks if not pieces[t].startswith("<"))
    return text.replace("\u2581", " ").split()


def _wer(refs: list[list[str]], hyps: list[list[str]]) -> float:
    from kaldialign import edit_distance

    errs = sum(edit_distance(r, h)["total"] for r, h in zip(refs, hyps))
    return 100.0 * errs / max(1, sum(len(r) for r in refs))


def run(device: str = "auto", repeat: int = 3) -> int:
    from . import Decoder, DecoderOptions, Graph

    from .cuda import has_torch, resolve_device

    graph = Graph.load(TINY / "HLG.img")
    device = resolve_device(device, graph)
    words = _words(TINY / "words.txt")
    pieces = _pieces(TINY / "tokens.txt")
    with np.load(TINY.parent / "demo" / "tiny_utts.npz") as z:
        lp = z["log_probs_fp16"].astype(np.float32)
        lens = z["lengths"].astype(np.int32)
        refs = [[words[w] for w in row if w >= 0] for row in z["ref_word_ids"]]
    print(f"graph: {graph.num_states} states, {graph.num_arcs} arcs, {len(words)} words "
          f"(tiny tier); {lp.shape[0]} simulated utterances, {lens.sum() * 0.04:.1f} s of audio; device {device}")
    t0 = time.perf_counter()
    dec = Decoder(graph, DecoderOptions(search_beam=20.0, output_beam=8.0, min_active_states=30,
                                        max_active_states=10000), device=device)
    inputs = lp
    if device != "cpu" and has_torch():  # time the decoder, not the copy (without torch: numpy in)
        import torch

        inputs = torch.from_numpy(lp).to(device)
    hyps = dec.decode(inputs, lens)  # first call builds/loads the native module
    setup = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        hyps = dec.decode(inputs, lens)
        times.append(time.perf_counter() - t0)
    dt = float(np.median(times))
    hyp_words = [[words[w] for w in h.words] for h in hyps]
    greedy = [_greedy(lp[b], int(lens[b]), pieces) for b in range(lp.shape[0])]
    for b, (r, h) in enumerate(zip(refs, hyp_words)):
        print(f"[{b}] REF: {' '.join(r)}")
        print(f"[{b}] HYP: {' '.join(h)}   (score {hyps[b].score:.2f})")
    print(f"WER: greedy CTC {_wer(refs, greedy):.1f}%, HLG decoding {_wer(refs, hyp_words):.1f}%")
    print(f"speed: {dt * 1000:.1f} ms for the batch (median of {repeat}), "
          f"RTFx {lens.sum() * 0.04 / dt:.0f}; first call incl. build/load {setup:.1f} s")
    return 0


def add_parser(sub, **kw) -> None:
    d = sub.add_parser("demo", help="decode shipped simulated utterances with the shipped tiny HLG", **kw)
    d.add_argument("--device", default="auto", help="auto (the GPU when there is one), cpu or cuda[:N]")
    d.add_argument("--repeat", type=int, default=3, help="timed decodes after the first")
    d.set_defaults(fn=lambda a: run(a.device, a.repeat))


if __name__ == "__main__":
    raise SystemExit(run(os.environ.get("CUWFST_DEVICE", "auto")))
