"""Exporters from k2 (Fsa / HLG.pt), OpenFst (kaldifst) and k2's text format to `Graph`."""

from __future__ import annotations

import os
import struct

import numpy as np

from .._deps import require


def parse_k2_text(cls, text: str, *, epsilon_id: int | None, vocab_size: int | None):
    """`src dst ilabel olabel score` per arc (grouped by src), the last line the final state."""
    lines = [ln.split() for ln in text.strip().splitlines() if ln.strip()]
    if not lines or len(lines[-1]) != 1:
        raise ValueError("k2 text: the last line must hold the final state alone")
    final_state = int(lines[-1][0])
    arcs = lines[:-1]
    for i, f in enumerate(arcs):
        if len(f) != 5:
            raise ValueError(f"k2 text line {i + 1}: expected 'src dst ilabel olabel score', got {' '.join(f)!r}")
    num_states = final_state + 1
    if arcs:
        src = np.array([int(f[0]) for f in arcs], np.int64)
        dst = np.array([int(f[1]) for f in arcs], np.int64)
        il = np.array([int(f[2]) for f in arcs], np.int64)
        ol = np.array([int(f[3]) for f in arcs], np.int64)
        w = np.array([float(f[4]) for f in arcs], np.float32)
        num_states = max(num_states, int(src.max()) + 1, int(dst.max()) + 1)
        if num_states != final_state + 1:
            raise ValueError(f"k2 text: final state {final_state} must be the last state")
    else:
        src = dst = il = ol = np.zeros(0, np.int64)
        w = np.zeros(0, np.float32)
    eps = (il == epsilon_id) if epsilon_id is not None else None
    words = (np.arange(len(ol) + 1), ol)
    return cls.from_arcs(num_states=num_states, start_state=0, src=src, dest=dst, ilabel=il,
                         weight=w, words=words, vocab_size=vocab_size, epsilon=eps)


def from_k2(cls, fsa_or_path, *, vocab_size: int | None):
    """A k2 Fsa or an icefall HLG.pt (a dict saved from `Fsa.as_dict()`)."""
    if isinstance(fsa_or_path, (str, os.PathLike)):
        from .sources import sniff, wrong_kind
        if not os.path.exists(fsa_or_path):
            raise FileNotFoundError(f"k2 graph not found: {fsa_or_path}")
        if sniff(fsa_or_path) != "torch":
            raise wrong_kind(fsa_or_path, "a torch file holding a k2 Fsa (an icefall HLG.pt)")
        torch = require("torch", "reading HLG.pt", extra="torch")
        try:
            d = torch.load(os.fspath(fsa_or_path), map_location="cpu", weights_only=False)
        except TypeError:  # torch < 1.13 has no weights_only
            d = torch.load(os.fspath(fsa_or_path), map_location="cpu")
    else:
        d = fsa_or_path.as_dict() if hasattr(fsa_or_path, "as_dict") else fsa_or_path
    if not isinstance(d, dict) or "arcs" not in d:
        raise ValueError("expected a k2 Fsa or a dict from Fsa.as_dict() (an icefall HLG.pt)")
    arcs = np.asarray(d["arcs"].cpu().numpy() if hasattr(d["arcs"], "cpu") else d["arcs"])
    if arcs.ndim != 2 or arcs.shape[1] != 4:
        raise ValueError(f"k2 arcs must be [num_arcs, 4] (an Fsa, not an FsaVec); got {arcs.shape}")
    arcs = np.ascontiguousarray(arcs, dtype=np.int32)
    src, dst, il = arcs[:, 0].astype(np.int64), arcs[:, 1].astype(np.int64), arcs[:, 2].astype(np.int64)
    w = arcs[:, 3].copy().view(np.float32)
    aux = d.get("aux_labels")
    if aux is None:
        words = None
    elif hasattr(aux, "shape") and hasattr(aux, "values") and callable(getattr(aux.shape, "row_splits", None)):
        words = (aux.shape.row_splits(1).cpu().numpy(), aux.values.cpu().numpy())  # k2.RaggedTensor
    else:
        aux = np.asarray(aux.cpu().numpy() if hasattr(aux, "cpu") else aux).astype(np.int64)
        words = (np.arange(aux.shape[0] + 1), aux)
    num_states = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1 if arcs.shape[0] else 1
    return cls.from_arcs(num_states=num_states, start_state=0, src=src, dest=dst, ilabel=il,
                         weight=w, words=words, vocab_size=vocab_size)


_FST_MAGIC = 2125659606


