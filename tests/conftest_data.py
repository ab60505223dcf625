"""Small datasets on the shipped tiny graph, in every input format the CLI reads."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

TINY = Path(__file__).resolve().parent.parent / "cuwfst" / "data" / "tiny"
DEMO = TINY.parent / "demo" / "tiny_utts.npz"


def demo_arrays():
    """(log_probs float16 [8, T, 501], lengths, reference texts) of the shipped demo utterances."""
    with np.load(DEMO) as z:
        return z["log_probs_fp16"], z["lengths"].astype(np.int32), [str(t) for t in z["ref_text"]]


def make_dataset(root: Path, *, kaldi: bool = True) -> dict:
    """A lang dir, graphs and the demo utterances as .npz, .npy dir, Kaldi scp/ark and refs."""
    root.mkdir(parents=True, exist_ok=True)
    lang = root / "lang"
    lang.mkdir(exist_ok=True)
    for name in ("HLG.fst", "TLG.fst", "tokens.txt", "words.txt"):
        shutil.copy(TINY / name, lang / name)
    shutil.copy(TINY / "HLG.img", root / "HLG.img")
    lp, lens, refs = demo_arrays()
    ids = [f"utt{i}" for i in range(len(lens))]
    np.savez(root / "utts.npz", log_probs=lp, lengths=lens, ids=np.array(ids))
    (root / "npy").mkdir(exist_ok=True)
    for i, u in enumerate(ids):
        np.save(root / "npy" / f"{u}.npy", lp[i, : lens[i]])
    (root / "refs.txt").write_text("".join(f"{u} {t}\n" for u, t in zip(ids, refs)))
    out = {"root": root, "lang": lang, "ids": ids, "lp": lp, "lens": lens, "refs": refs}
    if kaldi:
        import kaldiio

        with kaldiio.WriteHelper(f"ark,scp:{root / 'utts.ark'},{root / 'utts.scp'}") as w:
            for i, u in enumerate(ids):
                w(u, lp[i, : lens[i]].astype(np.float32))
    return out
