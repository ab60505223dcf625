"""Programmatic dependent launch is only safe for a kernel that waits for the kernel before it
before touching global memory (common.cuh StepKernelEntry): a kernel launched early that read
first would read the previous step's half-written state. Every kernel that GpuDecoder's
LaunchStep (or LaunchStepSmem) launches must therefore open with StepKernelEntry(); this reads the sources and
checks it, so a new step kernel cannot be added to the PDL path without it."""
import re
from pathlib import Path

CSRC = Path(__file__).resolve().parents[1] / "cuwfst" / "csrc"


def _launched_by_launch_step() -> set[str]:
    names = set()
    for path in CSRC.glob("*.cu"):
        for m in re.finditer(r"\bLaunchStep(?:Smem)?\(\s*([A-Za-z_]\w*)", path.read_text()):
            names.add(m.group(1))
    names.discard("void")  # (the declaration's own parameter list)
    names.discard("kernel")
    return names


def _kernel_bodies() -> dict[str, str]:
    """Each __global__ kernel's body up to its first statement that is not a declaration of
    types, shared memory or constants (what may precede the entry)."""
    bodies = {}
    for path in list((CSRC / "include" / "cuwfst").glob("*.cuh")) + list(CSRC.glob("*.cu")):
        text = path.read_text()
        for m in re.finditer(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(", text):
            brace = text.index("{", m.end())
            bodies.setdefault(m.group(1), []).append(text[brace + 1 : brace + 2000])
    return bodies


def _first_statement(body: str) -> str:
    # declarations that may come first, and the lines of a union of cub storages
    # (`__shared__ union {`, its `typename ...;` members, `} tmp;`)
    allowed = ("using ", "__shared__", "constexpr ", "typedef ", "static_assert", "typename ", "union")
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith("//") or s.startswith(allowed) or (s.startswith("}") and s.endswith(";")):
            continue
        return s
    return ""


def test_every_pdl_kernel_waits_on_entry():
    launched = _launched_by_launch_step()
    assert len(launched) >= 15, launched  # the step pipeline: scans, max, expansions, Finalize, closure, lattice
    bodies = _kernel_bodies()
    for name in sorted(launched):
        assert name in bodies, f"{name}: LaunchStep launches it, but no __global__ definition was found"
        for body in bodies[name]:
            first = _first_statement(body)
            assert first == "StepKernelEntry();", f"{name} opens with {first!r}, not StepKernelEntry()"


def test_the_parser_sees_a_kernel_that_reads_first():
    """The check above would pass vacuously if _first_statement skipped real statements."""
    body = "\n  __shared__ int x;\n  const int32_t lane = blockIdx.y;\n  StepKernelEntry();\n"
    assert _first_statement(body) == "const int32_t lane = blockIdx.y;"
    body = "\n  using S = cub::BlockScan<int, 256>;\n  __shared__ typename S::TempStorage t;\n  StepKernelEntry();\n"
    assert _first_statement(body) == "StepKernelEntry();"
