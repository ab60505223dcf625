"""Lattices from lattice records: how a search that ran elsewhere (the GPU decoder) gets the
very lattice the CPU decoder builds.

A record is one arc of one step whose destination is in the step's new frontier (after its
epsilon closure), admitted by the beam or not: {source graph state, image arc id (with
REDIRECT_ARC_BIT on allow_partial's redirected arcs), acoustic score as float32 bits}.
With each step's cutoff (exact max - beam) that is everything the lattice depends on: the
CPU reference replays the search on the recorded arcs (`RowSearch::ReplayStep`: the same
admission, recombination order and epsilon closure as a real step, so tokens are numbered
as the CPU numbers them) and its LatticeBuilder, the one that builds CPU lattices, observes
the replay (`LatticeFromRecords` in cuwfst/csrc/reference/reference_lattice.cc). One
pruning implementation, two producers of its input; docs/design.md "Lattices on the GPU".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lattice import Lattice, lattices_from_arrays

RECORD_INTS = 3  # {source state, arc | redirect bit, acoustic bits}


@dataclass
class LatticeRecords:
    """The records of a batch of rows. records [N, 3] int32, row by row and each row step
    by step; counts [B, S] int32 (records of step t of row b, S >= max length + 1; step
    `length` is the final step), cutoffs [B, S] float32, sizes [B, S] int32 (the frontier
    size after each step and its closure: the replay checks it). producer_a [B, S] float32 or
    None: > 0 where the producer's records filter (the GPU's on epsilon graphs) dropped some of
    the step's arcs, the magnitude it assumed (reference_lattice.h RecordedRow::producer_a)."""

    records: np.ndarray
    counts: np.ndarray
    cutoffs: np.ndarray
    sizes: np.ndarray
    producer_a: np.ndarray | None = None
    # (cpu_records(frontiers=True) only) the graph states of each row's frontiers: S_0, then
    # S_1 .. S_{n+1} (sizes), row by row, and each row's |S_0| [B] int32
    frontiers: np.ndarray | None = None
    start_sizes: np.ndarray | None = None
    # (cpu_records(trim=True) only) [rows the trim's guard recorded again untrimmed, arcs into
    # surviving states the trim left out, arcs the search walked on trimmed steps, those of them
    # at or above the trim's low, at or above the step's cutoff, and what a walk of each token's
    # sorted arcs by their bound (the row's best non-blank log-prob) reads to the low, to the cutoff,
    # a walk by the row's labels' lookups to the low, to the cutoff, and a sorted walk by the
    # state's own best log-prob to the low, to the cutoff, and by the row's top-3 labels' bound to
    # the low, to the cutoff, and the records pass's reads modelled with the row's bound and with
    # the label bound in rounds of 32 arcs, its one-round tokens and their arcs (reference_lattice.h)]
    trim_stats: np.ndarray | None = None

    def row_slices(self, lens: np.ndarray) -> list[slice]:
        """The records of each row."""
        n = np.array([self.counts[b, : int(lens[b]) + 1].sum() for b in range(len(lens))], np.int64)
        ends = np.cumsum(n)
        return [slice(int(e - k), int(e)) for e, k in zip(ends, n)]


