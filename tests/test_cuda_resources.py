"""The CUDA resource owners and the fault-injection hook (cuwfst/csrc/cuda_resources.cuh),
compiled with the host compiler against a stub CUDA runtime: no GPU needed."""

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CSRC = HERE.parent / "cuwfst" / "csrc"


def test_owners_and_fault_injection(tmp_path):
    from cuwfst.jit.core import cuda_home

    cxx = shutil.which("c++") or shutil.which("g++")
    home = cuda_home()
    if not cxx or not home or not (Path(home) / "include" / "cuda_runtime.h").exists():
        pytest.skip("needs a C++ compiler and the CUDA headers")
    exe = tmp_path / "cuda_resources_test"
    build = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", f"-I{home}/include", f"-I{CSRC}",
                            str(HERE / "native" / "cuda_resources_test.cc"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "ALL OK" in run.stdout, run.stdout + run.stderr
