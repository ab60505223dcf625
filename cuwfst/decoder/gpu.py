"""The GPU backend of `cuwfst.Decoder`: graph upload (shared per graph and device),
decoder instances, input checks, sub-batching and overflow rescue (decoder/rescue.py)."""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import os
import threading
import time
import weakref

import numpy as np

from .._deps import require
from ..graph.image import native_array
from .inputs import check_lengths, is_torch
from .lattice_records import RECORD_INTS, LatticeRecords, lattices_from_records
from .memory import (MEM_STATS, POOL_BOUNDS, POOL_HANDOUTS, arena_ahead_mode, gpu_memory_stats, lane_pool_mode,
                     graph_chunks_mode, graph_pack_mode, payload_mode, pool_bound_mode, pool_full_mode, pool_handout_mode,
                     pool_hints_mode, pool_lane_factor, resolve_memory, winners_log_mode)
from .rescue import CAPACITY_BITS, RESCUE_BITS, batches, rescue
from .result import OVERFLOW_ARENA, OVERFLOW_POOL

from .offline import REDIRECT_ARC_BIT  # noqa: E402  (one definition)

# A pruned row whose records' filter on an epsilon graph broke its guard on the GPU (the pruning's
# recorded count -2): it has no lattice and is decoded again without the filter
EPS_REDO = "eps-redo"


class HostOverlap:
    """A lattice decode's host work (Lattice objects, word times and confidences; the host
    replay) of one sub-batch, run on one worker thread while the calling thread decodes the
    next sub-batch on the GPU: the native calls on both sides release the GIL. In submission
    order; leaving the block waits for all of it, and re-raises the first error (an error of
    the block itself wins, after the worker has finished). With finish_thread, the pipelined
    prunings' finishes run on a second thread (run_pruning), each handing its host work on.
    host_workers > 1: that many host workers, so sub-batches' host work runs side by side (each
    job writes its own rows; the order of their ends is then free); the finishes then always
    run on the finish thread, one at a time in submission order (GpuDecoder::PruneFinish)."""

    def __init__(self, finish_thread: bool = False, host_workers: int = 1, pools: dict | None = None):
        if not isinstance(host_workers, int) or isinstance(host_workers, bool) or host_workers < 1:
            raise ValueError(f"host_workers must be an int >= 1, got {host_workers!r}")
        finish_thread = finish_thread or host_workers > 1
        # pools: a dict that keeps this overlap's thread pools for the next one of the same shape
        # (GpuBackend.lattice_keep_pools: no threads started and ended a call); None: pools of its
        # own, shut down as the block ends
        self._kept = pools is not None
        self._pool, self._finish = self.pools(pools if pools is not None else {}, finish_thread, host_workers)
        self._futures = []
        self._prunings = []  # the hand-offs that finish a pipelined pruning (GpuDecoder::PruneFinish)
        self.host_workers = host_workers

    @staticmethod
    def pools(kept: dict, finish_thread: bool, host_workers: int):
        """(host pool, finish pool or None) from `kept` or made there. finish_thread: a pipelined
        pruning's finish on a thread of its own, its host work then on the host worker, so the next
        finish need not wait for the last one's host work (GpuBackend.lattice_finish "thread"); else
        both on the host worker, one after the other."""
        from concurrent.futures import ThreadPoolExecutor

        key = (host_workers, finish_thread)
        if key not in kept:
            kept[key] = (ThreadPoolExecutor(max_workers=host_workers, thread_name_prefix="cuwfst-lattice-host"),
                         ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuwfst-lattice-finish")
                         if finish_thread else None)
        return kept[key]

    def run(self, fn, pruning: bool = False) -> None:
        f = self._pool.submit(fn)
        self._futures.append(f)
        if pruning:
            self._prunings.append(f)

    def run_pruning(self, finish, then, split: bool = False) -> None:
        """A pipelined pruning's hand-off: then(finish()), finish() being the pruning (what
        drain_prunings waits for) and then() the host work on its result. On the host worker as
        one piece, or with a finish thread: finish() there, in submission order, each then()
        handed to the host worker as its finish returns. split: then(result) returns the host
        work's shares (callables), each handed to the host workers on its own, so one
        sub-batch's shares run side by side (on the finish thread; one after the other
        without it)."""
        if self._finish is None:
            self.run(lambda: [w() for w in then(finish())] if split else then(finish()), pruning=True)
            return

        def staged():
            r = finish()
            works = then(r) if split else [functools.partial(then, r)]
            ts = [self._pool.submit(w) for w in works]
            self._futures.extend(ts)
            return ts

        f = self._finish.submit(staged)
        self._futures.append(f)
        self._prunings.append(f)

    def drain_prunings(self, keep: int = 0) -> None:
        """Wait until at most `keep` pipelined prunings handed over are unfinished (the latest
        ones; the work before each finishes first); a finished one's error is raised here, and
        with a finish thread also the error of its host work where that has ended (its host work
        is not waited for: that is the thread's point)."""
        for f in self._prunings[: max(len(self._prunings) - keep, 0)]:
            r = f.result()
            if self._finish is not None:
                for t in r:
                    if t.done():
                        t.result()

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if self._kept:  # the pools stay: all of this block's work waited for
            from concurrent.futures import wait

            wait(list(self._prunings))  # (first: their finishes hand the host worker their work)
            wait(list(self._futures))
        else:
            if self._finish is not None:  # (first: its finishes hand the host worker their work)
                self._finish.shutdown(wait=True)
            self._pool.shutdown(wait=True)
        if kind is None:
            for f in self._futures:
                f.result()  # the first error, if any
        return False


class EarlyRescue:
    """The rows that a sub-batch flagged with a capacity overflow alone (no arena or pool bit:
    fewer rows a batch on the main instance cures those, after the sub-batches), rescued as
    soon as that sub-batch's decode returns: on the rescue instance, on a thread of its own,
    while the calling thread decodes the next sub-batches on the main instance (its own
    streams; graph capture is thread-local). For the padded sub-batches of 1-best and lattice
    decodes alike. The plan is decoder/rescue.py's and the decodes are the rescue's after the
    sub-batches (_decode_rows, host work at once), so the results are the same; what changes is
    when they run: beside the sub-batches rather than after the last one (s137: one rescued row
    of the sim set's 256 was 26 ms of a 379 ms lattice call, after everything else; the 1-best
    call rescues the same row). The rows' hypotheses go to a list of their own (a lattice
    sub-batch's own host work writes those rows' unrescued ones on the host-overlap worker), so
    `apply` puts the rescued ones in place after the sub-batches. Leaving waits for the thread
    and re-raises its first error."""

    def __init__(self, backend, lp, lens, stream, frontend, online, lattice: bool):
        from concurrent.futures import ThreadPoolExecutor

        self.be, self.lp, self.lens, self.stream, self.frontend, self.online = backend, lp, lens, stream, frontend, online
        self.lattice = bool(lattice)
        self.hyps = [None] * len(lens)
        self.rows = set()
        self._context = backend.caller_stream_context()  # (the thread's PyTorch stream: the caller's)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cuwfst-early-rescue")
        self._futures = []

    @staticmethod
    def flagged(rows: np.ndarray, bits: np.ndarray) -> dict:
        """{row: bits} of a sub-batch's rows (bits: their overflow bits, in order) that this
        class rescues: a capacity bit and neither the arena's nor the pool's."""
        bits = np.asarray(bits, np.int64)
        sel = ((bits & CAPACITY_BITS) != 0) & ((bits & (OVERFLOW_ARENA | OVERFLOW_POOL)) == 0)
        return {int(r): int(b) for r, b in zip(np.asarray(rows)[sel].tolist(), bits[sel].tolist())}

    def submit(self, flagged: dict) -> None:
        if not flagged:
            return
        self.be.rescue_instance()  # made on the calling thread (an allocation, before any use)
        self.rows.update(flagged)
        self._futures.append(self._pool.submit(self._run, dict(flagged)))

    def _run(self, flagged: dict) -> None:
        be = self.be

        def decode_batch(instance, rows):
            if instance != "rescue":  # (rows with a capacity bit never halve on the main instance)
                raise RuntimeError(f"early rescue asked for the {instance!r} instance")
            inst = be.rescue_instance()
            for s in range(0, len(rows), inst.max_lanes):
                be._decode_rows(inst, self.lp, self.lens, rows[s : s + inst.max_lanes], self.stream, self.hyps,
                                self.frontend, self.online, self.lattice)
            return [self.hyps[r].overflow for r in rows]

        with self._context():
            rescue(flagged, self.lens, decode_batch, main_batch=be.main.max_lanes, rescue_lanes=be.rescue_lanes,
                   stats=be.stats)

    @staticmethod
    @contextlib.contextmanager
    def running(early: "EarlyRescue | None"):
        """The sub-batches' block (early None: nothing to wait for): leaving it waits for the
        thread; an error of the block wins (raised once the thread is done), else the thread's
        first error is raised."""
        if early is None:
            yield
            return
        try:
            yield
        except BaseException:
            early.close(errors=False)
            raise
        early.close()

    def close(self, errors: bool = True) -> None:
        """Waits for the thread; then (errors) raises its first error, if any."""
        self._pool.shutdown(wait=True)
        if errors:
            for f in self._futures:
                f.result()

    def apply(self, hyps: list) -> None:
        for r in self.rows:
            hyps[r] = self.hyps[r]


def _drop_overlap_stamped(host: HostOverlap | None) -> dict | None:
    """(benchmarks) A finished overlap's parts dropped one at a time, each timed: its futures (the
    latest first; the slowest three by index and result type) and its two pools. None for None."""
    if host is None:
        return None
    fs, host._futures, host._prunings = host._futures, [], []
    n, slow = len(fs), []
    while fs:
        f = fs.pop()
        kind = type(f.result()).__name__ if f.done() and f.exception() is None else "error"
        t0 = time.perf_counter()
        f = None
        slow.append(((time.perf_counter() - t0) * 1000, len(fs), kind))
    t0 = time.perf_counter()
    host._pool = None
    t1 = time.perf_counter()
    host._finish = None
    t2 = time.perf_counter()
    return dict(futures=n, futures_ms=sum(x[0] for x in slow), slowest=sorted(slow, reverse=True)[:3],
                pool_ms=(t1 - t0) * 1000, finish_ms=(t2 - t1) * 1000)


def _switch(backend, attr: str, env: str, choices: tuple, default: str) -> str:
    """A backend switch: the attribute `attr`, else the environment variable `env` (both read at each
    call; empty: `default`), one of `choices`, else a ValueError naming the attribute."""
    v = getattr(backend, attr, None) or os.environ.get(env, default) or default
    if v not in choices:
        named = ", ".join(map(repr, choices[:-1])) + f" or {choices[-1]!r}"
        raise ValueError(f"{attr} must be {named}, got {v!r}")
    return v


def _host_run(host: HostOverlap | None, fn) -> None:
    """fn() now (host None) or on the overlap's worker."""
    if host is None:
        fn()
    else:
        host.run(fn)
# Steps per run of a bounded GPU lattice decode (CUWFST_LATTICE_CHUNK; 0: one run): a CUDA-graph
# step bucket (a multiple of 32), so non-last runs replay; any value is exact.
LATTICE_CHUNK_DEFAULT = 64
# The automatic chunk (CUWFST_LATTICE_CHUNK unset or "auto"): a batch whose longest row takes at
# most this many steps (frames + 1) runs whole (one run, then pruned); a longer one in runs of
# LATTICE_CHUNK_DEFAULT. Why (docs/speed-notes.md, "The automatic lattice chunk"): the bounded
# path pays per run (host syncs, a carry move, two buffer generations, pageable readback: at
# mean T 227 on the full tier 158.7 ms of pruning passes and 50.2 ms of readback against the
# whole path's 103.5 and 1.6), while the whole path's records grow with T; below this bound
# they are at most 384 / (64 + ~20) ~ 4.6x the bounded path's, and past it the bound holds, so
# lattice memory stays bounded whatever T is. Same lattices either way.
LATTICE_WHOLE_MAX_STEPS = 384
# The same bound with the records' filter on (GpuBackend.lattice_filter_on): it keeps ~7% of the
# records on the full tier (H200, batch 32, mean T 227: 48.0 M of 676.5 M over 64 utterances;
# 32.7 M records of capacity whole against 437.7 M unfiltered, 2,303 against 22,772 MiB of
# lattice buffers), so whole batches of up to
# 1,024 steps hold fewer records than unfiltered ones of 384 did, and the whole path was 240.0 ms
# a batch against the bounded path's 281.9 in the same device call (docs/benchmarks.md).
LATTICE_WHOLE_MAX_STEPS_FILTERED = 1024


