"""The CPU reference decoder module (C++ only; no CUDA needed)."""

from .core import ModuleSpec, load

SPEC = ModuleSpec(
    name="cuwfst_reference",
    sources=("reference/reference_decoder.cc", "reference/reference_lattice.cc",
             "reference/lattice_posteriors.cc", "reference/reference_binding.cc"),
    # -fno-semantic-interposition: calls inside the module to its own exported functions may be
    # inlined (LatticeBuilder::IsEpsilon went through the PLT once an arc); IEEE results as before
    cflags=("-O2", "-std=c++17", "-fno-fast-math", "-ffp-contract=off", "-fno-semantic-interposition", "-pthread"),
    ldflags=("-pthread",),
)


def module():
    return load(SPEC)
