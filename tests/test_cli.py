"""The command line: export, info, decode, demo."""

import numpy as np

from cuwfst.cli import main
from test_graph_image import TEXT


def test_export_info_decode(tmp_path, capsys):
    txt = tmp_path / "g.txt"
    txt.write_text(TEXT)
    img = tmp_path / "g.img"
    assert main(["export", "--k2-text", str(txt), "--out", str(img)]) == 0
    assert main(["info", str(img)]) == 0
    out = capsys.readouterr().out
    assert "states         4" in out and "arcs           6" in out and "epsilon arcs   0" in out
    lp = np.log(np.full((2, 3, 3), 1 / 3, np.float32))
    np.savez(tmp_path / "u.npz", log_probs=lp, lengths=np.array([3, 2]))
    assert main(["decode", str(img), str(tmp_path / "u.npz")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("0\t")


def test_corrupt_image_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.img"
    bad.write_bytes(b"not an image" * 40)
    assert main(["info", str(bad)]) == 2
    assert "corrupt graph image" in capsys.readouterr().err


def test_demo_runs_on_cpu(capsys):
    assert main(["demo", "--device", "cpu", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    wer = [ln for ln in out.splitlines() if ln.startswith("WER:")][0]
    greedy, hlg = (float(x.split()[-1].rstrip("%")) for x in wer[4:].split(","))
    assert hlg < greedy  # the graph fixes most of the simulated misspellings
