"""torchaudio's CUDA CTC prefix beam search (no LM, no graph): cuda_ctc_decoder.

API used (torchaudio docs, torchaudio.models.decoder.cuda_ctc_decoder, present up to
torchaudio 2.8 and, per ../shared/device/README.md, in the GPU machine's 2.11 build):
cuda_ctc_decoder(tokens: list[str], nbest, beam_size, blank_skip_threshold) -> CUCTCDecoder;
decoder(log_probs float32 [B, T, V] CUDA, lengths int32 [B] CUDA) -> per utterance a list of
CUCTCHypothesis (.tokens: token ids, repeats and blanks removed). Blank is token 0, as in the
corpus. Token ids become words through the BPE pieces (`▁` starts a word) and words.txt;
words missing from words.txt count as errors.
"""

from __future__ import annotations

import warnings

import numpy as np

from . import Peer, PeerUnavailable, require, require_cuda


class TorchaudioCtcPeer(Peer):
    name = "torchaudio-ctc"
    device = "cuda"
    graph = "-"
    input = "cuda"
    memory = "torch"

    def __init__(self, corpus, batch, cfg):
        self.torch = require_cuda()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its deprecation notice, printed on import
            require("torchaudio", "torchaudio is not installed")
            try:
                from torchaudio.models.decoder import cuda_ctc_decoder
            except (ImportError, AttributeError, OSError) as e:
                raise PeerUnavailable(f"torchaudio has no usable cuda_ctc_decoder ({e})") from None
        self.corpus = corpus
        self.beam_size = int(cfg.ctc_beam)
        self.blank_skip_threshold = 0.95
        self.dec = cuda_ctc_decoder(list(corpus.pieces), nbest=1, beam_size=self.beam_size,
                                    blank_skip_threshold=self.blank_skip_threshold)

    def settings(self) -> str:
        return (f"cuda_ctc_decoder nbest=1 beam_size={self.beam_size} "
                f"blank_skip_threshold={self.blank_skip_threshold}, no LM; words from BPE pieces; "
                f"log-probs moved to the GPU once before timing")

    def decode(self, log_probs, lengths):
        lens = self.torch.from_numpy(np.ascontiguousarray(lengths, np.int32)).to(log_probs.device)
        hyps = self.dec(log_probs, lens)
        return [self.corpus.pieces_to_word_ids(h[0].tokens) if h else [] for h in hyps]

    def close(self):
        self.dec = None
