"""Reliability checks that need no GPU (issue 14): graph validation and read-only arrays,
the native upload's own checks, upload lifetime bookkeeping, and the rescue plan."""

import gc
import os

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, Graph
from cuwfst.decoder import gpu as gpu_mod
from cuwfst.decoder.rescue import (CAPACITY_BITS, OVERFLOW_SLOTS, RESCUE_BITS, batches, rescue)
from cuwfst.decoder.result import OVERFLOW_ARENA, OVERFLOW_KEPT
from cuwfst.graph.image import ImageArrays, native_array, parse_image
from helpers import random_ctc_graph, random_log_probs


def _arrays(graph: Graph, **changes) -> ImageArrays:
    """A writable copy of a graph's arrays, with some fields replaced."""
    a = graph.arrays
    fields = dict(num_states=a.num_states, num_arcs=a.num_arcs, vocab_size=a.vocab_size,
                  start_state=a.start_state, finals_at_end=a.finals_at_end,
                  row_splits=a.row_splits.copy(), final_count=a.final_count.copy(), dest=a.dest.copy(),
                  ilabel=a.ilabel.copy(), weight=a.weight.copy(), aux_row_splits=a.aux_row_splits.copy(),
                  aux_pool=a.aux_pool.copy(), eps_count=None if a.eps_count is None else a.eps_count.copy())
    fields.update(changes)
    return ImageArrays(**fields)


@pytest.fixture(scope="module")
def graph():
    return random_ctc_graph(np.random.default_rng(0), 40, 6, 4, 0.3)


# ---------------------------------------------------------------- Graph(arrays)
def test_graph_from_arrays_validates(graph):
    mine = _arrays(graph)
    ok = Graph(mine)
    assert ok.num_arcs == graph.num_arcs
    mine.dest[0] = graph.num_states + 99  # the caller's arrays stay the caller's
    assert ok.arrays.dest[0] == graph.arrays.dest[0]
    dest = graph.arrays.dest.copy()
    dest[3] = graph.num_states + 5
    with pytest.raises(ValueError, match=r"^invalid graph: arc 3 has destination"):
        Graph(_arrays(graph, dest=dest))
    il = graph.arrays.ilabel.copy()
    emitting = int(np.flatnonzero(il >= 0)[0])
    il[emitting] = graph.vocab_size  # one past the last log-prob column
    with pytest.raises(ValueError, match="ilabel"):
        Graph(_arrays(graph, ilabel=il))
    with pytest.raises(ValueError, match="start state"):
        Graph(_arrays(graph, start_state=graph.num_states))
    with pytest.raises(TypeError, match="ImageArrays"):
        Graph({"row_splits": graph.arrays.row_splits})


def _assert_frozen(g: Graph):
    a = g.arrays
    for name in ("row_splits", "final_count", "dest", "ilabel", "weight", "aux_row_splits", "aux_pool"):
        arr = getattr(a, name)
        assert not arr.flags.writeable, name
        if arr.size:
            with pytest.raises(ValueError, match="read-only"):
                arr[0] = arr[0]


def test_graph_arrays_are_read_only_after_validation(graph, tmp_path):
    _assert_frozen(graph)  # from_arcs
    _assert_frozen(Graph(_arrays(graph)))  # Graph(arrays)
    graph.save(tmp_path / "g.img")
    loaded = Graph.load(tmp_path / "g.img")  # memory-mapped, copy-on-write
    _assert_frozen(loaded)
    raw = np.frombuffer((tmp_path / "g.img").read_bytes(), np.uint8)  # truly read-only memory
    _assert_frozen(Graph(parse_image(raw)))


def test_from_arcs_does_not_freeze_the_callers_arrays():
    w = np.array([-1.0, -2.0, 0.0], np.float32)
    Graph.from_arcs(num_states=3, start_state=0, src=[0, 1, 1], dest=[1, 1, 2], ilabel=[0, 1, -1], weight=w)
    w[0] = 5.0  # still the caller's to write
    assert w[0] == 5.0


