"""Peers: other decoders run on the same log-probs as cuwfst, in one process and one run.

    python -m benchmarks.peers.run --corpus DIR --batch 1 8 32 --utts N [--decoders ...]

One adapter module per peer; each adapter class is built once per batch size with
`(corpus, batch, cfg)` and offers `decode(log_probs [B, T, V], lengths [B]) -> word-id
lists`, `settings()` and a few class attributes the driver reads before building it:

    device   "cuda" or "cpu"
    graph    the graph file it decodes with ("-" for none)
    batched  False: one utterance at a time, so the batch size changes nothing
    slow     True: limited to --cpu-utts utterances
    input    "cuda": takes the log-probs as a torch CUDA tensor staged once before timing;
             "host": a numpy array
    memory   where its peak GPU memory comes from: "torch" (max_memory_allocated),
             "own+torch" (its own allocation report plus torch's), "device" (cudaMemGetInfo)
    feed     utterances per decode() call when not batched (a peer with its own thread
             pool takes more)

Adapters import their peer package in `__init__` only, and raise `PeerUnavailable` with the
reason when it is missing, so a missing peer skips one row and nothing else.
"""

from __future__ import annotations

import importlib

# name -> (module, class, keyword arguments)
PEERS: dict[str, tuple[str, str, dict]] = {
    "cuwfst-gpu": ("cuwfst_peer", "CuwfstGpuPeer", {}),
    "cuwfst-cpu": ("cuwfst_peer", "CuwfstCpuPeer", {}),
    "cuwfst-gpu-tlg": ("cuwfst_peer", "CuwfstGpuPeer", {"graph": "TLG.img"}),
    "cuwfst-cpu-tlg": ("cuwfst_peer", "CuwfstCpuPeer", {"graph": "TLG.img"}),
    # the GPU decoder without the trimmed slots (the same-run A/B of docs/design.md "Trimmed slots")
    "cuwfst-gpu-untrimmed": ("cuwfst_peer", "CuwfstGpuPeer", {"trim_arcs": False}),
    "cuwfst-gpu-tlg-untrimmed": ("cuwfst_peer", "CuwfstGpuPeer", {"graph": "TLG.img", "trim_arcs": False}),
    # the closure by lists, the default before the closure by epsilon chains (docs/design.md
    # "Kernel variants"; the full TLG qualifies for the chains, so cuwfst-gpu-tlg runs them)
    "cuwfst-gpu-tlg-lists": ("cuwfst_peer", "CuwfstGpuPeer", {"graph": "TLG.img", "closure": "lists"}),
    # lattice=True: every row also gets its pruned lattice, word times and confidences
    # (riva always builds and determinizes a lattice; issue 10 compares against this row)
    "cuwfst-gpu-lattice": ("cuwfst_peer", "CuwfstGpuPeer", {"lattice": True}),
    "cuwfst-cpu-lattice": ("cuwfst_peer", "CuwfstCpuPeer", {"lattice": True}),
    # the same on the TLG (epsilon arcs: the host replays the GPU's records), riva's very graph
    "cuwfst-gpu-tlg-lattice": ("cuwfst_peer", "CuwfstGpuPeer", {"graph": "TLG.img", "lattice": True}),
    "cuwfst-cpu-tlg-lattice": ("cuwfst_peer", "CuwfstCpuPeer", {"graph": "TLG.img", "lattice": True}),
    "riva": ("riva_peer", "RivaPeer", {"graph": "TLG.fst"}),
    "riva-hlg": ("riva_peer", "RivaPeer", {"graph": "HLG.fst"}),
    "kaldi-decoder": ("kaldi_peer", "KaldiDecoderPeer", {"graph": "TLG.fst"}),
    "kaldi-decoder-hlg": ("kaldi_peer", "KaldiDecoderPeer", {"graph": "HLG.fst"}),
    "torchaudio-ctc": ("torchaudio_peer", "TorchaudioCtcPeer", {}),
    "greedy": ("greedy_peer", "GreedyPeer", {}),
}
DEFAULT_PEERS = ["cuwfst-gpu", "riva", "torchaudio-ctc", "cuwfst-cpu", "kaldi-decoder", "greedy"]


class PeerUnavailable(RuntimeError):
    """The peer cannot run here (package missing, no GPU): its row says `skipped: <reason>`."""


class Peer:
    """Base of the adapters: the attributes the driver reads, with their defaults."""

    name = "?"
    device = "cpu"
    graph = "-"
    batched = True
    slow = False
    input = "host"
    memory = "torch"
    feed = 1  # utterances per decode() call for peers that do not batch

    def settings(self) -> str:
        raise NotImplementedError

    def decode(self, log_probs, lengths) -> list[list[int]]:
        raise NotImplementedError

    def own_gpu_bytes(self) -> int | None:
        """Device memory the peer allocated outside torch, when it can say; else None."""
        return None

    def close(self) -> None:
        """Free what the peer holds before the next entry's memory baseline."""


def peer_class(name: str):
    """The adapter class of `name` and its keyword arguments (imports the adapter module,
    which imports no peer package at module level)."""
    if name not in PEERS:
        raise KeyError(f"unknown decoder {name!r}; known: {', '.join(PEERS)}")
    module, cls, kwargs = PEERS[name]
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls), kwargs


def require(module: str, why: str):
    """Import `module` or raise PeerUnavailable saying what is missing and why it is needed."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise PeerUnavailable(f"{why}: cannot import {module} ({e})") from None


def require_cuda():
    torch = require("torch", "needs torch with CUDA")
    if not torch.cuda.is_available():
        raise PeerUnavailable("no CUDA GPU visible to torch")
    return torch
