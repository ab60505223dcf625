"""`cuwfst.Decoder`: offline batched 1-best decoding on the CPU or the GPU."""

from __future__ import annotations

import os

import numpy as np

from ..graph import Graph
from ..graph.image import native_array
from .inputs import check_finite, check_lengths, check_log_probs, is_torch, log_probs_to_host, pad_on_device
from .options import DecoderOptions
from .prepare import prepare_offline
from .result import Hypothesis

REDIRECT_ARC_BIT = 1 << 30


class _ReferenceGraph:
    """The graph's arrays handed to the CPU reference module (kept alive here)."""

    def __init__(self, graph: Graph):
        from ..jit.reference import module

        a = graph.arrays
        self.mod = module()
        # the reference decoder reads these in place for its whole life (never writes them)
        self._keep = [
            native_array(a.row_splits, np.int32), native_array(a.final_count, np.int32),
            native_array(a.eps_count if a.has_eps else np.zeros(0), np.int32),
            native_array(a.dest, np.int32), native_array(a.ilabel, np.int32),
            native_array(a.weight, np.float32),
            # each image arc's source arc id (k2's order: it numbers the states and orders the
            # lattice's arcs), none where the image kept the source order
            native_array(a.arc_id if a.arc_id is not None else np.zeros(0), np.int32),
        ]
        self.handle = self.mod.ref_graph_create(*self._keep, a.vocab_size, a.start_state, a.finals_at_end)

    def __del__(self):
        h, self.handle = getattr(self, "handle", 0), 0
        if h:
            self.mod.ref_graph_free(h)


def _graph_of(graph) -> Graph:
    if isinstance(graph, Graph):
        return graph
    if isinstance(graph, (str, os.PathLike)):
        return Graph.open(graph)  # an image, or an HLG.pt / .fst exported and cached once
    raise TypeError(f"graph must be a cuwfst.Graph or a path to a graph (image, HLG.pt, .fst), "
                    f"got {type(graph).__name__}")


