"""L, G and LG with kaldifst and kaldilm (no k2), in OpenFst labels: ilabel = token id + 1
(0 = epsilon), olabel = word id.

- L: icefall's `lexicon_to_fst_no_sil` shape. State 0 is the start, the only final state and
  the loop state; each spelling (with its `#k`) is a chain from 0 back to 0 whose first arc
  outputs the word; a `#0:#0` self-loop on state 0 lets G's backoff symbol through.
- G: kaldilm's arpa2fst with icefall's words.txt (read_symbol_table) and disambig `#0`, so
  backoff arcs read `#0` and output epsilon, `<s>`/`</s>` become start and final weights.
- LG = minimize_encoded(determinize_star(L o G)), Kaldi's (and Riva's mkgraph_ctc.sh) recipe,
  but determinized in the tropical semiring as k2.determinize does (Kaldi uses the log
  semiring). icefall does not minimize (k2 has no minimization); minimizing only merges
  equivalent states, so the language and the best-path scores are the same.
  The `#k` stay on LG's input: TLG passes them through its T, HLG strips them (see build).
"""

from __future__ import annotations

import os

import numpy as np

from .fstio import FstArrays, to_kaldifst
from .units import Lang


def build_L(lang: Lang) -> FstArrays:
    """L with disambiguation symbols (icefall's L_disambig), as arrays."""
    tok, wid = lang.token_ids, lang.word_ids
    src, dst, il, ol = [], [], [], []
    n = 1
    for word, spelling in lang.lexicon_disambig:
        s = 0
        for i, piece in enumerate(spelling):
            d = 0 if i == len(spelling) - 1 else n
            n += d != 0
            src.append(s), dst.append(d), il.append(tok[piece] + 1), ol.append(wid[word] if i == 0 else 0)
            s = d
    src.append(0), dst.append(0), il.append(tok["#0"] + 1), ol.append(wid["#0"])
    final = np.full(n, np.inf, np.float32)
    final[0] = 0.0
    return FstArrays.from_arcs(num_states=n, start=0, final=final, src=src, ilabel=il, olabel=ol,
                               weight=np.zeros(len(src), np.float32), nextstate=dst)


def build_G(arpa_path: str, words_txt: str, out_path: str) -> None:
    """G.fst from the ARPA with kaldilm (binary; the returned text copy is dropped at once)."""
    import kaldilm

    kaldilm.arpa2fst(input_arpa=os.fspath(arpa_path), output_fst=os.fspath(out_path),
                     disambig_symbol="#0", read_symbol_table=os.fspath(words_txt), max_arpa_warnings=0)


def build_LG(L: FstArrays, G_path: str, work_dir: str, times: dict | None = None):
    """LG = minimize_encoded(determinize_star(L o G)), ilabel-sorted; a kaldifst.StdVectorFst.

    `times` (optional) receives the seconds spent in compose, determinize and minimize."""
    import time

    import kaldifst

    t = time.perf_counter()
    Lf = to_kaldifst(L, os.path.join(work_dir, "L_disambig.fst"))
    kaldifst.arcsort(Lf, sort_type="olabel")
    G = kaldifst.StdVectorFst.read(os.fspath(G_path))
    kaldifst.arcsort(G, sort_type="ilabel")
    LG = kaldifst.compose(Lf, G, connect=True)
    del Lf, G
    t1 = time.perf_counter()
    if not isinstance(LG, kaldifst.StdVectorFst):
        LG = kaldifst.StdVectorFst(LG)
    stopped_early = kaldifst.determinize_star(LG, use_log=False)
    if stopped_early:
        raise RuntimeError("determinize_star stopped early: L o G is not determinizable "
                           "(a disambiguation symbol is missing)")
    t2 = time.perf_counter()
    kaldifst.minimize_encoded(LG)
    kaldifst.arcsort(LG, sort_type="ilabel")
    t3 = time.perf_counter()
    if times is not None:
        times.update(compose_LG=t1 - t, determinize_LG=t2 - t1, minimize_LG=t3 - t2)
    return LG
