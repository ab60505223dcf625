"""The CPU reference decoder against real k2's answers (goldens, and k2 live when present)."""

import os
import subprocess
from pathlib import Path

import pytest

from helpers import DATA, compare_to_k2, load_cases

GOLDEN_SCRIPT = Path(__file__).resolve().parent / "goldens" / "make_k2_goldens.py"


def _run_all(cases):
    matched = ties = rows = 0
    bad = []
    for case in cases:
        m, t, b = compare_to_k2(case)
        matched, ties, rows = matched + m, ties + t, rows + len(case["rows"])
        bad += b
    return matched, ties, rows, bad


def test_k2_goldens():
    cases = load_cases("k2_goldens.json.gz")
    matched, ties, rows, bad = _run_all(cases)
    print(f"\nk2 1.23.4 goldens: {len(cases)} cases, {rows} rows: {matched} match, {ties} exact-score ties, "
          f"{len(bad)} mismatches")
    assert rows >= 400 and not bad, "\n".join(bad[:20])


def test_k2_allow_partial_goldens():
    """k2 master's allow_partial answers (../shared/data, copied into tests/data)."""
    cases = load_cases("k2-allow-partial-cases.json.gz")
    matched, ties, rows, bad = _run_all(cases)
    print(f"\nk2 allow_partial goldens: {len(cases)} cases, {rows} rows: {matched} match, {ties} ties, "
          f"{len(bad)} mismatches")
    assert rows > 100 and not bad, "\n".join(bad[:20])


def _k2_python():
    cand = os.environ.get("CUWFST_K2_PYTHON") or "/opt/k2-venv/bin/python"
    if not Path(cand).exists():
        return None
    ok = subprocess.run([cand, "-c", "import k2"], capture_output=True).returncode == 0
    return cand if ok else None


@pytest.mark.skipif(_k2_python() is None, reason="no k2 environment (set CUWFST_K2_PYTHON)")
def test_k2_live(tmp_path):
    """Re-answer the golden cases with the installed k2 and compare to our decoder."""
    out = tmp_path / "live.json.gz"
    subprocess.run([_k2_python(), str(GOLDEN_SCRIPT), "--answer", str(DATA / "k2_goldens.json.gz"),
                    "--out", str(out)], check=True, capture_output=True)
    import gzip
    import json

    with gzip.open(out, "rt") as f:
        cases = json.load(f)
    matched, ties, rows, bad = _run_all(cases)
    print(f"\nk2 live: {rows} rows: {matched} match, {ties} ties, {len(bad)} mismatches")
    assert rows >= 400 and not bad, "\n".join(bad[:20])