class Decoder:
    """Decodes CTC log-probs against a graph with k2 `intersect_dense_pruned` semantics.

    device="cpu" runs the exact reference decoder (slow, threads over rows);
    device="cuda" (or "cuda:N") runs the GPU decoder; its capacity knobs: max_lanes
    (utterances decoded together; larger batches are split), main_q_factor (frontier
    capacity = factor x max_active_states, capped by the graph's states), use_cuda_graphs
    (False: launch by launch, for profiling), check_inputs (NaN/+inf scan of log_probs),
    walker ("auto", the default: "warp_coop_pdl" on graphs with epsilon arcs, "warp" on the others;
    "warp": 32-slot warp strips; "thread": per-thread cursors; "warp_search": the warp strips
    entering lanes by binary searches, as before, for A/B runs; "warp_coop": Max and Expand as one
    cooperative kernel; "warp_coop_pdl": the same with programmatic dependent launch),
    walk_blocks (grid of the two walker kernels; 0 = clamp(64 x max_lanes, 1024, 8192) with
    trimmed slots, clamp(160 x max_lanes, 1024, 8192) without), eps_blocks (grid of the
    closure's expand kernels; 0 = 8 x the multiprocessors; small values are for tests and
    sanitizer runs),
    scan_split (CTAs per lane of the step's scan: 0 = auto, 1 = one, the old kernel),
    closure ("chain", the default: the passes' result by following epsilon chains, where
    every state has at most one epsilon arc and eps_iterations covers the longest chain, else
    "lists"; "lists": closure passes over lists Finalize writes; "scan": the old EpsScan
    passes),
    finalize_split (CTAs per lane of Finalize and the closure's Resolve: 0 =
    auto, 8 = the old grid) and fused_max (True: no separate max pass, the expansion finds
    each step's max as it admits arcs; off by default) and trim_arcs (True, the default: a
    step's scan trims each token's arcs to the prefix of its sorted emitting arcs that can
    pass, on graphs built with sorted arcs) and pdl (True: the step kernels are launched with
    programmatic dependent launch on GPUs of compute capability 9.0 and later, each launch
    overlapping the end of the kernel before it; on in "new", the default) and scan_round (tokens per granule
    of the split scan's chunks: 512 in "new"; 0 is 2,048; smaller spreads a lane over more
    CTAs) and scan_order ("lane", "chunk" or "persistent", the default in "new": the order the
    split scan's CTAs take their lanes' chunks in, "persistent" one wave of CTAs over the
    non-empty chunks only) and refill_kernel (continuous batching's device-side refill: False,
    the default, in the step's Finalize; True, a kernel of its own after it) pick kernel variants with identical
    results; None takes the default, the new ones, or those CUWFST_KERNELS names (e.g. "old",
    "fused"; KERNEL_VARIANTS in decoder/gpu.py),
    rescue_lanes (rows re-decoded together with a 4x frontier when a row overflows its
    capacity; decoder/rescue.py). A row the rescue cannot absorb keeps its overflow bits.
    batching, for more rows than max_lanes on the GPU: "padded" decodes sub-batches of
    similar lengths (each runs as many steps as its longest row), "continuous" feeds the
    next row into a lane the moment one finishes (segments of `segment` steps; refill
    "device" (default): a lane takes the next row on the GPU in the step after its row ends,
    so long segments lose no lane-steps (segment default 256), "segment": the host refills
    lanes at each segment's end (segment default 32); online rows and gc_interval segments
    always take the host's refill); results are the same either way. memory (GPU): "lazy"
    (default; $CUWFST_MEMORY overrides the default) commits the winners log as batches need it,
    "pooled" also hands the lanes' working memory out of shared pools sized by use (offline
    epsilon-free batches; far less memory, within 1% of lazy's time at batch 32 on the H200),
    "eager" holds everything in plain buffers (decoder/memory.py); results are the same either
    way. `memory_stats()` says what the decoder holds. gc_interval (GPU, 0 = off): rows longer than gc_interval frames are
    decoded in segments of gc_interval steps with a winners-log GC round after each (the
    arcs every surviving path shares move to the host, the log keeps what live tokens
    reach), so memory stays flat however long the input; results are the same. 128 suits
    inputs of thousands of frames; short inputs gain nothing from it. decode(lattice=True)
    always runs padded sub-batches through whole-row decodes (no continuous batching, no
    gc_interval segments: the lattice stage records every step of a row in one decode).
    arena_entries, lattice_entries: the initial sizes of the winners arena and of the
    lattice records (both grow on demand; small values are for tests).
    """

    def __init__(self, graph, options: DecoderOptions | None = None, device: str = "cpu",
                 num_threads: int | None = None, *, max_lanes: int = 32, main_q_factor: int = 32,
                 use_cuda_graphs: bool = True, check_inputs: bool = True, walker: str = "auto",
                 walk_blocks: int = 0, eps_blocks: int = 0, rescue_lanes: int = 4, batching: str = "padded", segment: int | None = None, refill: str = "device",
                 arena_entries: int | None = None, memory: str | None = None, gc_interval: int = 0,
                 scan_split: int | None = None, closure: str | None = None, finalize_split: int | None = None,
                 fused_max: bool | None = None, lattice_entries: int | None = None,
                 trim_arcs: bool | None = None, pdl: bool | None = None, scan_round: int | None = None,
                 scan_order: str | None = None, refill_kernel: bool | None = None, **kwargs):
        self.graph = _graph_of(graph)
        if options is None:
            options = DecoderOptions(**kwargs)
        elif kwargs:
            raise TypeError("pass either options or keyword options, not both")
        if not isinstance(options, DecoderOptions):
            raise TypeError(f"options must be a DecoderOptions, got {type(options).__name__}")
        self.options = options
        self.eps_iterations = options.resolved_eps_iterations(self.graph)
        from ..cuda import resolve_device

        self.device = resolve_device(str(device), self.graph)
        if self.device != "cpu":
            from ..cuda import gpu_backend_class

            self._gpu = gpu_backend_class()(self.graph, options, self.eps_iterations, self.device,
                                   max_lanes=max_lanes, main_q_factor=main_q_factor,
                                   use_cuda_graphs=use_cuda_graphs, check_inputs=check_inputs,
                                   walker=walker, walk_blocks=walk_blocks, eps_blocks=eps_blocks,
                                   rescue_lanes=rescue_lanes,
                                   batching=batching, segment=segment, refill=refill, arena_entries=arena_entries,
                                   memory=memory, gc_interval=gc_interval, scan_split=scan_split,
                                   closure=closure, finalize_split=finalize_split, fused_max=fused_max,
                                   lattice_entries=lattice_entries, trim_arcs=trim_arcs, pdl=pdl,
                                   scan_round=scan_round, scan_order=scan_order, refill_kernel=refill_kernel)
        else:
            from .gpu import check_gc_interval
            from .memory import resolve_memory

            resolve_memory(memory)  # checked here too, so a typo fails on every device
            check_gc_interval(gc_interval)
            self._gpu = None
            self._ref = _ReferenceGraph(self.graph)
        self.num_threads = num_threads or min(8, os.cpu_count() or 1)

    def memory_stats(self) -> dict:
        """What the decoder holds, in bytes (entries where a name says so): reserved,
        committed, fixed, graph, total, winners_high_water, per-pool and per-instance figures
        (decoder/memory.py says what each means). The CPU decoder holds no device memory: its
        device figures are 0 and `host_graph` gives the graph's host bytes."""
        if self._gpu is not None:
            return self._gpu.memory_stats()
        from .memory import cpu_memory_stats

        return cpu_memory_stats(self.graph)

    def path_capacity(self, frames: int) -> int:
        return (frames + 2) * (1 + self.eps_iterations)

    def decode(self, log_probs, lengths=None, *, online: bool = False, lattice: bool = False) -> list[Hypothesis]:
        """log_probs [B, T, V] or [T, V] (float32; numpy, torch or DLPack); lengths [B] or None.

        online=True: k2's online beam mode, as a stream sees its frames (the length is
        unknown until the final step, so the last-5-frames min_active rule is off); what
        StreamingDecoder.finalize returns for the same frames.
        lattice=True: each Hypothesis also gets k2's pruned lattice of its row (output_beam),
        word times and word confidences (cuwfst/decoder/lattice.py); the GPU's lattice is
        the CPU's, arc for arc and bit for bit (cuwfst/decoder/lattice_records.py)."""
        if not isinstance(online, bool):
            raise TypeError(f"online must be a bool, got {online!r}")
        if not isinstance(lattice, bool):
            raise TypeError(f"lattice must be a bool, got {lattice!r}")
        log_probs, lengths, skipped = prepare_offline(log_probs, lengths, self.graph.vocab_size, self.options)
        if self._gpu is not None:
            hyps = self._gpu.decode(log_probs, lengths, self, online=online, lattice=lattice)
            return self._finish(hyps, log_probs, lengths, skipped)
        lp = check_log_probs(log_probs_to_host(log_probs), self.graph.vocab_size)
        B, T, _ = lp.shape
        lens = check_lengths(lengths, B, T)
        check_finite(lp, lens)
        if lattice:
            from .lattice import decode_cpu

            return self._finish(decode_cpu(self, lp, lens, online), lp, lens, skipped)
        cap = self.path_capacity(T)
        out_arcs = np.zeros((B, cap), np.int32)
        out_len = np.zeros(B, np.int32)
        out_score = np.zeros(B, np.float32)
        out_meta = np.zeros((B, 4), np.int32)
        out_stats = np.zeros((B, 2), np.int64)
        o = self.options
        self._ref.mod.ref_decode(self._ref.handle, lp, lens, o.search_beam, o.output_beam,
                                 o.min_active_states, o.max_active_states, o.allow_partial,
                                 self.eps_iterations, online, self.num_threads,
                                 out_arcs, out_len, out_score, out_meta, out_stats)
        hyps = self.make_hypotheses([out_arcs[b, : out_len[b]] for b in range(B)], [float(x) for x in out_score],
                                    [bool(x) for x in out_meta[:, 0]], out_meta[:, 2].tolist(), [0] * B,
                                    out_meta[:, 3].tolist(), out_stats[:, 0].tolist(), out_stats[:, 1].tolist())
        return self._finish(hyps, lp, lens, skipped)

    def _finish(self, hyps: list[Hypothesis], log_probs, lengths, skipped) -> list[Hypothesis]:
        """Offline hypotheses with frames_decoded, and with blank_skip their frame indices
        moved back to the original frames (decoder/blank_skip.py). log_probs and lengths:
        what the backend decoded."""
        shape = log_probs.shape if len(log_probs.shape) == 3 else (1,) + tuple(log_probs.shape)
        lens = check_lengths(lengths, int(shape[0]), int(shape[1]))
        if skipped is None:
            for h, n in zip(hyps, lens.tolist()):
                h.frames_decoded = n
            return hyps
        from .blank_skip import remap_hypothesis

        for h, frames, n, length in zip(hyps, skipped.frames, lens.tolist(), skipped.lengths.tolist()):
            # blank 0: the blank lattice.word_times ends words with
            remap_hypothesis(h, frames[:n], length, blank_id=0)
        return hyps

    def decode_all(self, utterances, *, progress: bool = True, chunk: int | None = None,
                   online: bool = False):
        """Decodes an iterable of [T, V] log-prob arrays (numpy, torch or DLPack), yielding
        one Hypothesis per utterance in input order; results equal decoding each alone.

        Utterances are read `chunk` at a time (default: 8 x max_lanes on the GPU, where they
        are continuously batched through the lanes; 4 x the threads on the CPU), so memory is
        bounded by a chunk, not the dataset. progress: a tqdm bar of utterances."""
        if chunk is None:
            chunk = 8 * self._gpu.main.max_lanes if self._gpu is not None else 4 * self.num_threads
        if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
            raise ValueError(f"chunk must be an int >= 1, got {chunk!r}")
        from tqdm import tqdm

        bar = tqdm(unit="utt", desc="decoding", disable=not progress, leave=False)
        try:
            buf = []
            for utt in utterances:
                buf.append(utt)
                if len(buf) == chunk:
                    yield from self._decode_chunk(buf, online)
                    bar.update(len(buf))
                    buf = []
            if buf:
                yield from self._decode_chunk(buf, online)
                bar.update(len(buf))
        finally:
            bar.close()

    def _decode_chunk(self, utts, online: bool) -> list[Hypothesis]:
        gpu = self._gpu
        torch = getattr(gpu, "torch", None) if gpu is not None else None
        if torch is not None and all(is_torch(u) and u.device == gpu.device for u in utts):
            packed, lens = pad_on_device(torch, utts, "utterance")  # no host round trip
        else:
            rows = []
            for i, u in enumerate(utts):
                u = log_probs_to_host(u.detach().cpu() if is_torch(u) else u)
                if u.ndim != 2:
                    raise ValueError(f"utterance {i} of the chunk has shape {tuple(u.shape)}: each must be [T, V]")
                rows.append(u)
            T = max(r.shape[0] for r in rows)
            V = rows[0].shape[1]
            if any(r.shape[1] != V for r in rows):
                raise ValueError("utterances of one decode_all must have the same number of columns")
            # float16 rows stay float16 (exact, and half the bytes to pack and upload)
            dtype = np.float16 if all(r.dtype == np.float16 for r in rows) else np.float32
            packed = np.zeros((len(rows), max(T, 1), V), dtype)
            lens = np.zeros(len(rows), np.int32)
            for i, r in enumerate(rows):
                packed[i, : r.shape[0]] = np.asarray(r, dtype)
                lens[i] = r.shape[0]
        if gpu is None:
            return self.decode(packed, lens, online=online)
        # the GPU: every chunk continuously batched through the lanes, whatever `batching` says
        packed, lens, skipped = prepare_offline(packed, lens, self.graph.vocab_size, self.options)
        hyps = gpu.decode(packed, lens, self, online=online, batching="continuous")
        return self._finish(hyps, packed, lens, skipped)

    def make_hypothesis(self, arcs, score, reached_final, redirect_arc, overflow, max_frontier, *,
                        frontier_total: int = 0, closure_added: int = 0) -> Hypothesis:
        return self.make_hypotheses([arcs], [score], [reached_final], [redirect_arc], [overflow], [max_frontier],
                                    [frontier_total], [closure_added])[0]

    def make_hypotheses(self, arcs, scores, reached_final, redirect_arc, overflow, max_frontier,
                        frontier_total=None, closure_added=None) -> list[Hypothesis]:
        """Hypotheses of many rows at once: arcs, a list of each row's image arc ids, and the
        other arguments one value a row (as make_hypothesis). The numpy work runs once over
        all the rows' arcs: on the 2-core development VM 47 us a row against 112 one row at
        a time (256 rows of up to 400 arcs)."""
        g = self.graph.arrays
        B = len(arcs)
        n_arcs = np.array([len(a) for a in arcs], np.int64)
        cat = np.concatenate([np.asarray(a, np.int64) for a in arcs]) if n_arcs.sum() else np.zeros(0, np.int64)
        il = np.asarray(g.ilabel)[cat].astype(np.int64)
        emitting = il >= 0
        # frame of each arc: emitting arcs consume frames 0, 1, ...; others sit at the frame
        # reached (counted from each row's first arc)
        row_start = np.cumsum(n_arcs) - n_arcs
        emit_cum = np.cumsum(emitting)
        emit_before_row = np.concatenate([[0], emit_cum])[row_start]  # emitting arcs of earlier rows
        frame = emit_cum - emitting - np.repeat(emit_before_row, n_arcs)
        # the arcs' word labels (a ragged gather over aux_row_splits), each at its arc's frame
        rs = np.asarray(g.aux_row_splits)
        first = rs[cat]
        counts = rs[cat + 1] - first
        n = int(counts.sum())
        before = np.cumsum(counts) - counts  # words of the earlier arcs
        at = np.repeat(first - before, counts) + np.arange(n)
        words = np.asarray(g.aux_pool)[at].astype(np.int64)
        stamps = np.repeat(frame, counts)
        row_of_arc = np.repeat(np.arange(B), n_arcs)
        n_words = np.bincount(row_of_arc, weights=counts, minlength=B).astype(np.int64)
        n_tokens = np.bincount(row_of_arc, weights=emitting, minlength=B).astype(np.int64)
        # the decoders speak image arc ids; users see the source graph's
        src = self.graph.source_arc_ids(cat)
        tokens = il[emitting]
        # Python lists once for all rows, then each row a slice of them (no numpy array and
        # no tolist a row: about half of this function's time at 32 rows of 250 arcs)
        word_at, arc_at, tok_at = (np.concatenate([[0], np.cumsum(k)]).tolist() for k in (n_words, n_arcs, n_tokens))
        words_all, stamps_all, src_all, tokens_all = words.tolist(), stamps.tolist(), src.tolist(), tokens.tolist()
        table = self.graph.words
        out = []
        for b in range(B):
            w = words_all[word_at[b]: word_at[b + 1]]
            ra = int(redirect_arc[b])
            if ra >= 0:
                ra = int(self.graph.source_arc_ids(ra))
            symbols = [table[x] for x in w] if table is not None else None
            out.append(Hypothesis(words=w, score=scores[b], arcs=src_all[arc_at[b]: arc_at[b + 1]],
                                  reached_final=reached_final[b], overflow=overflow[b],
                                  tokens=tokens_all[tok_at[b]: tok_at[b + 1]],
                                  timestamps=stamps_all[word_at[b]: word_at[b + 1]],
                                  redirect_arc=ra, max_frontier=max_frontier[b],
                                  frontier_total=0 if frontier_total is None else frontier_total[b],
                                  closure_added=0 if closure_added is None else closure_added[b],
                                  word_symbols=symbols, text=" ".join(symbols) if symbols is not None else None))
        return out

    def decode_snapshots(self, log_probs, length: int | None = None) -> list[dict]:
        """Per-step frontiers of one row, for step-by-step comparison (CPU and GPU).

        Entry k: the frontier after step k-1 (k = 0: the initial frontier), as a dict with
        phase, beam, cutoff, before_closure (the frontier's size before the step's epsilon
        closure), `tokens` {state: (score, arc)} and overflow (the GPU's overflow bits after
        the step, as Hypothesis.overflow; always 0 on the CPU). On the GPU a frontier that
        outgrows the main instance's capacity (main_q: a cut frontier would miss tokens) is
        decoded again on the rescue instance, as decode does; a snapshot that still carries
        a capacity bit may miss tokens. With blank_skip, the steps are those of the kept
        frames (what decode runs)."""
        log_probs, lens, skipped = prepare_offline(log_probs, None if length is None else [length],
                                                   self.graph.vocab_size, self.options)
        if skipped is not None:
            length = int(lens[0])
        if self._gpu is not None:
            return self._gpu.decode_snapshots(log_probs, length)
        lp = check_log_probs(log_probs_to_host(log_probs), self.graph.vocab_size)
        if lp.shape[0] != 1:
            raise ValueError("decode_snapshots takes one row ([T, V])")
        lp = lp[0]
        length = snapshot_length(length, lp.shape[0])
        check_finite(lp[None], np.array([length]))
        bufs = snapshot_buffers(length, self.graph.num_states)
        o = self.options
        self._ref.mod.ref_decode_snapshots(self._ref.handle, lp, length, o.search_beam, o.output_beam,
                                           o.min_active_states, o.max_active_states, o.allow_partial,
                                           self.eps_iterations, False, *bufs)
        return snapshots_to_dicts(self.graph, *bufs)


