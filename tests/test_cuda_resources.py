"""Native host code tested without a GPU: the CUDA resource owners and the fault-injection
hook (cuwfst/csrc/cuda_resources.cuh), and GpuDecoder's host logic, compiled against stub
CUDA runtimes (tests/native) instead of libcudart."""

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CSRC = HERE.parent / "cuwfst" / "csrc"


def build_and_run_host_test(tmp_path, source: str, include: Path, timeout: int = 60) -> None:
    """Compiles tests/native/`source` with the host C++ compiler against the CUDA headers
    (include: the csrc directory the test includes from), runs it, and expects "ALL OK"."""
    from cuwfst.jit.core import cuda_home

    cxx = shutil.which("c++") or shutil.which("g++")
    home = cuda_home()
    if not cxx or not home or not (Path(home) / "include" / "cuda_runtime.h").exists():
        pytest.skip("needs a C++ compiler and the CUDA headers")
    exe = tmp_path / Path(source).stem
    build = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", f"-I{home}/include", f"-I{include}",
                            str(HERE / "native" / source), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0 and "ALL OK" in run.stdout, run.stdout + run.stderr


def test_owners_and_fault_injection(tmp_path):
    build_and_run_host_test(tmp_path, "cuda_resources_test.cc", CSRC)


def test_arc_destination_and_label_in_one_load(tmp_path):
    """ArcDestAndLabel (types.cuh; the records pass's walk) gives ArcDest's and ArcLabel's values,
    packed and unpacked, at every label width (tests/native/arc_words_test.cc)."""
    build_and_run_host_test(tmp_path, "arc_words_test.cc", CSRC / "include")


def test_records_slots_a_chunk_a_warp_model(tmp_path):
    """The records pass's chunked slots (types.cuh AfterChunkSlotOf / AfterChunkUsed, the
    arithmetic of lattice_after.cuh AfterWriteChunk; CUWFST_LATTICE_RESERVE=chunk) in a host model
    of warps taking rounds in random interleavings: every slot below the cursor is written once,
    a record or a hole, and a warp leaves at most 31 holes (tests/native/after_chunk_test.cc)."""
    build_and_run_host_test(tmp_path, "after_chunk_test.cc", CSRC / "include")


def test_pooled_lane_layout_model(tmp_path):
    """The pooled lanes' regions (types.cuh, the functions ScanKernel's last block calls) in a
    host model at the full tier's sizes: every index the step kernels reach through a lane's
    regions stays inside what the host committed, also for lanes the pools could not hold,
    and batches converge after a few growths (tests/native/pool_layout_test.cc)."""
    build_and_run_host_test(tmp_path, "pool_layout_test.cc", CSRC / "include", timeout=120)


def test_lattice_run_need(tmp_path):
    """What a lattice run that overflowed the records made and needs (types.cuh
    LatticeNeedOfRun): from its step counts, scaled by its largest step to one run of the
    chunk, never below what it made (tests/native/lattice_need_test.cc)."""
    build_and_run_host_test(tmp_path, "lattice_need_test.cc", CSRC / "include")


def test_lattice_number_rows(tmp_path):
    """The host half of the GPU lattice pruning (cuwfst/lattice_number.h NumberPrunedRows:
    kept states numbered by (time, rank), arcs sorted by (source, arc id)) against its first
    implementation, array for array, on random inputs of both endpoint forms, and the same
    errors on broken ones (tests/native/lattice_number_test.cc; it also prints both timings)."""
    cxx = shutil.which("c++") or shutil.which("g++")
    if not cxx:
        pytest.skip("needs a C++ compiler")
    exe = tmp_path / "lattice_number_test"
    build = subprocess.run([cxx, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", f"-I{CSRC / 'include'}",
                            str(HERE / "native" / "lattice_number_test.cc"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "ALL OK" in run.stdout, run.stdout + run.stderr


def test_gpu_decoder_host_logic_against_a_stub_runtime(tmp_path):
    """GpuDecoder's host side (construction, growth, readback, graph cache, fatal faults,
    continuous batching's runs) compiled with nvcc and run against the stub runtime of tests/native: fault walks over
    every acquisition, and no simulated kernel touches a freed or too small buffer."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        pytest.skip("needs nvcc")
    exe = tmp_path / "gpu_decoder_host_test"
    build = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90", "--extended-lambda", "--expt-relaxed-constexpr",
                            "-cudart", "none", f"-I{CSRC / 'include'}", f"-I{CSRC}", f"-I{HERE / 'native'}",
                            str(HERE / "native" / "gpu_decoder_host_test.cu"), str(CSRC / "gpu_lanes.cu"),
                            str(HERE / "native" / "cuda_stub_runtime.cc"), "-o", str(exe)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "ALL OK" in run.stdout, run.stdout + run.stderr
