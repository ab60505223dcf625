"""The automatic chunk of a GPU-pruned lattice decode (decoder/gpu.py auto_lattice_chunk and
GpuBackend.lattice_chunk_steps): the whole batch in one run up to LATTICE_WHOLE_MAX_STEPS
steps (LATTICE_WHOLE_MAX_STEPS_FILTERED with the records' filter, GpuBackend.lattice_filter_on),
runs of LATTICE_CHUNK_DEFAULT past it, CUWFST_LATTICE_CHUNK and the attribute
overriding. Host logic only (no GPU); the lattices are the same for every chunk
(tests/test_gpu_lattice.py)."""

from types import SimpleNamespace

import pytest

from cuwfst.decoder.gpu import (LATTICE_CHUNK_DEFAULT, LATTICE_WHOLE_MAX_STEPS, LATTICE_WHOLE_MAX_STEPS_FILTERED,
                                GpuBackend, auto_lattice_chunk)


def steps(attr=None, max_steps=None, filtered=False):
    ns = SimpleNamespace(lattice_chunk=attr, lattice_filter_on=lambda: filtered)
    return GpuBackend.lattice_chunk_steps(ns, max_steps)


def test_auto_rule():
    assert auto_lattice_chunk(1) == 0
    assert auto_lattice_chunk(LATTICE_WHOLE_MAX_STEPS) == 0
    assert auto_lattice_chunk(LATTICE_WHOLE_MAX_STEPS + 1) == LATTICE_CHUNK_DEFAULT
    assert auto_lattice_chunk(8001) == LATTICE_CHUNK_DEFAULT
    assert auto_lattice_chunk(None) == LATTICE_CHUNK_DEFAULT  # unknown length: bounded
    assert LATTICE_WHOLE_MAX_STEPS < LATTICE_WHOLE_MAX_STEPS_FILTERED
    assert auto_lattice_chunk(LATTICE_WHOLE_MAX_STEPS + 1, filtered=True) == 0
    assert auto_lattice_chunk(LATTICE_WHOLE_MAX_STEPS_FILTERED, filtered=True) == 0
    assert auto_lattice_chunk(LATTICE_WHOLE_MAX_STEPS_FILTERED + 1, filtered=True) == LATTICE_CHUNK_DEFAULT
    assert auto_lattice_chunk(None, filtered=True) == LATTICE_CHUNK_DEFAULT


def test_filter_setting(monkeypatch):
    be = SimpleNamespace(lattice_filter=None)
    monkeypatch.delenv("CUWFST_LATTICE_FILTER", raising=False)
    assert GpuBackend.lattice_filter_on(be) is True  # on by default
    monkeypatch.setenv("CUWFST_LATTICE_FILTER", "off")
    assert GpuBackend.lattice_filter_on(be) is False
    be.lattice_filter = "on"  # the attribute wins over the environment
    assert GpuBackend.lattice_filter_on(be) is True
    be.lattice_filter = "yes"
    with pytest.raises(ValueError, match="lattice_filter"):
        GpuBackend.lattice_filter_on(be)
    assert steps(max_steps=1001, filtered=True) == 0 and steps(max_steps=1001) == LATTICE_CHUNK_DEFAULT


def test_default_is_auto(monkeypatch):
    monkeypatch.delenv("CUWFST_LATTICE_CHUNK", raising=False)
    assert steps(max_steps=228) == 0
    assert steps(max_steps=1001) == LATTICE_CHUNK_DEFAULT
    for v in ("auto", "AUTO", ""):
        monkeypatch.setenv("CUWFST_LATTICE_CHUNK", v)
        assert steps(max_steps=228) == 0 and steps(max_steps=1001) == LATTICE_CHUNK_DEFAULT


def test_env_and_attribute_override(monkeypatch):
    monkeypatch.setenv("CUWFST_LATTICE_CHUNK", "64")
    assert steps(max_steps=10) == 64
    monkeypatch.setenv("CUWFST_LATTICE_CHUNK", "0")
    assert steps(max_steps=9000) == 0
    assert steps(attr=40, max_steps=10) == 40  # the attribute wins over the environment
    assert steps(attr="auto", max_steps=9000) == LATTICE_CHUNK_DEFAULT
    monkeypatch.setenv("CUWFST_LATTICE_CHUNK", "x")
    with pytest.raises(ValueError, match="lattice_chunk"):
        steps(max_steps=10)
    with pytest.raises(ValueError, match="lattice_chunk"):
        steps(attr=5000)
