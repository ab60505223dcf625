"""The GPU's output-beam pruning on graphs with epsilon arcs (gpu_lattice_prune.cu, "Epsilon
graphs"; its CPU twin is tests/eps_prune_twin.py): the CPU decoder's lattices bit for bit, on
random epsilon graphs (wide frontiers, small output beams, allow_partial on and off, batches over
1, 3 or many lanes, the pipelined sub-batches) and against the records' replay on the host; the
path is the GPU's where the closure is exact and the replay's below the chain.

Skipped where there is no CUDA GPU."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cuwfst import Decoder
from test_gpu_lattice import TOTALS, _eps_case, compare

pytestmark = pytest.mark.gpu


def _decode(graph, opts, lp, lens, prune_eps="gpu", eps_filter=None, **kw):
    dec = Decoder(graph, opts, device="cuda", **kw)
    dec._gpu.lattice_prune_eps = prune_eps
    if eps_filter is not None:
        dec._gpu.lattice_eps_filter = eps_filter
    return dec, dec.decode(lp, lens, lattice=True)


@pytest.mark.parametrize("seed", range(60))
def test_eps_gpu_pruning_equals_cpu(seed):
    """The records' filter on epsilon graphs on (the default) for two seeds in three, off for the
    third (then the rows' recorded arcs are counted and compared too)."""
    graph, lp, lens, opts = _eps_case(seed)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    lanes = [1, 3, int(lens.size)][seed % 3]
    filt = "off" if seed % 3 == 2 else None
    dec, got = _decode(graph, opts, lp, lens, eps_filter=filt, max_lanes=lanes)
    if filt == "off":
        assert [h.lattice.recorded_arcs for h in got] == [h.lattice.recorded_arcs for h in cpu]
    be = dec._gpu
    assert be.lattice_prune_on_gpu(be.main), "an exact closure: the GPU prunes"
    assert getattr(be.main, "last_prune_ms", None) is not None
    compare(cpu, got, f"eps GPU pruning, seed {seed}, {lanes} lanes")
    TOTALS["eps_gpu_rows"] = TOTALS.get("eps_gpu_rows", 0) + len(got)
    TOTALS["eps_gpu_eps_arcs"] = TOTALS.get("eps_gpu_eps_arcs", 0) + sum(
        int((h.lattice.token == -2).sum()) for h in got if h.lattice is not None)


def test_eps_gpu_pruning_totals():
    """(After the seeds above: rows and epsilon arcs they compared.)"""
    rows, eps = TOTALS.get("eps_gpu_rows", 0), TOTALS.get("eps_gpu_eps_arcs", 0)
    print(f"\nthe GPU pruning on epsilon graphs: {rows} rows, {eps} epsilon arcs kept")
    assert rows > 100 and eps > 1000


@pytest.mark.parametrize("seed", range(8))
def test_eps_gpu_pruning_equals_the_replay(seed):
    graph, lp, lens, opts = _eps_case(seed)
    _, gpu = _decode(graph, opts, lp, lens)
    # (the replay's records' filter off, so that it counts its recorded arcs as the GPU's pruning does)
    _, rep = _decode(graph, opts, lp, lens, prune_eps="replay", eps_filter="off")
    compare(rep, gpu, f"GPU pruning against the replay, seed {seed}")


@pytest.mark.parametrize("seed", range(6))
def test_eps_below_the_chain_takes_the_replay(seed):
    """eps_iterations below the graph's longest chain: the closure need not be exact, so the
    epsilon arcs inside a time do not follow from the frontier; the replay runs (same lattices)."""
    graph, lp, lens, opts = _eps_case(seed, chain_at_least=2)
    opts = dataclasses.replace(opts, eps_iterations=1)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    dec, got = _decode(graph, opts, lp, lens)
    assert not dec._gpu.lattice_prune_on_gpu(dec._gpu.main)
    compare(cpu, got, f"below the chain, seed {seed}")


def test_eps_gpu_pruning_many_sub_batches():
    """More rows than lanes: padded sub-batches, the pruning pipelined beside the next decode."""
    graph, lp, lens, opts = _eps_case(3)
    rng = np.random.default_rng(5)
    reps = 6
    lp = np.concatenate([lp] * reps)
    lens = np.concatenate([rng.permutation(lens) for _ in range(reps)]).astype(np.int32)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    _, got = _decode(graph, opts, lp, lens, max_lanes=4)
    compare(cpu, got, "many sub-batches")


@pytest.mark.parametrize("seed", range(6))
def test_eps_gpu_filter_guard_sends_rows_back(seed):
    """Log-probs of magnitudes in the thousands: within a window the scores outgrow the magnitude an
    early filtered step assumed (A = 2 m + 4096, m the step's |max| or |max - beam|, ~2 x 10^4 at the
    first steps), so the GPU pruning's guard breaks; those rows are decoded again without the filter,
    and every lattice is the CPU's. (At x300 the GPU's A, bounded by the beam, stayed above the first
    window's magnitudes where the CPU's exact one did not: s159.)"""
    graph, lp, lens, opts = _eps_case(seed)
    lp = np.ascontiguousarray(lp * np.float32(3000.0))
    opts = dataclasses.replace(opts, search_beam=8000.0, output_beam=4000.0, check_log_probs=False)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    dec, got = _decode(graph, opts, lp, lens)
    compare(cpu, got, f"the guard, seed {seed}")
    TOTALS["eps_gpu_redone"] = TOTALS.get("eps_gpu_redone", 0) + dec._gpu.stats.get("eps_filter_redone_rows", 0)


def test_eps_gpu_filter_guard_fired():
    """(After the seeds above: the guard sent some rows back.)"""
    print(f"\nthe GPU pruning's guard: {TOTALS.get('eps_gpu_redone', 0)} rows redone")
    assert TOTALS.get("eps_gpu_redone", 0) > 0


def _trimmed(graph, opts, lp, lens, trim, **kw):
    dec = Decoder(graph, opts, device="cuda", **kw)
    dec._gpu.lattice_eps_trim = trim
    out = dec.decode(lp, lens, lattice=True)
    return dec, out, dec._gpu.main.mem_stats()


@pytest.mark.parametrize("seed", range(60))
def test_eps_gpu_trim_equals_cpu(seed):
    """The lattice trim on epsilon graphs (common.cuh LatEpsTrimOn; its CPU twin is
    RecordingObserver's trim, tests/test_lattice_records.py): each step walks only the arcs
    ending at or above (L - beam) minus the records' filter's offset at the magnitude cap, and
    probes only those at or above its cutoff minus its own; the lattices are the CPU's, and no
    slot more is walked than without it."""
    graph, lp, lens, opts = _eps_case(seed)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    lanes = [1, 3, int(lens.size)][seed % 3]
    dec, on, st_on = _trimmed(graph, opts, lp, lens, "on", max_lanes=lanes)
    _, off, st_off = _trimmed(graph, opts, lp, lens, "off", max_lanes=lanes)
    assert dec._gpu.lattice_eps_trim_on() and dec._gpu.lattice_prune_on_gpu(dec._gpu.main)
    compare(cpu, on, f"eps lattice trim, seed {seed}, {lanes} lanes")
    compare(cpu, off, f"eps untrimmed, seed {seed}, {lanes} lanes")
    assert st_on["lattice_filter_reruns"] == 0 and st_on["slots"] <= st_off["slots"]
    for k, v in (("eps_trim_slots_on", st_on["slots"]), ("eps_trim_slots_off", st_off["slots"])):
        TOTALS[k] = TOTALS.get(k, 0) + v


def test_eps_gpu_trim_totals():
    """(After the seeds above: the trim walked fewer slots.)"""
    on, off = TOTALS.get("eps_trim_slots_on", 0), TOTALS.get("eps_trim_slots_off", 0)
    print(f"\nthe lattice trim on epsilon graphs: {on} slots walked against {off}")
    assert 0 < on < off


@pytest.mark.parametrize("seed", range(6))
def test_eps_gpu_trim_guard_decodes_again(seed):
    """Log-probs in the thousands carry a step's magnitude past the trim's cap (common.cuh
    kLatFilterMag) from a frontier within kLatTrimMag: its guard decodes the batch again without
    the trim (MemStats lattice_filter_reruns), and every lattice is the CPU's."""
    graph, lp, lens, opts = _eps_case(seed)
    lp = np.ascontiguousarray(lp * np.float32(3000.0))
    opts = dataclasses.replace(opts, search_beam=8000.0, output_beam=4000.0, check_log_probs=False)
    cpu = Decoder(graph, opts, num_threads=2).decode(lp, lens, lattice=True)
    _, got, st = _trimmed(graph, opts, lp, lens, "on")
    compare(cpu, got, f"the trim's guard, seed {seed}")
    TOTALS["eps_trim_reruns"] = TOTALS.get("eps_trim_reruns", 0) + st["lattice_filter_reruns"]


def test_eps_gpu_trim_guard_fired():
    print(f"\nthe lattice trim's guard on epsilon graphs: {TOTALS.get('eps_trim_reruns', 0)} batches again")
    assert TOTALS.get("eps_trim_reruns", 0) > 0


def test_eps_trim_switch_is_checked():
    graph, lp, lens, opts = _eps_case(0)
    with pytest.raises(ValueError, match="lattice_eps_trim"):
        _trimmed(graph, opts, lp, lens, "yes")


def test_eps_prune_mode_is_checked():
    graph, lp, lens, opts = _eps_case(0)
    with pytest.raises(ValueError, match="lattice_prune_eps"):
        _decode(graph, opts, lp, lens, prune_eps="cpu")
