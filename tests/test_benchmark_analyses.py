"""The benchmarks' analyses, on the CPU.

benchmarks/scan_trace.py on a hand-made trace ring whose times are known: each launch's scan
time, phase times (median and last CTA), hot item and the rest of the step come out as
constructed; launches without tokens (a captured graph's idle launches) and CTAs without an
item are left out; the timer's resolution is the smallest step seen.
benchmarks/memory_stages.py: each stage's growth and the part outside the module's counters.
benchmarks/long_stream.py's tie report over a path's float32 partial scores (helpers.path_scores_f32)."""

import numpy as np
import pytest

from benchmarks.scan_trace import INFO, MARKS, TOKENS, launch_phases, resolution_ns

WORDS = len(MARKS) + 2
M = {name: i for i, name in enumerate(MARKS)}


def ring_of(launches):
    """launches: list of (t0, [(cta marks dict of ns offsets, tokens, info)], tail offset)."""
    grid = max(len(ctas) for _, ctas, _ in launches)
    r = np.zeros((len(launches), grid, WORDS), np.uint64)
    for k, (t0, ctas, tail) in enumerate(launches):
        for c, (marks, tokens, info) in enumerate(ctas):
            for name, off in marks.items():
                r[k, c, M[name]] = t0 + off
            r[k, c, TOKENS] = tokens
            r[k, c, INFO] = info
        if tail is not None:
            r[k, 0, M["grid_last"]] = t0 + tail - 500
            r[k, 0, M["tail"]] = t0 + tail
    return r


def item(entry, ticket, trim, degrees, lane_done):
    return dict(entry=entry, plan=entry + 100, ticket=ticket, trim=trim, degrees=degrees, look_back=degrees + 50,
                emit=degrees + 80, lane_done=lane_done)


def test_phases_of_a_known_ring():
    base = 10_000_000
    launch0 = (base, [
        (item(32, 2_000, 8_000, 40_000, 45_000), 512, 0 | (1 << 28)),      # lane 0 chunk 0
        (item(0, 2_100, 9_000, 60_000, 64_000), 300, 1 | (1 << 28)),       # the last CTA
        (item(64, 2_050, 7_000, 30_000, 33_000), 100, 2),                  # lane 2
        (dict(entry=96, plan=196), 0, 0),                                  # no item
    ], 68_000)
    launch1 = (base + 200_000, [(item(0, 1_000, 5_000, 20_000, 21_000), 700, 0)], 25_000)
    idle = (base + 400_000, [(dict(entry=0, plan=100, ticket=200, lane_done=300), 0, 0)], 1_000)
    rows = launch_phases(ring_of([launch0, launch1, idle]))
    assert len(rows) == 2  # the idle launch (no tokens) is left out
    r0, r1 = rows
    assert r0["items"] == 3 and r0["tokens_total"] == 912
    assert r0["scan_us"] == pytest.approx(68.0)
    assert r0["degrees_last"] == pytest.approx(60.0)
    assert r0["degrees_median"] == pytest.approx(40.0)
    assert r0["trim_median"] == pytest.approx(8.0)
    assert r0["plan_last"] == pytest.approx(0.196)  # over every CTA that entered
    assert r0["hot_tokens"] == 512 and r0["hot_one_round"] is True
    assert r0["hot_degrees"] == pytest.approx(40.0)
    assert r0["tail_last"] == pytest.approx(68.0) and r0["grid_last_last"] == pytest.approx(67.5)
    # the rest of the step: from this launch's end to the next launch's first entry
    assert r0["rest_us"] == pytest.approx((200_000 - 68_000) / 1e3)
    assert r1["scan_us"] == pytest.approx(25.0) and r1["items"] == 1
    assert r1["rest_us"] == pytest.approx((400_000 - 200_000 - 25_000) / 1e3)


def test_resolution_is_the_smallest_step():
    # a timer that ticks every 32 ns: every mark a multiple of 32, two of them one tick apart
    marks = dict(entry=0, plan=32 * 60, ticket=32 * 61, trim=32 * 200, degrees=32 * 900, look_back=32 * 950,
                 emit=32 * 980, lane_done=32 * 1000)
    r = ring_of([(32 * 100_000, [(marks, 4, 0)], 32 * 1100)])
    assert resolution_ns(r) == 32


def test_memory_stage_rows():
    """benchmarks/memory_stages.py: each stage's growth since the one before, and the part the
    module's own counters do not hold."""
    from benchmarks.memory_stages import stage_rows

    MiB = 2**20
    rows = stage_rows([("torch", 1000 * MiB, 0), ("module", 1010 * MiB, 0), ("decoder", 1510 * MiB, 400 * MiB),
                       ("decode 1", 1650 * MiB, 420 * MiB)])
    assert [r["stage"] for r in rows] == ["module", "decoder", "decode 1"]
    assert rows[0] == dict(stage="module", used_mib=10.0, module_mib=0.0, outside_mib=10.0, total_used_mib=10.0)
    assert rows[1]["outside_mib"] == 100.0 and rows[1]["total_used_mib"] == 510.0
    assert rows[2] == dict(stage="decode 1", used_mib=140.0, module_mib=20.0, outside_mib=120.0, total_used_mib=650.0)


def test_long_stream_path_scores_and_tie_report():
    """benchmarks.long_stream's check helper and the score it reads: helpers.path_scores_f32
    accumulates a decoded path's float32 score exactly as the CPU decoder does (its last value is
    the hypothesis's score, bit for bit, on random rows of the tiny HLG), and arcs_difference finds no run for equal paths and, for a
    path whose arc on one frame is replaced by another arc out of the same state, one run whose
    merge scores differ (not a tie)."""
    from helpers import path_scores_f32

    from benchmarks.long_stream import arcs_difference
    from benchmarks.stream_tools import TINY
    from cuwfst import Decoder, Graph

    g = Graph.load(TINY / "HLG.img")
    rng = np.random.default_rng(7)
    lp = np.log(rng.dirichlet(np.full(g.vocab_size, 0.3), size=(4, 25))).astype(np.float32)
    hyps = Decoder(g).decode(lp, np.full(4, 25, np.int32))
    for b, h in enumerate(hyps):
        p = path_scores_f32(g, lp[b], h.arcs)
        assert len(p) == len(h.arcs) == 26 and p[-1].view(np.uint32) == np.float32(h.score).view(np.uint32), b
        assert arcs_difference(g, h.arcs, h.arcs, lp[b]).startswith("arcs differ: 0 of 26 positions in 0 runs")
    # another arc out of the state the path's arc at frame k leaves (a different path of the same
    # states before and after is not needed: the report reads the scores where the paths meet again)
    h, row = hyps[0], lp[0]
    arr = g.arrays
    img = g.image_arc_ids(h.arcs)
    splits = np.asarray(arr.row_splits)
    for k in range(len(img) - 2):
        src = int(np.searchsorted(splits, img[k], side="right")) - 1
        others = [a for a in range(splits[src], splits[src + 1]) if a != img[k] and arr.ilabel[a] >= 0
                  and row[k, arr.ilabel[a]] + arr.weight[a] != row[k, arr.ilabel[img[k]]] + arr.weight[img[k]]]
        if others:
            alt = list(h.arcs)
            alt[k] = int(g.source_arc_ids([others[0]])[0])
            rep = arcs_difference(g, alt, h.arcs, row)
            assert rep.startswith("arcs differ: 1 of 26 positions in 1 runs"), rep
            assert "equal in 0," in rep, rep
            break
    else:
        pytest.skip("no alternative arc on this row")
