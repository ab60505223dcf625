"""Run several decoders on identical inputs in one process and print one table.

    python -m benchmarks.peers.run --corpus DIR [--set sim|model] --batch 1 8 32 --utts N \\
        [--decoders cuwfst-gpu riva torchaudio-ctc cuwfst-cpu kaldi-decoder greedy] \\
        [--md docs/benchmarks.md] [--json out.jsonl]

Each (decoder, batch size) entry: build the peer (untimed), one warm-up pass over the
utterances, --reps timed passes; WER of the last pass. Peers that do not batch run once.
A peer that cannot run here (package or GPU missing) gets a `skipped: reason` row.
--blank-skip P [P ...]: the cuwfst decoders run once per value (DecoderOptions.blank_skip; 0 is
the exact decoder), their rows named `NAME blank_skip=P`; the other peers run once.
Names (benchmarks/peers/__init__.py PEERS): cuwfst-gpu, cuwfst-cpu, their -tlg forms (TLG.img)
and -lattice forms (lattice=True: each row's pruned lattice, word times and confidences too),
riva, riva-hlg, kaldi-decoder, kaldi-decoder-hlg, torchaudio-ctc, greedy.
"""

from __future__ import annotations

import numpy as np

import argparse
import contextlib
import gc
import shlex
import sys
import traceback

from . import DEFAULT_PEERS, PEERS, PeerUnavailable, peer_class, require_cuda
from .corpus import load_corpus
from .measure import GpuMemoryProbe, git_commit, machine, median, time_decodes
from .report import MIB, Row, append_json, markdown_section, table, write_section
from .scoring import word_errors


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.peers.run", description=__doc__.splitlines()[0])
    p.add_argument("--corpus", required=True, help="corpus directory (HLG.img, TLG.fst, words.txt, shards)")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--set", dest="set_name", default=None,
                   help="the shards' folder under the corpus: sim, model, ... (default: the only one)")
    p.add_argument("--utts", type=int, default=None, help="first N utterances (default: all)")
    p.add_argument("--cpu-utts", type=int, default=None,
                   help="at most this many utterances for the slow CPU decoders (cuwfst-cpu, kaldi-decoder)")
    p.add_argument("--decoders", nargs="+", default=DEFAULT_PEERS, choices=list(PEERS), metavar="NAME",
                   help=f"from: {', '.join(PEERS)} (default: {' '.join(DEFAULT_PEERS)})")
    p.add_argument("--reps", type=int, default=3, help="timed passes after one warm-up (median reported)")
    p.add_argument("--frame-shift", type=float, default=0.04, help="seconds of audio per log-prob frame")
    p.add_argument("--beam", type=float, default=20.0, help="riva default_beam and kaldi-decoder beam")
    p.add_argument("--lattice-beam", type=float, default=8.0, help="riva lattice_beam")
    p.add_argument("--cuwfst-search-beam", type=float, default=None,
                   help="cuwfst's search_beam (default 20, icefall's; the other beams stay icefall's): "
                        "an operating point for comparisons at equal or better WER")
    p.add_argument("--max-active", type=int, default=10000, help="riva and kaldi-decoder max_active")
    p.add_argument("--min-active", type=int, default=30, help="kaldi-decoder min_active")
    p.add_argument("--ctc-beam", type=int, default=10, help="torchaudio-ctc beam_size")
    p.add_argument("--kaldi-threads", type=int, default=1, help="kaldi-decoder threads over utterances")
    p.add_argument("--blank-skip", type=float, nargs="+", default=[0.0], metavar="P",
                   help="cuwfst decoders only: DecoderOptions.blank_skip values, one row each (0: off); the "
                   "results differ from the exact decoder's, so their WER is reported apart")
    p.add_argument("--feed", choices=["batch", "all"], default="batch",
                   help="utterances per decode() call of the batched decoders: 'batch' (each call holds --batch "
                        "utterances, the table's protocol so far) or 'all' (every utterance in one call, decoded with "
                        "--batch lanes: cuwfst's continuous batching, riva's batching over its channels)")
    p.add_argument("--order", choices=["given", "length"], default="given",
                   help="utterance order before batching: as stored, or longest first (every peer alike)")
    p.add_argument("--md", help="write/replace the peers section of this markdown file")
    p.add_argument("--json", help="append one JSON line per row to this file")
    a = p.parse_args(argv)
    if any(b < 1 for b in a.batch) or a.reps < 1:
        p.error("--batch sizes and --reps must be >= 1")
    return a


def _log(msg: str) -> None:
    print(f"[peers] {msg}", file=sys.stderr, flush=True)


