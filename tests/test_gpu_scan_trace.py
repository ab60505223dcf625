"""The persistent scan's phase trace (CUWFST_SCAN_TRACE, scan.cuh ScanTraceMark; a diagnostic
for benchmarks/scan_trace.py): a decoder built with it gives rows identical to one built
without it, traces every launch of the scan (a step; the steps with a frontier first, then
the all-idle launches that end a captured graph's bucket), and each launch's marks are what the
kernel's order makes them: every CTA enters, exactly one CTA is the grid's last and writes the
tail, a CTA's marks never go back in time, the items' tokens add up to the step's frontier,
and the trace is off (None) unless asked for.

Skipped where there is no CUDA GPU."""

from pathlib import Path

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from helpers import random_log_probs

pytestmark = pytest.mark.gpu
TINY = Path(__file__).resolve().parent.parent / "cuwfst" / "data" / "tiny"
MARKS = 10  # entry .. tail (GpuInstance.SCAN_TRACE_MARKS)


@pytest.mark.parametrize("name,lanes", [("HLG", 4), ("TLG", 4), ("HLG", 32)])
def test_scan_trace(monkeypatch, name, lanes):
    g = Graph.load(TINY / f"{name}.img")
    rng = np.random.default_rng(lanes)
    B, T = lanes, 40
    lp = random_log_probs(rng, B, T, g.vocab_size, peaky=True)
    lens = rng.integers(1, T + 1, size=B).astype(np.int32)
    lens[0] = T
    opts = DecoderOptions(search_beam=12.0)
    plain = Decoder(g, opts, device="cuda", max_lanes=lanes)
    assert plain._gpu.main.scan_trace() is None
    monkeypatch.setenv("CUWFST_SCAN_TRACE", "256")
    traced = Decoder(g, opts, device="cuda", max_lanes=lanes)
    want = plain.decode(lp, lens)
    got = traced.decode(lp, lens)
    for b, (x, y) in enumerate(zip(want, got)):
        assert x.words == y.words and x.arcs == y.arcs and x.score == y.score, b
    steps, ring = traced._gpu.main.scan_trace()
    # a launch a step: the T + 1 steps with a frontier (the final step's included), then the
    # launches of the captured graphs' last bucket, whose lanes are all idle
    assert T + 1 <= steps <= 256 and ring.shape[0] == steps and ring.shape[2] == MARKS + 2
    busy = [k for k in range(steps) if int(ring[k, :, MARKS + 1].sum()) > 0]
    assert busy == list(range(T + 1))
    frontier_total = sum(h.frontier_total for h in got)
    # a CTA for every possible item (lanes x scan CTAs a lane): each CTA's one item is traced
    every_item = ring.shape[1] == lanes * traced._gpu.main.mem_stats()["scan_split"]
    # (idle launches trace too: each lane's chunk 0 is an item, with 0 tokens)
    tokens = 0
    for k in range(ring.shape[0]):
        w = ring[k].astype(np.int64)
        assert (w[:, 0] > 0).all(), "every CTA enters"
        last = [c for c in range(w.shape[0]) if (int(w[c, MARKS]) >> 30) & 1]
        assert len(last) == 1 and w[last[0], MARKS - 1] > 0, "one grid-last CTA, with the tail"
        assert (w[:, MARKS - 1] > 0).sum() == 1
        for c in range(w.shape[0]):
            t = w[c, :MARKS]
            t = t[t > 0]
            assert (np.diff(t) >= 0).all(), (k, c, w[c])
        items = w[:, 2] > 0
        assert items.any()
        tokens += int(w[items, MARKS + 1].sum())
    # the launches' items cover the frontiers the rows stepped from (every frontier token is in
    # exactly one chunk) where every item is a CTA's first; else the traced ones are a part
    if every_item:
        assert tokens == frontier_total
    else:
        assert 0 < tokens <= frontier_total
