"""The CPU reference lattice against real k2's lattices (goldens, and k2 live when present)."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import DATA, load_cases
from lattice_helpers import compare_lattices_to_k2, lattice_case_inputs

GOLDENS = Path(__file__).resolve().parent / "goldens"


def _run_all(cases):
    tot = {"rows": 0, "arcs": 0, "score_rows": 0, "bad": []}
    for case in cases:
        r = compare_lattices_to_k2(case)
        for k in ("rows", "arcs", "score_rows"):
            tot[k] += r[k]
        tot["bad"] += r["bad"]
    return tot


def test_k2_lattice_goldens():
    """Every row: the (frame, graph arc) set of k2's pruned lattice exactly, its state count,
    its tot_scores (tropical and log, 1e-4 relative), its best path = k2's 1-best, and on
    rows under 400 arcs the float32 arc scores bit for bit."""
    cases = load_cases("k2_lattice_goldens.json.gz")
    r = _run_all(cases)
    long_rows = sum(n > 60 for c in cases for n in c["lens"])
    print(f"\nk2 1.23.4 lattice goldens: {len(cases)} cases, {r['rows']} rows ({long_rows} over 60 frames, "
          f"pruned in several windows), {r['arcs']} lattice arcs compared, arc scores on {r['score_rows']} rows: "
          f"{len(r['bad'])} mismatches")
    assert r["rows"] >= 500 and r["arcs"] >= 100_000 and long_rows >= 100
    assert not r["bad"], "\n".join(r["bad"][:20])


def test_goldens_cover_the_settings_that_matter():
    """The fixture exercises what the lattice rules depend on (so a passing comparison means
    something): small output beams, many pruning windows, rows whose lattice has no path
    (k2 still returns arcs for them), lattices well beyond their best path."""
    cases = load_cases("k2_lattice_goldens.json.gz")
    rows = [(c, r) for c in cases for r in c["rows"]]
    assert min(c["beams"][1] for c in cases) <= 0.5
    assert max(max(c["lens"]) for c in cases) >= 300  # 15 windows
    assert sum(r["tot"][0] is None for _, r in rows) >= 20
    assert sum(r["tot"][0] is not None and len(r["arcs"]) > 2 * len(r["best"]) for _, r in rows) >= 100


def _k2_python():
    cand = os.environ.get("CUWFST_K2_PYTHON") or "/opt/k2-venv/bin/python"
    if not Path(cand).exists():
        return None
    ok = subprocess.run([cand, "-c", "import k2"], capture_output=True).returncode == 0
    return cand if ok else None


@pytest.mark.skipif(_k2_python() is None, reason="no k2 environment (set CUWFST_K2_PYTHON)")
def test_k2_lattice_live(tmp_path):
    """Re-answer the golden cases with the installed k2 and compare again."""
    out = tmp_path / "live.json.gz"
    subprocess.run([_k2_python(), str(GOLDENS / "make_k2_lattice_goldens.py"), "--answer",
                    str(DATA / "k2_lattice_goldens.json.gz"), "--out", str(out)], check=True, capture_output=True)
    with gzip.open(out, "rt") as f:
        cases = json.load(f)
    r = _run_all(cases)
    print(f"\nk2 live lattices: {r['rows']} rows, {r['arcs']} arcs: {len(r['bad'])} mismatches")
    assert r["rows"] >= 500 and not r["bad"], "\n".join(r["bad"][:20])


def _to_k2_check(tmp_path, *flags):
    cases = load_cases("k2_lattice_goldens.json.gz")
    picked = [c for c in cases if c["beams"][0] == 20.0 and max(c["lens"]) > 30][:6]
    assert picked
    from cuwfst import Decoder

    arrays = {}
    for i, case in enumerate(picked):
        graph, lp, lens, opts = lattice_case_inputs(case)
        hyps = Decoder(graph, opts).decode(lp, lens, lattice=True)
        for r, h in enumerate(hyps):
            lat = h.lattice
            for name in ("src", "dst", "frame", "graph_arc", "redirect_arc", "token", "acoustic", "graph_score",
                         "score", "word_splits", "word_ids", "state_frame", "state_graph", "state_level"):
                arrays[f"c{i}_r{r}_{name}"] = getattr(lat, name)
            arrays[f"c{i}_r{r}_num_states"] = np.asarray(lat.num_states)
    np.savez(tmp_path / "ours.npz", **arrays)
    (tmp_path / "cases.json").write_text(json.dumps(picked))
    script = Path(__file__).resolve().parent / "k2_to_k2_check.py"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    res = subprocess.run([_k2_python(), str(script), str(tmp_path / "cases.json"), str(tmp_path / "ours.npz"), *flags],
                         capture_output=True, text=True, env=env)
    print(res.stdout[-3000:], res.stderr[-3000:], file=sys.stderr)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "rows compared: 0" not in res.stdout


@pytest.mark.skipif(_k2_python() is None, reason="no k2 environment (set CUWFST_K2_PYTHON)")
def test_to_k2_rescores_as_k2s_own_lattice(tmp_path):
    """Lattice.to_k2 (run in the k2 environment) against the FsaVec k2 itself returns: the same
    states, the same arcs as a multiset (label, word, score and lm_score bits), the same total
    scores, and icefall-style whole-lattice rescoring gives the same result on both."""
    _to_k2_check(tmp_path, "--no-structure")


@pytest.mark.skipif(_k2_python() is None, reason="no k2 environment (set CUWFST_K2_PYTHON)")
def test_to_k2_is_k2s_own_lattice(tmp_path):
    """The same, arc for arc: states numbered and arcs ordered as k2 numbers and orders them."""
    _to_k2_check(tmp_path)
