"""The GPU pruning on epsilon graphs, its CPU twin (tests/eps_prune_twin.py) against the CPU
decoder's lattices, array for array: random epsilon graphs (both generators, allow_partial on and
off, several output beams, rows long enough for several of k2's windows) and the small tier's TLG
where it is built."""

from __future__ import annotations

import os

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from cuwfst.decoder.lattice import lattices_from_arrays
from cuwfst.decoder.lattice_records import cpu_records
from eps_prune_twin import prune_rows
from helpers import random_eps_graph, random_eps_graph_any, random_log_probs
from lattice_reference_impl import lattice_difference


def _twin_against_cpu(g, lp, lens, opts):
    dec = Decoder(g, opts, device="cpu")
    hyps = dec.decode(lp, lens, lattice=True)
    rec = cpu_records(dec, lp, lens, frontiers=True)
    rows = prune_rows(g, rec, lens, opts.output_beam, dec.eps_iterations)
    lats = lattices_from_arrays(g, rows)
    arcs = eps = 0
    for h, lat in zip(hyps, lats):
        diff = lattice_difference(lat, h.lattice)
        assert diff is None, diff
        arcs += lat.num_arcs
        eps += int((lat.token == -2).sum())
    return arcs, eps


def _eps_graph(rng, case):
    while True:
        n, vocab = int(rng.integers(3, 12)), int(rng.integers(3, 6))
        g = (random_eps_graph(rng, n, vocab, 3, eps_prob=0.5) if case % 2 else
             random_eps_graph_any(rng, n, vocab, 3, eps_prob=0.5, cycles=False, chain=int(rng.integers(0, 4))))
        if g.has_epsilon and g.max_epsilon_chain >= 0:
            return g


@pytest.mark.parametrize("allow_partial", [False, True])
def test_twin_equals_cpu_lattices_on_random_epsilon_graphs(allow_partial):
    rng = np.random.default_rng(41 + allow_partial)
    arcs = eps = partial = 0
    for case in range(150):
        g = _eps_graph(rng, case)
        B, T = 3, int(rng.integers(1, 70))
        lp = random_log_probs(rng, B, T, g.vocab_size, peaky=bool(case % 3))
        lens = rng.integers(0, T + 1, size=B).astype(np.int32)
        opts = DecoderOptions(search_beam=float(rng.choice([4.0, 8.0, 20.0])),
                              output_beam=float(rng.choice([0.5, 3.0, 8.0, 1e4])), allow_partial=allow_partial)
        a, e = _twin_against_cpu(g, lp, lens, opts)
        arcs += a
        eps += e
    assert arcs > 8000 and eps > 800


@pytest.mark.skipif(not os.path.exists("/tmp/corpus-small/TLG.img"), reason="the small tier's TLG is not built")
def test_twin_equals_cpu_lattices_on_the_small_tlg():
    g = Graph.load("/tmp/corpus-small/TLG.img")
    path = "/tmp/corpus-full/sim/shard-00000.npz"
    if not os.path.exists(path):
        pytest.skip("no sim shard")
    d = np.load(path)
    lp = np.ascontiguousarray(d["log_probs"][:4, :, : g.vocab_size])
    lens = d["lengths"][:4].astype(np.int32)
    arcs, eps = _twin_against_cpu(g, lp, lens, DecoderOptions(output_beam=8.0))
    assert eps > 1000
