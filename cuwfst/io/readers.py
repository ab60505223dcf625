"""Utterances in: .npz archives, directories or globs of per-utterance .npy/.pt files,
Kaldi scp/ark matrices. Every reader streams: one utterance is in memory at a time (an
.npz member is read row by row from its zip stream), so a dataset's size never matters.
"""

from __future__ import annotations

import glob
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

LOG_PROB_KEYS = ("log_probs", "log_probs_fp16", "log_probs_fp32", "logprobs", "logp", "log_posteriors",
                 "nnet_output", "ctc_output", "emissions")
LENGTH_KEYS = ("lengths", "lens", "log_probs_lengths", "num_frames", "frames")
ID_KEYS = ("ids", "utt_ids", "utt_id", "keys", "names", "utterance_ids", "cut_ids")


@dataclass
class Utterance:
    """One utterance's log-probs [T, V] (float32 or float16) and its id."""

    id: str
    log_probs: np.ndarray


class UtteranceSource:
    """An iterable of Utterances with a count when it is known (for the progress bar)."""

    def __init__(self, parts: list):
        self.parts = parts  # (count | None, iterator factory)

    def __len__(self) -> int:
        return sum(c for c, _ in self.parts)

    @property
    def count(self) -> int | None:
        return None if any(c is None for c, _ in self.parts) else sum(c for c, _ in self.parts)

    def __iter__(self) -> Iterator[Utterance]:
        for _, make in self.parts:
            yield from make()


def _as_2d(x: np.ndarray, where: str) -> np.ndarray:
    if x.ndim == 3 and x.shape[0] == 1:
        x = x[0]
    if x.ndim != 2:
        raise ValueError(f"{where}: expected log-probs [T, V], got shape {tuple(x.shape)}")
    if x.dtype.name in ("float64", "bfloat16"):
        x = x.astype(np.float32)
    elif x.dtype.name not in ("float32", "float16"):
        raise ValueError(f"{where}: log-probs must be floating point, got {x.dtype.name}")
    return x


# ---------------------------------------------------------------------- .npz
def _npz_member_rows(path: str, member: str):
    """(shape, dtype, row iterator) of an .npy member of a zip, read from its stream."""
    z = zipfile.ZipFile(path)
    f = z.open(member)
    version = np.lib.format.read_magic(f)
    read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}.get(version)
    if read_header is None:  # a newer .npy version: numpy reads it whole
        f.close()
        z.close()
        with np.load(path, allow_pickle=False) as data:
            arr = data[member[:-4]]
        return arr.shape, arr.dtype, iter(arr)
    shape, fortran, dtype = read_header(f)
    if fortran or dtype.hasobject:
        f.close()
        z.close()
        with np.load(path, allow_pickle=False) as data:
            arr = data[member[:-4]]
        return shape, dtype, iter(arr)

    def rows():
        try:
            n = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
            for _ in range(shape[0]):
                yield np.frombuffer(f.read(n), dtype).reshape(shape[1:])
        finally:
            f.close()
            z.close()

    return shape, dtype, rows()


def read_npz(path: str, key: str | None = None) -> tuple[int, callable]:
    """An .npz of padded log-probs [B, T, V] (any key naming them; `lengths` and ids when
    present, else every frame counts and ids are `<stem>-<row>`)."""
    with np.load(path, allow_pickle=False) as data:
        names = list(data.files)
        if key is not None:
            if key not in names:
                raise ValueError(f"{path} has no array {key!r}; its arrays: {', '.join(names)}")
            lp_key = key
        else:
            found = [k for k in LOG_PROB_KEYS if k in names]
            if not found:
                floats = [k for k in names if data[k].dtype.kind == "f" and data[k].ndim in (2, 3)]
                found = floats if len(floats) == 1 else []
            if not found:
                raise ValueError(f"{path}: no log-probs array found among {', '.join(names) or 'no arrays'}; "
                                 f"name it one of {', '.join(LOG_PROB_KEYS)}, or pass --key NAME")
            lp_key = found[0]
        lens = next((np.asarray(data[k]).astype(np.int64) for k in LENGTH_KEYS if k in names), None)
        ids = next((np.asarray(data[k]) for k in ID_KEYS if k in names), None)
    shape, _, _ = _npz_member_rows(path, lp_key + ".npy")
    if len(shape) == 2:
        shape = (1,) + tuple(shape)
    B, T = shape[0], shape[1]
    if lens is not None and (lens.shape != (B,) or (lens < 0).any() or (lens > T).any()):
        raise ValueError(f"{path}: lengths must be {B} integers in [0, {T}], got shape {lens.shape}")
    if ids is not None and ids.shape != (B,):
        raise ValueError(f"{path}: ids must have one entry per row ({B}), got shape {ids.shape}")
    stem = Path(path).name.rsplit(".", 1)[0]
    id_list = ([x.decode() if isinstance(x, bytes) else str(x) for x in ids.tolist()] if ids is not None
               else [f"{stem}-{b}" for b in range(B)])

    def utterances():
        _, _, rows = _npz_member_rows(path, lp_key + ".npy")
        for b, row in enumerate(rows):
            if row.ndim == 1:  # a 2-D member is one utterance [T, V]: the "rows" are frames
                row = np.stack([row] + [next(rows) for _ in range(T - 1)])
            n = int(lens[b]) if lens is not None else row.shape[0]
            yield Utterance(id_list[b], _as_2d(row[:n], f"{path} row {b}"))

    return B, utterances


