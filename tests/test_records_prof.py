"""scripts/records_prof.py: the records pass's profile lines summed per side of an --env-ab run
(benchmarks/lattice_speed.py writes "[records-prof] side NAME" before each side), per grid and class."""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "records_prof.py"


def _item(items, wait, setup, walk, span):
    return (f"[records-prof] one items {items} wait_mcyc {wait} setup_mcyc {setup} walk_mcyc {walk} "
            f"active_ms 1.0 span_ms {span} ctas 528")


def test_sides_stay_apart(tmp_path):
    log = tmp_path / "ab.err"
    log.write_text("\n".join([
        _item(100, 10, 0, 90, 2.0),  # (before any side line: no side name)
        "[records-prof] side prof",
        "[records-prof] timeline ctas 528 plan 0.0 0.5 one 1.0 3.0",
        _item(200, 20, 0, 80, 4.0),
        _item(400, 20, 0, 80, 6.0),
        "unrelated stderr line",
        "[records-prof] side c2048prof",
        "[records-prof] timeline ctas 528 one 2.0 5.0",
        _item(50, 5, 5, 90, 8.0),
    ]) + "\n")
    out = subprocess.run([sys.executable, str(SCRIPT), str(log)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("grid 528 one: 1 passes, 100 items a pass")
    assert lines[1].startswith("c2048prof: grid 528 one: 1 passes, 50 items a pass")
    assert "(wait 5.0% setup 5.0% walk 90.0%)" in lines[1]
    assert lines[2].startswith("prof: grid 528 one: 2 passes, 300 items a pass, warp Mcycles a pass 100.0")
    assert "of 5.000 ms span" in lines[2]
    timelines = [x for x in lines if "timeline" in x]
    assert timelines == [
        "c2048prof: grid 528 one timeline (mean ms from the pass's first start, passes): one 2.000-5.000 (1); "
        "last end 5.000",
        "prof: grid 528 one timeline (mean ms from the pass's first start, passes): plan 0.000-0.500 (1); "
        "one 1.000-3.000 (1); last end 3.000"]
