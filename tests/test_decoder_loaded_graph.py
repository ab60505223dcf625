"""The CPU decoder on a graph loaded from an image file (a read-only memory map)."""

import numpy as np

from cuwfst import Decoder, Graph


def test_decoder_accepts_memory_mapped_graph(tmp_path):
    # 0 -a-> 1 -b-> 2 (final): tokens 1 then 2, words 7 and 8
    g = Graph.from_k2_text("0 1 1 7 -0.5\n1 2 2 8 -0.25\n2 3 -1 -1 0\n3", vocab_size=3)
    g.save(tmp_path / "g.img")
    loaded = Graph.load(tmp_path / "g.img")
    assert not loaded.arrays.dest.flags.writeable
    lp = np.log(np.full((1, 2, 3), 1.0 / 3.0, np.float32))
    hyp = Decoder(loaded).decode(lp)[0]
    assert hyp.words == [7, 8]
    np.testing.assert_allclose(hyp.score, -0.75 + 2 * np.log(1.0 / 3.0), rtol=1e-6)
