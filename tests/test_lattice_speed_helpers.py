"""benchmarks/lattice_speed.py's helpers that decide what its lines say (CPU only): the paired
ratio (--paired), the identical-rows rule with exact-score ties, and the tail's host-work parts
(--host-prof)."""
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.lattice_speed import (_host_prof_install, _paired, _print_gap_samples, _print_host_prof,  # noqa: E402
                                      _same_lattices, _ties, gap_samples)
from conftest_data import TINY, demo_arrays  # noqa: E402
from cuwfst import Decoder, Graph  # noqa: E402


def test_paired_ratio_is_taken_within_each_pair(monkeypatch):
    """Each pair is a 1-best pass then a lattice pass; the ratio is a pair's own: here the
    machine slows 3x after the first pair, which moves both passes of a pair, so every pair
    reads 2x (a median of each kind's times over all pairs would read otherwise). A fake clock
    that each pass advances (no sleeps: the timings are exact)."""
    import types

    from benchmarks import lattice_speed

    clock, calls = [0.0], []
    monkeypatch.setattr(lattice_speed, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    def run(lattice):
        slow = 3 if len(calls) >= 2 else 1
        calls.append(lattice)
        clock[0] += (0.004 if lattice else 0.002) * slow
        return []
    r = _paired(run, lambda: None, 3, 2)
    assert calls == [False, True] * 3
    assert r["ratios"] == pytest.approx([2.0, 2.0, 2.0]) and r["over"] == 3
    assert r["median"] == pytest.approx(2.0) and r["min"] == pytest.approx(2.0)
    assert r["ms_1best"] == pytest.approx(3.0) and r["ms_lattice"] == pytest.approx(6.0)  # medians / 2 batches


@pytest.fixture(scope="module")
def lattice_rows():
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    dec = Decoder(graph, output_beam=5.0)
    return dec.decode(lp, lens, lattice=True), dec.decode(lp, lens, lattice=True)


def test_identical_rows_excuse_word_times_only_on_ties(lattice_rows):
    """Equal rows count; other word times on the same 1-best path do not; other word times on
    another path of the same score (a tie) do, and count as a tie; other words never do."""
    a, b = lattice_rows
    n = len(a)
    assert _same_lattices(a, b) == n and _ties(a, b) == 0
    i = next(k for k, h in enumerate(a) if h.word_times and any(s or e for s, e in h.word_times))
    j = next(k for k in range(n) if k != i)
    c = [dataclasses.replace(h) for h in b]
    c[i] = dataclasses.replace(c[i], word_times=[(0, 0)] * len(c[i].word_times))
    assert _same_lattices(a, c) == n - 1 and _ties(a, c) == 0
    c[i] = dataclasses.replace(c[i], arcs=list(c[i].arcs)[::-1] + [-5])  # another path, same score
    assert _same_lattices(a, c) == n and _ties(a, c) == 1
    c[j] = dataclasses.replace(c[j], words=list(c[j].words) + [1])
    assert _same_lattices(a, c) == n - 1


def test_host_prof_times_the_parts_and_undoes_itself(capsys):
    """--host-prof's wrappers record each part (the lattice module's functions and its native
    calls) with its thread, only calls from t_tail on are summed, and undo restores the module."""
    from cuwfst.decoder import lattice as lat_mod
    before = (lat_mod.attach_all, lat_mod.lattices_from_arrays, lat_mod._reference_module)
    graph = Graph.load(TINY / "HLG.img")
    lp, lens, _ = demo_arrays()
    calls, undo = _host_prof_install()
    Decoder(graph, output_beam=5.0).decode(lp, lens, lattice=True)
    t_tail = time.perf_counter()
    Decoder(graph, output_beam=5.0).decode(lp, lens, lattice=True)
    undo()
    assert (lat_mod.attach_all, lat_mod.lattices_from_arrays, lat_mod._reference_module) == before
    names = {c[0] for c in calls}
    assert {"lattices_from_arrays", "attach_all", "word_times_many", "ref_lattices_arcs"} <= names, names
    out = _print_host_prof(calls, t_tail, "x")
    assert out["parts"]["attach_all"]["calls"] == sum(1 for c in calls if c[0] == "attach_all" and c[2] >= t_tail)
    assert out["parts"]["attach_all"]["calls"] >= 1 and "tail's host work by part" in capsys.readouterr().out
    assert _print_host_prof(calls, time.perf_counter() + 1, "x") == {}


def test_switch_interval_is_checked_and_set(monkeypatch):
    """--switch-interval S: a positive S is Python's thread switch interval for the run (read back
    before the run goes on; here it stops at torch's import where torch is missing, else at the missing
    graph file), anything else a usage error."""
    from benchmarks import lattice_speed

    before = sys.getswitchinterval()
    try:
        for bad in ("0", "-1"):
            monkeypatch.setattr(sys, "argv", ["lattice_speed", "--graph", "x", "--log-probs", "y", "--switch-interval", bad])
            with pytest.raises(SystemExit):
                lattice_speed.main()
            assert sys.getswitchinterval() == before
        monkeypatch.setattr(sys, "argv", ["lattice_speed", "--graph", "/nonexistent/HLG.img", "--log-probs", "/nonexistent.npz",
                                          "--switch-interval", "0.0005"])
        with pytest.raises((OSError, ValueError, ImportError)):
            lattice_speed.main()
        assert abs(sys.getswitchinterval() - 0.0005) < 1e-9
    finally:
        sys.setswitchinterval(before)


def test_gap_samples_reads_faulthandlers_repeated_dumps(tmp_path, capsys):
    """Two dumps of every thread by faulthandler itself (the format the traced calls' gap dump
    writes), a second thread parked in a known function: two samples, each with both threads, the
    parked one's innermost frame named; the summary counts each (thread, frames) twice."""
    import faulthandler
    import threading

    go, parked = threading.Event(), threading.Event()

    def parked_in_wait():
        parked.set()
        go.wait(10)

    t = threading.Thread(target=parked_in_wait)
    t.start()
    try:
        assert parked.wait(10)
        with open(tmp_path / "dump.txt", "w+") as f:
            faulthandler.dump_traceback(f, all_threads=True)
            faulthandler.dump_traceback(f, all_threads=True)
            f.seek(0)
            text = f.read()
    finally:
        go.set()
        t.join()
    samples = gap_samples(text)
    assert len(samples) == 2 and all(len(s) >= 2 for s in samples), samples  # (other tests' threads may live on)
    for s in samples:
        assert sum(h.startswith("Current thread") for h, _ in s) == 1, s
        parked_frames = [frames for _, frames in s if any("parked_in_wait" in f for f in frames)]
        assert len(parked_frames) == 1 and "in wait" in parked_frames[0][0], s
    _print_gap_samples(text, "head")
    out = capsys.readouterr().out
    assert "sampled 2 times" in out and "2 x Thread" in out and "parked_in_wait" in out
