"""A small conformer CTC model over the corpus' 501 BPE outputs (blank 0) at 40 ms frames.

80-dim fbank at 10 ms -> two stride-2 convolutions (4x subsampling: T' = ceil(T / 4)) ->
conformer blocks (macaron feed-forwards, self-attention with rotary positions, a depthwise
convolution module) -> a linear layer to 501 log-probs.

Weights are saved as an .npz (numpy arrays plus the config as JSON), optionally int8 with one
scale per output row, so a checkpoint can be read, and shipped small, without pickles.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .weights import store as _store

NUM_OUTPUTS = 501  # must equal the graph's vocab_size (<blk> + 500 BPE pieces)


@dataclass(frozen=True)
class ModelConfig:
    d_model: int = 144
    heads: int = 3
    ff: int = 576
    layers: int = 12
    conv_kernel: int = 15
    sub_channels: int = 64
    dropout: float = 0.1
    num_mel_bins: int = 80
    num_outputs: int = NUM_OUTPUTS


PRESETS = {
    "tiny": ModelConfig(d_model=32, heads=2, ff=64, layers=2, conv_kernel=7, sub_channels=8, dropout=0.0),
    "cpu": ModelConfig(d_model=64, heads=2, ff=256, layers=4, conv_kernel=15, sub_channels=32),
    # the GPU run's model: 12 layers (base) sat in CTC's all-blank plateau for all of a
    # 1,429-step, 203 s run on the H200 (loss 5.4 per token, greedy WER 98%); half the depth
    # trains about twice the steps in the same time
    "mid": ModelConfig(d_model=144, heads=4, ff=576, layers=6, conv_kernel=15, sub_channels=64),
    "base": ModelConfig(),
}


def subsampled_lengths(frames):
    """Output frames of the 4x subsampling for input frames (two k=3, s=2, p=1 convolutions)."""
    if isinstance(frames, torch.Tensor):
        return ((frames + 1) // 2 + 1) // 2
    return ((np.asarray(frames) + 1) // 2 + 1) // 2


def _rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = x[..., ::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)


class FeedForward(nn.Module):
    def __init__(self, d: int, ff: int, dropout: float):
        super().__init__()
        self.norm, self.w1, self.w2, self.drop = nn.LayerNorm(d), nn.Linear(d, ff), nn.Linear(ff, d), nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.w2(self.drop(F.silu(self.w1(self.norm(x))))))


class SelfAttention(nn.Module):
    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        if d % heads or (d // heads) % 2:
            raise ValueError(f"d_model {d} must split into {heads} heads of an even width")
        self.h, self.dh = heads, d // heads
        self.norm, self.qkv, self.out = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.p = dropout
        self.drop = nn.Dropout(dropout)

    def forward(self, x, key_mask, cos, sin):
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm(x)).view(B, T, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        q, k = _rotary(q, cos, sin), _rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask, dropout_p=self.p if self.training else 0.0)
        return self.drop(self.out(y.transpose(1, 2).reshape(B, T, D)))


class ConvModule(nn.Module):
    def __init__(self, d: int, kernel: int, dropout: float):
        super().__init__()
        self.norm, self.pw1 = nn.LayerNorm(d), nn.Linear(d, 2 * d)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.norm2, self.pw2, self.drop = nn.LayerNorm(d), nn.Linear(d, d), nn.Dropout(dropout)

    def forward(self, x, pad):
        y = F.glu(self.pw1(self.norm(x)), dim=-1).masked_fill(pad[..., None], 0.0)  # no leaks from padding
        y = self.dw(y.transpose(1, 2)).transpose(1, 2)
        return self.drop(self.pw2(F.silu(self.norm2(y))))


class Block(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.ff1, self.ff2 = FeedForward(c.d_model, c.ff, c.dropout), FeedForward(c.d_model, c.ff, c.dropout)
        self.att, self.conv = SelfAttention(c.d_model, c.heads, c.dropout), ConvModule(c.d_model, c.conv_kernel, c.dropout)
        self.norm = nn.LayerNorm(c.d_model)

    def forward(self, x, pad, key_mask, cos, sin):
        x = x + 0.5 * self.ff1(x)
        x = x + self.att(x, key_mask, cos, sin)
        x = x + self.conv(x, pad)
        x = x + 0.5 * self.ff2(x)
        return self.norm(x)


class ConformerCTC(nn.Module):
    def __init__(self, c: ModelConfig = ModelConfig()):
        super().__init__()
        self.config = c
        ch = c.sub_channels
        self.sub = nn.Sequential(nn.Conv2d(1, ch, 3, 2, 1), nn.SiLU(), nn.Conv2d(ch, ch, 3, 2, 1), nn.SiLU())
        freq = ((c.num_mel_bins + 1) // 2 + 1) // 2
        self.sub_out = nn.Linear(ch * freq, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.head = nn.Linear(c.d_model, c.num_outputs)
        # feature normalization (global mean and 1/std over the training set)
        self.register_buffer("feat_mean", torch.zeros(c.num_mel_bins))
        self.register_buffer("feat_istd", torch.ones(c.num_mel_bins))

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor):
        """feats [B, T, 80], lengths [B] -> (log-probs [B, T', 501] float32, lengths' [B])."""
        x = (feats.float() - self.feat_mean) * self.feat_istd
        # padded frames must read as the convolutions' own zero padding, so that a row's
        # output does not depend on what it is batched with
        x = x.masked_fill(torch.arange(x.shape[1], device=x.device)[None, :, None] >= lengths[:, None, None], 0.0)
        x = F.silu(self.sub[0](x[:, None]))  # [B, C, T/2, F/2]
        half = (lengths + 1) // 2
        x = x.masked_fill(torch.arange(x.shape[2], device=x.device)[None, None, :, None] >= half[:, None, None, None], 0.0)
        x = F.silu(self.sub[2](x))  # [B, C, T', F']
        B, C, T, Fq = x.shape
        x = self.sub_out(x.permute(0, 2, 1, 3).reshape(B, T, C * Fq))
        out_len = torch.clamp(subsampled_lengths(lengths), max=T)
        pad = torch.arange(T, device=x.device)[None, :] >= out_len[:, None]  # [B, T'] True = padding
        key_mask = ~pad[:, None, None, :]  # attend to real frames only
        dh = self.config.d_model // self.config.heads
        inv = 1.0 / (10000 ** (torch.arange(0, dh, 2, device=x.device, dtype=torch.float32) / dh))
        ang = torch.arange(T, device=x.device, dtype=torch.float32)[:, None] * inv[None]
        cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
        for blk in self.blocks:
            x = blk(x, pad, key_mask, cos, sin)
        return F.log_softmax(self.head(x).float(), dim=-1), out_len

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


# ------------------------------------------------------------------ checkpoints
def save_npz(model: ConformerCTC, path, *, int8: bool = False, meta: dict | None = None) -> int:
    """Weights as numpy arrays, float16 (the model trains in bfloat16 autocast, so float16
    storage loses nothing that matters, and halves the file); int8=True stores every 2-D+
    weight as int8 with a float32 scale per output row (max |w| / 127). The feature
    normalization stays float32. Returns the file size."""
    arrays = {"__config__": np.array(json.dumps(asdict(model.config))),
              "__meta__": np.array(json.dumps(meta or {}))}
    for name, t in model.state_dict().items():
        _store(arrays, name, t.detach().float().cpu().numpy(), int8)
    np.savez_compressed(path, **arrays)
    return os.path.getsize(path)


def load_npz(path, device: str = "cpu") -> tuple[ConformerCTC, dict]:
    """(model in eval mode, meta) from save_npz's file (float or int8)."""
    with np.load(path) as z:
        config = ModelConfig(**json.loads(str(z["__config__"])))
        meta = json.loads(str(z["__meta__"]))
        state = {}
        for key in z.files:
            if key.startswith("__") or key.endswith("::s"):
                continue
            if key.endswith("::q"):
                name = key[:-3]
                q = z[key].astype(np.float32)
                s = z[name + "::s"]
                state[name] = torch.from_numpy((q.reshape(q.shape[0], -1) * s[:, None]).reshape(q.shape))
            else:
                state[key] = torch.from_numpy(z[key].astype(np.float32))
    model = ConformerCTC(config)
    model.load_state_dict(state)
    return model.to(device).eval(), meta


@torch.no_grad()
def log_probs_of(model: ConformerCTC, feats: list[np.ndarray], device: str, batch_frames: int = 200_000,
                 amp: bool = True) -> list[np.ndarray]:
    """Log-probs [T'_i, 501] float32 of each utterance's fbank [T_i, 80], batched by length."""
    model.eval()
    order = np.argsort([-f.shape[0] for f in feats], kind="stable")
    out: list[np.ndarray | None] = [None] * len(feats)
    i = 0
    use_amp = amp and device.startswith("cuda")
    while i < len(order):
        T = feats[order[i]].shape[0]
        n = max(1, batch_frames // max(T, 1))
        idx = order[i : i + n]
        x = torch.zeros(len(idx), T, feats[idx[0]].shape[1])
        lens = torch.tensor([feats[j].shape[0] for j in idx])
        for k, j in enumerate(idx):
            x[k, : feats[j].shape[0]] = torch.from_numpy(np.asarray(feats[j], np.float32))
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
            lp, ol = model(x.to(device), lens.to(device))
        lp = lp.float().cpu().numpy()
        for k, j in enumerate(idx):
            out[j] = lp[k, : int(ol[k])]
        i += n
    return out  # type: ignore[return-value]


def frame_seconds() -> float:
    """Seconds per output frame: 10 ms fbank frames, subsampled 4x."""
    return 0.04


def describe(c: ModelConfig) -> str:
    m = ConformerCTC(c)
    return (f"conformer d={c.d_model} heads={c.heads} ff={c.ff} layers={c.layers} kernel={c.conv_kernel}: "
            f"{m.num_params() / 1e6:.2f} M parameters")

