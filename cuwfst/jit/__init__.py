"""JIT build and cache of the native modules (one small spec per module)."""

from .core import ModuleSpec, build, cache_root, load

__all__ = ["ModuleSpec", "build", "cache_root", "load"]