def run_entry(name: str, corpus, batch: int, args, blank_skip: float = 0.0) -> Row:
    """One row: build `name` for `batch`, time it, score it. Never raises. blank_skip: for
    the cuwfst decoders (their adapter reads it from the config)."""
    cls, kwargs = peer_class(name)
    args = argparse.Namespace(**dict(vars(args), blank_skip=blank_skip))  # one value, not the list
    if blank_skip:
        name = f"{name} blank_skip={blank_skip:g}"
    row = Row(decoder=name, device=cls.device, graph=kwargs.get("graph", cls.graph),
              batch=(str(batch) + (" (every utterance in one call)" if args.feed == "all" else ""))
              if cls.batched else "1 (no batching)")
    n = corpus.num_utts
    if cls.slow and args.cpu_utts:
        n = min(n, args.cpu_utts)
    torch = None
    try:
        if cls.device == "cuda":
            torch = require_cuda()
        log_probs = corpus.cuda_log_probs() if cls.input == "cuda" else corpus.log_probs
    except PeerUnavailable as e:
        row.status, row.batch = f"skipped: {e}", "-"
        return row
    lengths = corpus.lengths[:n]
    probe = GpuMemoryProbe(torch) if torch is not None else contextlib.nullcontext()
    peer = None
    try:
        with probe:
            peer = cls(corpus, batch, args, **kwargs)
            feed = (n if args.feed == "all" else batch) if cls.batched else getattr(peer, "feed", 1)
            times, passes = time_decodes(peer, log_probs[:n], lengths, feed, args.reps,
                                         torch.cuda.synchronize if torch is not None else None)
            own = peer.own_gpu_bytes()
            row.settings = peer.settings()
            row.graph = peer.graph
    except PeerUnavailable as e:
        row.status, row.batch = f"skipped: {e}", "-"
        return row
    except Exception as e:  # a peer that breaks must not take the table with it
        traceback.print_exc(file=sys.stderr)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        row.status = f"failed: {type(e).__name__}: {msg[:200]}"
        return row
    finally:
        if peer is not None:
            peer.close()
        del peer
        gc.collect()
    refs = [corpus.scored(r) for r in corpus.refs[:n]]
    errs = word_errors(refs, [corpus.scored(h) for h in passes[-1]])  # the last pass's, as the table shows
    # every pass's WER (warm-up included): equal for an exact decoder, not for riva's 1-best
    row.wer_passes = [100 * word_errors(refs, [corpus.scored(h) for h in hyps]).rate for hyps in passes]
    row.utts, row.times_s, row.median_s = n, times, median(times)
    row.audio_s = corpus.audio_seconds(n)
    row.rtfx = row.audio_s / row.median_s if row.median_s > 0 else None
    row.wer_percent, row.errors, row.ref_words = 100 * errs.rate, errs.errors, errs.ref_words
    if torch is not None:
        row.torch_peak_mib = probe.torch_peak / MIB
        row.device_peak_mib = probe.device_peak / MIB
        row.own_mib = None if own is None else own / MIB
        row.gpu_source = cls.memory
        row.gpu_mib = {"torch": row.torch_peak_mib, "device": row.device_peak_mib,
                       "own+torch": (row.own_mib or 0.0) + row.torch_peak_mib}[cls.memory]
    return row


def main(argv=None) -> list[Row]:
    args = parse_args(argv)
    command = "python -m benchmarks.peers.run " + shlex.join(sys.argv[1:] if argv is None else argv)
    corpus = load_corpus(args.corpus, args.utts, args.frame_shift, args.set_name)
    if args.order == "length":  # batches of similar lengths, as a bucketing sampler makes them
        order = np.argsort(-corpus.lengths, kind="stable")
        corpus.log_probs = np.ascontiguousarray(corpus.log_probs[order])
        corpus.lengths = corpus.lengths[order]
        corpus.refs = [corpus.refs[i] for i in order]
    _log(f"{corpus.num_utts} utterances, {corpus.audio_seconds(corpus.num_utts):.1f} s of audio, "
         f"T <= {corpus.log_probs.shape[1]}, V = {corpus.vocab_size}")
    rows = []
    for name in args.decoders:
        cls, _ = peer_class(name)
        skips = args.blank_skip if name.startswith("cuwfst") else [0.0]
        for batch, skip in [(b, p) for p in skips for b in (args.batch if cls.batched else [1])]:
            row = run_entry(name, corpus, batch, args, blank_skip=skip)
            rows.append(row)
            if row.status == "ok":
                spread = max(row.wer_passes) - min(row.wer_passes)
                passes = f" (passes {min(row.wer_passes):.2f}-{max(row.wer_passes):.2f}%)" if spread > 1e-9 else ""
                _log(f"{row.decoder} batch {row.batch}: WER {row.wer_percent:.2f}%{passes}  RTFx {row.rtfx:.1f}")
            else:
                _log(f"{row.decoder} batch {row.batch}: {row.status}")
                if row.status.startswith("skipped"):
                    break  # the other batch sizes would be skipped for the same reason
    m, commit = machine(), git_commit()
    print(f"{m['gpu'] or 'no GPU'}; {m['cpu']}, {m['cores']} cores; commit {commit}; {m['date']}")
    print(table(rows))
    if args.md:
        write_section(args.md, markdown_section(rows, m, commit, command, args.reps))
    if args.json:
        append_json(args.json, rows, commit=commit, machine=m, command=command)
    return rows


if __name__ == "__main__":
    main()
