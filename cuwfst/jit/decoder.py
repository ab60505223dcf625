"""The GPU decoder module (CUDA; compiled with nvcc for one arch, no GPU needed to build)."""

from __future__ import annotations

import os

from .core import ModuleSpec, load


def spec(cuda_arch: str) -> ModuleSpec:
    return ModuleSpec(
        name="cuwfst_gpu_sm" + cuda_arch.replace(".", ""),
        sources=("gpu_decoder.cu", "gpu_lanes.cu", "gpu_lattice.cu", "gpu_lattice_prune.cu", "gpu_binding.cu"),
        cflags=("-O2", "-std=c++17"),
        cuda_cflags=(),
        cuda_arch=cuda_arch,
        include_dirs=("include", "."),
    )


def device_arch(device_index: int) -> str:
    arch = os.environ.get("CUWFST_CUDA_ARCH")
    if arch:
        return arch
    from ..cuda import capability  # the driver API: no torch needed

    major, minor = capability(device_index)
    return f"{major}.{minor}"


def module(device_index: int = 0):
    return load(spec(device_arch(device_index)))
