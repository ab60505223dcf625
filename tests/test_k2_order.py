"""The search's order of addition against k2's, on a case built to tell them apart.

k2's intersect_dense_pruned scores an arc's end as forward + (acoustic + weight)
(`ai.arc_loglike = acoustic_score + arc.score; ai.end_loglike = forward_loglike + arc_loglike`).
The search here did (score + weight) + acoustic until 2026-12-05, and the two differ in the last bit
where the weight is not 0, so a token at the beam's edge can be admitted by one and not by the other.
The lattice goldens cannot see it (their log-probs are multiples of 1/64). `scripts/k2_full_check.py`
found it on the full tier's HLG: 3 of 64 rows of the model's posteriors differed from k2 by 2 to 19
arcs (docs/speed-notes.md, "Exactness at full scale against real k2"). The search now adds in k2's
order on the CPU (RowSearch::Step) and the GPU (ArcEnd, and every bound in the same shape).

The case: frame 0 reaches states 1 and 2 with the same score s1; on frame 1 arc 1 -> 3 (weight w1,
label 3) ends within a float step of the cutoff (max - 4, the max from 2 -> 4): k2's order puts it
just above the cutoff, the old order on it. k2's answer below is k2 1.23.4's lattice for this input
(made in the k2 environment, ../shared/tools/k2-venv.sh, from the same text and log-probs): every
arc kept; the old order kept 3 (the dead state's arcs went too).
"""

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph

F = np.float32
W0, LP01, S1 = F(-1.6667883396148682), F(-0.8143548369407654), F(-2.4811432361602783)
W1, LP13, LP14 = F(-3.5186047554016113), F(-1.3210722208023071), F(-0.8396772146224976)
TEXT = "\n".join([f"0 1 1 0 {float(W0)!r}", "0 2 2 0 0.0", f"1 3 3 0 {float(W1)!r}", "2 4 4 0 0.0",
                  "3 5 -1 0 0.0", "4 5 -1 0 0.0", "5"])
K2_ARCS = [(0, 0), (0, 1), (1, 2), (1, 3), (2, 4), (2, 5)]  # (frame, graph arc) of k2's lattice


def _inputs():
    lp = np.full((1, 2, 5), -30.0, np.float32)
    lp[0, 0, 1], lp[0, 0, 2], lp[0, 1, 3], lp[0, 1, 4] = LP01, S1, LP13, LP14
    opts = DecoderOptions(search_beam=4.0, output_beam=50.0, min_active_states=1, max_active_states=2,
                          allow_partial=False, check_log_probs=False)
    return Graph.from_k2_text(TEXT, vocab_size=5), lp, opts


def test_the_case_separates_the_two_orders():
    """The arithmetic the case rests on, in float32: the two orders give different ends and the
    cutoff lies between them (k2's above it, the old order's on it)."""
    assert F(W0 + LP01) == S1 and F(0.0) + F(S1 + F(0.0)) == S1
    cutoff = F(F(S1 + LP14) - F(4.0))
    old, k2s = F(F(S1 + W1) + LP13), F(S1 + F(LP13 + W1))
    assert old != k2s and k2s > cutoff and not old > cutoff


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_lattice_equals_k2s_where_the_order_of_addition_decides(device):
    graph, lp, opts = _inputs()
    h = Decoder(graph, opts, device=device).decode(lp, np.array([2], np.int32), lattice=True)[0]
    assert sorted(zip(h.lattice.frame.tolist(), h.lattice.graph_arc.tolist())) == K2_ARCS
    # the best path's score is k2's arithmetic too: 0 + (lp + w) per arc, in order
    want = F(S1 + F(LP14 + F(0.0)))
    assert F(F(want + F(F(0.0) + F(0.0)))) == F(h.score)
