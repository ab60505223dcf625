"""Build native modules on first use with tvm-ffi's JIT and cache them.

A build lands in `<cache>/<name>-<key>/` where the key hashes the full text of every
source and header under `cuwfst/csrc`, the flags, the compiler's version line, the CUDA
arch and the tvm-ffi version, so any change to one of them rebuilds. Builds run in a
private temporary directory and are published by an atomic rename, so two processes
building at once both end with a complete library (the loser's copy is discarded).
The cache root is `$CUWFST_CACHE_DIR`, else `~/.cache/cuwfst`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CSRC = Path(__file__).resolve().parent.parent / "csrc"


def cache_root() -> Path:
    return Path(os.environ.get("CUWFST_CACHE_DIR") or Path.home() / ".cache" / "cuwfst")


@functools.lru_cache(maxsize=None)
def _compiler_id(compiler: str) -> str:
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
        return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else compiler
    except (OSError, subprocess.TimeoutExpired):
        return f"{compiler}:missing"


@dataclass(frozen=True)
class ModuleSpec:
    """What to build: sources (relative to cuwfst/csrc) and flags."""

    name: str
    sources: tuple[str, ...]
    cflags: tuple[str, ...] = ("-O2", "-std=c++17")
    cuda_cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    cuda_arch: str | None = None  # e.g. "9.0"; None for CPU-only modules
    include_dirs: tuple[str, ...] = field(default=("include", "reference"))

    @property
    def is_cuda(self) -> bool:
        return any(s.endswith(".cu") for s in self.sources)

    def key(self) -> str:
        import tvm_ffi

        h = hashlib.sha256()
        for p in sorted(CSRC.rglob("*")):
            if p.is_file() and p.suffix in (".h", ".cuh", ".cc", ".cu", ".cpp"):
                h.update(str(p.relative_to(CSRC)).encode())
                h.update(p.read_bytes())
        for part in (self.name, self.sources, self.cflags, self.cuda_cflags, self.ldflags,
                     self.cuda_arch, self.include_dirs, tvm_ffi.__version__,
                     _compiler_id(os.environ.get("CXX", "c++"))):
            h.update(repr(part).encode())
        if self.is_cuda:
            h.update(_compiler_id("nvcc").encode())
        return h.hexdigest()[:16]


def cuda_home() -> str | None:
    """CUDA_HOME, else the toolkit nvcc belongs to, else /usr/local/cuda."""
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            return os.environ[env]
    nvcc = shutil.which("nvcc")
    if nvcc:
        root = Path(os.path.realpath(nvcc)).parent.parent
        if (root / "lib64").is_dir() or (root / "include" / "cuda_runtime.h").exists():
            return str(root)
    return "/usr/local/cuda" if Path("/usr/local/cuda").is_dir() else None


def _arch_flags(arch: str) -> list[str]:
    major, minor = arch.split(".")
    cc = f"{major}{minor}"
    # sm_90a enables Hopper-only instructions; keep plain sm_90 plus PTX for forward compat.
    return [f"-gencode=arch=compute_{cc},code=sm_{cc}", f"-gencode=arch=compute_{cc},code=compute_{cc}"]


def build(spec: ModuleSpec, *, verbose: bool = False) -> Path:
    """Return the path of the built shared library, building it if not cached."""
    import tvm_ffi.cpp

    final_dir = cache_root() / f"{spec.name}-{spec.key()}"
    lib = final_dir / f"{spec.name}.so"
    if lib.exists():
        return lib
    cache_root().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=cache_root()))
    try:
        cuda_flags = list(spec.cuda_cflags)
        ldflags = list(spec.ldflags)
        if spec.is_cuda:
            if not spec.cuda_arch:
                raise ValueError(f"module {spec.name} has CUDA sources but no cuda_arch")
            cuda_flags += ["-std=c++17", "--expt-relaxed-constexpr", "--extended-lambda", "-lineinfo"]
            cuda_flags.append(_arch_flags(spec.cuda_arch)[1])  # PTX too, for newer chips
            home = cuda_home()
            if home:
                ldflags.append(f"-L{home}/lib64")
        # tvm-ffi turns this list into -gencode flags; set it so no GPU is probed at build
        env_arch = os.environ.get("TVM_FFI_CUDA_ARCH_LIST")
        if spec.is_cuda:
            os.environ["TVM_FFI_CUDA_ARCH_LIST"] = spec.cuda_arch
        try:
            built = tvm_ffi.cpp.build(
                spec.name,
                sources=[str(CSRC / s) for s in spec.sources],
                extra_cflags=list(spec.cflags),
                extra_cuda_cflags=cuda_flags,
                extra_ldflags=ldflags,
                extra_include_paths=[str(CSRC / d) for d in spec.include_dirs],
                build_directory=str(tmp),
                backend="cuda" if spec.is_cuda else None,
            )
        finally:
            if env_arch is not None:
                os.environ["TVM_FFI_CUDA_ARCH_LIST"] = env_arch
            else:
                os.environ.pop("TVM_FFI_CUDA_ARCH_LIST", None)
        if Path(built).resolve() != (tmp / f"{spec.name}.so").resolve():
            shutil.copy2(built, tmp / f"{spec.name}.so")
        try:
            os.rename(tmp, final_dir)  # atomic publish
        except OSError:
            if not lib.exists():  # the destination is not a finished build: report
                raise
        else:
            tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return lib


_loaded: dict = {}


def load(spec: ModuleSpec):
    """Build if needed and load the module (once per process)."""
    import tvm_ffi

    k = (spec.name, spec.key())
    if k not in _loaded:
        _loaded[k] = tvm_ffi.load_module(str(build(spec)))
    return _loaded[k]
