"""riva-asrlib-decoder 0.4.4 (NVIDIA's CUDA WFST decoder, Kaldi's cudadecoder) on TLG.fst.

API used (the nanobind module riva/asrlib/decoder/python_decoder, source
src/riva/asrlib/decoder/python_decoder.cc of nvidia-riva/riva-asrlib-decoder, and the
settings of create_decoder_config() in its test_graph_construction.py):

    cfg = BatchedMappedDecoderCudaConfig(); cfg.online_opts.decoder_opts.default_beam = ...
    dec = BatchedMappedDecoderCuda(cfg, fst_path, words_path, num_tokens_including_blank)
    dec.decode_nbest(log_probs, lengths) -> per utterance a list of NBestResult
        (.words: word ids, .ilabels, .score)

log_probs: float32 [B, T, V], C-contiguous, on the GPU; lengths: int64 [B] on the CPU.
Input label i of the graph reads column i - 1 (CTCTransitionInformation), which is the
corpus convention (ilabel = token + 1, 0 = epsilon). The decoder takes the values as
log-likelihoods (the caller applies any acoustic scale), so log-probs go in as they are.
Every utterance gets a lattice; with nbest = 1 the lattice postprocessor returns its best
path (decode_nbest), which is what we score. The postprocessor also computes an MBR CTM for
every utterance whichever call is used: that CPU work is part of riva's pipeline and of
its time here.
"""

from __future__ import annotations

import os

from . import Peer, PeerUnavailable, require_cuda


class RivaPeer(Peer):
    name = "riva"
    device = "cuda"
    graph = "TLG.fst"
    input = "cuda"
    memory = "device"  # allocates with cudaMalloc, outside torch

    def __init__(self, corpus, batch, cfg, graph: str = "TLG.fst"):
        self.torch = require_cuda()
        try:
            from riva.asrlib.decoder.python_decoder import (BatchedMappedDecoderCuda,
                                                            BatchedMappedDecoderCudaConfig)
        except ImportError as e:
            raise PeerUnavailable(
                f"riva-asrlib-decoder is not installed ({e}); install the cp312 wheel "
                "riva_asrlib_decoder-0.4.4 (../shared/device/wheels)") from None
        self.graph = graph
        c = BatchedMappedDecoderCudaConfig()
        c.n_input_per_chunk = 50
        o = c.online_opts
        o.decoder_opts.default_beam = float(cfg.beam)
        o.decoder_opts.lattice_beam = float(cfg.lattice_beam)
        o.decoder_opts.max_active = int(cfg.max_active)
        o.decoder_opts.ntokens_pre_allocated = 10_000_000
        o.determinize_lattice = True
        o.max_batch_size = int(batch)
        o.num_channels = 2 * int(batch)
        o.frame_shift_seconds = float(corpus.frame_shift)
        o.lattice_postprocessor_opts.acoustic_scale = 1.0
        o.lattice_postprocessor_opts.lm_scale = 1.0
        o.lattice_postprocessor_opts.word_ins_penalty = 0.0
        o.lattice_postprocessor_opts.nbest = 1
        o.num_decoder_copy_threads = 2
        o.num_post_processing_worker_threads = max(1, (os.cpu_count() or 4) - 2)
        self.cfg = c
        self.dec = BatchedMappedDecoderCuda(c, corpus.path(graph), corpus.path("words.txt"), corpus.vocab_size)

    def settings(self) -> str:
        o = self.cfg.online_opts
        d = o.decoder_opts
        return (f"default_beam={d.default_beam:g} lattice_beam={d.lattice_beam:g} max_active={d.max_active} "
                f"acoustic_scale=1.0 (log-probs as given) blank_penalty={d.blank_penalty:g} "
                f"length_penalty={d.length_penalty:g} max_batch_size={o.max_batch_size} "
                f"num_channels={o.num_channels} determinize_lattice={o.determinize_lattice} "
                f"frame_shift={o.frame_shift_seconds:g}; 1-best = decode_nbest with nbest=1 "
                f"(not MBR); post-processing threads={o.num_post_processing_worker_threads}; "
                f"log-probs moved to the GPU once before timing")

    def decode(self, log_probs, lengths):
        torch = self.torch
        if not log_probs.is_contiguous():
            log_probs = log_probs.contiguous()
        lens = torch.from_numpy(lengths.astype("int64"))
        return [list(r[0].words) if len(r) else [] for r in self.dec.decode_nbest(log_probs, lens)]

    def close(self):
        self.dec = None
