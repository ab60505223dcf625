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

from .graph import Graph

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
    from . import Decoder, DecoderOptions

    from .cuda import has_torch_cuda, resolve_device

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
    if device != "cpu" and has_torch_cuda():  # time the decoder, not the copy (without torch: numpy in)
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


def write_example(out: str | os.PathLike) -> int:
    """The shipped tiny graph and utterances laid out as a user's project, so the commands
    of README.md and docs/usage.md run as written inside `out`:

        data/lang_bpe_500/   HLG.fst, TLG.fst (OpenFst, token offset 1), tokens.txt, words.txt,
                             HLG.pt (icefall's k2 dict; only where torch is installed)
        data/test/text       reference transcripts, `id words`
        exp/log_probs.npz    the utterances padded: log_probs [B, T, V] float16, lengths, ids
        exp/log_probs/       one `<id>.npy` [T, V] per utterance
        exp/log_probs.{ark,scp}  Kaldi matrices (only where kaldi_native_io or kaldiio is installed)
    """
    import shutil

    root = Path(out)
    lang, test, exp = root / "data" / "lang_bpe_500", root / "data" / "test", root / "exp"
    for d in (lang, test, exp / "log_probs"):
        d.mkdir(parents=True, exist_ok=True)
    for name in ("HLG.fst", "TLG.fst", "tokens.txt", "words.txt"):
        shutil.copy(TINY / name, lang / name)
    with np.load(TINY.parent / "demo" / "tiny_utts.npz") as z:
        lp, lens, texts = z["log_probs_fp16"], z["lengths"].astype(np.int32), [str(t) for t in z["ref_text"]]
    ids = [f"utt{i:03d}" for i in range(len(lens))]
    np.savez(exp / "log_probs.npz", log_probs=lp, lengths=lens, ids=np.array(ids))
    for i, u in enumerate(ids):
        np.save(exp / "log_probs" / f"{u}.npy", lp[i, : lens[i]])
    (test / "text").write_text("".join(f"{u} {t}\n" for u, t in zip(ids, texts)), encoding="utf-8")
    made = ["HLG.fst", "TLG.fst", "tokens.txt", "words.txt", "text", "log_probs.npz", "log_probs/*.npy"]
    try:
        import torch

        g = Graph.load(TINY / "HLG.img")  # an image in k2's own arc order: k2's dict is a view of it
        a = g.arrays
        src = np.repeat(np.arange(a.num_states, dtype=np.int32), np.diff(a.row_splits))
        arcs = np.stack([src, a.dest, a.ilabel, a.weight.view(np.int32)], axis=1).astype(np.int32)
        aux = np.zeros(a.num_arcs, np.int32)
        has = np.diff(a.aux_row_splits) > 0
        aux[has] = a.aux_pool[a.aux_row_splits[:-1][has]]
        aux[a.ilabel == -1] = -1  # k2 labels final arcs -1 on both sides
        torch.save({"arcs": torch.from_numpy(arcs), "aux_labels": torch.from_numpy(aux)}, lang / "HLG.pt")
        made.append("HLG.pt")
    except ImportError:
        pass
    try:
        from .io.readers import kaldi_writer

        cwd = os.getcwd()
        os.chdir(root)  # the scp names the ark relative to the project, as Kaldi recipes do
        try:
            with kaldi_writer("ark,scp:exp/log_probs.ark,exp/log_probs.scp") as write:
                for i, u in enumerate(ids):
                    write(u, lp[i, : lens[i]].astype(np.float32))
        finally:
            os.chdir(cwd)
        made.append("log_probs.ark/.scp")
    except ImportError:
        pass
    print(f"wrote {', '.join(made)} under {root}")
    return 0


def add_parser(sub, **kw) -> None:
    d = sub.add_parser("demo", help="decode shipped simulated utterances with the shipped tiny HLG", **kw)
    d.add_argument("--device", default="auto", help="auto (the GPU when there is one), cpu or cuda[:N]")
    d.add_argument("--repeat", type=int, default=3, help="timed decodes after the first")
    d.add_argument("--write-example", metavar="DIR",
                   help="instead, write the tiny graph and utterances as a small project in DIR (the layout "
                        "README.md and docs/usage.md use) and exit")
    d.set_defaults(fn=lambda a: write_example(a.write_example) if a.write_example else run(a.device, a.repeat))


if __name__ == "__main__":
    raise SystemExit(run(os.environ.get("CUWFST_DEVICE", "auto")))