def test_native_array_aliases_writable_memory_and_copies_read_only_memory(graph, tmp_path):
    rs = graph.arrays.row_splits  # frozen, but its memory is ours
    alias = native_array(rs, np.int32)
    assert alias.flags.writeable and np.shares_memory(alias, rs)
    assert not rs.flags.writeable  # the graph's own view stays read-only
    graph.save(tmp_path / "g.img")
    mm = Graph.load(tmp_path / "g.img").arrays.weight  # a copy-on-write memmap section
    assert np.shares_memory(native_array(mm, np.float32), mm)
    raw = np.frombuffer((tmp_path / "g.img").read_bytes(), np.uint8)
    w = parse_image(raw).weight
    out = native_array(w, np.float32)
    assert out.flags.writeable and not np.shares_memory(out, w) and np.array_equal(out, w)


def test_read_only_graphs_decode_on_the_cpu(graph, tmp_path):
    """DLPack refuses read-only numpy arrays: the reference decoder must still get them."""
    rng = np.random.default_rng(1)
    lp = random_log_probs(rng, 2, 12, graph.vocab_size, peaky=True)
    opts = DecoderOptions(search_beam=10.0)
    want = Decoder(graph, opts).decode(lp)
    graph.save(tmp_path / "g.img")
    raw = np.frombuffer((tmp_path / "g.img").read_bytes(), np.uint8)
    for g in (Graph.load(tmp_path / "g.img"), Graph(parse_image(raw))):
        got = Decoder(g, opts).decode(lp)
        assert [(h.words, np.float32(h.score)) for h in got] == [(h.words, np.float32(h.score)) for h in want]


# ---------------------------------------------------------------- native upload checks
@pytest.fixture(scope="module")
def gpu_module():
    """The CUDA module, built for sm_90 and loaded without a GPU: the upload's argument
    checks run before any CUDA call, so they are testable here."""
    try:
        from cuwfst.jit.core import load
        from cuwfst.jit.decoder import spec

        return load(spec(os.environ.get("CUWFST_CUDA_ARCH", "9.0")))
    except Exception as e:  # no nvcc, or no CUDA runtime library to load against
        pytest.skip(f"the CUDA module cannot be built or loaded here: {e}")


def _upload(mod, graph, **changes):
    a = graph.arrays
    args = dict(row_splits=a.row_splits.copy(), final_count=a.final_count.copy(),
                eps_count=a.eps_count.copy() if a.has_eps else np.zeros(0, np.int32), dest=a.dest.copy(),
                ilabel=a.ilabel.copy(), weight=a.weight.copy(), vocab=a.vocab_size, start=a.start_state,
                finals_at_end=a.finals_at_end)
    args.update(changes)
    return mod.gpu_graph_upload(args["row_splits"], args["final_count"], args["eps_count"], args["dest"],
                                args["ilabel"], args["weight"], args.get("source_arc", np.zeros(0, np.int32)),
                                args["vocab"], args["start"], args["finals_at_end"], 0, args.get("pack", True))


def _changed(arr, i, v):
    arr = arr.copy()
    arr[i] = v
    return arr


def test_native_upload_checks_what_the_kernels_assume(gpu_module, graph):
    """The native layer refuses, by itself, every graph a kernel would read out of bounds
    with; and it does so before touching the device (no acquisition is attempted)."""
    a = graph.arrays
    n = graph.num_states
    emitting = int(np.flatnonzero(a.ilabel >= 0)[0])
    final = int(np.flatnonzero(a.ilabel == -1)[0])
    cases = [
        (dict(dest=_changed(a.dest, 2, n)), "destination"),
        (dict(dest=_changed(a.dest, 2, -1)), "destination"),
        (dict(row_splits=_changed(a.row_splits, 1, a.num_arcs + 7)), "row_splits"),
        (dict(row_splits=_changed(a.row_splits, -1, a.num_arcs - 1)), "row_splits"),
        (dict(start=n), "start state"),
        (dict(start=-1), "start state"),
        (dict(final_count=_changed(a.final_count, 0, 10**6)), "final_count"),
        (dict(final_count=_changed(a.final_count, 0, -1)), "final_count"),
        (dict(ilabel=_changed(a.ilabel, emitting, a.vocab_size)), "ilabel"),
        (dict(ilabel=_changed(a.ilabel, emitting, -1)), "ilabel"),
        (dict(ilabel=_changed(a.ilabel, emitting, -2)), "outside its state's epsilon range"),
        (dict(eps_count=np.full(n, 10**6, np.int32)), "eps_count"),
        (dict(eps_count=np.ones(n + 1, np.int32)), "eps_count"),
        (dict(ilabel=_changed(a.ilabel, final, 3)), "final range"),
        (dict(dest=_changed(a.dest, final, 0)), "final range"),
        (dict(weight=_changed(a.weight, 1, np.nan)), "weight"),
        (dict(weight=_changed(a.weight, 1, np.inf)), "weight"),
        (dict(vocab=0), "vocab_size"),
    ]
    gpu_module.gpu_fault_injection(0)
    for change, msg in cases:
        with pytest.raises(ValueError, match=msg):
            _upload(gpu_module, graph, **change)
    assert gpu_module.gpu_fault_injection(0) == 0, "a refused graph must not reach the device"
    try:  # the unchanged graph passes the checks (and fails here only for want of a GPU)
        gpu_module.gpu_graph_free(_upload(gpu_module, graph))
    except RuntimeError as e:
        assert "cuda" in str(e).lower()