def snapshot_length(length, frames: int) -> int:
    length = frames if length is None else int(length)
    if not 0 <= length <= frames:
        raise ValueError(f"length {length} outside [0, {frames}]")
    return length


def snapshot_buffers(length: int, num_states: int):
    """(count, state, score, arc, step) buffers for length + 2 snapshots of up to num_states tokens."""
    K = length + 2
    return (np.zeros(K, np.int32), np.zeros((K, num_states), np.int32),
            np.zeros((K, num_states), np.float32), np.zeros((K, num_states), np.int32),
            np.zeros((K, 4), np.float32))


def snapshots_to_dicts(graph, cnt, st, sc, ar, step, overflow=None) -> list[dict]:
    """Snapshot buffers as dicts; arcs as source arc ids (-1: the start token); overflow:
    the GPU's bits per snapshot (None: the CPU's, all 0)."""
    out = []
    for k in range(len(cnt)):
        n = int(cnt[k])
        arcs = ar[k, :n].astype(np.int64)
        bit = np.where(arcs >= 0, arcs & REDIRECT_ARC_BIT, 0)  # allow_partial's redirect mark
        arcs = np.where(arcs >= 0, graph.source_arc_ids(np.maximum(arcs, 0) & ~REDIRECT_ARC_BIT) | bit, -1)
        out.append({"phase": int(step[k, 0]), "beam": float(step[k, 1]), "cutoff": float(step[k, 2]),
                    "before_closure": int(step[k, 3]),
                    "overflow": 0 if overflow is None else int(overflow[k]),
                    "tokens": {int(st[k, i]): (float(sc[k, i]), int(arcs[i])) for i in range(n)}})
    return out