def auto_lattice_chunk(max_steps: int | None, filtered: bool = False) -> int:
    """The automatic chunk of a batch whose longest row takes `max_steps` steps (its frames +
    1; None: unknown): 0 (the whole batch in one run) up to LATTICE_WHOLE_MAX_STEPS (with the
    records' filter: LATTICE_WHOLE_MAX_STEPS_FILTERED), else LATTICE_CHUNK_DEFAULT."""
    bound = LATTICE_WHOLE_MAX_STEPS_FILTERED if filtered else LATTICE_WHOLE_MAX_STEPS
    return 0 if max_steps is not None and max_steps <= bound else LATTICE_CHUNK_DEFAULT
# Winners ids are int32 on the device, so an arena holds fewer than 2^31 entries.
ARENA_LIMIT = 2**31 - 1

# graph -> {device index: _Uploaded}. Weak on the graph: an upload lives while its Graph
# does or while a decoder built on it holds it (GpuInstance._uploaded), and is freed when
# both are gone, so a service that reloads graphs does not keep every copy on the GPU.
_uploads: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_uploads_lock = threading.Lock()


def _next_pow2(x: int) -> int:
    return 1 << max(1, int(x - 1).bit_length())


def lane_capacities(num_states: int, main_q: int) -> tuple[int, int, int]:
    """A lane's static capacities on a graph of num_states states: (main_q, claims_cap,
    hash_cap): the frontier (at most every state), the distinct states a step claims (at
    most every state, twice the frontier), and the hash table (a power of two, load <= 1/2).
    The pooled layout's regions and pools are sized from these (types.cuh, Allocate)."""
    q = int(min(num_states, main_q))
    claims = int(min(num_states, 2 * q))
    return q, claims, _next_pow2(2 * claims)


def arena_limits(max_lanes: int, arena_entries: int | None = None, memory: str = "eager") -> tuple[int, int]:
    """(initial, maximum) winners-arena entries for an instance of `max_lanes` lanes: 16 Mi
    per lane up to the int32 id limit (the spec's min(512 Mi, ...) cap, 512 Mi at 32 lanes,
    made 1024 lanes x 1000 frames x ~512 survivors overflow). The arena starts small and
    grows on demand (a lazy log commits memory to what batches use, 4 Mi entries = 32 MiB
    first; an eager one starts at 16 Mi, as each growth copies), so a large maximum costs
    nothing until a batch needs it."""
    if max_lanes < 1:
        raise ValueError(f"max_lanes must be >= 1, got {max_lanes}")
    arena_max = min(ARENA_LIMIT, max(64 << 20, (16 << 20) * max_lanes))
    first = (4 << 20) if memory != "eager" else (16 << 20)
    return int(min(arena_max, arena_entries or first)), int(arena_max)


class _Uploaded:
    """One graph's device arrays on one device (a native handle)."""

    def __init__(self, mod, handle):
        self.mod, self.handle = mod, handle

    @property
    def emit_sorted(self) -> bool:
        """The graph's emitting arcs are sorted (label 0, then by weight): decoders trim slots."""
        return bool(self.mod.gpu_graph_emit_sorted(self.handle))

    @property
    def packed(self) -> bool:
        """Each arc's destination and label share one uint32 on the device (CUWFST_GRAPH_PACK)."""
        return bool(self.mod.gpu_graph_packed(self.handle))

    @property
    def label_tables(self) -> tuple[int, int]:
        """The label bound's tables (types.cuh DeviceGraph::heavy_bits): (heavy states, 32-bit words
        a heavy state's label bitmap); (0, 0) where the upload built none."""
        v = int(self.mod.gpu_graph_label_tables(self.handle))
        return v >> 8, v & 255

    def __del__(self):
        h, self.handle = getattr(self, "handle", 0), 0
        if h:
            try:
                self.mod.gpu_graph_free(h)
            except Exception:  # interpreter shutdown: nothing left to free into
                pass


def upload_graph(mod, graph, device_index: int) -> _Uploaded:
    """Upload once per (graph, device); every decoder on that device shares it."""
    with _uploads_lock:
        per_device = _uploads.get(graph)
        if per_device is None:
            per_device = _uploads[graph] = {}
        up = per_device.get(device_index)
        if up is not None:
            return up
        a = graph.arrays
        h = mod.gpu_graph_upload(
            native_array(a.row_splits, np.int32), native_array(a.final_count, np.int32),
            native_array(a.eps_count if a.has_eps else np.zeros(0, np.int32), np.int32),
            native_array(a.dest, np.int32), native_array(a.ilabel, np.int32),
            native_array(a.weight, np.float32),
            native_array(a.arc_id if a.arc_id is not None else np.zeros(0, np.int32), np.int32),
            a.vocab_size, a.start_state, a.finals_at_end, device_index, graph_pack_mode() == "on")
        up = per_device[device_index] = _Uploaded(mod, h)
        return up


class _NeverRaised(Exception):
    """Stands in for PyTorch's OutOfMemoryError where there is no torch."""


def check_gc_interval(gc_interval) -> int:
    if not isinstance(gc_interval, int) or isinstance(gc_interval, bool) or not 0 <= gc_interval <= 4096:
        raise ValueError(f"gc_interval must be an int in [0, 4096] steps (0: off), got {gc_interval!r}")
    return gc_interval


def live_uploads() -> int:
    """Graph uploads alive in this process (for tests and leak checks)."""
    with _uploads_lock:
        return sum(len(v) for v in _uploads.values())


# Kernel variants (docs/design.md, "Kernel variants"): every one gives the same results; the
# switches exist so that one process can time them side by side. "new" is the default;
# CUWFST_KERNELS=old (read when a decoder is built) makes "old" the default instead.
# scan_split: CTAs per lane of the step's scan (0 auto, 1 the one-CTA ScanKernel); closure:
# "lists" (Finalize and Resolve list the next pass's tokens) or "scan" (EpsScan every pass), or
# "chain" (the passes' fixpoint in three launches by following each listed token's epsilon
# chain, epsilon.cuh; where a state has at most one epsilon arc, the epsilon arcs are acyclic
# and eps_iterations covers the longest chain, else "lists"; lattice decodes run "lists");
# finalize_split: CTAs per lane of Finalize / Resolve / ClearClaims (0 auto, 8 the old grid);
# fused_max: True = no MaxKernel, FusedExpandKernel admits against a lower bound of the step's
# max and finds the exact max as it goes (issue 11; off by default until a device A/B proves it).
# trim_arcs: True = a real step's scan gives each token only the prefix of its sorted emitting
# arcs that can pass (scan.cuh TrimDegrees; on graphs whose arcs are sorted, which every graph
# built by this version is); "untrimmed" is "new" without it; "new_lists" is "new" closing by
# lists everywhere (the default before the closure by chains, kept for A/B runs). finalize_split
# 0 (auto) gives a lane's claims to at most AutoFinalizeSplit CTAs, each taking at least one
# round of claims (1,024); an explicit split gives even chunks over that many CTAs: "new_even"
# is "new" with 32 (the auto grid at 32 lanes before the rounds rule, kept for A/B runs).
# pdl: True = the step kernels are launched with programmatic dependent launch where the GPU
# has it (compute capability 9.0+): each kernel's launch overlaps the end of the one before,
# which it waits for on entry (common.cuh StepKernelEntry); the same kernels, the same results.
# "new" has it (H200, same run: HLG 32 x 250 1% faster, TLG 2.5%); "new_nopdl" is "new"
# without it and "new_fused" "new" with fused_max, for A/B runs; the older variants launch plainly.
# scan_order / scan_round: the split scan's tickets and granule (SCAN_ORDERS). "new" runs the
# persistent scan (one wave of CTAs over the lanes' non-empty chunks) with 512-token granules
# (H200, same run at 5d7b6fd: HLG 32 x 250 35.46 -> 33.04 ms against lane-major 2,048-token
# granules; TLG 61.43 -> 58.54 ms with 2,048-token granules); "new_lane" is "new" with the
# lane-major tickets and 2,048-token granules (the default before), "new_chunks" with
# chunk-major tickets, both for A/B runs.
# refill_kernel: where continuous batching's device-side refill runs: False = in FinalizeKernel
# (the last CTA of each lane whose row ended refills it: no launch a step), True = RefillKernel
# after every step's Finalize (the way before; "new_rk" for A/B runs). The same results.
_NEW = dict(scan_split=0, closure="chain", finalize_split=0, fused_max=False, trim_arcs=True, pdl=True,
            scan_order="persistent", scan_round=512, refill_kernel=False)
KERNEL_VARIANTS = {
    "new": _NEW,
    "old": dict(scan_split=1, closure="scan", finalize_split=8, fused_max=False, trim_arcs=False),
    "split": dict(scan_split=0, closure="scan", finalize_split=8, fused_max=False, trim_arcs=False),
    "lists": dict(scan_split=1, closure="lists", finalize_split=8, fused_max=False, trim_arcs=False),
    "wide": dict(scan_split=1, closure="scan", finalize_split=0, fused_max=False, trim_arcs=False),
    "fused": dict(scan_split=0, closure="lists", finalize_split=0, fused_max=True, trim_arcs=True),
    "untrimmed": dict(scan_split=0, closure="lists", finalize_split=0, fused_max=False, trim_arcs=False),
    "new_lists": dict(scan_split=0, closure="lists", finalize_split=0, fused_max=False, trim_arcs=True),
    "new_even": dict(scan_split=0, closure="chain", finalize_split=32, fused_max=False, trim_arcs=True),
    "new_nopdl": {**_NEW, "pdl": False},
    "new_fused": {**_NEW, "fused_max": True},
    "new_lane": {**_NEW, "scan_order": "lane", "scan_round": 0},
    "new_chunks": {**_NEW, "scan_order": "chunk", "scan_round": 0},
    "new_rk": {**_NEW, "refill_kernel": True},
    "new_noload": {**_NEW, "scan_order": "persistent_noload"},
}
# continuous batching's segment length when the caller names none (steps between the host's
# visits): with refill="device" lanes refill on the GPU inside a segment, so long segments only
# save the per-segment host round trip (~0.3 ms on the H200); with refill="segment" a lane that
# ends mid-segment idles until the segment's end, so they stay short
SEGMENT_DEVICE_REFILL = 256
SEGMENT_HOST_REFILL = 32
CLOSURES = ("scan", "lists", "chain")  # the native closure modes (DecoderConfig::closure_lists)


def chain_closure_ok(graph, eps_iterations: int) -> bool:
    """closure="chain" gives the passes' result here: every state has at most one epsilon
    arc, the epsilon arcs are acyclic and eps_iterations covers the longest chain."""
    eps = graph.arrays.eps_count
    chain = graph.max_epsilon_chain
    return eps is not None and len(eps) > 0 and int(eps.max()) <= 1 and 0 <= chain <= eps_iterations


def kernel_variant(name: str) -> dict:
    """The switches of a variant name: a KERNEL_VARIANTS key, optionally with ':N' (N scan CTAs
    a lane) and ':R' after it ('new:16:512', 'new::512': R-token granules of the split scan)."""
    base, _, rest = name.partition(":")
    n, _, r = rest.partition(":")
    if base not in KERNEL_VARIANTS or not all(x == "" or x.isdigit() for x in (n, r)):
        raise ValueError(f"a kernel variant is one of {sorted(KERNEL_VARIANTS)}, optionally with :N scan CTAs a "
                         f"lane and :R tokens per scan granule (e.g. new:16:512, new::512), got {name!r}")
    kw = dict(KERNEL_VARIANTS[base])
    if n:
        kw["scan_split"] = int(n)
    if r:
        kw["scan_round"] = int(r)
    return kw


def kernel_defaults() -> dict:
    """The kernel variant a decoder gets when its caller names none: CUWFST_KERNELS or "new"."""
    import os

    name = os.environ.get("CUWFST_KERNELS", "new") or "new"
    try:
        return kernel_variant(name)
    except ValueError as e:
        raise ValueError(f"CUWFST_KERNELS: {e}") from None


# the slot walkers (expand.cuh; their index is DecoderConfig::walker): "warp" (32-slot warp strips,
# the default), "thread" (per-thread cursors), "warp_search" ("warp" entering each lane by the
# binary search and the gallop it used before WarpLaneOf, for A/B runs), "warp_coop" ("warp" with
# Max and Expand in one cooperative kernel, expand.cuh CoopWalkKernel; the static layout without
# fused_max, else the two kernels), "warp_coop_pdl" ("warp_coop" launched with programmatic dependent
# launch too, as the other step kernels are)
WALKERS = ("warp", "thread", "warp_search", "warp_coop", "warp_coop_pdl")
# walker="auto" (the default): "warp_coop_pdl" on graphs with epsilon arcs, "warp" on the others.
# Measured on the H200, full tier, batch 32, same run (docs/benchmarks.md, session of 2026-12-01
# 16:00): the TLG 56.17 / 56.43 ms "warp", 53.43 "warp_coop_pdl"; the HLG 31.75 / 31.92 "warp",
# 32.61 "warp_coop_pdl".


