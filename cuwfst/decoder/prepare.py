"""What a decode does to its log-probs before either backend sees them.

1. Adopt the array where it lives: numpy stays numpy, torch stays torch (on its device),
   other DLPack arrays become numpy on the CPU and torch on a GPU (or, without torch,
   are used through their own array namespace: cupy, JAX). bfloat16 and float64 become
   float32 there; float16 is kept (the native modules read it).
2. Shape and width: [T, V] becomes [1, T, V]; an empty batch, fewer columns than the
   graph's vocab_size, or more (unless allow_extra_columns) are errors: a width mismatch
   almost always means a model and a graph that do not belong together.
3. Log-probability check (check_log_probs): on up to 64 frames, in up to 8 runs of 8
   consecutive frames of one row whose starts are spread evenly over the rows' valid
   frames, each frame's logsumexp must be within 0.1 of 0. Probabilities,
   logits or pre-scaled scores otherwise decode to garbage with exit code 0. With
   normalize=True, log_softmax is applied instead of checking.
4. blank_skip (prepare_offline only, off by default): blank frames dropped, one kept per
   run (decoder/blank_skip.py), tested here, after log_softmax and before step 5, so the
   threshold is a probability.
5. acoustic_scale and blank_penalty: x * acoustic_scale, then blank_penalty subtracted
   from column blank_id. Both neutral by default, and then the input is not touched, so
   results stay bit-identical to k2's.

Nothing is modified in place: a transform makes a new array.
"""

from __future__ import annotations

import importlib

import numpy as np

from .inputs import check_lengths, is_torch

LSE_TOLERANCE = 0.1
SAMPLED_FRAMES = 64
SAMPLED_RUNS = 8  # the sampled frames come in runs of consecutive frames (_host_rows)
_KEEP = ("float32", "float16")
_WIDEN = ("float64", "bfloat16")


def _namespace(x):
    """The array namespace of a non-numpy, non-torch array (array API, else its module)."""
    if hasattr(x, "__array_namespace__"):
        return x.__array_namespace__()
    return importlib.import_module(type(x).__module__.split(".")[0])


def _adopt(x):
    """(kind, array): kind is 'numpy', 'torch', 'xp' or None (left to the backends' errors)."""
    if isinstance(x, np.ndarray):
        return "numpy", x
    if is_torch(x):
        return "torch", x.detach()  # decoding is outside autograd
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        if int(x.__dlpack_device__()[0]) == 1:  # kDLCPU
            try:
                return "numpy", np.from_dlpack(x)
            except (BufferError, TypeError, RuntimeError, ValueError):
                return "numpy", np.asarray(x)  # e.g. JAX bfloat16, which numpy's DLPack lacks
        try:
            import torch
        except ImportError:
            return "xp", x
        try:
            return "torch", torch.from_dlpack(x).detach()
        except (RuntimeError, AssertionError, BufferError, TypeError, ValueError):
            # a torch that cannot take it (a CPU-only build beside cupy, say): the array's own namespace
            return "xp", x
    return None, x


def _dtype_name(kind, x) -> str:
    if kind == "torch":
        return str(x.dtype).replace("torch.", "")
    return np.dtype(x.dtype).name if kind == "numpy" else str(x.dtype).rsplit(".", 1)[-1]


def _to_float32(kind, x):
    if kind == "torch":
        return x.float()
    return x.astype(np.float32)


