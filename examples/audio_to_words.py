"""Audio in, words with times out: the synthetic-speech conformer's CTC log-probs decoded by cuwfst.

    python examples/audio_to_words.py --corpus /tmp/corpus-small a.wav b.wav
    python examples/audio_to_words.py --corpus /tmp/corpus-small --say "it is not my fault"

--weights: model.npz or model.int8.npz written by `python -m benchmarks.model.train` (the
model is trained there on espeak-ng speech; it knows espeak's voices, not real speakers).
Default: examples/model.int8.npz, the 3.2 M-parameter conformer trained on the H200 at
commit d757c28 (held-out greedy WER 38.9%, HLG 30.7%; docs/benchmarks.md), 3.0 MiB.
--corpus: a tier from `python -m benchmarks.corpus.build` (HLG.img, words.txt, tokens.txt);
the model was trained on the `small` tier's sentences, and any tier decodes them as long as
its vocabulary holds the words. --say TEXT synthesizes TEXT with espeak-ng (the
espeakng-loader wheel) into a WAV first. Decoding runs on the GPU when cuwfst's GPU
decoder works here, else on the CPU; --device forces one.

Prints, per file, the words with start and end times in seconds; --json prints JSON lines.
The times come from the best path's frames (40 ms): a word starts at its first piece and
ends after its last one. A CTC model fires each piece as a spike of a frame or two, so the
starts are where the word is heard and the ends come early (the blank frames after the
last piece are not counted to the word).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the benchmarks package of this checkout


def word_times(tokens: list[int], num_words: int, pieces: list[str], frame_s: float):
    """[(start_s, end_s)] per word from the best path's token per frame: a word starts at the
    frame where a piece beginning with `▁` is emitted (a new non-blank token, not the repeat
    of the frame before) and ends after its last non-blank frame before the next word. None
    when the path's word starts do not match the word count (then the graph's timestamps
    are used)."""
    starts, last_tok, spans = [], 0, []
    last_nonblank = -1
    for t, tok in enumerate(tokens):
        if tok != 0 and tok != last_tok and pieces[tok].startswith("▁"):
            if starts:
                spans.append((starts[-1], last_nonblank + 1))
            starts.append(t)
        if tok != 0:
            last_nonblank = t
        last_tok = tok
    if starts:
        spans.append((starts[-1], last_nonblank + 1))
    if len(spans) != num_words:
        return None
    return [(round(s * frame_s, 2), round(e * frame_s, 2)) for s, e in spans]


def load_audio(path: str) -> np.ndarray:
    from benchmarks.model.audio import SAMPLE_RATE, read_wav, resample

    x, rate = read_wav(path)
    return resample(x, rate, SAMPLE_RATE) if rate != SAMPLE_RATE else x


def pick_device(want: str | None) -> str:
    if want:
        return want
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wavs", nargs="*", help="PCM WAV files (any rate; mono or mixed down)")
    ap.add_argument("--weights", default=str(Path(__file__).resolve().parent / "model.int8.npz"),
                    help="model weights (default: the shipped examples/model.int8.npz)")
    ap.add_argument("--corpus", required=True, help="tier directory with HLG.img, words.txt, tokens.txt")
    ap.add_argument("--graph", default="HLG.img", help="graph image in the tier (default HLG.img)")
    ap.add_argument("--say", action="append", default=[], help="synthesize this text with espeak-ng first")
    ap.add_argument("--voice", default="en-us", help="espeak-ng voice for --say (e.g. en-gb-x-rp+f2)")
    ap.add_argument("--say-dir", default=".", help="where --say writes its WAV files")
    ap.add_argument("--device", choices=["cpu", "cuda"], default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    from benchmarks.corpus.units import NUM_IDS, read_table
    from benchmarks.model.audio import SAMPLE_RATE, fbank, resample, write_wav

    wavs = list(a.wavs)
    if a.say:
        from benchmarks.model.espeak import Espeak, Voice

        engine = Espeak.get()
        os.makedirs(a.say_dir, exist_ok=True)
        for k, text in enumerate(a.say):
            path = os.path.join(a.say_dir, f"say-{k}.wav")
            write_wav(path, resample(engine.synth(text, Voice(a.voice)) / 32768.0, engine.sample_rate, SAMPLE_RATE))
            wavs.append(path)
    if not wavs:
        ap.error("give WAV files or --say TEXT")

    import torch

    from cuwfst import Decoder, DecoderOptions, Graph

    from benchmarks.model.net import load_npz, log_probs_of

    device = pick_device(a.device)
    model, meta = load_npz(a.weights, device)
    d = Path(a.corpus)
    words = {i: w for w, i in read_table(str(d / "words.txt")).items()}
    tokens = read_table(str(d / "tokens.txt"))
    pieces = [p for p, i in sorted(tokens.items(), key=lambda kv: kv[1]) if i < NUM_IDS]
    graph = Graph.load(d / a.graph)
    if graph.vocab_size != model.config.num_outputs:
        raise SystemExit(f"{d / a.graph} reads {graph.vocab_size} tokens, the model writes {model.config.num_outputs}")
    opts = DecoderOptions(search_beam=20.0, output_beam=8.0, min_active_states=30, max_active_states=10000)
    dec = None
    if device == "cuda":
        try:
            dec = Decoder(graph, opts, device="cuda", max_lanes=max(1, min(len(wavs), 32)))
        except Exception as e:  # e.g. no CUDA toolchain for the JIT: the CPU decoder gives the same words
            print(f"GPU decoder unavailable ({type(e).__name__}: {e}); using the CPU", file=sys.stderr)
    if dec is None:
        dec = Decoder(graph, opts, device="cpu")

    t0 = time.perf_counter()
    feats = [fbank(load_audio(w)) for w in wavs]
    lps = log_probs_of(model, feats, device)
    t1 = time.perf_counter()
    from benchmarks.model.shards import pad

    lp, lens = pad(lps)
    hyps = dec.decode(torch.from_numpy(lp).to(device) if device == "cuda" and dec.device != "cpu" else lp, lens)
    t2 = time.perf_counter()
    frame_s = float(meta.get("frame_seconds", 0.04))
    for path, h, n in zip(wavs, hyps, lens):
        ws = [words[w] for w in h.words]
        times = word_times(h.tokens, len(ws), pieces, frame_s) or [
            (round(s * frame_s, 2), None) for s in h.timestamps]
        if a.json:
            print(json.dumps({"file": path, "seconds": round(int(n) * frame_s, 2), "text": " ".join(ws),
                              "words": [{"word": w, "start": s, "end": e} for w, (s, e) in zip(ws, times)],
                              "score": h.score, "device": dec.device}))
        else:
            print(f"{path} ({int(n) * frame_s:.2f} s): {' '.join(ws)}")
            for w, (s, e) in zip(ws, times):
                print(f"  {s:7.2f} - {e if e is not None else float('nan'):7.2f}  {w}")
    audio_s = float(lens.sum()) * frame_s
    print(f"{len(wavs)} files, {audio_s:.1f} s of audio: model {t1 - t0:.2f} s ({device}), "
          f"decoding {t2 - t1:.3f} s ({dec.device})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
