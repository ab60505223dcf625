"""kaldi-decoder (the `kaldi-decoder` PyPI package, sherpa-onnx's decoder): Kaldi's
FasterDecoder on TLG.fst (or HLG.fst), on the CPU, one utterance at a time.

API used (read from the installed package kaldi_decoder 0.3.2: its pybind11 signatures and
kaldi-decoder/csrc/decodable-ctc.cc): FasterDecoderOptions(beam, max_active, min_active,
beam_delta, hash_ratio); FasterDecoder(kaldifst.StdVectorFst, options); DecodableCtc(log_probs
[T, V] float32), whose LogLikelihood(frame, i) is log_probs[frame, i - 1], the corpus
convention (input label = token + 1); decoder.decode(decodable); decoder.get_best_path() ->
(ok, kaldifst.Lattice); kaldifst.get_linear_symbol_sequence(lattice) -> (ok, ilabels,
olabels = word ids, weight).

No batching. The binding holds the GIL while decoding (2 threads on 2 cores took 0.35 s
for what 1 thread did in 0.30 s, 2026-11-29), so a thread pool would not help: --kaldi-threads
defaults to 1.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import Peer, require


class KaldiDecoderPeer(Peer):
    name = "kaldi-decoder"
    device = "cpu"
    graph = "TLG.fst"
    batched = False
    slow = True

    def __init__(self, corpus, batch, cfg, graph: str = "TLG.fst"):
        self.kd = require("kaldi_decoder", "kaldi-decoder is not installed (pip install kaldi-decoder)")
        self.kaldifst = require("kaldifst", "kaldifst is not installed (pip install kaldifst)")
        self.graph = graph
        self.fst = self.kaldifst.StdVectorFst.read(corpus.path(graph))  # shared, read-only
        self.opts = self.kd.FasterDecoderOptions(beam=float(cfg.beam), max_active=int(cfg.max_active),
                                                 min_active=int(cfg.min_active))
        self.threads = max(1, int(getattr(cfg, "kaldi_threads", 1)))
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None
        self.feed = 1 if self._pool is None else 8 * self.threads

    def settings(self) -> str:
        o = self.opts
        return (f"FasterDecoder beam={o.beam:g} max_active={o.max_active} min_active={o.min_active} "
                f"beam_delta={o.beam_delta:g}; one utterance at a time, threads={self.threads} "
                f"(the binding holds the GIL)")

    def _decoder(self):
        d = getattr(self._local, "dec", None)
        if d is None:
            d = self._local.dec = self.kd.FasterDecoder(self.fst, self.opts)
        return d

    def decode_one(self, log_probs_row, length: int) -> list[int]:
        dec = self._decoder()
        dec.decode(self.kd.DecodableCtc(np.ascontiguousarray(log_probs_row[:length], np.float32)))
        ok, lattice = dec.get_best_path()
        if not ok:
            return []
        _, _, words, _ = self.kaldifst.get_linear_symbol_sequence(lattice)
        return list(words)

    def decode(self, log_probs, lengths):
        rows = range(len(lengths))
        if self._pool is None:
            return [self.decode_one(log_probs[b], int(lengths[b])) for b in rows]
        return list(self._pool.map(lambda b: self.decode_one(log_probs[b], int(lengths[b])), rows))

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()
