"""cuwfst decoding of per-utterance log-probs, on the GPU when it runs here, else the CPU."""

from __future__ import annotations

import os
import time

import numpy as np

from .shards import pad


def decode_hlg(graph_path, lps: list[np.ndarray], prefer_gpu: bool = True, log=print):
    """cuwfst 1-best (search_beam 20, output_beam 8, min/max active 30/10000) of each row:
    (hypotheses, device used, seconds). GPU when it builds and runs here, else the CPU."""
    from cuwfst import Decoder, DecoderOptions, Graph

    g = Graph.load(graph_path)
    opts = DecoderOptions(search_beam=20.0, output_beam=8.0, min_active_states=30, max_active_states=10000)
    lp, lens = pad(lps)
    if prefer_gpu:
        try:
            import torch

            if torch.cuda.is_available():
                dec = Decoder(g, opts, device="cuda", max_lanes=32)
                t = time.perf_counter()
                hyps = []
                for s in range(0, lp.shape[0], 32):
                    hyps += dec.decode(lp[s : s + 32], lens[s : s + 32])
                return hyps, "cuda", time.perf_counter() - t
        except Exception as e:  # the GPU module may fail to build on a machine; the CPU decoder is exact
            log(f"GPU decoder unavailable ({type(e).__name__}: {str(e)[:200]}); decoding on the CPU")
    dec = Decoder(g, opts, device="cpu", num_threads=os.cpu_count())
    t = time.perf_counter()
    hyps = dec.decode(lp, lens)
    return hyps, "cpu", time.perf_counter() - t