def _host_rows(kind, x, b: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """x[b[i], t0[i]:t1[i], :] for every run i, stacked, as a float64 numpy array. On a GPU each
    run is one device-to-host copy of a contiguous block (a frame a copy where the tensor's rows
    are not packed), and no kernel runs: PyTorch's advanced indexing and cast kernels, loaded
    lazily by the first such call in a process, took ~90 MiB of device memory (H200, tiny HLG:
    98 MiB outside the decoder's counters at the first decode with them, 8 without;
    docs/benchmarks.md)."""
    if kind == "numpy":
        return np.concatenate([x[bi, a:c] for bi, a, c in zip(b, t0, t1)]).astype(np.float64)
    blocks = []
    for bi, a, c in zip(b.tolist(), t0.tolist(), t1.tolist()):
        run = x[bi, a:c]
        if kind == "torch":
            # a frame a copy keeps its [1, V] shape (x[bi, t] would be [V]: a column-sliced
            # tensor's rows then came back flattened, found on the H200)
            parts = [run] if run.is_contiguous() else [x[bi, t : t + 1] for t in range(a, c)]
            blocks += [p.cpu().numpy() for p in parts]
        else:
            blocks.append(np.asarray(run.get() if hasattr(run, "get") else run))
    return np.concatenate(blocks).astype(np.float64)


def _sample_runs(lens: np.ndarray, frames: int = SAMPLED_FRAMES, runs: int = SAMPLED_RUNS):
    """Up to `runs` runs of up to frames // runs consecutive valid frames of one row, their
    starts spread evenly over every row's valid frames: (row, first frame, end frame) arrays."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    per = max(frames // runs, 1)
    n = min(runs, max(-(-total // per), 2))  # (2: the first and the last valid frames)
    ends = np.cumsum(lens.astype(np.int64))
    # the last run ends at the last valid frame: it starts per frames before it, or at the start
    # of the last row that has frames if that row is shorter
    last = int(np.flatnonzero(lens)[-1])
    pos = np.unique(np.linspace(0, max(total - per, int(ends[last] - lens[last])), n).round().astype(np.int64))
    b = np.searchsorted(ends, pos, side="right")
    t0 = pos - (ends[b] - lens[b])
    return b, t0, np.minimum(t0 + per, lens[b].astype(np.int64))


def _not_log_probs(rows: np.ndarray, lse: np.ndarray, where: str, worst: int) -> str:
    finite = rows[np.isfinite(rows).all(axis=1)]
    sums = np.exp(finite).sum(axis=1) if finite.size else np.zeros(0)
    if finite.size and finite.min() >= 0 and finite.max() <= 1 and finite.size and (abs(finite.sum(axis=1) - 1) < 0.05).all():
        kind = ("they look like probabilities (every value in [0, 1], rows summing to 1): pass their log "
                "(np.log / torch.log)")
    elif (lse < -LSE_TOLERANCE).all() and finite.size and (sums < 1).all():
        kind = ("the rows' probabilities sum to less than 1: were columns cut off (a model wider than the "
                "graph?), or were the log-probs already scaled (use acoustic_scale instead)? Normalise them "
                "with log_softmax (normalize=True, CLI --log-softmax) if that is intended")
    else:
        kind = ("they look like logits (unnormalised scores): apply log_softmax first, or pass normalize=True "
                "(CLI --log-softmax)")
    return (f"log_probs are not log-probabilities: the logsumexp of row {where} is {lse[worst]:.4g} (it must be "
            f"within {LSE_TOLERANCE} of 0; {rows.shape[0]} sampled frames checked); {kind}. "
            "check_log_probs=False (CLI --no-log-prob-check) skips this check for deliberately unnormalised scores")


def _check_normalised(kind, x, lens: np.ndarray) -> None:
    b0, t0, t1 = _sample_runs(lens)
    if b0.size == 0:
        return
    rows = _host_rows(kind, x, b0, t0, t1)
    b = np.repeat(b0, t1 - t0)  # each sampled frame's row and frame, for the message
    t = np.concatenate([np.arange(a, c) for a, c in zip(t0, t1)])
    keep = ~(np.isnan(rows) | (rows == np.inf)).any(axis=1)  # NaN/+inf: the backends name them
    if not keep.any():
        return
    rows, b, t = rows[keep], b[keep], t[keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        m = rows.max(axis=1)
        lse = m + np.log(np.exp(rows - np.where(np.isfinite(m), m, 0)[:, None]).sum(axis=1))
        lse = np.where(np.isfinite(m), lse, m)
    worst = int(np.argmax(np.abs(lse)))
    if not abs(lse[worst]) <= LSE_TOLERANCE:
        raise ValueError(_not_log_probs(rows, lse, f"log_probs[{int(b[worst])}, {int(t[worst])}]", worst))


def _log_softmax(kind, x):
    if kind == "torch":
        import torch
        return torch.log_softmax(x.float(), dim=-1)
    if kind == "numpy":
        x = x.astype(np.float32, copy=False)
        m = x.max(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
    xp = _namespace(x)
    x = x.astype(np.float32)
    m = xp.max(x, axis=-1, keepdims=True)
    return x - m - xp.log(xp.sum(xp.exp(x - m), axis=-1, keepdims=True))


def _scale_and_penalise(kind, x, scale: float, penalty: float, blank_id: int):
    if _dtype_name(kind, x) != "float32":
        x = _to_float32(kind, x)  # transform in float32: float16 would round the penalty away
    if scale != 1.0:
        x = x * np.float32(scale)
    if penalty != 0.0:
        pen = np.zeros(x.shape[-1], np.float32)
        pen[blank_id] = penalty
        if kind == "torch":
            import torch
            pen = torch.from_numpy(pen).to(x.device)
        elif kind == "xp":
            pen = _namespace(x).asarray(pen)
        x = x - pen  # a new array: the caller's is never modified
    return x


def prepare_log_probs(log_probs, lengths, vocab_size: int, options):
    """Checked and transformed log-probs [B, T, V] of the caller's kind (see the module doc);
    no blank skipping (streams, snapshots)."""
    kind, x = _checked(log_probs, lengths, vocab_size, options)
    if kind is None:
        return x
    return _scaled(kind, x, options)


def prepare_offline(log_probs, lengths, vocab_size: int, options):
    """(log-probs, lengths, skipped) for an offline decode: prepare_log_probs plus step 4.
    Without blank_skip: (prepared, the caller's lengths, None). With it: the compacted
    log-probs, int32 lengths [B] of the kept frames and a blank_skip.SkippedFrames (the
    original frame of each kept one, the original lengths)."""
    kind, x = _checked(log_probs, lengths, vocab_size, options)
    if kind is None or options.blank_skip == 0:
        return (x if kind is None else _scaled(kind, x, options)), lengths, None
    from .blank_skip import skip_blank_frames

    B, T = int(x.shape[0]), int(x.shape[1])
    x, lengths, skipped = skip_blank_frames(kind, x, check_lengths(lengths, B, T), options.blank_id,
                                            options.blank_skip)
    return _scaled(kind, x, options), lengths, skipped


def _scaled(kind, x, options):
    if options.acoustic_scale != 1.0 or options.blank_penalty != 0.0:
        x = _scale_and_penalise(kind, x, options.acoustic_scale, options.blank_penalty, options.blank_id)
    return x


def _checked(log_probs, lengths, vocab_size: int, options):
    """(kind, array) after steps 1-3; (None, log_probs) for what is not an array."""
    kind, x = _adopt(log_probs)
    if kind is None:
        return None, log_probs  # not an array: the backends raise the TypeError
    name = _dtype_name(kind, x)
    if name in _WIDEN:
        x = _to_float32(kind, x)
    elif name not in _KEEP:
        raise TypeError(f"log_probs must be floating point (float32, float16, bfloat16 or float64), got {name}")
    shape = tuple(int(d) for d in x.shape)
    if len(shape) == 2:
        x = x[None]
        shape = (1,) + shape
    if len(shape) != 3:
        raise ValueError(f"log_probs must be [B, T, V] or [T, V], got shape {shape}")
    B, T, V = shape
    if B == 0:
        raise ValueError("log_probs holds an empty batch (B = 0): there is nothing to decode; "
                         "skip empty batches before calling decode")
    if V < vocab_size:
        raise ValueError(
            f"log_probs has {V} columns but the graph's vocab_size is {vocab_size}: every token id of the "
            "graph needs a column. The model and the graph do not belong together, or the graph was "
            "exported with a wrong --token-offset or --vocab-size")
    if V > vocab_size and not options.allow_extra_columns:
        raise ValueError(
            f"log_probs has {V} columns but the graph reads only {vocab_size} (its vocab_size): the model and "
            "the graph may not belong together (export the graph with the model's tokens.txt, --tokens, so "
            "vocab_size is the model's width; an OpenFst graph with a wrong --token-offset also does this). "
            "If the model really has outputs the graph never reads, pass allow_extra_columns=True "
            "(CLI --allow-extra-columns)")
    if (options.blank_penalty != 0.0 or options.blank_skip != 0) and options.blank_id >= V:
        raise ValueError(f"blank_id {options.blank_id} is not a column of log_probs (V = {V})")
    if options.normalize:
        x = _log_softmax(kind, x)
    elif options.check_log_probs:
        _check_normalised(kind, x, check_lengths(lengths, B, T))
    return kind, x
