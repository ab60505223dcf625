"""The `cuwfst` command line: export, info, build, decode, demo.

Parsing and wiring only: graphs come from cuwfst.graph, utterances and results from
cuwfst.io, decoding from cuwfst.decoder. A user's mistake ends in one line on stderr
saying what to do (exit 2); --debug shows the traceback instead.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


class _Help(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults in --help, descriptions kept as written; no "(default: None)" on options
    whose help already says what their absence means, nor on flags."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


# What a user can cause by a wrong file, option or environment: one line, no traceback.
_USER_ERRORS = (ValueError, TypeError, FileNotFoundError, ImportError, OSError, RuntimeError, KeyError)


def _log(cmd: str):
    return lambda msg: print(f"cuwfst {cmd}: {msg}", file=sys.stderr)


# ---------------------------------------------------------------------- export
def _cmd_export(args) -> int:
    from .graph import Graph
    from .graph.symbols import read_lang_dir

    t0 = time.perf_counter()
    if args.k2:
        g = Graph.from_k2(args.k2, vocab_size=args.vocab_size)
    elif args.openfst:
        g = Graph.from_openfst(args.openfst, token_offset=args.token_offset, vocab_size=args.vocab_size)
    else:
        if not os.path.isfile(args.k2_text):
            raise FileNotFoundError(f"k2 text graph not found: {args.k2_text}")
        with open(args.k2_text) as f:
            g = Graph.from_k2_text(f.read(), epsilon_id=args.epsilon_id, vocab_size=args.vocab_size)
    tokens, words = args.tokens, args.words
    if args.lang_dir:
        lt, lw = read_lang_dir(args.lang_dir)
        tokens, words = tokens or lt, words or lw
    if tokens is not None or words is not None:
        g = g.with_symbols(tokens, words, token_offset=args.token_offset if args.openfst else None,
                           resize_vocab=args.vocab_size is None)
    elif args.openfst and (g.arrays.ilabel >= 0).any() and not (g.arrays.ilabel == 0).any():
        _log("export")(f"warning: no arc reads token 0 (the CTC blank in icefall/WeNet/sherpa models): check "
                       f"--token-offset (now {args.token_offset}); --tokens tokens.txt makes this an error")
    size = g.save(args.out)
    tables = ", ".join(f"{k} table {len(t)}" for k, t in (("token", g.tokens), ("word", g.words)) if t is not None)
    print(f"wrote {args.out}: {g.num_states} states, {g.num_arcs} arcs, vocab {g.vocab_size}, "
          f"{g.num_epsilon_arcs} epsilon arcs, {tables or 'no symbol tables'}, "
          f"{size / 2**20:.1f} MiB in {time.perf_counter() - t0:.1f} s")
    return 0


# ---------------------------------------------------------------------- info
def _cmd_info(args) -> int:
    import numpy as np

    from .graph import Graph
    from .graph.image import FLAG_EPS_FIRST, FLAG_FINALS_AT_END, FLAG_HAS_EPS

    g = Graph.load(args.image)
    a = g.arrays
    deg = np.diff(a.row_splits)
    flags = a.flags
    print(f"image          {args.image}")
    print(f"version        {a.version}")
    print(f"states         {g.num_states}")
    print(f"arcs           {g.num_arcs}")
    print(f"vocab_size     {g.vocab_size}")
    print(f"start_state    {g.start_state}")
    print(f"flags          finals-at-end={int(bool(flags & FLAG_FINALS_AT_END))} "
          f"has-eps={int(bool(flags & FLAG_HAS_EPS))} eps-first={int(bool(flags & FLAG_EPS_FIRST))} "
          f"arc-ids={int(g.reordered)} symbols={int(a.symbols is not None)}")
    print(f"final arcs     {g.num_final_arcs}")
    print(f"epsilon arcs   {g.num_epsilon_arcs}")
    if a.has_eps:
        print(f"max eps chain  {g.max_epsilon_chain}")
    print(f"out-degree     max {int(deg.max(initial=0))}, mean {deg.mean():.2f}")
    print(f"words on arcs  {int(a.aux_pool.shape[0])}")
    tok, words = g.tokens, g.words
    print(f"token table    {f'{len(tok)} symbols ({tok.num_tokens} tokens)' if tok is not None else 'none'}")
    print(f"word table     {f'{len(words)} words' if words is not None else 'none'}")
    print(f"file size      {os.path.getsize(args.image)} bytes")
    return 0


# ---------------------------------------------------------------------- build
def _cmd_build(args) -> int:
    from .jit import build
    from .jit.reference import SPEC as REF

    specs = [REF]
    try:
        from .jit.decoder import spec as gpu_spec

        specs.append(gpu_spec(args.cuda_arch))
    except ImportError:
        pass
    for spec in specs:
        t0 = time.perf_counter()
        path = build(spec)
        print(f"{spec.name}: {path} ({time.perf_counter() - t0:.1f} s)")
    return 0


# ---------------------------------------------------------------------- decode
def _cmd_decode(args) -> int:
    from tqdm import tqdm

    from .decoder import Decoder, DecoderOptions
    from .graph import open_graph
    from .io import batches, make_record, make_writer, open_inputs, read_refs, score, write_reports

    log = _log("decode")
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        writer = make_writer(args.format, out)  # first: an unavailable format fails before any work
        graph = open_graph(args.graph, token_offset=args.token_offset, tokens=args.tokens, words=args.words,
                           lang_dir=args.lang_dir, log=log)
        if graph.words is None:
            log("the graph has no word table: words are printed as ids (pass --words words.txt, or export "
                "with --words)")
        opts = DecoderOptions(search_beam=args.search_beam, output_beam=args.output_beam,
                              min_active_states=args.min_active_states, max_active_states=args.max_active_states,
                              allow_partial=not args.no_partial, acoustic_scale=args.acoustic_scale,
                              blank_penalty=args.blank_penalty, blank_id=args.blank_id,
                              normalize=args.log_softmax, check_log_probs=not args.no_log_prob_check,
                              allow_extra_columns=args.allow_extra_columns, blank_skip=args.blank_skip)
        lattices = args.format == "nbest" or args.confidences
        if args.format == "nbest" and args.nbest < 1:
            raise ValueError(f"--nbest must be >= 1, got {args.nbest}")
        dec = Decoder(graph, opts, device=args.device, num_threads=args.num_threads, memory=args.memory)
        refs = read_refs(args.refs) if args.refs else None
        source = open_inputs(args.inputs, key=args.key)
        seen, pairs = set(), []
        n_utts = frames = decoded = overflow = empty = 0
        t_start = time.perf_counter()
        t_decode = 0.0
        bar = tqdm(total=source.count, unit="utt", desc="decoding", file=sys.stderr,
                   disable=not sys.stderr.isatty())
        for batch in batches(source, args.batch_size):
            t0 = time.perf_counter()
            hyps = dec.decode(batch.log_probs, batch.lengths, lattice=lattices)
            t_decode += time.perf_counter() - t0
            for utt, hyp, n in zip(batch.ids, hyps, batch.lengths.tolist()):
                if utt in seen:
                    raise ValueError(f"utterance id {utt} appears twice in the inputs: ids must be unique")
                seen.add(utt)
                rec = make_record(utt, hyp, n, words_table=graph.words, tokens_table=graph.tokens,
                                  frame_shift=args.frame_shift,
                                  blank_id=args.blank_id, nbest=args.nbest if args.format == "nbest" else 0)
                writer.write(rec)
                if refs is not None and utt in refs:
                    pairs.append((utt, refs[utt], rec.words))
                overflow += hyp.overflow != 0
                empty += hyp.empty
                frames += n
                decoded += hyp.frames_decoded
            n_utts += len(batch.ids)
            bar.update(len(batch.ids))
        bar.close()
        writer.close()
        if n_utts == 0:
            raise ValueError("the inputs hold no utterance")
        wall = time.perf_counter() - t_start
        audio = frames * args.frame_shift
        log(f"{n_utts} utterances, {audio:.1f} s of audio (frame shift {args.frame_shift} s) on {dec.device}: "
            f"decoding {t_decode:.2f} s (RTFx {audio / max(t_decode, 1e-9):.0f}), {wall:.2f} s wall; "
            f"overflow {overflow}, no path {empty}")
        if opts.blank_skip:
            log(f"blank_skip {opts.blank_skip:g}: {decoded} of {frames} frames decoded "
                f"({100 * decoded / max(frames, 1):.1f}%); results differ from the exact decoder's")
        if refs is not None:
            if not pairs:
                raise ValueError(f"no utterance id of the inputs is in {args.refs} (ids like {next(iter(seen))!r} "
                                 f"vs {next(iter(refs))!r})")
            st = score(pairs)
            unscored = n_utts - len(pairs)
            log(st.summary() + (f"; {unscored} utterances without a reference were not scored" if unscored else ""))
            out_dir = args.results_dir or (os.path.dirname(os.path.abspath(args.out)) if args.out else ".")
            name = args.results_name or (os.path.splitext(os.path.basename(args.out))[0] if args.out else "cuwfst")
            recogs, errs = write_reports(st, out_dir, name)
            log(f"wrote {recogs} and {errs}")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    # --debug before or after the command; SUPPRESS keeps a subcommand from resetting it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error")
    p = argparse.ArgumentParser(prog="cuwfst", description=__doc__.split("\n\n")[0], formatter_class=_Help)
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    p.add_argument("--version", action="version", version=f"cuwfst {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    e = sub.add_parser("export", help="export a graph (HLG.pt, .fst, k2 text) to a cuwfst image",
                       formatter_class=_Help, parents=[common],
                       description="Export a graph once into a validated, memory-mapped image, with its symbol "
                                   "tables. `cuwfst decode` also takes the source graph and does this itself.")
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument("--k2", metavar="HLG.pt", help="icefall HLG.pt (a k2 Fsa dict; needs torch)")
    src.add_argument("--openfst", metavar="TLG.fst", help="OpenFst TLG.fst/HLG.fst (Kaldi, WeNet, sherpa, Riva)")
    src.add_argument("--k2-text", metavar="FILE", help="k2 transducer text")
    e.add_argument("--tokens", metavar="tokens.txt", help="the token table (id = log-prob column)")
    e.add_argument("--words", metavar="words.txt", help="the word table (id = word id on the arcs)")
    e.add_argument("--lang-dir", metavar="DIR", help="an icefall lang dir holding tokens.txt and words.txt")
    e.add_argument("--token-offset", type=int, default=1, help="OpenFst: ilabel = token + offset (0 = epsilon)")
    e.add_argument("--epsilon-id", type=int, default=None, help="k2 text: the ilabel of epsilon arcs")
    e.add_argument("--vocab-size", type=int, default=None,
                   help="log-prob width (default: the token table's, else the largest token + 1)")
    e.add_argument("--out", required=True, metavar="IMAGE", help="the image to write")
    e.set_defaults(fn=_cmd_export)

    i = sub.add_parser("info", help="describe a graph image", formatter_class=_Help, parents=[common])
    i.add_argument("image")
    i.set_defaults(fn=_cmd_info)

    b = sub.add_parser("build", help="compile every native module into the cache (no GPU needed)",
                       formatter_class=_Help, parents=[common])
    b.add_argument("--cuda-arch", default="9.0", help="CUDA compute capability, e.g. 9.0")
    b.set_defaults(fn=_cmd_build)

    d = sub.add_parser(
        "decode", help="decode utterances (.npz, .npy/.pt directories, Kaldi scp/ark)", formatter_class=_Help,
        parents=[common],
        description="Decode log-probs against a graph (an image, or an HLG.pt / .fst exported and cached on "
                    "first use). INPUT: .npz files (any key naming the log-probs; lengths and ids when present), "
                    "a directory or glob of per-utterance .npy/.pt files (the stem is the id), Kaldi "
                    "scp:/ark: matrices. Results go to stdout (or --out); a summary to stderr.")
    d.add_argument("graph", help="graph image, HLG.pt or .fst")
    d.add_argument("inputs", nargs="+", metavar="INPUT")
    d.add_argument("--words", metavar="words.txt", help="word table (default: the graph's)")
    d.add_argument("--tokens", metavar="tokens.txt", help="token table (default: the graph's)")
    d.add_argument("--lang-dir", metavar="DIR", help="icefall lang dir with tokens.txt and words.txt "
                   "(default for a source graph: the tables beside it)")
    d.add_argument("--token-offset", type=int, default=1, help="for an OpenFst source graph: ilabel = token + offset")
    d.add_argument("--device", default="auto", help="auto (the GPU when there is one), cpu, cuda or cuda:N")
    d.add_argument("--batch-size", type=int, default=16, help="utterances per decode call (bounds memory)")
    d.add_argument("--num-threads", type=int, default=None, help="CPU decoder threads (default: min(8, cores))")
    d.add_argument("--memory", choices=("lazy", "pooled", "eager"), default=None,
                   help="GPU memory mode (Decoder's memory=; default: $CUWFST_MEMORY, else lazy): pooled holds "
                        "far less device memory for batches on epsilon-free graphs (HLG) with the same "
                        "results; ignored on the CPU")
    d.add_argument("--format", default="text", choices=("text", "jsonl", "ctm", "nbest"),
                   help="text: `id words`; jsonl: words, ids, tokens, times, score; ctm: NIST CTM; "
                   "nbest: `id-k score words` for the --nbest best word sequences of each lattice")
    d.add_argument("--nbest", type=int, default=10, help="hypotheses per utterance with --format nbest")
    d.add_argument("--confidences", action="store_true",
                   help="decode lattices (output_beam) and give each word its posterior: CTM's 6th column, "
                   "JSONL's word_conf (implied by --format nbest)")
    d.add_argument("--out", metavar="FILE", help="write results here instead of stdout")
    d.add_argument("--refs", metavar="FILE", help="reference text (`id words`): print WER, write recogs/errs files")
    d.add_argument("--results-dir", metavar="DIR", help="where --refs reports go (default: --out's directory, else .)")
    d.add_argument("--results-name", metavar="NAME", help="report names recogs-NAME.txt, errs-NAME.txt "
                   "(default: --out's stem, else cuwfst)")
    d.add_argument("--frame-shift", type=float, default=0.04, help="seconds per log-prob frame (times, RTFx)")
    d.add_argument("--key", help="the .npz array holding the log-probs (default: found by name)")
    d.add_argument("--search-beam", type=float, default=20.0, help="k2's search_beam")
    d.add_argument("--output-beam", type=float, default=8.0, help="k2's output_beam (lattices only)")
    d.add_argument("--min-active-states", type=int, default=30, help="k2's min_active_states")
    d.add_argument("--max-active-states", type=int, default=10000, help="k2's max_active_states")
    d.add_argument("--no-partial", action="store_true", help="allow_partial=False (k2's older behaviour)")
    d.add_argument("--acoustic-scale", type=float, default=1.0, help="multiply every log-prob")
    d.add_argument("--blank-penalty", type=float, default=0.0, help="subtract from the blank column after scaling")
    d.add_argument("--blank-id", type=int, default=0, help="the blank's column (penalty, CTM/JSONL times)")
    d.add_argument("--log-softmax", action="store_true", help="apply log_softmax to the inputs (logits in)")
    d.add_argument("--no-log-prob-check", action="store_true",
                   help="skip the check that each row is a log-probability distribution")
    d.add_argument("--allow-extra-columns", action="store_true",
                   help="accept log-probs wider than the graph's vocab_size")
    d.add_argument("--blank-skip", type=float, default=0.0, metavar="P",
                   help="drop frames whose blank probability is >= P (0 < P < 1), keeping the first of each "
                   "run; 0 = off. Faster, but results (and WER) differ from the exact decoder's")
    d.set_defaults(fn=_cmd_decode)

    from .demo import add_parser as add_demo

    add_demo(sub, formatter_class=_Help, parents=[common])
    return p


def _silence_stdout() -> None:
    """After a closed pipe (`| head`): point stdout at /dev/null so the interpreter's
    final flush does not print a second BrokenPipeError."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.fn(args)
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        _silence_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a reader that went away
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"cuwfst {args.cmd}: interrupted", file=sys.stderr)
        return 130
    except _USER_ERRORS as ex:
        if args.debug:
            raise
        msg = " ".join(str(ex).split()) or type(ex).__name__
        print(f"cuwfst {args.cmd}: error: {msg}", file=sys.stderr)
        return 2
    except Exception as ex:  # a bug of ours: still one line, with the way to the traceback
        if args.debug:
            raise
        print(f"cuwfst {args.cmd}: internal error: {type(ex).__name__}: {ex} (run again with --debug for the "
              "traceback, and please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