# ---------------------------------------------------------------------- .npy / .pt files
def _read_pt(path: str) -> np.ndarray:
    from .._deps import require

    torch = require("torch", f"reading {path} (a .pt file)", extra="torch")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13
        obj = torch.load(path, map_location="cpu")
    if isinstance(obj, dict):
        key = next((k for k in LOG_PROB_KEYS if k in obj), None)
        if key is None:
            raise ValueError(f"{path}: a dict without a log-probs entry ({', '.join(map(str, obj))}); "
                             f"name it one of {', '.join(LOG_PROB_KEYS)}")
        obj = obj[key]
    if not hasattr(obj, "detach"):
        raise ValueError(f"{path}: expected a tensor of log-probs [T, V], got {type(obj).__name__}")
    t = obj.detach().cpu()
    if t.dtype == torch.bfloat16 or t.dtype == torch.float64:
        t = t.float()  # numpy has no bfloat16
    return t.numpy()


def read_file(path: str) -> Utterance:
    """One .npy or .pt file: one utterance [T, V] (or [1, T, V]); its id is the file stem."""
    p = Path(path)
    if p.suffix == ".npy":
        x = np.load(p, mmap_mode="r", allow_pickle=False)
    elif p.suffix == ".pt":
        x = _read_pt(str(p))
    else:
        raise ValueError(f"{path}: per-utterance files must be .npy or .pt")
    return Utterance(p.stem, _as_2d(np.asarray(x), str(p)))


def _files(paths: list[str]) -> tuple[int, callable]:
    return len(paths), lambda: (read_file(p) for p in paths)


# ---------------------------------------------------------------------- Kaldi
def kaldi_reader(rspecifier: str):
    """(key, matrix) pairs of a Kaldi rspecifier, with kaldi_native_io or else kaldiio."""
    try:
        import kaldi_native_io

        def it():
            with kaldi_native_io.SequentialFloatMatrixReader(rspecifier) as r:
                for key, value in r:
                    # a copy: the array views the reader's matrix, which the next read reuses
                    yield key, np.array(value, copy=True)
        return it()
    except ImportError:
        pass
    try:
        import kaldiio
    except ImportError:
        raise ImportError("reading Kaldi scp/ark needs kaldi_native_io or kaldiio: "
                          "pip install 'cuwfst[kaldi]' (or pip install kaldiio)") from None

    def it():
        with kaldiio.ReadHelper(rspecifier) as r:
            for key, value in r:
                yield key, np.asarray(value)
    return it()


class kaldi_writer:
    """`with kaldi_writer("ark,scp:a.ark,a.scp") as write: write(key, matrix)`, with
    kaldi_native_io or else kaldiio (for tests and examples)."""

    def __init__(self, wspecifier: str):
        self.wspecifier = wspecifier

    def __enter__(self):
        try:
            import kaldi_native_io

            self._w = kaldi_native_io.FloatMatrixWriter(self.wspecifier)
            return lambda k, m: self._w.write(k, np.ascontiguousarray(m, np.float32))
        except ImportError:
            pass
        try:
            import kaldiio
        except ImportError:
            raise ImportError("writing Kaldi ark needs kaldi_native_io or kaldiio: pip install 'cuwfst[kaldi]'") from None
        self._w = kaldiio.WriteHelper(self.wspecifier)
        return lambda k, m: self._w(k, np.ascontiguousarray(m, np.float32))

    def __exit__(self, *exc):
        self._w.close()


def _kaldi(spec: str) -> tuple[int | None, callable]:
    if ":" not in spec.split("/")[0]:  # a plain path: the type from its suffix
        spec = f"{'scp' if spec.endswith('.scp') else 'ark'}:{spec}"
    kind, _, path = spec.partition(":")
    if not Path(path).is_file():
        raise FileNotFoundError(f"Kaldi {kind.split(',')[0]} file not found: {path}")
    count = None
    if kind.split(",")[0] == "scp":
        with open(path, encoding="utf-8") as f:
            count = sum(1 for line in f if line.strip())
    return count, lambda: (Utterance(k, _as_2d(v, f"{spec} [{k}]")) for k, v in kaldi_reader(spec))


# ---------------------------------------------------------------------- dispatch
def open_inputs(inputs: list[str], *, key: str | None = None) -> UtteranceSource:
    """Any mix of: .npz files, directories or globs of .npy/.pt files, Kaldi `scp:`/`ark:`
    specifiers or .scp/.ark paths, single .npy/.pt files."""
    if not inputs:
        raise ValueError("no input given: pass .npz files, a directory of .npy/.pt files, or Kaldi scp/ark")
    parts = []
    for spec in inputs:
        spec = os.fspath(spec)
        head = spec.split(":", 1)[0]
        if ":" in spec and head.split(",")[0] in ("ark", "scp") or spec.endswith((".scp", ".ark")):
            parts.append(_kaldi(spec))
        elif any(c in spec for c in "*?[") and not os.path.exists(spec):
            files = sorted(p for p in glob.glob(spec) if p.endswith((".npy", ".pt")))
            if not files:
                raise FileNotFoundError(f"no .npy or .pt file matches {spec}")
            parts.append(_files(files))
        elif os.path.isdir(spec):
            files = sorted(str(p) for p in Path(spec).iterdir() if p.suffix in (".npy", ".pt"))
            if not files:
                raise FileNotFoundError(f"{spec} holds no .npy or .pt file")
            parts.append(_files(files))
        elif not os.path.exists(spec):
            raise FileNotFoundError(f"input not found: {spec}")
        elif spec.endswith(".npz") or zipfile.is_zipfile(spec) and not spec.endswith(".pt"):
            parts.append(read_npz(spec, key))
        elif spec.endswith((".npy", ".pt")):
            parts.append(_files([spec]))
        else:
            from ..graph.sources import describe
            raise ValueError(f"{spec} is {describe(spec)}, not an input cuwfst reads: give .npz files, "
                             "a directory or glob of .npy/.pt files, or Kaldi scp:/ark: matrices")
    return UtteranceSource(parts)