def resolve_walker(walker: str, has_epsilon: bool) -> str:
    """The walker a decoder runs: `walker` itself, or for "auto" the measured choice above."""
    if walker == "auto":
        return "warp_coop_pdl" if has_epsilon else "warp"
    if walker not in WALKERS:
        raise ValueError(f"walker must be 'auto' or one of {', '.join(map(repr, WALKERS))}, got {walker!r}")
    return walker


# ("persistent_noload": "persistent" without Workspace::scan_preload's fetching ahead: a chunk's
# tokens read after the trim's anchor walk, every ticket its own atomic, the order before; for
# A/B runs as the variant "new_noload")
SCAN_ORDERS = ("lane", "chunk", "persistent", "persistent_noload")  # ScanSplitKernel's ticket order (DecoderConfig::scan_order)
# the switches a kernel variant sets, and their values where a variant leaves one out
KERNEL_SWITCH_DEFAULTS = dict(scan_split=0, closure="chain", finalize_split=0, fused_max=False, trim_arcs=True,
                              pdl=False, scan_round=0, scan_order="lane", refill_kernel=False)


def resolve_kernels(**given) -> dict:
    """The kernel switches (KERNEL_SWITCH_DEFAULTS' names), checked; one not given or None
    takes the default variant's value (kernel_defaults)."""
    d = {**KERNEL_SWITCH_DEFAULTS, **kernel_defaults()}
    unknown = set(given) - set(d)
    if unknown:
        raise TypeError(f"unknown kernel switches {sorted(unknown)}")
    k = {name: d[name] if given.get(name) is None else given[name] for name in KERNEL_SWITCH_DEFAULTS}
    for name in ("fused_max", "trim_arcs", "pdl", "refill_kernel"):
        if not isinstance(k[name], bool):
            raise ValueError(f"{name} must be a bool (or None: the default), got {k[name]!r}")
    for name in ("scan_split", "finalize_split"):
        v = k[name]
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 64:
            raise ValueError(f"{name} must be an int in [0, 64] (0: auto), got {v!r}")
    v = k["scan_round"]
    if not isinstance(v, int) or isinstance(v, bool) or not (v == 0 or 32 <= v <= 2048):
        raise ValueError(f"scan_round must be 0 (the default, 2048) or an int in [32, 2048], got {v!r}")
    if k["scan_order"] not in SCAN_ORDERS:
        raise ValueError(f"scan_order must be one of {', '.join(map(repr, SCAN_ORDERS))}, got {k['scan_order']!r}")
    if k["closure"] not in CLOSURES:
        raise ValueError(f"closure must be one of {', '.join(map(repr, CLOSURES))}, got {k['closure']!r}")
    return k


class GpuInstance:
    """One native decoder: fixed capacities, its own stream and CUDA-graph cache."""

    def __init__(self, mod, uploaded, graph, options, device_index, *, max_lanes, max_frames,
                 main_q, use_cuda_graphs, walker="warp", walk_blocks=0, arena_entries=None,
                 arena_max=None, graph_cache_size=8, graph_max_steps=4096, eps_iterations=0, memory="lazy",
                 scan_split=None, closure=None, finalize_split=None, fused_max=None, eps_blocks=0,
                 lattice_entries=None, pool_bound=None, pool_hints=None, arena_ahead=None, pool_handout=None,
                 trim_arcs=None, pdl=None, scan_round=None, scan_order=None, refill_kernel=None,
                 winners_log=None, graph_chunks=None, payload=None, pool_full=None, pool_q=0):
        o = options
        self.main_q, self.claims_cap, self.hash_cap = lane_capacities(graph.num_states, main_q)
        # a pooled 1-best batch's lane caps (native GpuDecoder::SeqWorkspace, DecoderConfig::pool_q):
        # main_q's unless pool_q asks more, capped as main_q is by the graph's states (the native
        # side also keeps it within the payload words' and the hints' int32 ranges)
        self.pool_caps = (lane_capacities(graph.num_states, pool_q) if pool_q > self.main_q
                          else (self.main_q, self.claims_cap, self.hash_cap))
        arena_cap, default_max = arena_limits(max_lanes, arena_entries, memory)
        self.arena_max = int(arena_max or default_max)
        arena_cap = min(arena_cap, self.arena_max)
        self.max_lanes = max_lanes
        self.eps_iterations = eps_iterations
        self.mod = mod
        self._uploaded = uploaded  # keeps the graph's device arrays alive
        k = resolve_kernels(scan_split=scan_split, closure=closure, finalize_split=finalize_split,
                            fused_max=fused_max, trim_arcs=trim_arcs, pdl=pdl, scan_round=scan_round,
                            scan_order=scan_order, refill_kernel=refill_kernel)
        if k["closure"] == "chain" and not chain_closure_ok(graph, eps_iterations):
            k["closure"] = "lists"  # (the native side checks the degree too; mem_stats tells which ran)
        self.handle = mod.gpu_decoder_create(
            uploaded.handle, o.search_beam, o.output_beam, o.min_active_states, o.max_active_states,
            o.allow_partial, max_lanes, max_frames, self.main_q, self.claims_cap, self.hash_cap,
            arena_cap, self.arena_max, use_cuda_graphs, WALKERS.index(walker), int(walk_blocks),
            int(graph_cache_size), int(graph_max_steps), int(eps_iterations), memory != "eager",
            lane_pool_mode(memory), k["scan_split"], CLOSURES.index(k["closure"]), int(eps_blocks), k["finalize_split"],
            k["fused_max"], int(lattice_entries or 0), POOL_BOUNDS.index(pool_bound or pool_bound_mode()),
            (pool_hints or pool_hints_mode()) == "adaptive", (arena_ahead or arena_ahead_mode()) == "on",
            POOL_HANDOUTS.index(pool_handout or pool_handout_mode()), k["trim_arcs"], k["pdl"], k["scan_round"],
            SCAN_ORDERS.index(k["scan_order"]), k["refill_kernel"],
            memory == "pooled" and (winners_log or winners_log_mode()) == "host",
            (graph_chunks or graph_chunks_mode()) == "on", (payload or payload_mode()) == "token",
            pool_full_mode() if pool_full is None else int(pool_full), int(pool_q))

    def __del__(self):
        h, self.handle = getattr(self, "handle", 0), 0
        if h:
            try:
                self.mod.gpu_decoder_free(h)
            except Exception:  # interpreter shutdown
                pass

    def trim(self, log: bool = True) -> int:
        """Gives back the lane pools whole and, with log, a device winners log's growth beyond
        its first commit; the next decode commits them back before its first step. The bytes
        given back (GpuDecoder::TrimWorkspace)."""
        return int(self.mod.gpu_decoder_trim(self.handle, bool(log)))

    def mem_stats(self) -> dict:
        out = np.zeros(len(MEM_STATS), np.int64)
        self.mod.gpu_decoder_mem_stats(self.handle, out)
        return dict(zip(MEM_STATS, out.tolist()))

    PROFILE_KINDS = ("init", "scan", "lane_scan(fused into scan)", "max", "expand", "finalize", "backtrack",
                     "sanitize", "eps_scan", "eps_expand", "eps_resolve", "clear_claims", "lat_persist",
                     "lat_step_end", "handout", "eps_link")

    def profile(self, enable: bool | None = None) -> dict:
        """Accumulated kernel milliseconds by kind; enable=True makes later decodes run
        launch by launch with CUDA events around each kernel (no CUDA-graph replay)."""
        out = np.zeros(len(self.PROFILE_KINDS), np.float64)
        self.mod.gpu_decoder_profile(self.handle, -1 if enable is None else int(enable), out)
        return dict(zip(self.PROFILE_KINDS, out.tolist()))

    SCAN_TRACE_MARKS = ("entry", "plan", "ticket", "trim", "degrees", "look_back", "emit", "lane_done",
                        "grid_last", "tail")

    def scan_trace(self):
        """The persistent scan's phase trace (diagnostics; CUWFST_SCAN_TRACE=N set when this
        instance was built): (launches traced, ring [min(N, launches), grid, words] uint64 with
        the oldest kept launch first), or None when the trace is off. A CTA's words: the
        %globaltimer ns at SCAN_TRACE_MARKS (0: not reached), then its first item's info (lane |
        chunk << 16 | one round << 28 | the lane's last CTA << 29 | the grid's last << 30) and
        its tokens (scan.cuh ScanTraceMark)."""
        head = np.zeros(4, np.int64)
        need = int(self.mod.gpu_decoder_scan_trace(self.handle, head))
        if need == 0:
            return None
        out = np.zeros(need, np.int64)
        self.mod.gpu_decoder_scan_trace(self.handle, out)
        cap, grid, words, steps = (int(x) for x in out[:4])
        ring = out[4:].view(np.uint64).reshape(cap, grid, words)
        kept = min(cap, steps)
        order = [(steps - kept + i) % cap for i in range(kept)]
        return steps, ring[order]

    def _outputs(self, lp, B: int | None = None):
        """The decode's output arrays for lp [B, T, V] (or B of its rows): arcs [B, cap] (one arc
        per frame and per closure pass), length, score, meta [B, 4], stats [B, 2]."""
        B, T = lp.shape[0] if B is None else B, lp.shape[1]
        cap = (T + 2) * (1 + self.eps_iterations)
        return (np.zeros((B, cap), np.int32), np.zeros(B, np.int32), np.zeros(B, np.float32),
                np.zeros((B, 4), np.int32), np.zeros((B, 2), np.int64))

    @staticmethod
    def _step_outputs(lp, B: int | None = None):
        """The lattice stage's per-step arrays: record counts, cutoffs and frontier sizes
        [B, T + 1], and the records' total."""
        B, T = lp.shape[0] if B is None else B, lp.shape[1]
        return (np.zeros((B, T + 1), np.int32), np.zeros((B, T + 1), np.float32), np.zeros((B, T + 1), np.int32),
                np.zeros(1, np.int64))

    def first_non_finite(self, lp, lens: np.ndarray, stream: int) -> int:
        """b * T + t of the first frame of lp [B, T, V] (on the device) within a row's length
        that holds a NaN or +inf, or -1 (the native check; B may exceed max_lanes). Nothing to
        look at (T = 0, every length 0): -1 without a native call (on the H200 a case of the
        fuzz test, likely T = 0, was refused by the binding's tensor checks)."""
        if int(lp.shape[1]) == 0 or not np.any(lens):
            return -1
        return int(self.mod.gpu_check_finite(self.handle, lp, np.ascontiguousarray(lens, np.int32), stream))

    def decode(self, lp, lens: np.ndarray, stream: int, online: bool = False, rows: np.ndarray | None = None):
        """rows: decode those rows of lp (read in place, gpu_decode_rows), else all of lp."""
        if rows is not None:
            out = self._outputs(lp, len(rows))
            self.mod.gpu_decode_rows(self.handle, lp, np.ascontiguousarray(rows, np.int32), lens, online, stream, *out)
            return out
        out_arcs, out_len, out_score, out_meta, out_stats = out = self._outputs(lp)
        self.mod.gpu_decode(self.handle, lp, lens, online, stream, out_arcs, out_len, out_score, out_meta, out_stats)
        return out

    def decode_lattice(self, lp, lens: np.ndarray, stream: int, online: bool = False, eps_filter: bool = False,
                       output_beam: float = 0.0, filter_pad: float = 0.0):
        """decode() plus the lattice records of every row (lattice_records.LatticeRecords):
        the decode runs the step pipeline's lattice stage (csrc/include/cuwfst/lattice.cuh).
        eps_filter (graphs with epsilon arcs): the records' filter (common.cuh LatEpsFilterFor,
        output_beam its beam, filter_pad added to its offset) leaves out the arcs no pruning window
        can keep, and the records carry each step's assumed magnitude (producer_a) for the
        replay's guard."""
        out_arcs, out_len, out_score, out_meta, out_stats = out = self._outputs(lp)
        counts, cutoffs, sizes, total = self._step_outputs(lp)
        producer_a = np.zeros(counts.shape, np.float32)
        eps_filter = bool(eps_filter) and self.eps_iterations > 0
        t0 = time.perf_counter()
        self.mod.gpu_decode_lattice(self.handle, lp, lens, online, stream, out_arcs, out_len, out_score, out_meta,
                                    out_stats, counts, cutoffs, sizes, total, int(eps_filter), float(output_beam),
                                    float(filter_pad), producer_a)
        t1 = time.perf_counter()
        records = np.empty((int(total[0]), RECORD_INTS), np.int32)  # (every entry written: its rows' records)
        self.mod.gpu_lattice_records(self.handle, records)
        # (benchmarks: the decode call, the records' copy to the host, their count)
        self.last_lattice_stamps = (t0, t1, time.perf_counter(), int(total[0]))
        return out, LatticeRecords(records, counts, cutoffs, sizes, producer_a if eps_filter else None)

    def decode_lattice_pruned(self, lp, lens: np.ndarray, stream: int, output_beam: float, online: bool = False,
                              chunk: int = 0, filter: bool = True, filter_pad: float = 0.0, trim: bool = True,
                              eps_trim: bool = False):
        """decode() plus every row's lattice pruned on the GPU (gpu_lattice_prune.cu; epsilon-free
        graphs): returns the decode's arrays and, per row, (states [3, S], arcs [4, A],
        scores [3, A], recorded arcs) as the reference module's ref_lattice_row gives them,
        None for rows with a rescue overflow bit. self.last_prune_ms: {device, readback, host} of
        the native pruning ("host": the numbering of the kept states and arcs, on the device
        unless CUWFST_LATTICE_NUMBER=host selects lattice_number.h's host numbering), native
        (the whole native call: decode + pruning) and rows (the rows' arrays into numpy),
        milliseconds. chunk > 0: bounded lattice memory (the batch
        in runs of `chunk` steps, each run's records pruned with k2's windows before the next,
        GpuDecoder::RunBoundedLattice); 0: the whole batch, then pruned. Same lattices.
        filter: the records' filter (GpuBackend.lattice_filter_on); filter_pad: added
        to its rounding pad (tests only: a negative pad must be caught); trim: with the filter,
        the lattice trim (GpuBackend.lattice_trim_on; the rows' recorded arcs are then None);
        eps_trim: on a graph with epsilon arcs, with its filter, the lattice trim on epsilon graphs
        (GpuBackend.lattice_eps_trim_on). Same lattices."""
        B = lp.shape[0]
        out_arcs, out_len, out_score, out_meta, out_stats = out = self._outputs(lp)
        counts, cutoffs, sizes, total = self._step_outputs(lp)
        sizes2 = np.zeros((B, 3), np.int64)
        ms = np.zeros(3, np.float64)
        t0 = time.perf_counter()
        self.mod.gpu_decode_lattice_pruned(self.handle, lp, lens, online, stream, out_arcs, out_len, out_score,
                                           out_meta, out_stats, counts, cutoffs, sizes, total, float(output_beam),
                                           sizes2, ms, int(chunk), int(bool(filter)), float(filter_pad),
                                           _trim_bits(trim, eps_trim))
        t1 = time.perf_counter()
        rows = self._pruned_rows(out, sizes2)
        self.last_prune_ms = dict(zip(("device", "readback", "host"), ms.tolist()),
                                  native=(t1 - t0) * 1000, rows=(time.perf_counter() - t1) * 1000)
        return out, rows

    def _pruned_rows(self, out, sizes2):
        """Every kept row's arrays of the last pruning (None for rows with a rescue bit), in one
        call (gpu_lattice_pruned_rows writes every entry, on several threads)."""
        skip = (out[3][:, 2] & RESCUE_BITS) != 0
        rows = [None] * len(skip)
        take, arrays = [], []
        for b in range(len(skip)):
            if skip[b]:
                continue
            S, A = int(sizes2[b, 0]), int(sizes2[b, 1])
            row = (np.empty((3, S), np.int32), np.empty((4, A), np.int32), np.empty((3, A), np.float32))
            take.append(b)
            arrays += row
            rec = int(sizes2[b, 2])  # -1: the lattice trim (or an epsilon graph's filter) did not count them
            rows[b] = (*row, rec if rec >= 0 else None)
        self.mod.gpu_lattice_pruned_rows(self.handle, np.array(take, np.int32), arrays)
        for b in take:  # -2: an epsilon graph's records' filter broke its guard (the row is decoded again)
            if int(sizes2[b, 2]) == -2:
                rows[b] = EPS_REDO
        return rows

    def decode_lattice_pruned_begin(self, lp, lens: np.ndarray, stream: int, output_beam: float,
                                    online: bool = False, filter: bool = True, filter_pad: float = 0.0,
                                    trim: bool = True, rows: np.ndarray | None = None, eps_trim: bool = False):
        """decode_lattice_pruned's first half (the whole batch, chunk 0): the decode of lp's rows
        `rows` (read in place; None: every row), and its records copied into a pruning job
        (GpuDecoder::PruneBegin), so the next decode may start. Returns the decode's arrays and
        the job for lattice_prune_finish, which the caller runs (on one thread at a time, e.g. a
        HostOverlap worker) before the begin after next."""
        rows = np.arange(lp.shape[0], dtype=np.int32) if rows is None else np.ascontiguousarray(rows, np.int32)
        out_arcs, out_len, out_score, out_meta, out_stats = out = self._outputs(lp, len(rows))
        counts, cutoffs, sizes, total = self._step_outputs(lp, len(rows))
        t0 = time.perf_counter()
        job = self.mod.gpu_decode_lattice_pruned_begin(self.handle, lp, rows, lens, online, stream, out_arcs, out_len,
                                                       out_score, out_meta, out_stats, counts, cutoffs, sizes, total,
                                                       float(output_beam), int(bool(filter)), float(filter_pad),
                                                       _trim_bits(trim, eps_trim))
        return out, (int(job), (time.perf_counter() - t0) * 1000)

    def lattice_prune_finish(self, out, job):
        """The second half: the pruning of `job` on the decoder's pruning stream, beside whatever
        decode runs meanwhile, and every kept row's arrays (decode_lattice_pruned's rows)."""
        job_id, begin_ms = job
        B = out[3].shape[0]
        sizes2 = np.zeros((B, 3), np.int64)
        ms = np.zeros(3, np.float64)
        t0 = time.perf_counter()
        self.mod.gpu_lattice_prune_finish(self.handle, job_id, sizes2, ms)
        t1 = time.perf_counter()
        rows = self._pruned_rows(out, sizes2)
        self.last_prune_ms = dict(zip(("device", "readback", "host"), ms.tolist()),
                                  native=begin_ms + (t1 - t0) * 1000, rows=(time.perf_counter() - t1) * 1000)
        return rows

    def decode_many(self, lp, lens: np.ndarray, stream: int, online: bool = False, segment: int = 32,
                    gc: bool = False, refill: bool = False):
        """Continuous batching: any number of rows through the lanes in one native call
        (gpu_decode_many: ManyBegin, then ManyLaunch / ManyWait until done); gc: a winners-log
        GC round after every segment (long-form decoding); refill: lanes take the next row on
        the device the step after theirs ends (offline rows, without gc)."""
        out_arcs, out_len, out_score, out_meta, out_stats = out = self._outputs(lp)
        self.mod.gpu_decode_many(self.handle, lp, lens, online, int(segment), bool(gc), bool(refill), stream,
                                 out_arcs, out_len, out_score, out_meta, out_stats)
        return out

    def decode_many_segments(self, lp, lens: np.ndarray, stream: int, online: bool = False, segment: int = 32,
                             refill: bool = False):
        """decode_many a segment at a time: yields (outputs, rows) with the rows (indices into
        lp) whose results the outputs now hold, as segments end. Each yield happens while the
        GPU runs the next segment, so the caller's work on those rows costs the decode no time.
        Leaving the loop early ends the native run (the lanes are released)."""
        out_arcs, out_len, out_score, out_meta, out_stats = out = self._outputs(lp)
        done = np.zeros(lp.shape[0], np.int32)
        self.mod.gpu_decode_many_begin(self.handle, lp, lens, online, int(segment), False, bool(refill), stream,
                                       out_arcs, out_len, out_score, out_meta, out_stats)
        over = False
        try:
            ready: list[int] = []
            while self.mod.gpu_decode_many_launch(self.handle):
                if ready:
                    yield out, ready  # the segment just launched runs meanwhile
                n = int(self.mod.gpu_decode_many_wait(self.handle, done))
                ready = done[:n].tolist()
            over = True  # (the native run ended with the last launch)
            if ready:
                yield out, ready
        finally:
            if not over:
                self.mod.gpu_decode_many_abort(self.handle)


