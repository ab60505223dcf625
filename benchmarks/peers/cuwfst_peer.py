"""cuwfst on HLG.img (or TLG.img, the very graph riva reads as TLG.fst): the GPU decoder
(device="cuda") or the exact CPU reference (device="cpu")."""

from __future__ import annotations

import os


from . import Peer, require, require_cuda

BEAMS = dict(search_beam=20.0, output_beam=8.0, min_active_states=30, max_active_states=10000)


class CuwfstPeer(Peer):
    graph = "HLG.img"

    def __init__(self, corpus, batch, cfg, graph: str = "HLG.img", lattice: bool = False, trim_arcs: bool = True,
                 closure: str | None = None):
        cuwfst = require("cuwfst", "the cuwfst package")
        device = self.device
        if device == "cuda":
            require_cuda()
        self.graph = graph
        self.lattice = bool(lattice)
        self.trim_arcs = bool(trim_arcs)
        self.closure = closure  # None: the decoder's default closure kernels
        self.graph_obj = cuwfst.Graph.load(corpus.path(graph))
        beams = dict(BEAMS)
        if getattr(cfg, "cuwfst_search_beam", None) is not None:  # --cuwfst-search-beam: an operating point
            beams["search_beam"] = float(cfg.cuwfst_search_beam)
        self.opts = cuwfst.DecoderOptions(**beams, blank_skip=float(getattr(cfg, "blank_skip", 0.0)))
        self.threads = os.cpu_count() or 1
        # --feed all (every utterance in one call): continuous batching, the next row entering a
        # lane the moment one finishes (lattice decodes keep padded sub-batches of similar lengths)
        self.batching = "continuous" if getattr(cfg, "feed", "batch") == "all" else "padded"
        if device == "cuda":
            self.dec = cuwfst.Decoder(self.graph_obj, self.opts, device="cuda", max_lanes=batch, trim_arcs=trim_arcs,
                                      closure=closure, batching=self.batching)
        else:
            self.dec = cuwfst.Decoder(self.graph_obj, self.opts, device="cpu", num_threads=self.threads)
        self.batch = batch

    def settings(self) -> str:
        o = self.opts
        s = (f"search_beam={o.search_beam:g} output_beam={o.output_beam:g} min_active={o.min_active_states} "
             f"max_active={o.max_active_states} allow_partial={o.allow_partial}")
        if self.graph_obj.has_epsilon:
            s += f" eps_iterations={self.dec.eps_iterations}"
        if o.blank_skip:
            s += f" blank_skip={o.blank_skip:g}"
        if self.lattice:
            s += " lattice=True (pruned lattice, word times and confidences per row)"
        if self.device == "cuda" and not self.trim_arcs:
            s += " trim_arcs=False (every emitting arc of a token is walked)"
        if self.device == "cuda" and self.closure:
            ran = ["scan", "lists", "chain"][self.dec._gpu.main.mem_stats()["closure_lists"]]
            s += f" closure={self.closure} (ran: {ran})"
        if self.device == "cuda":
            return s + (f" max_lanes={self.batch} batching={self.batching}; log-probs moved to the GPU once before "
                        "timing")
        return s + f" num_threads={self.threads} (threads over the rows of a batch)"

    def decode(self, log_probs, lengths):
        hyps = self.dec.decode(log_probs, lengths, lattice=True) if self.lattice else self.dec.decode(log_probs, lengths)
        return [h.words for h in hyps]

    def own_gpu_bytes(self):
        """The decoder instances' reports (fixed buffers + winners arena) plus the uploaded graph."""
        gpu = getattr(self.dec, "_gpu", None)
        if gpu is None:
            return None
        total = sum(inst.mem_stats()["committed"] for inst in (gpu.main, gpu._rescue) if inst is not None)
        a = self.graph_obj.arrays
        eps = [a.eps_count] if a.has_eps else []
        return total + sum(x.nbytes for x in [a.row_splits, a.final_count, a.dest, a.ilabel, a.weight] + eps)

    def close(self):
        self.dec = None


class CuwfstGpuPeer(CuwfstPeer):
    name = "cuwfst-gpu"
    device = "cuda"
    input = "cuda"
    memory = "own+torch"


class CuwfstCpuPeer(CuwfstPeer):
    name = "cuwfst-cpu"
    device = "cpu"
    slow = True
