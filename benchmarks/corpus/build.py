"""Build one tier of the benchmark corpus: units, symbol tables, HLG and TLG, with statistics.

    python -m benchmarks.corpus.build --tier {tiny,small,full} --out DIR [--arpa PATH]

Writes into DIR: bpe.model, tokens.txt, words.txt, lexicon.txt, lexicon_disambig.txt,
lm.arpa.gz (the pruned LM; pruned tiers only), HLG.fst + HLG.img, TLG.fst + TLG.img and
stats.json. Only kaldifst, kaldilm, sentencepiece and numpy are used (no k2), so the same
command runs on the GPU machine, given a sentencepiece wheel (it has kaldifst and kaldilm).
Every tier trains the same BPE model (text sampled from the source LM, seed 0); --bpe-model
reuses one instead, e.g. cuwfst/data/tiny/bpe.model.

- HLG (k2 style, epsilon-free): LG with its `#k` relabelled to epsilon, input epsilons
  removed (benchmarks.corpus.rmeps), then H o LG with H the CTC topology. Every arc reads a
  token: OpenFst ilabel = token + 1, so cuwfst reads it with token_offset=1.
- TLG (Kaldi/Riva style, with epsilons): T o LG where T passes LG's `#k` (so G's backoff
  arcs and the word-end `#k` arcs become input-epsilon arcs), not determinized, like Riva's
  mkgraph_ctc.sh.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from .arpa import prune, read_arpa, write_arpa
from .fstio import read_fst, to_kaldifst
from .lang import build_G, build_L, build_LG
from .rmeps import remove_input_epsilons
from .stats import StageTimer, fst_stats, graph_stats, machine, peak_rss_mb, sha256_file
from .topo import ctc_topology
from .units import NUM_IDS, make_lang, train_bpe

REPO = Path(__file__).resolve().parents[2]
ARPA_NAME = "en-us-3gram.arpa.xz"

# words kept, then bigrams and trigrams kept (by joint probability); None = the whole LM
TIERS: dict[str, tuple[int, list[int]] | None] = {
    "tiny": (300, [800, 400]),
    "small": (5000, [150000, 100000]),
    "full": None,
}


def default_arpa() -> Path:
    """../shared/data/ beside the checkout, else the staged copy in .device/data/."""
    for p in (REPO.parent / "shared" / "data" / ARPA_NAME, REPO / ".device" / "data" / ARPA_NAME):
        if p.exists():
            return p
    raise FileNotFoundError(f"{ARPA_NAME} is neither in {REPO.parent / 'shared/data'} nor in "
                            f"{REPO / '.device/data'}; pass --arpa")


def _plain_copy(arpa: Path, dest: Path) -> Path:
    """kaldilm reads plain ARPA text only."""
    opener = {".xz": lzma.open, ".gz": gzip.open}.get(arpa.suffix)
    if opener is None:
        return arpa
    with opener(arpa, "rb") as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 24)
    return dest


def _export(fst_path: Path, img_path: Path, *, expect_epsilons: bool, num_words: int) -> dict:
    """OpenFst file -> cuwfst image, with the checks every tier must pass."""
    from cuwfst import Graph

    graph = Graph.from_openfst(fst_path, token_offset=1, vocab_size=NUM_IDS)
    problems = []
    if expect_epsilons and graph.num_epsilon_arcs == 0:
        problems.append("no epsilon arcs")
    if not expect_epsilons and graph.num_epsilon_arcs:
        problems.append(f"{graph.num_epsilon_arcs} epsilon arcs (it must be epsilon-free)")
    if graph.num_final_arcs == 0:
        problems.append("no final state")
    if graph.arrays.aux_pool.size and graph.arrays.aux_pool.max() >= num_words:
        problems.append("an output label that is not a word (a disambiguation symbol or <s>/</s>)")
    if problems:
        raise RuntimeError(f"{fst_path.name}: " + "; ".join(problems))
    size = graph.save(img_path)
    return graph_stats(graph, image_bytes=size, fst_bytes=fst_path.stat().st_size)


GRAPHS = ("HLG", "TLG")


def build(tier: str, out_dir: str | os.PathLike, arpa: str | os.PathLike | None = None, *,
          bpe_model: str | None = None, keep_work: bool = False, seed: int = 0, log=print,
          graphs: tuple[str, ...] = GRAPHS) -> dict:
    """Build `tier` into `out_dir`; returns (and writes) the statistics. `graphs`: which of
    HLG and TLG to build (both by default; a GPU call that reads the HLG alone saves the TLG's
    composition and export, ~33 s of the full tier's ~200 on the development VM)."""
    import kaldifst

    if tier not in TIERS:
        raise ValueError(f"tier must be one of {sorted(TIERS)}, got {tier!r}")
    graphs = tuple(graphs)
    if not graphs or any(g not in GRAPHS for g in graphs):
        raise ValueError(f"graphs must be a non-empty subset of {GRAPHS}, got {graphs!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arpa = Path(arpa) if arpa else default_arpa()
    if not arpa.exists():
        raise FileNotFoundError(f"ARPA not found: {arpa}")
    work = Path(tempfile.mkdtemp(prefix=".work-", dir=out)) if not keep_work else out / "work"
    work.mkdir(exist_ok=True)
    timer = StageTimer(log)
    stats: dict = {"tier": tier, "arpa": str(arpa.resolve()), "arpa_sha256": sha256_file(arpa), "seed": seed,
                   "machine": machine()}
    try:
        with timer.stage("lm"):
            source_lm = lm = read_arpa(arpa)
            stats["lm_source_counts"] = lm.counts
            if TIERS[tier] is not None:
                words, ngrams = TIERS[tier]
                lm = prune(source_lm, words, ngrams)
                write_arpa(lm, out / "lm.arpa.gz")
                plain = work / "lm.arpa"
                write_arpa(lm, plain)
            else:
                plain = _plain_copy(arpa, work / "lm.arpa")
            stats["lm_counts"] = lm.counts
        with timer.stage("bpe"):
            if bpe_model:
                shutil.copyfile(bpe_model, out / "bpe.model")
            else:
                train_bpe(source_lm, str(out / "bpe.model"), seed=seed)
            del source_lm
        with timer.stage("lexicon"):
            lang = make_lang(lm, str(out / "bpe.model"))
            lang.write(str(out))
            del lm
            stats["lang"] = {"tokens": len(lang.pieces), "words": len(lang.words) - 4,
                             "disambig_symbols": lang.num_disambig,
                             "mean_pieces_per_word": round(float(np.mean([len(p) for _, p in lang.lexicon])), 3)}
        with timer.stage("G"):
            build_G(plain, out / "words.txt", work / "G.fst")
            stats["G"] = fst_stats(read_fst(work / "G.fst"), lang.first_word_disambig)
        with timer.stage("L"):
            L = build_L(lang)
            stats["L"] = fst_stats(L, lang.first_token_disambig + 1)
        lg_times: dict = {}
        with timer.stage("LG"):
            LG = build_LG(L, str(work / "G.fst"), str(work), lg_times)
            LG.write(str(work / "LG.fst"))
            del LG
            lg = read_fst(work / "LG.fst")
            stats["LG"] = fst_stats(lg, lang.first_token_disambig + 1)
        timer.stages["LG"].update({k: round(v, 3) for k, v in lg_times.items()})
        if "HLG" in graphs:
            with timer.stage("HLG"):
                stats["HLG"] = _build_hlg(lg, lang, work, out, kaldifst)
        del lg
        if "TLG" in graphs:
            stats["TLG"] = _build_tlg(lang, work, out, timer, kaldifst)
    finally:
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)
    stats["stages"] = timer.stages
    stats["total_seconds"] = round(timer.total, 3)
    stats["peak_rss_mb"] = round(peak_rss_mb(), 1)
    stats["artifact_bytes"] = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()
                               and p.name != "stats.json"}
    with open(out / "stats.json", "w") as f:
        json.dump(stats, f, indent=1)
    log(summary(stats))
    return stats


