"""The CPU reference decoder module (C++ only; no CUDA needed)."""

from .core import ModuleSpec, load

SPEC = ModuleSpec(
    name="cuwfst_reference",
    sources=("reference/reference_decoder.cc", "reference/reference_lattice.cc",
             "reference/lattice_posteriors.cc", "reference/reference_binding.cc"),
    cflags=("-O2", "-std=c++17", "-fno-fast-math", "-ffp-contract=off", "-pthread"),
    ldflags=("-pthread",),
)


def module():
    return load(SPEC)