def test_fault_injection_switch_arms_and_counts(gpu_module):
    assert gpu_module.gpu_fault_injection(5) >= 0
    assert gpu_module.gpu_fault_injection(0) == 0  # nothing was acquired in between
    with pytest.raises(ValueError, match=">= 0"):
        gpu_module.gpu_fault_injection(-1)


# ---------------------------------------------------------------- upload lifetime
class _FakeModule:
    """Stands in for the CUDA module: hands out handles, records frees."""

    def __init__(self):
        self.next, self.live, self.freed = 1, set(), []

    def gpu_graph_upload(self, *args):
        h, self.next = self.next, self.next + 1
        self.live.add(h)
        return h

    def gpu_graph_free(self, h):
        self.live.remove(h)
        self.freed.append(h)


def test_upload_lives_while_its_graph_or_a_decoder_holds_it():
    mod = _FakeModule()
    g = random_ctc_graph(np.random.default_rng(2), 10, 4, 3, 0.3)
    up = gpu_mod.upload_graph(mod, g, 0)
    assert gpu_mod.upload_graph(mod, g, 0) is up  # once per (graph, device)
    other = gpu_mod.upload_graph(mod, g, 1)
    assert other is not up and mod.live == {up.handle, other.handle}
    h0, h1 = up.handle, other.handle
    del up, other
    gc.collect()
    assert mod.live == {h0, h1}, "the graph is alive: its uploads must stay"
    held = gpu_mod.upload_graph(mod, g, 0)  # what a decoder holds (GpuInstance._uploaded)
    del g
    gc.collect()
    assert mod.live == {h0}, "graph gone: only the upload a decoder still holds stays"
    del held
    gc.collect()
    assert mod.live == set() and sorted(mod.freed) == [h0, h1]


def test_reloading_a_graph_does_not_keep_old_uploads():
    mod = _FakeModule()
    for seed in range(20):  # a service reloading its graph
        g = random_ctc_graph(np.random.default_rng(seed), 8, 4, 2, 0.3)
        up = gpu_mod.upload_graph(mod, g, 0)
        assert up.handle in mod.live
        del g, up
        gc.collect()
        assert len(mod.live) == 0
    assert len(mod.freed) == 20


# ---------------------------------------------------------------- rescue plan
class _FakeGpu:
    """Decodes rows on two instances the way the arena and the frontier overflow: a batch
    overflows the arena when its rows' winners exceed `arena`, a row overflows its frontier
    on the main instance when it is in `wide` (and on the rescue one when in `huge`)."""

    def __init__(self, need, arena, lanes, rescue_lanes, wide=(), huge=(), rescue_arena=None):
        self.need, self.arena, self.wide, self.huge = need, arena, set(wide), set(huge)
        self.lanes = {"main": lanes, "rescue": rescue_lanes}
        self.arena_of = {"main": arena, "rescue": rescue_arena or arena}
        self.calls = []

    def decode(self, instance, rows):
        assert 1 <= len(rows) <= self.lanes[instance], (instance, rows)
        self.calls.append((instance, list(rows)))
        full = sum(self.need[r] for r in rows) > self.arena_of[instance]
        kept = self.wide if instance == "main" else self.huge
        return [(OVERFLOW_ARENA if full else 0) | (OVERFLOW_KEPT if r in kept else 0) for r in rows]


def _first(fake, rows, batch):
    """The main decode: rows in batches of `batch`, as GpuBackend.decode runs them."""
    over = {}
    for group in batches(rows, fake.lens, batch):
        for r, bits in zip(group, fake.decode("main", group)):
            over[r] = bits
    fake.calls.clear()
    return over


