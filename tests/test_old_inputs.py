"""benchmarks/old_inputs.py on the CPU at tiny scale: the image it writes for an older reader
(no arc-id or symbol sections) decodes as the original does, and its uniform and sorted
arrays are the harness's rows."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import old_inputs  # noqa: E402
from benchmarks.gpu_speed import uniform_rows  # noqa: E402
from benchmarks.stream_tools import DEMO_SHARD, TINY, load_shard  # noqa: E402
from cuwfst import Decoder, DecoderOptions, Graph  # noqa: E402
from cuwfst.graph.image import FLAG_ARC_IDS, FLAG_SYMBOLS  # noqa: E402


def test_old_inputs_decode_as_the_originals(tmp_path):
    graph = Path(TINY) / "TLG.img"
    assert old_inputs.main(["--graph", str(graph), "--log-probs", str(DEMO_SHARD), "--out", str(tmp_path),
                            "--rows", "3", "--frames", "40"]) == 0
    new, old = Graph.load(graph), Graph.load(tmp_path / "TLG_old.img")
    assert new.arrays.arc_id is not None  # the tiny TLG carries source arc ids: the case strips a section
    assert old.arrays.flags & (FLAG_ARC_IDS | FLAG_SYMBOLS) == 0
    assert old.arrays.arc_id is None and old.arrays.symbols is None
    for k in ("row_splits", "final_count", "dest", "ilabel", "weight", "aux_row_splits", "aux_pool"):
        assert np.array_equal(getattr(old.arrays, k), getattr(new.arrays, k)), k
    lp, lens = load_shard(DEMO_SHARD)
    u = np.load(tmp_path / "uniform.npz")
    want_lp, want_lens = uniform_rows(lp, lens, 3, 40)
    assert np.array_equal(u["log_probs"], want_lp) and np.array_equal(u["lengths"], want_lens)
    s = np.load(tmp_path / "sorted.npz")
    assert np.all(np.diff(s["lengths"]) <= 0) and sorted(s["lengths"].tolist()) == sorted(lens.tolist())
    opts = DecoderOptions()
    a = Decoder(new, opts, num_threads=2).decode(u["log_probs"], u["lengths"])
    b = Decoder(old, opts, num_threads=2).decode(u["log_probs"], u["lengths"])
    assert [(np.float32(h.score), h.words) for h in a] == [(np.float32(h.score), h.words) for h in b]
    assert any(h.words for h in a)
