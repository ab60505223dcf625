"""Lattices numbered and ordered as k2's, arc for arc (tests/data/k2_structure_goldens.json.gz,
made by tests/goldens/make_k2_structure_goldens.py with k2 1.23.4).

The lattice goldens prove each row's arcs as a set of (frame, graph arc); this fixture keeps k2's
FsaVec as it is: its states' numbering (first admission: the source's rank, then the arc's place in
the graph's order) and each state's arcs in the graph's order. The graphs' emitting arcs are
reordered in the image (label 0 first, then by weight), so the image's order is not k2's on most
of them: the numbering and the arc order must come from the source arc ids. On the CPU here, and
on the GPU where there is one (its pruning's keys and numberers; branch k2-numbering until the
device has run it)."""

import gzip
import json

import numpy as np
import pytest

from cuwfst import Decoder
from helpers import DATA
from lattice_helpers import lattice_case_inputs

with gzip.open(DATA / "k2_structure_goldens.json.gz", "rt") as _f:
    CASES = json.load(_f)


def _mismatches(case, device):
    graph, lp, lens, opts = lattice_case_inputs(case)
    hyps = Decoder(graph, opts, device=device).decode(lp, lens, lattice=True)
    bad = []
    for r, (h, row) in enumerate(zip(hyps, case["rows"])):
        lat = h.lattice
        ours = dict(num_states=int(lat.num_states), src=lat.src.tolist(), dst=lat.dst.tolist(),
                    frame=lat.frame.tolist(), arc=lat.graph_arc.tolist())
        for k in ("num_states", "src", "dst", "frame", "arc"):
            if ours[k] != row[k]:
                bad.append(f"{case['name']} row {r}: {k} differs")
                break
    return bad


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_lattices_are_k2s_arc_for_arc(device):
    assert len(CASES) >= 50
    reordered = sum(1 for c in CASES if lattice_case_inputs(c)[0].reordered)
    assert reordered >= len(CASES) // 2, "most graphs must be reordered in the image, or the order is not tested"
    bad = [m for c in CASES for m in _mismatches(c, device)]
    rows = sum(len(c["lens"]) for c in CASES)
    print(f"\nk2 structure goldens ({device}): {len(CASES)} cases, {rows} rows: {len(bad)} differ")
    assert not bad, "\n".join(bad[:20])
