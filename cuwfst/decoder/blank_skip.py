"""Blank-frame skipping (`DecoderOptions.blank_skip`): offline decoding of fewer frames.

The rule. Frame t of a row (t < the row's length; padding is never looked at) is a blank
frame when log_probs[t, blank_id] >= log(blank_skip), tested on the log-probs as the
caller gave them after `normalize`'s log_softmax and before acoustic_scale and
blank_penalty, so the threshold is a probability of the model's. Each maximal run of
consecutive blank frames keeps its first frame and drops the others; every other frame is
kept. One frame per run keeps CTC's separation of repeated tokens: "a <b> <b> a" becomes
"a <b> a" (two a's), where dropping the whole run would leave "a a" (one a). A +inf blank
log-prob is not a blank frame (the frame stays, so the decoder's NaN/+inf check sees it);
dropped frames are never read otherwise.

Compaction happens where the array lives (numpy, torch on its device, or an array-API
namespace such as cupy's), vectorised: keep mask, a per-row cumulative sum, one batched
searchsorted that gives every slot of the compacted rows its original frame, and one
gather. Both decoders then read the same compacted float32 rows, so the GPU's results stay
equal to the CPU's. What comes to the host: the new lengths [B] and the frame map
[B, T'] (int64), which the hypotheses are remapped with.

The remap (`remap_hypothesis`): every frame index a Hypothesis carries refers to the
original frames. `timestamps` and lattice frames go through the frame map (the frame
after the last decoded one, where final arcs sit, maps to the row's length). `tokens`
gets one entry per original frame again: a dropped frame repeats the token of the kept
frame before it (the first frame of its blank run), as a CTC self-loop would, so the
tokens' CTC collapse is the decoded one. `word_times` ends move to the last frame of that
run when the word's last sounding frame is a kept blank-run start. `frames_decoded` says
how many frames the search consumed.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class SkippedFrames(NamedTuple):
    """What a compaction kept: frames[b, j] the original frame of row b's decoded frame j
    (int64 [B, T']; -1 past the row's decoded frames), lengths the rows' original lengths."""

    frames: np.ndarray
    lengths: np.ndarray


def blank_threshold(blank_skip: float) -> float:
    """log(blank_skip) rounded to float32, the comparison both decoders' inputs get (a
    Python float holding a float32 value compares the same in numpy, torch and cupy)."""
    return float(np.float32(math.log(blank_skip)))


def skip_blank_frames(kind: str, x, lens: np.ndarray, blank_id: int, blank_skip: float):
    """(compacted [B, T', V] of x's kind and device, new lengths int32 [B], SkippedFrames) of
    x [B, T, V] ('numpy', 'torch' or 'xp', as decoder/prepare.py names them) and its lengths
    under the rule above. T' = max(1, the longest new length) when T > 0."""
    lens = np.asarray(lens, np.int64)
    B, T = int(x.shape[0]), int(x.shape[1])
    if T == 0:
        return x, lens.astype(np.int32), SkippedFrames(np.zeros((B, 0), np.int64), lens)
    thr = blank_threshold(blank_skip)
    if kind == "torch":
        out, new_lens, frames = _skip_torch(x, lens, blank_id, thr)
    elif kind == "numpy":
        out, new_lens, frames = _skip_xp(np, x, lens, blank_id, thr, np.asarray)
    else:
        from .prepare import _namespace

        def host(a):
            return np.asarray(a.get() if hasattr(a, "get") else a)

        out, new_lens, frames = _skip_xp(_namespace(x), x, lens, blank_id, thr, host)
    return out, new_lens, SkippedFrames(frames, lens)


def _skip_xp(xp, x, lens: np.ndarray, blank_id: int, thr: float, host):
    """The rule in an array namespace (numpy, cupy, JAX...): no assignment into arrays."""
    B, T, V = (int(d) for d in x.shape)
    concat = getattr(xp, "concat", None) or xp.concatenate
    cumsum = getattr(xp, "cumulative_sum", None) or xp.cumsum
    col = x[:, :, blank_id].astype(xp.float32)
    valid = xp.arange(T)[None, :] < xp.asarray(lens)[:, None]
    blank = (col >= xp.float32(thr)) & (col < xp.float32(np.inf)) & valid
    after_blank = concat([xp.zeros((B, 1), dtype=getattr(xp, "bool", bool)), blank[:, :-1]], axis=1)
    keep = valid & ~(blank & after_blank)
    kept = cumsum(keep.astype(xp.int64), axis=1)  # kept[b, t]: kept frames in [0, t]
    new_lens = host(kept[:, -1]).astype(np.int64)
    Tn = max(1, int(new_lens.max(initial=0)))
    # slot j of row b holds the first frame where kept[b] reaches j + 1: a searchsorted over
    # all rows at once, each row lifted by b * (T + 1) so the flat sequence stays sorted
    lift = xp.arange(B, dtype=xp.int64)[:, None] * (T + 1)
    flat = xp.reshape(kept + lift, (-1,))
    want = xp.reshape(xp.arange(1, Tn + 1, dtype=xp.int64)[None, :] + lift, (-1,))
    pos = xp.searchsorted(flat, want)  # b * T + t, or past the row where slot j >= new length
    src = xp.minimum(pos, B * T - 1)
    out = xp.reshape(xp.take(xp.reshape(x, (B * T, V)), src, axis=0), (B, Tn, V))
    frame = host(xp.reshape(pos, (B, Tn))).astype(np.int64) - np.arange(B, dtype=np.int64)[:, None] * T
    frame_map = np.where(np.arange(Tn)[None, :] < new_lens[:, None], frame, -1)
    return out, new_lens.astype(np.int32), frame_map


def _skip_torch(x, lens: np.ndarray, blank_id: int, thr: float):
    """The rule in torch on x's device; only the lengths and the frame map come to the host."""
    import torch

    B, T, V = (int(d) for d in x.shape)
    dev = x.device
    col = x[:, :, blank_id].float()
    valid = torch.arange(T, device=dev)[None, :] < torch.from_numpy(lens).to(dev)[:, None]
    blank = (col >= thr) & (col < math.inf) & valid
    after_blank = torch.cat([torch.zeros((B, 1), dtype=torch.bool, device=dev), blank[:, :-1]], dim=1)
    keep = valid & ~(blank & after_blank)
    kept = torch.cumsum(keep.to(torch.int64), dim=1)
    new_lens = kept[:, -1].cpu().numpy().astype(np.int64)
    Tn = max(1, int(new_lens.max(initial=0)))
    lift = torch.arange(B, dtype=torch.int64, device=dev)[:, None] * (T + 1)
    flat = (kept + lift).reshape(-1)
    want = (torch.arange(1, Tn + 1, dtype=torch.int64, device=dev)[None, :] + lift).reshape(-1)
    pos = torch.searchsorted(flat, want)
    src = pos.clamp(max=B * T - 1)
    out = x.reshape(B * T, V).index_select(0, src).reshape(B, Tn, V)
    frame = pos.reshape(B, Tn).cpu().numpy().astype(np.int64) - np.arange(B, dtype=np.int64)[:, None] * T
    frame_map = np.where(np.arange(Tn)[None, :] < new_lens[:, None], frame, -1)
    return out, new_lens.astype(np.int32), frame_map


def remap_hypothesis(hyp, frames: np.ndarray, length: int, blank_id: int = 0) -> None:
    """Makes hyp's frame indices refer to the original frames (in place; see the module
    notes). frames: the original frame of each decoded frame (n of them, increasing, 0
    first when n > 0); length: the row's original length."""
    frames = np.asarray(frames, np.int64)
    n = int(frames.shape[0])
    # decoded frame j -> original; n (after the last: final arcs, epsilon arcs at the end)
    # -> length; n + 1 (a lattice's final state) -> length + 1
    ext = np.concatenate([frames, np.array([length, length + 1], np.int64)])
    decoded_tokens = hyp.tokens
    hyp.timestamps = ext[np.asarray(hyp.timestamps, np.int64)].tolist()
    if len(decoded_tokens) == n and n:
        owner = np.repeat(np.arange(n), np.diff(ext[: n + 1]))  # the kept frame each original frame follows
        hyp.tokens = np.asarray(decoded_tokens, np.int64)[owner].tolist()
    if hyp.word_times is not None:
        def last(e):  # a sounding kept frame carries its token over the dropped frames after it
            return int(ext[e + 1] - 1) if e < min(n, len(decoded_tokens)) and decoded_tokens[e] != blank_id \
                else int(ext[e])

        hyp.word_times = [(int(ext[s]), max(int(ext[s]), last(e))) for s, e in hyp.word_times]
    if hyp.lattice is not None:
        lat = hyp.lattice
        lat.frame = ext[lat.frame].astype(np.int32)
        lat.state_frame = ext[lat.state_frame].astype(np.int32)
    hyp.frames_decoded = n