def test_rescue_splits_arena_overflow_instead_of_rescuing_every_row():
    rng = np.random.default_rng(0)
    B, lanes = 64, 64
    need = {r: int(rng.integers(90, 110)) for r in range(B)}
    fake = _FakeGpu(need, arena=2000, lanes=lanes, rescue_lanes=4)
    fake.lens = np.array([need[r] for r in range(B)])
    over = _first(fake, range(B), lanes)
    assert all(over[r] & OVERFLOW_ARENA for r in range(B))  # the whole batch is flagged
    stats = {}
    final = rescue({r: b for r, b in over.items() if b & RESCUE_BITS}, fake.lens, fake.decode,
                   main_batch=lanes, rescue_lanes=4, stats=stats)
    assert all(bits == 0 for bits in final.values())
    assert all(inst == "main" for inst, _ in fake.calls), "arena overflow never needs the rescue instance"
    assert stats["rescued_rows"] == 0 and stats["unabsorbed_rows"] == 0
    # 64 rows of ~100 entries in an arena of 2000: halving 64 -> 32 (still full) -> 16 fits
    assert [len(rows) for _, rows in fake.calls] == [32, 32, 16, 16, 16, 16]
    assert stats["arena_batches"] == 6 and stats["arena_rows"] == 128


def test_rescue_batches_capacity_overflow_on_the_rescue_instance():
    B = 10
    need = {r: 10 for r in range(B)}
    fake = _FakeGpu(need, arena=10**6, lanes=16, rescue_lanes=4, wide={1, 3, 4, 8, 9})
    fake.lens = np.arange(B) + 5
    over = _first(fake, range(B), 16)
    stats = {}
    final = rescue({r: b for r, b in over.items() if b & RESCUE_BITS}, fake.lens, fake.decode,
                   main_batch=B, rescue_lanes=4, stats=stats)
    assert all(final[r] == 0 for r in (1, 3, 4, 8, 9))
    assert [inst for inst, _ in fake.calls] == ["rescue", "rescue"]
    assert [rows for _, rows in fake.calls] == [[9, 8, 4, 3], [1]]  # longest first, 4 per batch
    assert stats["rescued_rows"] == 5 and stats["rescue_batches"] == 2


def test_rescue_reports_what_it_cannot_absorb():
    need = {0: 50, 1: 5000, 2: 50, 3: 60}
    # row 1 overflows even alone; row 3's frontier is too big for both instances
    fake = _FakeGpu(need, arena=1000, lanes=4, rescue_lanes=2, wide={3}, huge={3})
    fake.lens = np.array([4, 4, 4, 4])
    over = _first(fake, range(4), 4)
    stats = {}
    final = rescue({r: b for r, b in over.items() if b & RESCUE_BITS}, fake.lens, fake.decode,
                   main_batch=4, rescue_lanes=2, stats=stats)
    assert final[1] & OVERFLOW_ARENA, "an arena overflow that fits nowhere stays flagged"
    assert final[3] & OVERFLOW_KEPT, "a frontier overflow the rescue could not absorb stays flagged"
    assert final[0] == 0 and final[2] == 0
    assert stats["unabsorbed_rows"] == 2


def test_rescue_bits_and_batches_contract():
    assert CAPACITY_BITS & OVERFLOW_ARENA == 0 and RESCUE_BITS & OVERFLOW_SLOTS
    assert batches([5, 6, 7], np.array([0, 0, 0, 0, 0, 3, 9, 3]), 2) == [[6, 5], [7]]
    with pytest.raises(ValueError, match=">= 1"):
        batches([1], np.array([1, 1]), 0)
    with pytest.raises(ValueError, match="rescue_lanes"):
        rescue({}, np.zeros(1), lambda *a: [], main_batch=1, rescue_lanes=0)


def test_arena_limits_scale_with_lanes_to_the_int32_limit():
    assert gpu_mod.arena_limits(32) == (16 << 20, 512 << 20)  # the spec's value at 32 lanes
    assert gpu_mod.arena_limits(2)[1] == 64 << 20
    assert gpu_mod.arena_limits(1024)[1] == 2**31 - 1  # winners ids are int32
    assert gpu_mod.arena_limits(8, arena_entries=1000) == (1000, 128 << 20)
