"""The `cuwfst` command line: export, info, build, decode, demo."""

from __future__ import annotations

import argparse
import os
import sys
import time


def _cmd_export(args) -> int:
    from .graph import Graph

    t0 = time.perf_counter()
    if args.k2:
        g = Graph.from_k2(args.k2, vocab_size=args.vocab_size)
    elif args.openfst:
        g = Graph.from_openfst(args.openfst, token_offset=args.token_offset, vocab_size=args.vocab_size)
    else:
        with open(args.k2_text) as f:
            g = Graph.from_k2_text(f.read(), epsilon_id=args.epsilon_id, vocab_size=args.vocab_size)
    size = g.save(args.out)
    print(f"wrote {args.out}: {g.num_states} states, {g.num_arcs} arcs, vocab {g.vocab_size}, "
          f"{g.num_epsilon_arcs} epsilon arcs, {size / 2**20:.1f} MiB in {time.perf_counter() - t0:.1f} s")
    return 0


def _cmd_info(args) -> int:
    import numpy as np

    from .graph import Graph

    g = Graph.load(args.image)
    a = g.arrays
    deg = np.diff(a.row_splits)
    print(f"image          {args.image}")
    print(f"version        {a.version}")
    print(f"states         {g.num_states}")
    print(f"arcs           {g.num_arcs}")
    print(f"vocab_size     {g.vocab_size}")
    print(f"start_state    {g.start_state}")
    print(f"flags          finals-at-end={int(a.finals_at_end)} has-eps={int(a.has_eps)} "
          f"eps-first={int(a.has_eps)}")
    print(f"final arcs     {g.num_final_arcs}")
    print(f"epsilon arcs   {g.num_epsilon_arcs}")
    if a.has_eps:
        print(f"max eps chain  {g.max_epsilon_chain}")
    print(f"out-degree     max {int(deg.max(initial=0))}, mean {deg.mean():.2f}")
    print(f"words on arcs  {int(a.aux_pool.shape[0])}")
    print(f"file size      {os.path.getsize(args.image)} bytes")
    return 0


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


def _cmd_decode(args) -> int:
    import numpy as np

    from .decoder import Decoder, DecoderOptions
    from .graph import Graph

    g = Graph.load(args.graph)
    data = np.load(args.log_probs)
    lp = data["log_probs"] if hasattr(data, "files") else data
    lens = data["lengths"] if hasattr(data, "files") and "lengths" in data.files else None
    opts = DecoderOptions(search_beam=args.search_beam, output_beam=args.output_beam,
                          min_active_states=args.min_active_states,
                          max_active_states=args.max_active_states, allow_partial=not args.no_partial)
    dec = Decoder(g, opts, device=args.device)
    t0 = time.perf_counter()
    hyps = dec.decode(lp, lens)
    dt = time.perf_counter() - t0
    words = _read_words(args.words) if args.words else None
    for i, h in enumerate(hyps):
        text = " ".join(words.get(w, str(w)) for w in h.words) if words else " ".join(map(str, h.words))
        print(f"{i}\t{h.score:.4f}\t{text}")
    print(f"decoded {len(hyps)} rows in {dt:.3f} s on {args.device}", file=sys.stderr)
    return 0


def _read_words(path: str) -> dict[int, str]:
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                out[int(parts[1])] = parts[0]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="cuwfst", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    e = sub.add_parser("export", help="export a graph to a cuwfst image")
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument("--k2", help="icefall HLG.pt (a k2 Fsa dict)")
    src.add_argument("--openfst", help="OpenFst TLG.fst/HLG.fst (Kaldi, WeNet, sherpa, Riva)")
    src.add_argument("--k2-text", help="k2 transducer text")
    e.add_argument("--token-offset", type=int, default=1, help="OpenFst ilabel = token + offset")
    e.add_argument("--epsilon-id", type=int, default=None, help="k2 text: ilabel of epsilon arcs")
    e.add_argument("--vocab-size", type=int, default=None, help="log-prob width (default: max token + 1)")
    e.add_argument("--out", required=True)
    e.set_defaults(fn=_cmd_export)

    i = sub.add_parser("info", help="describe a graph image")
    i.add_argument("image")
    i.set_defaults(fn=_cmd_info)

    b = sub.add_parser("build", help="compile every native module into the cache (no GPU needed)")
    b.add_argument("--cuda-arch", default="9.0", help="CUDA compute capability, e.g. 9.0")
    b.set_defaults(fn=_cmd_build)

    d = sub.add_parser("decode", help="decode log-probs from an .npz (log_probs, lengths)")
    d.add_argument("graph")
    d.add_argument("log_probs")
    d.add_argument("--words", help="words.txt to print words instead of ids")
    d.add_argument("--device", default="cpu")
    d.add_argument("--search-beam", type=float, default=20.0)
    d.add_argument("--output-beam", type=float, default=8.0)
    d.add_argument("--min-active-states", type=int, default=30)
    d.add_argument("--max-active-states", type=int, default=10000)
    d.add_argument("--no-partial", action="store_true", help="allow_partial=False")
    d.set_defaults(fn=_cmd_decode)

    try:
        from .demo import add_parser as add_demo

        add_demo(sub)
    except ImportError:
        pass
    args = p.parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as ex:
        print(f"cuwfst {args.cmd}: error: {ex}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