def _trim_bits(trim: bool, eps_trim: bool) -> int:
    """The native pruned decodes' trim argument: bit 0 the lattice trim (epsilon-free graphs),
    bit 1 the lattice trim on epsilon graphs (gpu_binding.cu SetPrunedOptions)."""
    return int(bool(trim)) | (2 if eps_trim else 0)


class GpuBackend:
    # the rescue instance gives back what it grew after each rescue, and the main instance its
    # pools' growth before one (__init__ reads CUWFST_RESCUE_TRIM and CUWFST_MAIN_TRIM; the class
    # defaults serve stand-ins built without __init__)
    rescue_trim = True
    main_trim = True

    def __init__(self, graph, options, eps_iterations, device: str, *, max_lanes: int = 32,
                 max_frames: int = 1024, main_q_factor: int = 32, use_cuda_graphs: bool = True,
                 check_inputs: bool = True, walker: str = "auto", walk_blocks: int = 0, eps_blocks: int = 0,
                 rescue_lanes: int = 4, batching: str = "padded", segment: int | None = None, refill: str = "device",
                 arena_entries: int | None = None, memory: str | None = None, gc_interval: int = 0,
                 scan_split: int | None = None, closure: str | None = None, finalize_split: int | None = None,
                 fused_max: bool | None = None, lattice_entries: int | None = None,
                 trim_arcs: bool | None = None, pdl: bool | None = None, scan_round: int | None = None,
                 scan_order: str | None = None, refill_kernel: bool | None = None):
        if batching not in ("padded", "continuous"):
            raise ValueError(f"batching must be 'padded' or 'continuous', got {batching!r}")
        if refill not in ("segment", "device"):
            raise ValueError(f"refill must be 'segment' or 'device', got {refill!r}")
        if segment is None:  # the device refill loses no lane-steps to long segments; the host's does
            segment = SEGMENT_DEVICE_REFILL if refill == "device" else SEGMENT_HOST_REFILL
        if not isinstance(segment, int) or isinstance(segment, bool) or not 1 <= segment <= 4096:
            raise ValueError(f"segment must be an int in [1, 4096] steps (or None: the default), got {segment!r}")
        self.batching, self.segment, self.refill = batching, segment, refill
        self.gc_interval = check_gc_interval(gc_interval)
        if not isinstance(rescue_lanes, int) or isinstance(rescue_lanes, bool) or not 1 <= rescue_lanes <= 1024:
            raise ValueError(f"rescue_lanes must be an int in [1, 1024], got {rescue_lanes!r}")
        self.memory = resolve_memory(memory)
        self.oom_retries = 0  # native MemoryErrors absorbed by a retry (_retrying)
        self._open_device(device)
        from ..jit.decoder import module

        self.mod = module(self.index)
        self.graph = graph
        self.options = options
        self.check_inputs = check_inputs
        self.uploaded = upload_graph(self.mod, graph, self.index)
        walker = resolve_walker(walker, graph.has_epsilon)
        self.walker = walker
        if not isinstance(eps_blocks, int) or isinstance(eps_blocks, bool) or not 0 <= eps_blocks <= 65535:
            raise ValueError(f"eps_blocks must be an int in [0, 65535] (0: auto), got {eps_blocks!r}")
        # fixed here: the environment is read once, and the rescue instance gets the same kernels
        kernels = resolve_kernels(scan_split=scan_split, closure=closure, finalize_split=finalize_split,
                                  fused_max=fused_max, trim_arcs=trim_arcs, pdl=pdl, scan_round=scan_round,
                                  scan_order=scan_order, refill_kernel=refill_kernel)
        # lattice_entries: the lattice records' initial size (they grow; small values make
        # tests exercise the growth)
        self.kw = dict(max_lanes=max_lanes, max_frames=max_frames, use_cuda_graphs=use_cuda_graphs,
                       walker=walker, walk_blocks=walk_blocks, eps_blocks=eps_blocks, eps_iterations=eps_iterations,
                       memory=self.memory,
                       **kernels, lattice_entries=lattice_entries,
                       # (read once: the rescue instance sizes its pools the same way)
                       pool_bound=pool_bound_mode(), pool_hints=pool_hints_mode(), arena_ahead=arena_ahead_mode(),
                       pool_handout=pool_handout_mode(), winners_log=winners_log_mode(),
                       graph_chunks=graph_chunks_mode(), payload=payload_mode(), pool_full=pool_full_mode())
        self.main_q_factor = main_q_factor
        self.rescue_lanes = min(rescue_lanes, max_lanes)
        # arena_entries: the winners arena's initial size (it grows); small values make tests
        # exercise growth and the GC rounds of continuous batching and streams
        main_q = max(main_q_factor * options.max_active_states, 1024)
        # a pooled 1-best lane may hold pool_lane_factor() x main_q (memory.pool_lane_factor; the
        # native side uses it only where the lanes are pooled; the rescue instance keeps its own)
        self.pool_q = min(pool_lane_factor() * main_q, 1 << 28) if self.memory != "eager" else 0
        self.main = self._retrying(lambda: GpuInstance(
            self.mod, self.uploaded, graph, options, self.index,
            main_q=main_q, arena_entries=arena_entries, pool_q=self.pool_q, **self.kw))
        self._rescue = None
        # CUWFST_RESCUE_TRIM=off (read once, here): the rescue's growth stays for the next
        # rescue (the peak is the same; an A/B knob, benchmarks.memory's "pooled-keep")
        self.rescue_trim = (os.environ.get("CUWFST_RESCUE_TRIM", "on") or "on") != "off"
        # CUWFST_MAIN_TRIM=off (read once, here): the main instance keeps its pools' growth while
        # the rescue instance runs (the rule before; benchmarks.memory's "pooled-maintrimoff").
        # On: the two instances' growths never stack, so the peak is the larger, not the sum;
        # the main's next decode commits its pools back before its first step (RestoreTrimmed)
        self.main_trim = (os.environ.get("CUWFST_MAIN_TRIM", "on") or "on") != "off"
        # the lattice trim on epsilon graphs (lattice_eps_trim_on): CUWFST_LATTICE_EPS_TRIM read
        # here, when the decoder is made (so benchmarks' --env-ab sides take it); the attribute
        # may be set after
        self.lattice_eps_trim = os.environ.get("CUWFST_LATTICE_EPS_TRIM") or None
        # a list to collect perf_counter stamps of each pipelined lattice sub-batch on the calling
        # thread (entered _decode_rows, rows taken, before and after the wait for the pruning before
        # last, the begin returned; benchmarks.lattice_speed), or None
        self.lattice_trace = None
        # the same for the job of each such sub-batch (its finish started, the pruning's rows back,
        # its host work started, done), or None
        self.lattice_trace_worker = None
        # (CUWFST_LATTICE_HOST_SPLIT as the decoder was made: lattice_host_split_on)
        self._host_split_env = os.environ.get("CUWFST_LATTICE_HOST_SPLIT", "")
        # (CUWFST_LATTICE_TAIL_HYPS as the decoder was made: lattice_tail_hyps_on)
        self._tail_hyps_env = os.environ.get("CUWFST_LATTICE_TAIL_HYPS", "")
        self.lattice_trace_exit = None  # (benchmarks: when a traced lattice call's host work was all done)
        self.lattice_trace_end = None  # (benchmarks: when a traced lattice call's rescue, if any, was done)
        self.lattice_trace_unlocked = None  # (benchmarks: when a traced lattice call left the decoder's lock)
        # (benchmarks: a traced lattice call's frame locals dropped at its end, ms each, and when done)
        self.lattice_trace_drops = self.lattice_trace_dropped = None
        self.lattice_trace_returned = None  # (benchmarks: when the decode's frame had returned, in the lock)
        self.lattice_trace_host_drops = None  # (benchmarks: the overlap's parts dropped, _drop_overlap_stamped)
        self._overlap_pools = {}  # (lattice_keep_pools: HostOverlap's pools kept between calls, by shape)
        # (benchmarks: a file that gets every Python thread's stack each lattice_trace_gap_every s from
        # the locals' drops to the lock left: faulthandler's own thread, which needs no GIL)
        self.lattice_trace_gap_dump, self.lattice_trace_gap_every = None, 0.002
        # a list for the records replay's sub-batches (graphs with epsilon arcs): a dict each, its
        # decode_lattice stamps and its host job's (benchmarks.lattice_speed), or None
        self.lattice_trace_replay = None
        self._ref = None  # the CPU reference's view of the graph: lattices are built with it
        self.lock = threading.Lock()
        # what the rescue did since construction (rescue.rescue's counters)
        self.stats = {"arena_batches": 0, "arena_rows": 0, "rescue_batches": 0, "rescued_rows": 0,
                      "unabsorbed_rows": 0, "flagged_rows": 0, "flagged_bits": 0}

    @property
    def trims_arcs(self) -> bool:
        """True when this decoder's steps trim each token's arcs (trim_arcs on a sorted graph;
        lattice decodes never trim: their lattice stage walks every arc)."""
        return bool(self.kw["trim_arcs"]) and self.uploaded.emit_sorted

    def memory_stats(self) -> dict:
        with self.lock:
            return gpu_memory_stats(self)

    def _free_torch_cache(self) -> bool:
        """Gives PyTorch's cached, unused device memory back to the driver; True if that gave
        any back (cached blocks in segments that still hold live tensors stay with PyTorch, and
        then a retry would only fail again)."""
        torch = getattr(self, "torch", None)
        if torch is None:
            return False
        try:
            reserved = torch.cuda.memory_reserved(self.index)
            if reserved - torch.cuda.memory_allocated(self.index) <= 0:
                return False
            torch.cuda.empty_cache()
            return torch.cuda.memory_reserved(self.index) < reserved
        except Exception:  # a framework state we cannot read: nothing to give back
            return False

    def _retrying(self, fn):
        """fn(), and once more if it ran out of device memory while PyTorch's cache held unused
        memory that it gave back (our allocations are cudaMalloc / VMM, which cannot take what
        PyTorch caches). A native allocation that fails leaves the decoder as it was, so the
        retry starts from a usable state; a second failure is the caller's MemoryError, which
        names the option to lower. `oom_retries` counts the retries (a failure they absorbed
        is not seen by the caller: tests/test_gpu_faults.py turns them off to see each)."""
        try:
            return fn()
        except MemoryError:
            if not self._free_torch_cache():
                raise
        self.oom_retries += 1
        return fn()

    def _torch_oom(self):
        """PyTorch's out-of-memory exception class, or a class nothing raises."""
        return getattr(self.torch.cuda, "OutOfMemoryError", _NeverRaised) if self.torch is not None else _NeverRaised

    def _open_device(self, device: str) -> None:
        """Sets torch, device and index (a torch-free subclass: decoder/gpu_host.py)."""
        self.torch = require("torch", "the GPU decoder", extra="torch")
        torch = self.torch
        if not torch.cuda.is_available():
            raise RuntimeError("device='cuda' but torch sees no CUDA GPU; use device='cpu'")
        self.device = torch.device(device)
        self.index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        self.device = torch.device("cuda", self.index)

    def _stream(self) -> int:
        """The stream the caller's work is on; the decoder waits for it."""
        return self.torch.cuda.current_stream(self.device).cuda_stream

    def _take_rows(self, lp, rows: np.ndarray):
        """lp's `rows` as one batch, without a PyTorch kernel: a run of consecutive rows is a
        view, other rows are copied one device-to-device copy a row into a packed tensor (a
        plain memcpy where lp's rows are contiguous; a column-sliced lp's rows take PyTorch's
        copy kernel, still exact). index_select, used before,
        loaded PyTorch's indexing code at its first call in a process: ~90 MiB of device memory
        that a batch-32 decode with one rescued row paid (H200, 618 MiB with it)."""
        if rows.size and (np.diff(rows) == 1).all():
            return lp[int(rows[0]) : int(rows[-1]) + 1]
        out = self.torch.empty((len(rows),) + tuple(lp.shape[1:]), dtype=lp.dtype, device=lp.device)
        for i, r in enumerate(rows.tolist()):
            out[i].copy_(lp[r])
        return out

    def rescue_instance(self) -> GpuInstance:
        if self._rescue is None:
            # a frontier 4x larger (and at least 64 x max_active), capped by the graph's
            # states; the main instance's arena limit, so long rows are not cut short here.
            # Its winners log starts at 1 Mi entries (8 MiB, lazy): a rescued row's log is
            # tens of Mi entries, so the first run grows it whatever it starts at, and after
            # each rescue it goes back to that first commit (GpuInstance.trim)
            q = max(4 * self.main.main_q, 64 * self.options.max_active_states)
            kw = dict(self.kw)
            if kw.get("arena_entries") is None and kw.get("memory", "lazy") != "eager":
                kw["arena_entries"] = 1 << 20

            def make(lanes):
                return self._retrying(lambda: GpuInstance(
                    self.mod, self.uploaded, self.graph, self.options, self.index, main_q=q,
                    arena_max=self.main.arena_max, **dict(kw, max_lanes=lanes)))

            try:
                self._rescue = make(self.rescue_lanes)
            except MemoryError as e:
                if self.rescue_lanes > 1:  # where memory is tight, one row at a time still rescues
                    try:
                        self._rescue = make(1)
                        self.rescue_lanes = 1
                        return self._rescue
                    except MemoryError as e1:
                        e = e1
                raise MemoryError(f"rows overflowed their frontier and the rescue instance ({self.rescue_lanes} "
                                  f"lane(s), {q} tokens each) does not fit: {e}; lower rescue_lanes or "
                                  "main_q_factor, or free GPU memory") from e
        return self._rescue

    def to_device(self, log_probs):
        try:
            return self._to_device(log_probs)
        except self._torch_oom() as e:
            shape = tuple(getattr(log_probs, "shape", ()))
            raise MemoryError(f"cannot copy log_probs of shape {shape} to {self.device}: out of GPU memory ({e}); "
                              "decode fewer rows at a time, or pass log_probs already on the GPU") from e

    def _to_device(self, log_probs):
        torch = self.torch
        if is_torch(log_probs):
            lp = log_probs.detach()
            if lp.device != self.device:
                if lp.device.type == "cuda":
                    raise ValueError(f"log_probs is on {lp.device} but the decoder is on {self.device}")
                lp = lp.to(self.device)
        elif isinstance(log_probs, np.ndarray):
            lp = torch.from_numpy(np.ascontiguousarray(log_probs)).to(self.device)
        elif hasattr(log_probs, "__dlpack__"):
            lp = torch.from_dlpack(log_probs)
            if lp.device != self.device:
                lp = lp.to(self.device)
        else:
            raise TypeError(f"log_probs must be a numpy array, a torch tensor or a DLPack tensor, "
                            f"got {type(log_probs).__name__}")
        if lp.dim() == 2:
            lp = lp.unsqueeze(0)
        if lp.dim() != 3:
            raise ValueError(f"log_probs must be [B, T, V] or [T, V], got shape {tuple(lp.shape)}")
        if lp.dtype not in (torch.float32, torch.float16):
            raise TypeError(f"log_probs must be float32 (or float16), got {lp.dtype}")
        if lp.shape[2] < self.graph.vocab_size:
            raise ValueError(f"log_probs has {lp.shape[2]} columns but the graph's vocab_size is "
                             f"{self.graph.vocab_size}: every token id of the graph needs a column")
        if lp.numel() == 0 and lp.stride(2) != 1:
            # (an empty numpy array's strides are all 0, and from_numpy keeps them: there is
            # nothing to read, so any packed tensor of the shape will do)
            lp = torch.empty(lp.shape, dtype=lp.dtype, device=lp.device)
        if lp.shape[2] > 1 and lp.stride(2) != 1:
            raise ValueError("log_probs must be packed: its last dimension must be contiguous")
        return lp

    def check_finite(self, lp, lens: np.ndarray):
        """NaN or +inf inside a row's length is a ValueError naming the first such frame
        (row-major), -inf is a legal log-prob. The native check (gpu_check_finite): one kernel
        on the caller's stream over the device tensor as it is (torch, or DLPack from another
        framework), no framework kernels and no temporaries the size of the input."""
        first = self.main.first_non_finite(lp, lens, self._stream())
        if first >= 0:
            b, t = divmod(first, int(lp.shape[1]))
            raise ValueError(f"log_probs[{b}, {t}] holds NaN or +inf: log-probs must not be NaN or +inf")

    def reference_graph(self):
        """The CPU reference module's view of the graph (built on first use), which turns
        the GPU's lattice records into lattices."""
        if self._ref is None:
            from .offline import _ReferenceGraph

            self._ref = _ReferenceGraph(self.graph)
        return self._ref

    def decode(self, log_probs, lengths, frontend, online: bool = False, lattice: bool = False,
               batching: str | None = None):
        if lattice and self.graph.has_epsilon and self.graph.max_epsilon_chain < 0:
            raise ValueError("lattices need a graph whose epsilon arcs are acyclic; this graph's "
                             "epsilon arcs form a cycle")
        lp = self.to_device(log_probs)
        B, T = lp.shape[0], lp.shape[1]
        lens = check_lengths(lengths, B, T)
        if self.check_inputs:
            self.check_finite(lp, lens)
        stream = self._stream()
        with self.lock:
            hyps = self._retrying(lambda: self._decode_locked(lp, lens, stream, frontend, online, batching,
                                                              lattice))
            if lattice and getattr(self, "lattice_trace", None) is not None:  # (benchmarks: the frame gone)
                self.lattice_trace_returned = time.perf_counter()
        if lattice and getattr(self, "lattice_trace", None) is not None:  # (benchmarks: the lock left)
            self.lattice_trace_unlocked = time.perf_counter()
            if self.lattice_trace_gap_dump is not None:
                faulthandler.cancel_dump_traceback_later()
        return hyps

    def _decode_locked(self, lp, lens, stream, frontend, online, batching=None, lattice=False):
        B = lp.shape[0]
        hyps = [None] * B
        # (the caller holds self.lock)
        lanes = self.main.max_lanes
        early = None
        if lattice:
            # padded sub-batches of whole-row decodes: continuous batching and the gc_interval
            # segments (gpu_decode_many) have no lattice stage. Each sub-batch's host work (its
            # hypotheses, Lattice objects, word times and confidences) runs while the GPU
            # decodes the next one (HostOverlap); all of it is done before the rescue reads
            # the rows' overflow bits and before return.
            # (overlap off: a null context, host None, each sub-batch's host work at once)
            overlap = HostOverlap(self.lattice_finish_mode() == "thread", self.lattice_worker_count(),
                                  self._overlap_pools if self.lattice_keep_pools_on() else None) \
                if self.lattice_overlap_on() else None
            # rows a sub-batch flags with a capacity overflow: rescued beside the next sub-batches
            # (EarlyRescue; with the overlap on), else by the rescue below
            early = EarlyRescue(self, lp, lens, stream, frontend, online, True) \
                if overlap is not None and self.early_rescue_on() else None
            # rows whose records' filter (epsilon graphs) broke its guard in a host job: decoded
            # again without it once the sub-batches' host work is done (the jobs append to it)
            self._eps_redo = []
            with EarlyRescue.running(early):  # (the overlap's worker joined first, then the rescue's thread)
                with overlap if overlap is not None else contextlib.nullcontext() as host:
                    subs = batches(range(B), lens, lanes)
                    for k, rows in enumerate(subs):
                        got = self._decode_rows(self.main, lp, lens, rows, stream, hyps, frontend, online, lattice,
                                                host, last=k == len(subs) - 1)
                        if early is not None:
                            early.submit(EarlyRescue.flagged(*got))
                redo, self._eps_redo = sorted(self._eps_redo), []
                for rows in batches(redo, lens, lanes):  # (their hypotheses and lattices replaced)
                    self._decode_rows(self.main, lp, lens, rows, stream, hyps, frontend, online, True, None,
                                      eps_filter=False)
            if getattr(self, "lattice_trace", None) is not None:  # (benchmarks: the host work all done)
                self.lattice_trace_exit = time.perf_counter()
            self._apply_early(early, hyps)  # (after the sub-batches' host work, which wrote these rows unrescued)
        elif self._long_form(lens):
            # rows longer than gc_interval: segments of gc_interval steps through the lanes,
            # a winners-log GC round after each (the golden prefix goes to the host), so the
            # log holds what live tokens reach, not the whole utterance
            res = self.main.decode_many(lp, lens, stream, online, self.gc_interval, gc=True)
            self._collect(hyps, range(B), res, frontend)
        elif B <= lanes:
            res = self.main.decode(lp, lens, stream, online)
            self._collect(hyps, range(B), res, frontend)
        elif (batching or self.batching) == "continuous":
            # every row through the lanes, the next row entering a lane the moment one
            # finishes: no lane-steps of padding, each row's result as if decoded alone; the
            # rows of each segment become hypotheses while the GPU runs the next one
            for res, rows in self.main.decode_many_segments(lp, lens, stream, online, self.segment,
                                                            refill=self.refill == "device"):
                self._collect(hyps, rows, res, frontend, at=rows)
        else:
            # sub-batches of similar lengths: a batch runs as many steps as its longest row; rows
            # a sub-batch flags with a capacity overflow rescued beside the next sub-batches
            # (EarlyRescue), else by the rescue below
            early = EarlyRescue(self, lp, lens, stream, frontend, online, False) if self.early_rescue_on() else None
            with EarlyRescue.running(early):
                for rows in batches(range(B), lens, lanes):
                    self._decode_rows(self.main, lp, lens, rows, stream, hyps, frontend, online)
                    if early is not None:
                        early.submit(EarlyRescue.flagged(rows, [hyps[r].overflow for r in rows]))
            self._apply_early(early, hyps)
        rescued_early = early.rows if early is not None else ()
        # (rows rescued early went through the same plan: what still overflows stays flagged)
        overflow = {b: hyps[b].overflow for b in range(B) if hyps[b].overflow & RESCUE_BITS and b not in rescued_early}
        if overflow:
            main_trimmed = []

            def decode_batch(instance, rows):
                if instance != "main" and self.main_trim and not main_trimmed:
                    # the main instance is idle while the rescue runs: what its pools grew goes
                    # back first, so the two instances' growths do not stack (VMM pieces unmapped,
                    # pointers kept; its next decode commits them back in one go). Its log stays: a
                    # device log would grow back only by re-running a whole batch, and a host
                    # one holds no device memory
                    main_trimmed.append(self.main.trim(log=False))
                inst = self.main if instance == "main" else self.rescue_instance()
                for s in range(0, len(rows), inst.max_lanes):  # the rescue may have fewer lanes
                    self._decode_rows(inst, lp, lens, rows[s : s + inst.max_lanes], stream, hyps, frontend,
                                      online, lattice)
                return [hyps[r].overflow for r in rows]

            rescue(overflow, lens, decode_batch, main_batch=min(B, lanes),
                   rescue_lanes=self.rescue_lanes, stats=self.stats)
            # the rescue's rows are the rare ones that outgrew the main instance: what they
            # grew goes back (a later rescue grows it again, in place)
            if self._rescue is not None and self.rescue_trim:
                self._rescue.trim()
        if lattice and getattr(self, "lattice_trace", None) is not None:  # (benchmarks: the rescue done)
            self.lattice_trace_end = time.perf_counter()
            # (benchmarks) the frame's larger locals dropped one at a time, stamped, before its end: a
            # slow drop between the rescue's end and the lock left shows by name
            t = [self.lattice_trace_end]
            overlap = None
            t.append(time.perf_counter())
            early = None
            t.append(time.perf_counter())
            got = subs = None
            t.append(time.perf_counter())
            # (the with-statement's name for the overlap: its last reference) its parts first, one at a
            # time: each future (the latest first), its pools
            self.lattice_trace_host_drops = _drop_overlap_stamped(host)
            host = None
            t.append(time.perf_counter())
            rows = redo = None
            t.append(time.perf_counter())
            self.lattice_trace_drops = dict(zip(("overlap", "early", "got_subs", "host", "rows_redo"),
                                                ((b - a) * 1000 for a, b in zip(t, t[1:]))))
            self.lattice_trace_dropped = t[-1]
            if self.lattice_trace_gap_dump is not None:  # (benchmarks: every thread's stack while the end lasts)
                faulthandler.dump_traceback_later(self.lattice_trace_gap_every, repeat=True,
                                                  file=self.lattice_trace_gap_dump)
        return hyps

    def _long_form(self, lens: np.ndarray) -> bool:
        return self.gc_interval > 0 and int(np.max(lens, initial=0)) > self.gc_interval

    def _redo_eps_rows(self, redo, inst, lp, lens, stream, hyps, frontend, online, host):
        """Rows whose records' filter on an epsilon graph broke its guard (the host replay's or the
        GPU pruning's): decoded again without the filter, now (host None: this thread holds the
        instance) or by the calling thread after its sub-batches (a worker's job)."""
        if not redo:
            return
        self.stats["eps_filter_redone_rows"] = self.stats.get("eps_filter_redone_rows", 0) + len(redo)
        if host is None:
            for part in batches(redo, lens, inst.max_lanes):
                self._decode_rows(inst, lp, lens, part, stream, hyps, frontend, online, True, None, eps_filter=False)
        else:
            self._eps_redo.extend(redo)

    def _decode_rows(self, inst, lp, lens, rows, stream, hyps, frontend, online=False, lattice=False, host=None,
                     eps_filter=True, last=False):
        """One sub-batch through `inst`: the hypotheses of `rows` into hyps; with lattice, their
        lattices, word times and confidences too, now or (host: a HostOverlap) on its worker.
        eps_filter False: no records' filter on an epsilon graph (the rows its guard sent back).
        last: the call's last sub-batch (its host work split under lattice_host_split "last").
        With lattice, returns (rows, their overflow bits) as the decode left them (known when
        the decode call returns, before the host work: EarlyRescue); else None."""
        t_enter = time.perf_counter()
        rows = np.asarray(list(rows), np.int64)
        sub_lens = np.ascontiguousarray(lens[rows])
        # the rows read in place by the lanes (gpu_decode_rows, the pipelined lattice begin), or
        # copied into a packed tensor first (_take_rows; CUWFST_ROW_GATHER=copy, the other paths)
        in_place = self.row_gather_in_place(inst)
        pruned = lattice and self.lattice_prune_on_gpu(inst)  # the GPU prunes (gpu_lattice_prune.cu)
        # (an epsilon graph: whole batches, with the records' filter and lattice trim on epsilon
        # graphs in place of the epsilon-free ones, whose bounds have no epsilon arcs in a time)
        eps_pruned = pruned and getattr(inst, "eps_iterations", 0) > 0
        chunk = self.lattice_chunk_steps(int(sub_lens.max(initial=0)) + 1) if pruned and not eps_pruned else 0
        pipelined = pruned and host is not None and chunk == 0 and self.lattice_pipeline_on()
        sub = None if in_place and (pipelined or not lattice) and not self._long_form(sub_lens) else \
            self._take_rows(lp, rows)
        t_take = time.perf_counter()
        if pruned:
            # only the kept states and arcs come back
            from .lattice import attach_all, lattices_from_arrays, word_times_many

            # (an epsilon graph: `filter` is the records' filter on epsilon graphs, whose guard the
            # GPU pruning checks: a row that breaks it comes back as EPS_REDO and is decoded again
            # without it)
            # (and `trim` there the lattice trim on epsilon graphs, with the filter: lattice_eps_trim_on)
            eps_filter_on = eps_pruned and eps_filter and self.lattice_eps_filter_on(inst)
            opts = dict(filter=eps_filter_on if eps_pruned else self.lattice_filter_on(),
                        filter_pad=float(getattr(self, "_lattice_filter_pad", 0.0)),
                        trim=self.lattice_trim_on() and not eps_pruned,
                        eps_trim=eps_filter_on and self.lattice_eps_trim_on())

            def redo_rows(lat_rows):  # the rows whose guard broke: decoded again, unfiltered
                self._redo_eps_rows([int(rows[i]) for i, r in enumerate(lat_rows) if r is EPS_REDO], inst, lp, lens,
                                    stream, hyps, frontend, online, host)
            if pipelined:
                # the pruning beside the next sub-batch's decode: this thread decodes and hands
                # the records to a pruning job; the worker prunes (its own CUDA stream) and builds
                # the rows. A job's buffers serve the sub-batch after next, so the one before
                # last must be done first
                t0 = time.perf_counter()
                host.drain_prunings(keep=1)
                t1 = time.perf_counter()
                res, job = inst.decode_lattice_pruned_begin(lp if sub is None else sub, sub_lens, stream,
                                                            self.options.output_beam, online,
                                                            rows=rows if sub is None else None, **opts)
                if self.lattice_trace is not None:  # (benchmarks: where this thread's time goes)
                    self.lattice_trace.append((t_enter, t_take, t0, t1, time.perf_counter()))

                wtrace = self.lattice_trace_worker  # (benchmarks: the job's stamps)

                def finish():
                    w0 = time.perf_counter()
                    lat_rows = inst.lattice_prune_finish(res, job)
                    return lat_rows, w0, time.perf_counter()

                # the call's last sub-batch (lattice_tail_hyps_on): its hypotheses and their word
                # times made on this thread while the finish prunes (below), handed to the shares
                from concurrent.futures import Future
                early = Future() if last and self.lattice_tail_hyps_on() else None

                def shares(done, n):
                    # the hypotheses first (on the finish thread where there is one; or made already,
                    # `early`); then the rows' Lattice objects, word times and confidences in n
                    # shares, every n-th row from the k-th (the rows are sorted by length): one
                    # (attach below), or one a host worker side by side (lattice_host_split_on)
                    lat_rows, w0, w1 = done
                    w2 = time.perf_counter()
                    keep = [i for i, r in enumerate(lat_rows) if r is not None and r is not EPS_REDO]
                    if early is None:
                        self._collect(hyps, rows.tolist(), res, frontend)
                        times = None
                    else:
                        times = early.result()  # (its error, if any, raised here: the job's)
                    w3 = time.perf_counter()
                    left = {"n": n, "w4": w3}
                    lock = threading.Lock()

                    def share(k):
                        ks = keep[k::n]
                        lats = lattices_from_arrays(self.graph, [lat_rows[i] for i in ks], frontend.num_threads)
                        t4 = time.perf_counter()
                        attach_all(self.graph, [hyps[int(rows[i])] for i in ks], lats, frontend.num_threads,
                                   times=None if times is None else [times[i] for i in ks])
                        if k == 0:
                            redo_rows(lat_rows)
                        with lock:
                            left["w4"] = max(left["w4"], t4)
                            left["n"] -= 1
                            last = left["n"] == 0
                        if last and wtrace is not None:
                            # (one stamp set a sub-batch, by its last share) the finish's start and end,
                            # the host work's start and end; inside it, the hypotheses made and the
                            # Lattice objects made (the latest share's; attach_all after)
                            wtrace.append((w0, w1, w2, time.perf_counter(), w3, left["w4"]))
                    return [functools.partial(share, k) for k in range(n)]

                def attach(done):
                    for work in shares(done, 1):
                        work()

                split_mode = self.lattice_host_split_mode()
                split = host.host_workers > 1 and (split_mode == "on" or split_mode == "last" and last)
                host.run_pruning(finish, functools.partial(shares, n=host.host_workers) if split else attach,
                                 split=split)
                if early is not None:  # (the pruning runs on the finish thread meanwhile)
                    try:
                        self._collect(hyps, rows.tolist(), res, frontend)
                        early.set_result(word_times_many(self.graph, [hyps[int(r)] for r in rows]))
                    except BaseException as e:  # (raised by the job that reads it: at the overlap's exit)
                        early.set_exception(e)
                        if not isinstance(e, Exception):  # (an interrupt goes on from here too; the job
                            raise  # that reads it ends, so the overlap's exit does not wait forever)
                return rows, res[3][:, 2].copy()
            if host is not None:
                host.drain_prunings()  # a whole pruning here takes the finisher's buffers and rows
            res, lat_rows = inst.decode_lattice_pruned(sub, sub_lens, stream, self.options.output_beam, online,
                                                       chunk, **opts)
            keep = [i for i, r in enumerate(lat_rows) if r is not None and r is not EPS_REDO]

            def attach():  # the hypotheses too: the outputs are this call's own arrays
                self._collect(hyps, rows.tolist(), res, frontend)
                lats = lattices_from_arrays(self.graph, [lat_rows[i] for i in keep], frontend.num_threads)
                attach_all(self.graph, [hyps[int(rows[i])] for i in keep], lats, frontend.num_threads)
                redo_rows(lat_rows)

            _host_run(host, attach)
            return rows, res[3][:, 2].copy()
        if lattice:  # whole-row decodes (the lattice stage records every step; no GC segments)
            res, records = inst.decode_lattice(sub, sub_lens, stream, online,
                                               eps_filter=eps_filter and self.lattice_eps_filter_on(inst),
                                               output_beam=self.options.output_beam,
                                               filter_pad=float(getattr(self, "_lattice_filter_pad", 0.0)))
            rtrace = getattr(self, "lattice_trace_replay", None)  # (benchmarks: the replay path's stamps)
            entry = None
            if rtrace is not None:  # the sub-batch's stamps (decode_lattice's) and rows; the job's below
                entry = dict(enter=t_enter, take=t_take, stamps=getattr(inst, "last_lattice_stamps", None),
                             rows=len(rows))
                rtrace.append(entry)

            def attach_replayed():
                w0 = time.perf_counter()
                self._collect(hyps, rows.tolist(), res, frontend)
                w1 = time.perf_counter()
                t_replayed, redo = self._attach_lattices(hyps, rows.tolist(), sub_lens, res, records, frontend)
                if entry is not None:  # the job's start, hypotheses made, replay done, Lattice objects made, the end
                    entry["job"] = (w0, w1, t_replayed, time.perf_counter())
                # (the records' filter broke its guard on these rows: their records again, unfiltered)
                self._redo_eps_rows(redo, inst, lp, lens, stream, hyps, frontend, online, host)

            _host_run(host, attach_replayed)
            return rows, res[3][:, 2].copy()
        if self._long_form(sub_lens):
            res = inst.decode_many(sub, sub_lens, stream, online, self.gc_interval, gc=True)
        elif sub is None:
            res = inst.decode(lp, sub_lens, stream, online, rows=rows)
        else:
            res = inst.decode(sub, sub_lens, stream, online)
        self._collect(hyps, rows.tolist(), res, frontend)

    def lattice_prune_on_gpu(self, inst) -> bool:
        """Whether lattice decodes prune on the GPU ("gpu", the default) or replay the records on
        the host ("replay": the CPU LatticeBuilder over every record, the path before
        gpu_lattice_prune.cu). Set by the attribute `lattice_prune` or the environment variable
        CUWFST_LATTICE_PRUNE. On a graph with epsilon arcs the GPU prunes where the search's
        eps_iterations covers the graph's longest epsilon chain (the closure is then exact, so the
        epsilon arcs inside a time follow from its frontier: gpu_lattice_prune.cu, "Epsilon
        graphs"), unless the attribute `lattice_prune_eps` or CUWFST_LATTICE_PRUNE_EPS is
        "replay"."""
        mode = getattr(self, "lattice_prune", None) or os.environ.get("CUWFST_LATTICE_PRUNE", "gpu")
        if mode not in ("gpu", "replay"):
            raise ValueError(f"lattice_prune must be 'gpu' or 'replay', got {mode!r}")
        eps_mode = getattr(self, "lattice_prune_eps", None) or os.environ.get("CUWFST_LATTICE_PRUNE_EPS", "gpu")
        if eps_mode not in ("gpu", "replay"):
            raise ValueError(f"lattice_prune_eps must be 'gpu' or 'replay', got {eps_mode!r}")
        eps = getattr(inst, "eps_iterations", None)
        if mode != "gpu" or eps is None or not hasattr(getattr(inst, "mod", None), "gpu_decode_lattice_pruned"):
            return False
        return eps == 0 or (eps_mode == "gpu" and eps >= self.graph.max_epsilon_chain >= 0)

    def lattice_eps_filter_on(self, inst) -> bool:
        """Whether a lattice decode on a graph with epsilon arcs (records replayed on the host)
        leaves out of its records the arcs no pruning window can keep (common.cuh
        LatEpsFilterFor): "on" (the default) where the search's eps_iterations covers the graph's
        longest epsilon chain (the closure is then complete, so the forward the replay computes
        is the search's score that the filter tests), "off", or "force" (tests: also below the
        chain, where the replay's guard then sends rows back), by the attribute
        `lattice_eps_filter` or the environment variable CUWFST_LATTICE_EPS_FILTER. Same
        lattices either way; a row whose guard breaks is decoded again without the filter. Rows
        the filter ran on have recorded_arcs None."""
        v = getattr(self, "lattice_eps_filter", None) or os.environ.get("CUWFST_LATTICE_EPS_FILTER", "on") or "on"
        if v not in ("on", "off", "force"):
            raise ValueError(f"lattice_eps_filter must be 'on', 'off' or 'force', got {v!r}")
        eps = getattr(inst, "eps_iterations", 0)
        if v == "off" or eps <= 0:
            return False
        return v == "force" or eps >= self.graph.max_epsilon_chain

    def lattice_eps_trim_on(self) -> bool:
        """Whether a GPU-pruned lattice decode on a graph with epsilon arcs, with its records'
        filter (lattice_eps_filter_on), trims its steps' slots below what the filter could keep
        (common.cuh LatEpsTrimOn: each step walks only arcs ending at or above (L - beam) minus the
        filter's offset at a magnitude cap, and probes only those at or above its cutoff minus
        its own offset); same records and lattices, and a batch whose step passes the cap is
        decoded again without it. "on" (the default since device_s163.sh: exact on every test, the
        small TLG's lattice batch 72.2 -> 58.1 ms on the H100) or "off", by the attribute
        `lattice_eps_trim` or the environment variable CUWFST_LATTICE_EPS_TRIM (read when the
        decoder is made); also off where lattice_trim_on() is."""
        v = getattr(self, "lattice_eps_trim", None) or "on"
        if v not in ("on", "off"):
            raise ValueError(f"lattice_eps_trim must be 'on' or 'off', got {v!r}")
        return v == "on" and self.lattice_trim_on()

    def lattice_filter_on(self) -> bool:
        """Whether a GPU-pruned lattice decode of a whole batch keeps out of its records the
        arcs that no k2 pruning window can keep (csrc/include/cuwfst/lattice.cuh LatFilterFor:
        a non-admitted arc more than output_beam plus a rounding slack below its destination's
        score); same lattices, fewer records to write, hold and prune. "on" (the default) or
        "off", by the attribute `lattice_filter` or the environment variable
        CUWFST_LATTICE_FILTER."""
        return _switch(self, "lattice_filter", "CUWFST_LATTICE_FILTER", ("on", "off"), "on") == "on"

    def lattice_overlap_on(self) -> bool:
        """Whether a lattice decode of several sub-batches runs each one's host work (Lattice
        objects, word times and confidences; the host replay) beside the next one's GPU decode
        (HostOverlap). "on" (the default) or "off", by the attribute `lattice_overlap` or the
        environment variable CUWFST_LATTICE_OVERLAP. Same results either way."""
        return _switch(self, "lattice_overlap", "CUWFST_LATTICE_OVERLAP", ("on", "off"), "on") == "on"

    def lattice_keep_pools_on(self) -> bool:
        """Whether a lattice decode's host-overlap thread pools (HostOverlap: the host workers and
        the finish thread) are kept for the next call ("on") or made and shut down every call
        ("off", the default), by the attribute `lattice_keep_pools` or the environment variable
        CUWFST_LATTICE_KEEP_POOLS. Traced calls (s214, H100, full HLG) put 12.7-32.5 ms of the end
        of 4 calls in 8 in dropping the ended overlap. Same results either way."""
        return _switch(self, "lattice_keep_pools", "CUWFST_LATTICE_KEEP_POOLS", ("on", "off"), "off") == "on"

    def lattice_finish_mode(self) -> str:
        """Where a pipelined lattice decode finishes each sub-batch's pruning (PruneFinish: its
        device passes and rows): "worker" (the default: on the host-overlap worker, then that
        sub-batch's host work there) or "thread" (a thread of its own, the host work then handed to
        the worker, so a finish never waits for the last sub-batch's host work), by the attribute
        `lattice_finish` or the environment variable CUWFST_LATTICE_FINISH. Same results."""
        return _switch(self, "lattice_finish", "CUWFST_LATTICE_FINISH", ("worker", "thread"), "worker")

    def lattice_host_split_mode(self) -> str:
        """Which sub-batches of a pipelined lattice decode, with several host workers
        (lattice_worker_count), split their host work (Lattice objects, word times and
        confidences) into one share of their rows a worker, run side by side, so that work does
        not run on one worker while the others wait: "last" (the default since s200: the call's
        last one alone; its host work is the call's tail, with the CPUs to itself, while an
        earlier one's runs beside the next decode), "on" (every sub-batch) or "off" (none), by
        the attribute `lattice_host_split` or the environment variable CUWFST_LATTICE_HOST_SPLIT
        as it was when the decoder was made. Same results."""
        v = getattr(self, "lattice_host_split", None) or self._host_split_env or "last"
        if v not in ("on", "off", "last"):
            raise ValueError(f"lattice_host_split must be 'on', 'last' or 'off', got {v!r}")
        return v

    def lattice_tail_hyps_on(self) -> bool:
        """Whether a pipelined lattice decode's last sub-batch makes its hypotheses and their word
        times on the calling thread while the finish thread prunes its lattices, rather than on
        the finish thread once the pruning is done (with its Lattice objects after): the call's
        tail is that job alone, the calling thread otherwise only waits. "on" (the default) or
        "off", by the attribute `lattice_tail_hyps` or the environment variable
        CUWFST_LATTICE_TAIL_HYPS as it was when the decoder was made. Same results."""
        v = getattr(self, "lattice_tail_hyps", None) or self._tail_hyps_env or "on"
        if v not in ("on", "off"):
            raise ValueError(f"lattice_tail_hyps must be 'on' or 'off', got {v!r}")
        return v == "on"

    def lattice_host_split_on(self) -> bool:
        """Whether every sub-batch's host work is split (lattice_host_split_mode "on")."""
        return self.lattice_host_split_mode() == "on"

    def row_gather_in_place(self, inst) -> bool:
        """Whether a padded sub-batch's rows are read in place by the lanes (the module's
        gpu_decode_rows; the 1-best path and the pipelined lattice path) rather than copied
        into a packed tensor first (_take_rows): "native" (the default) or "copy", by the
        attribute `row_gather` or the environment variable CUWFST_ROW_GATHER. Same results."""
        v = getattr(self, "row_gather", None) or os.environ.get("CUWFST_ROW_GATHER", "native") or "native"
        if v not in ("native", "copy"):
            raise ValueError(f"row_gather must be 'native' or 'copy', got {v!r}")
        return v == "native" and hasattr(getattr(inst, "mod", None), "gpu_decode_rows")

    def lattice_worker_count(self) -> int:
        """How many threads run the sub-batches' host work of a lattice decode (HostOverlap's
        host_workers), by the attribute `lattice_host_workers` or the environment variable
        CUWFST_LATTICE_HOST_WORKERS; by default 2 on a host of 8 or more CPUs, else 1, and on a
        graph with epsilon arcs (whose lattices the host replays from the records) 4 on a host of
        16 or more CPUs. More than 1 puts the prunings' finishes on a thread of their own (as
        lattice_finish "thread"). Host-bound decodes gain (large lattices: the model set's 964
        arcs a frame, 256 rows, batch 32, H100 at 5bce007: 164-179 ms a lattice batch with 1
        worker, 114 with 2, 105 with 3; the sim set 48.4 with 1, 42.3-43.2 with 2; the small
        tier's TLG, 256 sim rows, H200 at 90c7e65: 298.0 / 297.7 ms with 2, 287.1 with 3, 236.3
        with 4); each worker's native calls take the decoder's num_threads. Same results
        whatever the count."""
        cpus = os.cpu_count() or 1
        default = "4" if cpus >= 16 and self.graph.has_epsilon else "2" if cpus >= 8 else "1"
        raw = getattr(self, "lattice_host_workers", None) or os.environ.get("CUWFST_LATTICE_HOST_WORKERS", default) \
            or default
        n = raw if isinstance(raw, int) and not isinstance(raw, bool) else \
            int(raw) if isinstance(raw, str) and raw.strip().isdigit() else 0
        if n < 1:
            raise ValueError(f"lattice_host_workers must be an int >= 1, got {raw!r}")
        return n

    def early_rescue_on(self) -> bool:
        """Whether a decode of several padded sub-batches (1-best, or lattice with the host
        overlap on) rescues the rows a sub-batch flags with a capacity overflow beside the next
        sub-batches' decodes (EarlyRescue: the rescue instance on a thread of its own) rather than
        after the last one. "on" (the default) or "off", by the attribute `early_rescue` or the
        environment variable CUWFST_EARLY_RESCUE. Same results either way; "on" can hold the
        rescue instance's memory while the main instance's is at its peak. Measured (sim set,
        256 rows, batch 32, one rescued row a call): H100 at 5bce007, a lattice call's tail after
        its last decode 50-56 ms off, 17 on, 43.0 / 45.7 ms a lattice batch off, 42.2 on; H200 at
        0574e54, 41.3 / 41.3 off, 39.8 on (tail 45-48 -> 26 ms). On by default since the GPU suite
        and five rounds of the rescue tests with it on passed at 0574e54 (the records pass's side
        streams non-blocking: at 4d710f1, with blocking ones, a lattice decode on the main thread
        failed with cudaErrorStreamCaptureImplicit while the rescue thread captured)."""
        return _switch(self, "early_rescue", "CUWFST_EARLY_RESCUE", ("on", "off"), "on") == "on"

    def _apply_early(self, early: EarlyRescue | None, hyps: list) -> None:
        """The rows EarlyRescue rescued into hyps (after the sub-batches, and after their host
        work where a lattice decode has one); the rescue instance's growth given back."""
        if early is not None and early.rows:
            early.apply(hyps)
            if self._rescue is not None and self.rescue_trim:
                self._rescue.trim()

    def caller_stream_context(self):
        """A callable giving a context in which another thread's PyTorch work runs on the
        calling thread's current stream (PyTorch's current stream is per thread): EarlyRescue's
        row copies (_take_rows) then follow what the caller queued. The torch-free backend's
        copies synchronise instead (decoder/gpu_host.py)."""
        torch = self.torch
        if torch is None:
            return contextlib.nullcontext
        current = torch.cuda.current_stream(self.device)
        return lambda: torch.cuda.stream(current)

    def lattice_pipeline_on(self) -> bool:
        """Whether a GPU-pruned lattice decode of several sub-batches (whole batches, with the
        host overlap on) prunes each one on the decoder's pruning stream beside the next one's
        decode (GpuDecoder::PruneBegin / PruneFinish), rather than before it. "on" (the
        default) or "off", by the attribute `lattice_pipeline` or the environment variable
        CUWFST_LATTICE_PIPELINE. Same lattices either way; "on" holds a second set of the
        pruning's buffers."""
        return _switch(self, "lattice_pipeline", "CUWFST_LATTICE_PIPELINE", ("on", "off"), "on") == "on"

    def lattice_trim_on(self) -> bool:
        """Whether a GPU-pruned lattice decode with the records' filter trims its steps' slots
        as 1-best decodes do, but lower (csrc/include/cuwfst/common.cuh LatTrimLow): each step
        walks only the arcs the filter could keep, so the records and the lattices are the
        same, and the arcs left out are not counted: the lattices' `recorded_arcs` is None.
        "on" (the default) or "off" (every arc walked and counted: `recorded_arcs` is k2's
        count), by the attribute `lattice_trim` or the environment variable CUWFST_LATTICE_TRIM.
        Only where the decoder trims its 1-best steps (`trim_arcs`, a graph with sorted arcs)."""
        return _switch(self, "lattice_trim", "CUWFST_LATTICE_TRIM", ("on", "off"), "on") == "on"

    def lattice_chunk_steps(self, max_steps: int | None = None) -> int:
        """Steps per run of a GPU-pruned lattice decode whose longest row takes `max_steps`
        steps (frames + 1): bounded lattice memory (runs of `chunk` steps: each run's records
        are pruned with k2's windows whose end exists and the frames no later window reaches
        leave the device, so live records follow the chunk, not the input's length), or 0: the
        whole batch in one run, pruned after it. Same lattices. Set by the attribute
        `lattice_chunk` or the environment variable CUWFST_LATTICE_CHUNK (an integer, or
        "auto"); unset or "auto": auto_lattice_chunk(max_steps, lattice_filter_on()) (the whole
        batch up to LATTICE_WHOLE_MAX_STEPS steps, or LATTICE_WHOLE_MAX_STEPS_FILTERED with the
        records' filter, else runs of LATTICE_CHUNK_DEFAULT)."""
        v = getattr(self, "lattice_chunk", None)
        if v is None:
            v = os.environ.get("CUWFST_LATTICE_CHUNK", "auto") or "auto"
        if isinstance(v, str) and v.strip().lower() == "auto":
            return auto_lattice_chunk(max_steps, self.lattice_filter_on())
        try:
            n = int(v)
        except ValueError:
            raise ValueError(f"lattice_chunk must be an integer number of steps or 'auto', got {v!r}") from None
        if not 0 <= n <= 4096:
            raise ValueError(f"lattice_chunk must be in [0, 4096] steps (0: the whole batch), got {n}")
        return n

    def _attach_lattices(self, hyps, rows, lens, res, records, frontend):
        """Lattices from the GPU's records (lattice_records.py) onto hyps[rows[i]]. A row
        flagged with a capacity or arena overflow gets none (its search was cut short; the
        rescue decodes it again), nor does a row whose records' filter broke its guard (returned:
        the caller decodes it again without the filter); every other row's replay must end on
        the GPU's own 1-best score, bit for bit. Returns (when the replay was done, those rows)."""
        from .lattice import attach_all

        out_score, out_meta = res[2], res[3]
        skip = (out_meta[:, 2] & RESCUE_BITS) != 0
        redo = np.zeros(len(rows), np.uint8)
        lats, scores = lattices_from_records(self.reference_graph(), self.graph, self.options,
                                             self.main.eps_iterations, lens, records, frontend.num_threads,
                                             skip.astype(np.uint8), redo)
        t_replayed = time.perf_counter()
        got = []
        for i, row in enumerate(rows):
            if skip[i] or redo[i]:
                continue
            if scores[i].view(np.int32) != np.float32(out_score[i]).view(np.int32):
                raise RuntimeError(f"GPU lattice of row {row}: the replay of its records ends on score "
                                   f"{float(scores[i])!r}, the GPU's 1-best on {float(out_score[i])!r} "
                                   "(a decoder bug; please report it)")
            got.append((hyps[row], lats[i]))
        attach_all(self.graph, [h for h, _ in got], [x for _, x in got], frontend.num_threads)
        # (benchmarks: when the replay and the Lattice objects were done) and the rows whose records'
        # filter broke its guard (no lattice yet: decode them again without the filter)
        return t_replayed, [row for i, row in enumerate(rows) if redo[i]]

    def decode_snapshots(self, log_probs, length):
        from .offline import snapshot_length

        lp = self.to_device(log_probs)
        if lp.shape[0] != 1:
            raise ValueError("decode_snapshots takes one row ([T, V])")
        length = snapshot_length(length, lp.shape[1])
        stream = self._stream()
        with self.lock:
            snaps = self.snapshots_on(self.main, lp, length, stream)
            # A capacity overflow (a frontier past main_q, a full claims list or hash) cuts
            # the frontier, so this snapshot and the later ones would miss tokens the CPU
            # keeps: decode it again on the rescue instance (4x the frontier), as decode does.
            if any(s["overflow"] & RESCUE_BITS for s in snaps):
                snaps = self.snapshots_on(self.rescue_instance(), lp, length, stream)
        return snaps

    def snapshots_on(self, inst, lp, length, stream):
        """decode_snapshots' dicts of one instance, no rescue (the caller holds self.lock)."""
        from .offline import snapshot_buffers, snapshots_to_dicts

        bufs = snapshot_buffers(length, self.graph.num_states)
        overflow = np.zeros(length + 2, np.int32)
        self.mod.gpu_decode_snapshots(inst.handle, lp, length, stream, *bufs, overflow)
        return snapshots_to_dicts(self.graph, *bufs, overflow)

    @staticmethod
    def _collect(hyps, rows, res, frontend, at=None):
        """Hypotheses of a sub-batch into hyps[rows[i]], from the outputs' row at[i] (default
        i: the outputs may hold more rows than the sub-batch)."""
        out_arcs, out_len, out_score, out_meta, out_stats = res
        rows = list(rows)
        idx = np.arange(len(rows)) if at is None else np.asarray(at, np.int64)
        out_len, out_score, out_meta, out_stats = out_len[idx], out_score[idx], out_meta[idx], out_stats[idx]
        paths, redirects = [], []
        for i in range(len(rows)):
            n = min(int(out_len[i]), out_arcs.shape[1])
            arcs = out_arcs[idx[i], :n]
            redirect_arc = -1
            if n and arcs[-1] & REDIRECT_ARC_BIT:
                redirect_arc = int(arcs[-1] & ~REDIRECT_ARC_BIT)
                arcs = arcs[:-1]
            paths.append(arcs)
            redirects.append(redirect_arc)
        made = frontend.make_hypotheses(paths, [float(x) for x in out_score], [bool(x) for x in out_meta[:, 0]],
                                        redirects, out_meta[:, 2].tolist(), out_meta[:, 3].tolist(),
                                        out_stats[:, 0].tolist(), out_stats[:, 1].tolist())
        for row, h in zip(rows, made):
            hyps[row] = h
