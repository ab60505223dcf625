"""The README's and docs/usage.md's runnable blocks, run as written.

A fenced bash or python block preceded by `<!-- doctest -->` runs; `<!-- doctest: needs
torch -->` (or kaldi, gpu) is skipped, with the reason shown, where that is missing. Each
document's blocks run in order in one fresh directory (a block may use what an earlier
one made), with the installed `cuwfst` on PATH; `pip` is a no-op there, since the
package under test is already installed.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"<!-- doctest(?::\s*needs ([\w ]+))? -->\s*\n```(bash|python)\n(.*?)```", re.S)


def blocks(doc: str):
    text = (ROOT / doc).read_text(encoding="utf-8")
    return [(m.group(2), m.group(3), (m.group(1) or "").split()) for m in BLOCK.finditer(text)]


def _has(need: str) -> bool:
    if need == "torch":
        import importlib.util
        return importlib.util.find_spec("torch") is not None
    if need == "kaldi":
        import importlib.util
        return any(importlib.util.find_spec(m) is not None for m in ("kaldi_native_io", "kaldiio"))
    if need == "gpu":
        from cuwfst import cuda
        return cuda.device_count() > 0
    raise ValueError(f"unknown doctest need {need!r}")


CASES = [(doc, i) for doc in ("README.md", "docs/usage.md") for i in range(len(blocks(doc)))]


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    return {doc: tmp_path_factory.mktemp(doc.replace("/", "_")) for doc in ("README.md", "docs/usage.md")}


def test_every_document_has_runnable_blocks():
    assert len(blocks("README.md")) >= 3 and len(blocks("docs/usage.md")) >= 6


@pytest.mark.parametrize("doc,index", CASES, ids=[f"{d}#{i}" for d, i in CASES])
def test_block_runs_as_written(doc, index, workdirs):
    lang, code, needs = blocks(doc)[index]
    missing = [n for n in needs if not _has(n)]
    if missing:
        pytest.skip(f"{doc} block {index} needs {', '.join(missing)}, which this machine lacks")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    cwd = workdirs[doc]
    if lang == "bash":
        # -e: a failing command fails the block; pip: the package is installed already
        script = "set -e\npip() { echo \"(doc test: skipped pip $*)\"; }\n" + code
        cmd = ["bash", "-c", script]
    else:
        cmd = [sys.executable, "-c", code]
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{doc} block {index} failed:\n{code}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    print(r.stdout[-2000:])