def _read_vector_fst_binary(path: str):
    """Fast reader for OpenFst's binary VectorFst<StdArc> (what Kaldi/WeNet/sherpa write).

    Returns (start, finals f32[N], row_splits, ilabel, olabel, weight, nextstate) or None when
    the file is some other FST type (then kaldifst reads it)."""
    with open(path, "rb") as f:
        data = f.read()

    def rd_str(p):
        (n,) = struct.unpack_from("<i", data, p)
        return data[p + 4 : p + 4 + n].decode("latin1"), p + 4 + n

    if len(data) < 4 or struct.unpack_from("<i", data, 0)[0] != _FST_MAGIC:
        return None
    fst_type, p = rd_str(4)
    arc_type, p = rd_str(p)
    if fst_type != "vector" or arc_type != "standard":
        return None
    version, flags = struct.unpack_from("<ii", data, p)
    p += 8
    if flags & 3:  # symbol tables inside the file: let kaldifst deal with them
        return None
    _props, start, num_states, num_arcs = struct.unpack_from("<Qqqq", data, p)
    p += 32
    if version < 2:
        return None
    finals = np.empty(num_states, np.float32)
    counts = np.empty(num_states, np.int64)
    arc_pos = np.empty(num_states, np.int64)
    hdr = struct.Struct("<fq")  # final weight, number of arcs
    for s in range(num_states):
        fw, narcs = hdr.unpack_from(data, p)
        finals[s] = fw
        counts[s] = narcs
        arc_pos[s] = p + hdr.size
        p += hdr.size + 16 * narcs
    if p != len(data):
        raise ValueError(f"{path}: OpenFst file size does not match its arcs")
    total = int(counts.sum())
    # every state's block is 12 + 16*narcs bytes, so all arc records share one alignment mod 4
    offs = np.repeat(arc_pos, counts) + (np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)) * 16
    r = int(offs[0] % 4) if total else 0
    words = np.frombuffer(data, "<i4", offset=r, count=(len(data) - r) // 4)
    q = (offs - r) // 4
    arcs = (words[q], words[q + 1], words[q + 2].view("<f4"), words[q + 3])
    row_splits = np.concatenate([[0], np.cumsum(counts)])
    return (start, finals, row_splits) + arcs


def _read_with_kaldifst(fst):
    kf = require("kaldifst", "reading OpenFst graphs", extra="openfst")
    if isinstance(fst, (str, os.PathLike)):
        path = os.fspath(fst)
        fst = kf.StdVectorFst.read(path)
        if fst is None:  # kaldifst returns None for what it cannot read
            raise ValueError(f"kaldifst could not read {path} as a StdVectorFst (a const or compact FST, "
                             "or a non-tropical arc type?): convert it with `fstconvert --fst_type=vector`")
    n = fst.num_states
    finals = np.empty(n, np.float32)
    il, ol, w, ns, counts = [], [], [], [], np.zeros(n, np.int64)
    for s in range(n):
        finals[s] = fst.final(s).value
        c = 0
        for arc in kf.ArcIterator(fst, s):
            il.append(arc.ilabel)
            ol.append(arc.olabel)
            w.append(arc.weight.value)
            ns.append(arc.nextstate)
            c += 1
        counts[s] = c
    row_splits = np.concatenate([[0], np.cumsum(counts)])
    return (fst.start, finals, row_splits, np.array(il, np.int64), np.array(ol, np.int64),
            np.array(w, np.float32), np.array(ns, np.int64))


def from_openfst(cls, fst_or_path, *, token_offset: int, vocab_size: int | None):
    """OpenFst TLG/HLG: ilabel = token + token_offset (0 = epsilon), olabel = word id,
    tropical costs (score = -cost), final weights become ilabel -1 arcs to a new last state."""
    parsed = None
    if isinstance(fst_or_path, (str, os.PathLike)):
        if not os.path.exists(fst_or_path):
            raise FileNotFoundError(f"OpenFst graph not found: {fst_or_path}")
        from .sources import sniff, wrong_kind
        if sniff(fst_or_path) != "openfst":
            raise wrong_kind(fst_or_path, "an OpenFst binary graph (.fst)")
        parsed = _read_vector_fst_binary(os.fspath(fst_or_path))
    if parsed is None:
        parsed = _read_with_kaldifst(fst_or_path)
    start, finals, row_splits, il, ol, cost, ns = parsed
    n = finals.shape[0]
    if start < 0 or n == 0:
        raise ValueError("the OpenFst graph has no start state")
    il, ol, ns = il.astype(np.int64), ol.astype(np.int64), ns.astype(np.int64)
    counts = np.diff(row_splits)
    src = np.repeat(np.arange(n), counts)
    has_final = np.isfinite(finals)
    # final weights -> one arc per final state with ilabel -1 into a new super-final state
    fsrc = np.flatnonzero(has_final)
    super_final = n
    all_src = np.concatenate([src, fsrc])
    order = np.argsort(all_src, kind="stable")  # appends each state's final arc after its arcs
    eps = np.concatenate([il == 0, np.zeros(fsrc.size, bool)])[order]
    tok = np.concatenate([il - token_offset, np.full(fsrc.size, -1)])[order]
    tok[eps] = -2
    if ((il != 0) & (il < token_offset)).any():
        bad = int(il[(il != 0) & (il < token_offset)][0])
        raise ValueError(f"input label {bad} is below token_offset={token_offset} and not 0 (epsilon): "
                         "with ilabel = token + offset, check --token-offset (Kaldi/WeNet/sherpa TLGs use 1)")
    dest = np.concatenate([ns, np.full(fsrc.size, super_final)])[order]
    weight = np.concatenate([-cost, -finals[fsrc]]).astype(np.float32)[order]
    words = np.concatenate([ol, np.zeros(fsrc.size, np.int64)])[order]
    return cls.from_arcs(num_states=n + 1, start_state=int(start), src=all_src[order], dest=dest,
                         ilabel=tok, weight=weight, words=(np.arange(words.size + 1), words),
                         vocab_size=vocab_size, epsilon=eps if eps.any() else None)
