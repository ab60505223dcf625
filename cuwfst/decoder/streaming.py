"""`cuwfst.StreamingDecoder`: chunked decoding of many streams, with partial results.

A stream (a channel) holds one utterance's search state between chunks. `advance` moves
any set of streams by one chunk each; `partial` reads the best path so far and how many of
its leading words can no longer change; `finalize` runs k2's final step and returns the
result, which equals `Decoder(graph, options).decode(frames, online=True)` on the frames
the stream was fed, whatever their split into chunks: the search is k2's online beam
mode (the length is unknown until the end, so k2's last-5-frames rule is off).

Endpointing (off by default) applies the rules of sherpa's and Kaldi's online decoders to
the best path after each chunk: trailing blank frames after the last word, and a cap on the
utterance's length; a stream that meets one reports `endpoint` so a server can finalize it
and open the next.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

from ..graph import Graph
from .inputs import check_log_probs, is_torch, log_probs_to_host, pad_on_device
from .prepare import prepare_log_probs
from .options import DecoderOptions
from .offline import REDIRECT_ARC_BIT
from .result import Hypothesis

GPU_MAX_LANES = 4096  # one decoder's lanes (kMaxLanes in csrc/include/cuwfst/types.cuh)


@dataclass(frozen=True)
class EndpointRule:
    """Endpoint when the best path has at least `min_trailing_blank_s` seconds of trailing
    blank frames, having decoded a word already or not (`must_contain_word`), or when the
    utterance is at least `min_utterance_s` long (0: no such limit). sherpa's defaults: rule1
    2.4 s of silence with no word, rule2 1.2 s after a word, rule3 an utterance of 20 s."""

    must_contain_word: bool
    min_trailing_blank_s: float
    min_utterance_s: float = 0.0


SHERPA_RULES = (EndpointRule(False, 2.4), EndpointRule(True, 1.2), EndpointRule(False, 0.0, 20.0))


@dataclass(frozen=True)
class EndpointConfig:
    """Endpointing: the rules, the seconds per log-prob frame, and the blank token id."""

    rules: tuple[EndpointRule, ...] = SHERPA_RULES
    frame_shift_s: float = 0.04
    blank_id: int = 0

    def detect(self, hyp: Hypothesis, frames: int) -> bool:
        trailing = 0
        for tok in reversed(hyp.tokens):
            if tok != self.blank_id:
                break
            trailing += 1
        if hyp.timestamps:  # the frames after the last word's arc
            trailing = min(trailing, frames - 1 - hyp.timestamps[-1])
        for r in self.rules:
            if r.must_contain_word and not hyp.words:
                continue
            if r.min_utterance_s > 0 and frames * self.frame_shift_s >= r.min_utterance_s:
                return True
            if r.min_utterance_s == 0 and trailing * self.frame_shift_s >= r.min_trailing_blank_s:
                return True
        return False


class Stream:
    """One stream of a StreamingDecoder. Read its state here; feed it through the decoder."""

    def __init__(self, decoder: "StreamingDecoder", handle: int, index: int):
        self._decoder = decoder
        self._handle = handle
        self.index = index
        self.frames = 0  # frames fed so far
        self.endpoint = False  # an endpoint rule fired after the last chunk
        self.closed = False

    def partial(self) -> Hypothesis:
        """The best path so far; `final_words` of its leading words can no longer change."""
        return self._decoder._partial(self)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.frames} frames"
        return f"Stream({self.index}, {state})"


class _CpuStreams:
    """Streams on the CPU: one reference RowSearch per stream (reference_decoder.h)."""

    def __init__(self, frontend, num_threads: int, compact: bool):
        self.frontend, self.mod = frontend, frontend._ref.mod
        self.num_threads, self.compact = num_threads, compact

    def open(self, n: int) -> list[int]:
        o, f = self.frontend.options, self.frontend
        return [self.mod.ref_stream_create(f._ref.handle, o.search_beam, o.output_beam, o.min_active_states,
                                           o.max_active_states, o.allow_partial, f.eps_iterations) for _ in range(n)]

    def advance(self, handles: list[int], packed: np.ndarray, lens: np.ndarray) -> None:
        self.mod.ref_streams_advance(np.array(handles, np.int64), packed, lens, self.num_threads, self.compact)

    def partial(self, handle: int, cap: int):
        arcs = np.zeros(cap, np.int32)
        info = np.zeros(4, np.int32)
        score = np.zeros(1, np.float32)
        self.mod.ref_stream_partial(handle, arcs, info, score)
        n, committed, _, ok = info.tolist()
        return arcs[:n], committed, float(score[0]), bool(ok), 0

    def finalize(self, handles: list[int], cap: int):
        n = len(handles)
        out = (np.zeros((n, cap), np.int32), np.zeros(n, np.int32), np.zeros(n, np.float32),
               np.zeros((n, 4), np.int32), np.zeros((n, 2), np.int64))
        for i, h in enumerate(handles):
            self.mod.ref_stream_finalize(h, out[0][i : i + 1], out[1][i : i + 1], out[2][i : i + 1],
                                         out[3][i : i + 1], out[4][i : i + 1])
        for h in handles:  # read out: the searches (and their logs) go
            self.mod.ref_stream_free(h)
        return out, np.zeros(n, np.int32)  # the CPU search has no capacity limits: no overflow

    def release(self, handle: int) -> None:
        self.mod.ref_stream_free(handle)

    def stats(self, handle: int) -> dict:
        out = np.zeros(2, np.int64)
        self.mod.ref_stream_stats(handle, out)
        return {"frames": int(out[0]), "winners": int(out[1])}


class _GpuStreams:
    """Streams on the GPU: each stream holds one lane of a native decoder; an advance moves
    every given stream in one launch sequence, then a GC round keeps the winners log to
    the live windows (gc.cuh) and moves final arcs to the host."""

    def __init__(self, frontend, max_streams: int):
        self.frontend = frontend
        self.backend = frontend._gpu
        self.inst = self.backend.main
        self.mod = self.inst.mod
        self.free = list(range(max_streams - 1, -1, -1))

    def open(self, n: int) -> list[int]:
        if n == 0:
            return []
        lanes = [self.free.pop() for _ in range(n)]
        try:
            self.mod.gpu_stream_open(self.inst.handle, np.array(lanes, np.int32))
        except Exception:
            self.free.extend(reversed(lanes))
            raise
        return lanes

    def advance(self, lanes: list[int], packed: np.ndarray, lens: np.ndarray) -> None:
        lp = self.backend.to_device(packed)
        with self.backend.lock:
            self.mod.gpu_stream_advance(self.inst.handle, np.array(lanes, np.int32), lp, lens, self.backend._stream())

    def partial(self, lane: int, cap: int):
        out = (np.zeros((1, cap), np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32),
               np.zeros(1, np.float32), np.zeros((1, 2), np.int32))
        with self.backend.lock:
            self.mod.gpu_stream_partial(self.inst.handle, np.array([lane], np.int32), *out)
        arcs, n, committed, score, meta = out
        return arcs[0, : min(n[0], cap)], int(committed[0]), float(score[0]), bool(meta[0, 0]), int(meta[0, 1])

    def finalize(self, lanes: list[int], cap: int):
        n = len(lanes)
        out = (np.zeros((n, cap), np.int32), np.zeros(n, np.int32), np.zeros(n, np.float32),
               np.zeros((n, 4), np.int32), np.zeros((n, 2), np.int64))
        with self.backend.lock:  # a failure leaves the lanes held: their streams stay open
            self.mod.gpu_stream_finalize(self.inst.handle, np.array(lanes, np.int32), *out)
        self.free.extend(lanes)
        return out, out[3][:, 2].copy()

    def release(self, lane: int) -> None:
        with self.backend.lock:
            self.mod.gpu_stream_release(self.inst.handle, np.array([lane], np.int32))
        self.free.append(lane)

    def stats(self, lane: int) -> dict:
        out = np.zeros(3, np.int64)
        self.mod.gpu_stream_stats(self.inst.handle, lane, out)
        return {"frames": int(out[0]), "winners": int(out[1]), "committed_arcs": int(out[2])}


class StreamingDecoder:
    """Decodes many streams chunk by chunk (k2's online beam mode), on the CPU or the GPU.

    max_streams: open streams at most (a clear error past it; on the GPU, the lanes).
    compact (CPU): after every chunk each stream moves the arcs every future path shares out
    of its search log, so memory does not grow with a stream's length (the GPU always does
    this, for all its streams at once). endpoint: an EndpointConfig, or True for sherpa's
    rules, or None (off). main_q_factor (GPU): frontier capacity per stream = factor x
    max_active_states; a stream that outgrows it is flagged (Hypothesis.overflow), not rescued.
    Other keyword arguments are DecoderOptions fields; blank_skip is offline-only for now
    (a ValueError here).
    """

    def __init__(self, graph, options: DecoderOptions | None = None, device: str = "cpu", *,
                 max_streams: int = 1024, num_threads: int | None = None, compact: bool = True,
                 endpoint: EndpointConfig | bool | None = None, main_q_factor: int = 8, **kwargs):
        from .offline import Decoder, _graph_of

        skip = options.blank_skip if isinstance(options, DecoderOptions) else kwargs.get("blank_skip", 0)
        if skip:
            raise ValueError(f"blank_skip is offline-only for now (got blank_skip={skip!r}): decode streams "
                             "with blank_skip=0, or whole utterances with Decoder.decode")
        graph = _graph_of(graph)
        if not isinstance(max_streams, int) or isinstance(max_streams, bool) or max_streams < 1:
            raise ValueError(f"max_streams must be an int >= 1, got {max_streams!r}")
        self.num_threads = num_threads or min(8, os.cpu_count() or 1)
        if str(device) == "cpu":
            # the offline CPU decoder holds the native graph and assembles hypotheses
            self._frontend = Decoder(graph, options, device="cpu", **kwargs)
            self._backend = _CpuStreams(self._frontend, self.num_threads, bool(compact))
        else:
            if max_streams > GPU_MAX_LANES:
                raise ValueError(f"max_streams on the GPU is at most {GPU_MAX_LANES} (lanes of one decoder), "
                                 f"got {max_streams}")
            self._frontend = Decoder(graph, options, device=device, max_lanes=max_streams,
                                     main_q_factor=main_q_factor, **kwargs)
            self._backend = _GpuStreams(self._frontend, max_streams)
        self.device = self._frontend.device
        self.graph: Graph = self._frontend.graph
        self.options = self._frontend.options
        self.eps_iterations = self._frontend.eps_iterations
        self.max_streams = max_streams
        self.compact = bool(compact)
        self.endpoint = EndpointConfig() if endpoint is True else (endpoint or None)
        self._open: dict[int, Stream] = {}
        self._next_index = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def open_stream(self) -> Stream:
        """A new stream at frame 0 (its start state and epsilon closure)."""
        return self.open_streams(1)[0]

    def open_streams(self, n: int) -> list[Stream]:
        """n new streams at once (on the GPU one launch sequence for all of them)."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        with self._lock:
            if len(self._open) + n > self.max_streams:
                held = (f"all {self.max_streams} streams are in use" if len(self._open) == self.max_streams else
                        f"{n} more streams do not fit: {len(self._open)} of {self.max_streams} are in use")
                raise RuntimeError(f"{held}: finalize or release one (or build the StreamingDecoder with a larger "
                                   "max_streams)")
            out = []
            for handle in self._backend.open(n):
                s = Stream(self, handle, self._next_index)
                self._next_index += 1
                self._open[s.index] = s
                out.append(s)
            return out

    def release(self, stream: Stream) -> None:
        """Abandons a stream without a result and frees what it holds."""
        with self._lock:
            self._check_open(stream)
            self._close(stream)

    def finalize(self, stream):
        """k2's final step on the frames fed so far, the best path, and the stream freed.
        Given a list of streams, finalizes them all in one launch sequence (GPU) and returns
        their hypotheses in order. If the backend fails (an out-of-memory, say), the
        streams stay open: finalize can be called again, or the streams released."""
        if isinstance(stream, Stream):
            return self._finalize([stream])[0]
        streams = list(stream)
        if len({id(s) for s in streams}) != len(streams):
            raise ValueError("a stream appears twice in one finalize")
        return self._finalize(streams) if streams else []

    def _finalize(self, streams: list) -> list:
        with self._lock:
            for s in streams:
                self._check_open(s)
            cap = max(self._frontend.path_capacity(s.frames) for s in streams)
            (arcs, n, score, meta, stats), overflow = self._backend.finalize([s._handle for s in streams], cap)
            hyps = []
            for i, s in enumerate(streams):
                s.closed = True
                self._open.pop(s.index, None)
                s._handle = None
                k = min(int(n[i]), arcs.shape[1])
                path = arcs[i, :k]
                redirect_arc = int(meta[i, 2]) if self.device == "cpu" else -1
                if self.device != "cpu" and k and path[-1] & REDIRECT_ARC_BIT:  # the GPU marks it on the path
                    redirect_arc, path = int(path[-1] & ~REDIRECT_ARC_BIT), path[:-1]
                hyp = self._frontend.make_hypothesis(
                    path, float(score[i]), bool(meta[i, 0]), redirect_arc, int(overflow[i]), int(meta[i, 3]),
                    frontier_total=int(stats[i, 0]), closure_added=int(stats[i, 1]))
                hyp.final_words = len(hyp.words)
                hyps.append(hyp)
            return hyps

    def __del__(self):
        for s in list(getattr(self, "_open", {}).values()):
            try:
                self._close(s)
            except Exception:  # interpreter shutdown
                pass

    # ------------------------------------------------------------------ decoding
    def advance(self, streams, chunks) -> None:
        """Feeds chunks[i] ([Tc, V], Tc >= 0; numpy, torch or DLPack, any device) to
        streams[i], all in one call."""
        streams = list(streams)
        chunks = list(chunks)
        if len(streams) != len(chunks):
            raise ValueError(f"{len(streams)} streams but {len(chunks)} chunks")
        if len({id(s) for s in streams}) != len(streams):
            raise ValueError("a stream appears twice in one advance")
        for s in streams:
            self._check_open(s)
        if not streams:
            return
        packed = self._pack_on_device(chunks)
        if packed is not None:
            packed, lens = packed
            self._feed(streams, packed, lens)
            return
        rows = []
        for s, c in zip(streams, chunks):
            if is_torch(c) and c.device.type != "cpu":  # any device: the CPU search reads host memory
                c = c.detach().cpu()
            lp = log_probs_to_host(c)
            if lp.ndim != 2:
                raise ValueError(f"each chunk must be [Tc, V], got shape {tuple(lp.shape)}")
            rows.append(lp)
        if not streams:
            return
        V = max(r.shape[1] for r in rows)
        Tc = max(r.shape[0] for r in rows)
        packed = np.zeros((len(rows), max(Tc, 1), max(V, 1)), np.float32)
        lens = np.zeros(len(rows), np.int32)
        for i, r in enumerate(rows):
            if r.shape[0] and r.shape[1] != V:
                raise ValueError(f"chunk {i} has {r.shape[1]} columns, others {V}")
            packed[i, : r.shape[0], : r.shape[1]] = r
            lens[i] = r.shape[0]
        if Tc:
            # the offline decoder's checks and transforms (acoustic_scale, blank_penalty, ...)
            packed = prepare_log_probs(packed, lens, self.graph.vocab_size, self.options)
            packed = check_log_probs(packed, self.graph.vocab_size)
            for i, r in enumerate(rows):
                bad = ~np.isfinite(r) & ~(r == -np.inf)
                if bad.any():
                    t, v = (int(x) for x in np.argwhere(bad)[0])
                    raise ValueError(f"chunk {i}[{t}, {v}] is {r[t, v]}: log-probs must not be NaN or +inf")
        self._feed(streams, packed, lens)

    def _feed(self, streams, packed, lens: np.ndarray) -> None:
        with self._lock:
            for s in streams:
                self._check_open(s)
            try:
                self._backend.advance([s._handle for s in streams], packed, lens)
            except Exception:
                # a GPU advance runs in rounds: one that fails after a round has moved some
                # streams part of their chunk; their frame counts follow the decoder's
                if self.device != "cpu":
                    for s in streams:
                        try:
                            s.frames = int(self._backend.stats(s._handle)["frames"])
                        except Exception:
                            pass
                raise
            for s, n in zip(streams, lens.tolist()):
                s.frames += n
        if self.endpoint is not None:
            for s in streams:
                s.endpoint = self.endpoint.detect(self._partial(s), s.frames)

    def _pack_on_device(self, chunks):
        """CUDA torch chunks for a GPU decoder on their device: padded into one [S, Tc, V]
        tensor there (no copy through the host), checked and transformed there as the
        offline GPU decoder does. None when the chunks are not all such tensors."""
        gpu = self._frontend._gpu
        torch = getattr(gpu, "torch", None) if gpu is not None else None
        if torch is None or not all(is_torch(c) and c.device == gpu.device for c in chunks):
            return None
        packed, lens = pad_on_device(torch, chunks, "chunk")
        if lens.any():
            packed = prepare_log_probs(packed, lens, self.graph.vocab_size, self.options)
            packed = gpu.to_device(packed)
            gpu.check_finite(packed, lens)
        return packed, lens

    def memory_stats(self, stream: Stream | None = None) -> dict:
        """With a stream: {frames, winners}: the search-log entries held (CPU: the stream's,
        bounded with compact; GPU: the decoder's, all streams, after its GC round), and on
        the GPU the committed arcs kept on the host. Without: the decoder's memory as
        `Decoder.memory_stats()` gives it, plus `streams` (open streams) and, on the CPU,
        `winners_held` (the open streams' search-log entries)."""
        if stream is not None:
            self._check_open(stream)
            return self._backend.stats(stream._handle)
        with self._lock:
            open_streams = list(self._open.values())
            if self.device == "cpu":
                from .memory import cpu_memory_stats

                held = sum(self._backend.stats(s._handle)["winners"] for s in open_streams)
                out = cpu_memory_stats(self.graph, winners_held=held)
            else:
                out = self._frontend.memory_stats()
            out["streams"] = len(open_streams)
            return out

    # ------------------------------------------------------------------ internals
    def _partial(self, stream: Stream) -> Hypothesis:
        self._check_open(stream)
        arcs, committed, score, ok, overflow = self._backend.partial(
            stream._handle, self._frontend.path_capacity(stream.frames))
        if not ok:
            h = self._frontend.make_hypothesis(np.zeros(0, np.int32), float("-inf"), False, -1, overflow, 0)
            h.final_words = 0
            return h
        h = self._frontend.make_hypothesis(arcs, score, False, -1, overflow, 0)
        rs = self.graph.arrays.aux_row_splits  # the words on the committed (image) arcs
        done = np.asarray(arcs[:committed], np.int64)
        h.final_words = int((rs[done + 1] - rs[done]).sum()) if done.size else 0
        return h

    def _check_open(self, stream) -> None:
        if not isinstance(stream, Stream) or stream._decoder is not self:
            raise TypeError("expected a Stream opened by this StreamingDecoder")
        if stream.closed:
            raise ValueError(f"{stream!r} was finalized or released; open a new stream")

    def _close(self, stream: Stream) -> None:
        if stream.closed:
            return
        stream.closed = True
        self._open.pop(stream.index, None)
        h, stream._handle = stream._handle, None
        if h is not None:
            self._backend.release(h)