def _build_tlg(lang, work: Path, out: Path, timer, kaldifst) -> dict:
    """TLG = T o LG (T passes LG's #k), written as TLG.fst and TLG.img."""
    with timer.stage("TLG"):
        T = ctc_topology(NUM_IDS, [lang.first_token_disambig + k + 1 for k in range(lang.num_disambig)])
        Tf = to_kaldifst(T, work / "T.fst")
        kaldifst.arcsort(Tf, sort_type="olabel")
        TLG = kaldifst.compose(Tf, kaldifst.StdVectorFst.read(str(work / "LG.fst")), connect=True)
        kaldifst.arcsort(TLG, sort_type="ilabel")
        TLG.write(str(out / "TLG.fst"))
        del TLG, Tf
        return _export(out / "TLG.fst", out / "TLG.img", expect_epsilons=True, num_words=lang.first_word_disambig)


def _build_hlg(lg, lang, work: Path, out: Path, kaldifst) -> dict:
    """HLG = H o rmeps(LG without #k), written as HLG.fst and HLG.img."""
    lg.ilabel[lg.ilabel > lang.first_token_disambig] = 0  # #k (token id >= first, label = id + 1)
    lg.olabel[lg.olabel >= lang.first_word_disambig] = 0
    lg_noeps = remove_input_epsilons(lg)
    LGn = to_kaldifst(lg_noeps, work / "LG_noeps.fst")
    del lg_noeps
    kaldifst.connect(LGn)
    kaldifst.arcsort(LGn, sort_type="ilabel")
    H = to_kaldifst(ctc_topology(NUM_IDS), work / "H.fst")
    kaldifst.arcsort(H, sort_type="olabel")
    HLG = kaldifst.compose(H, LGn, connect=True)
    del LGn
    kaldifst.arcsort(HLG, sort_type="ilabel")
    HLG.write(str(out / "HLG.fst"))
    del HLG
    return _export(out / "HLG.fst", out / "HLG.img", expect_epsilons=False, num_words=lang.first_word_disambig)