def lattices_from_records(ref, graph, options, eps_iterations: int, lens: np.ndarray, rec: LatticeRecords,
                          num_threads: int, skip: np.ndarray | None = None,
                          redo: np.ndarray | None = None) -> tuple[list[Lattice | None], np.ndarray]:
    """One Lattice per row from its records (rows flagged in `skip` get None: their records
    are not trusted). `ref` is a decoder.offline._ReferenceGraph of `graph`. Returns the
    lattices and the replay's float32 1-best score per row (a check against the producer's
    own result). Raises RuntimeError when records are inconsistent. Where rec.producer_a says
    the producer filtered a row's records and the filter's guard broke (its dropped arcs may
    be ones the lattice keeps), the row gets None and redo[row] = 1 ([B] uint8, set to 0
    elsewhere); without `redo` that raises RuntimeError. Rows the producer filtered have
    recorded_arcs None (the dropped arcs were never seen)."""
    if graph.has_epsilon and graph.max_epsilon_chain < 0:
        raise ValueError("lattices need a graph whose epsilon arcs are acyclic; this graph's "
                         "epsilon arcs form a cycle")
    B = len(lens)
    lens = np.ascontiguousarray(lens, np.int32)
    skip = np.zeros(B, np.uint8) if skip is None else np.ascontiguousarray(skip, np.uint8)
    out_size = np.zeros((B, 3), np.int64)
    out_score = np.zeros(B, np.float32)
    out_redo = np.zeros(B, np.uint8)
    pa = np.zeros((0, 0), np.float32) if rec.producer_a is None else np.ascontiguousarray(rec.producer_a, np.float32)
    o = options
    handle = ref.mod.ref_lattices_from_records(
        ref.handle, lens, np.ascontiguousarray(rec.records, np.int32).reshape(-1, RECORD_INTS),
        np.ascontiguousarray(rec.counts, np.int32), np.ascontiguousarray(rec.cutoffs, np.float32),
        np.ascontiguousarray(rec.sizes, np.int32), skip, o.search_beam, o.output_beam, o.min_active_states,
        o.max_active_states, o.allow_partial, eps_iterations, num_threads, out_size, out_score, pa, out_redo)
    try:
        if out_redo.any() and redo is None:
            raise RuntimeError(f"lattice records of rows {np.flatnonzero(out_redo).tolist()}: the producer's "
                               "records filter broke its guard; decode them again without it")
        if redo is not None:
            redo[:] = out_redo
        rows, kept = [], []
        for b in range(B):
            if skip[b] or out_redo[b]:
                continue
            S, A = int(out_size[b, 0]), int(out_size[b, 1])
            states = np.zeros((3, S), np.int32)
            arcs = np.zeros((4, A), np.int32)
            scores = np.zeros((3, A), np.float32)
            ref.mod.ref_lattice_row(handle, b, states, arcs, scores)
            rows.append((states, arcs, scores, int(out_size[b, 2]) if out_size[b, 2] >= 0 else None))
            kept.append(b)
    finally:
        ref.mod.ref_lattice_free(handle)
    # the graph lookups of every row's arcs in two native calls on num_threads threads
    lats: list[Lattice | None] = [None] * B
    for b, lat in zip(kept, lattices_from_arrays(graph, rows, num_threads)):
        lats[b] = lat
    return lats, out_score


def cpu_records(decoder, lp: np.ndarray, lens: np.ndarray, online: bool = False, filter: bool = False,
                filter_pad: float = 0.0, frontiers: bool = False, trim: bool = False) -> LatticeRecords:
    """The records of a CPU decode, made as the GPU makes them (for tests and debugging):
    `decoder` is a CPU cuwfst.Decoder, lp float32 [B, T, V] on the host. filter: with the
    twin of the GPU's records filter on epsilon graphs (reference_lattice.h RecordingObserver;
    filter_pad added to its offset: a negative one drops arcs the lattice keeps, for tests),
    and producer_a set. frontiers: the frontiers' graph states too (LatticeRecords.frontiers).
    trim (with filter): the twin of the GPU's lattice trim on epsilon graphs (reference_lattice.h
    RecordingObserver, common.cuh LatTrimLow): a real step leaves out the arcs ending below the
    step's cutoff minus the filter's offset at the magnitude cap, and a row whose step broke the
    trim's assumption is recorded again without it (LatticeRecords.trim_stats)."""
    if trim and not filter:
        raise ValueError("the trim's twin needs the records' filter (filter=True)")
    ref = decoder._ref
    B, T, _ = lp.shape
    S = T + 1
    counts = np.zeros((B, S), np.int32)
    cutoffs = np.zeros((B, S), np.float32)
    sizes = np.zeros((B, S), np.int32)
    total = np.zeros(1, np.int64)
    producer_a = np.zeros((B, S), np.float32)
    o = decoder.options
    h = ref.mod.ref_decode_records(ref.handle, np.ascontiguousarray(lp, np.float32), np.ascontiguousarray(lens, np.int32),
                                   o.search_beam, o.output_beam, o.min_active_states, o.max_active_states,
                                   o.allow_partial, decoder.eps_iterations, online, decoder.num_threads,
                                   counts, cutoffs, sizes, total, 2 if trim else int(bool(filter)), float(filter_pad),
                                   producer_a)
    trim_stats = None
    try:
        records = np.zeros((int(total[0]), RECORD_INTS), np.int32)
        ref.mod.ref_records_take(h, records)
        if trim:
            trim_stats = np.zeros(17, np.int64)
            ref.mod.ref_records_trim_stats(h, trim_stats)
        states = start = None
        if frontiers:
            start = np.zeros(B, np.int32)
            states = np.zeros(int(ref.mod.ref_records_frontier_count(h, start)), np.int32)
            ref.mod.ref_records_frontiers_take(h, states)
    finally:
        ref.mod.ref_records_free(h)
    return LatticeRecords(records, counts, cutoffs, sizes, producer_a if filter else None, states, start, trim_stats)
