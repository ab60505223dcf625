"""The OpenFst binary reader against kaldifst's own arc iteration."""

import numpy as np
import pytest

from cuwfst import Graph

kaldifst = pytest.importorskip("kaldifst")


def test_binary_reader_matches_kaldifst(tmp_path):
    # states with 0, 1 and 3 arcs, an epsilon arc, two final states
    text = "\n".join(["0 1 1 10 0.5", "0 2 0 0 0.25", "0 3 3 0 1.5", "1 3 2 11 0.125",
                      "2 2 4 12 2.0", "3 0.75", "2 0.0"])
    fst = kaldifst.compile(text, acceptor=False)
    path = tmp_path / "g.fst"
    fst.write(str(path))
    from_file = Graph.from_openfst(path, token_offset=1)
    from_object = Graph.from_openfst(kaldifst.StdVectorFst.read(str(path)), token_offset=1)
    a, b = from_file.arrays, from_object.arrays
    assert (from_file.num_states, from_file.num_arcs) == (5, 7)  # 5 arcs + 2 final arcs
    for name in ("row_splits", "dest", "ilabel", "weight", "aux_row_splits", "aux_pool", "final_count"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert from_file.num_epsilon_arcs == 1