def summary(stats: dict) -> str:
    lines = [f"tier {stats['tier']}: LM {stats['lm_counts']} n-grams, {stats['lang']['words']} words, "
             f"total {stats['total_seconds']:.1f} s, peak RSS {stats['peak_rss_mb']:.0f} MB "
             f"on {stats['machine']['hostname']} ({stats['machine']['cores']} cores)"]
    for name in ("G", "LG", "HLG", "TLG"):
        g = stats.get(name)
        if not g:
            continue
        eps = g["epsilon_arcs"] if "epsilon_arcs" in g else g["input_epsilon_arcs"] + g.get("disambig_arcs", 0)
        d = g["out_degree"]
        size = f", image {g['image_bytes'] / 2**20:.2f} MiB, fst {g['fst_bytes'] / 2**20:.2f} MiB" \
            if "image_bytes" in g else ""
        lines.append(f"  {name:4s} states {g['states']:>10,} arcs {g['arcs']:>11,} eps/#k {eps:>9,} "
                     f"out-degree min/median/p99/max {d['min']}/{d['median']:g}/{d['p99']:g}/{d['max']}{size}")
    lines.append("  stages: " + ", ".join(f"{k} {v['seconds']:.1f} s" for k, v in stats["stages"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.corpus.build", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", required=True, choices=sorted(TIERS))
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--arpa", default=None, help=f"ARPA LM (default: ../shared/data/{ARPA_NAME}, "
                    f"else .device/data/{ARPA_NAME})")
    ap.add_argument("--bpe-model", default=None, help="reuse this bpe.model instead of training one")
    ap.add_argument("--keep-work", action="store_true", help="keep G.fst, LG.fst, ... in OUT/work")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--graphs", default="hlg,tlg",
                    help="which graphs to build, comma-separated: hlg, tlg (default both)")
    args = ap.parse_args(argv)
    graphs = tuple(g.strip().upper() for g in args.graphs.split(",") if g.strip())
    build(args.tier, args.out, args.arpa, bpe_model=args.bpe_model, keep_work=args.keep_work, seed=args.seed,
          graphs=graphs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
