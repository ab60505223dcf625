"""Memory statistics and memory options without a GPU (issue 9): the CPU decoders' figures,
the per-stream and decoder-wide forms of StreamingDecoder.memory_stats, and the checks of
the memory and gc_interval options. The GPU's figures: test_gpu_memory.py (GPU) and
test_gpu_host.py (the Python wiring, with a stand-in module). The pooled lane layout's
sizing rules (tests/helpers.py) are checked here against the figures the H200 reported and
against the GPU tests' batches that must outgrow the pools' first pieces."""

import os

import numpy as np
import pytest

from cuwfst import Decoder, DecoderOptions, StreamingDecoder
from cuwfst.decoder.memory import MEMORY_MODES, lane_pool_mode, resolve_memory
from helpers import (POOLED_LANES, POOLS, outgrowing_pooled_batch, pooled_first_capacities, pooled_step_asks,
                     random_ctc_graph, random_log_probs)

KEYS = {"device", "memory", "reserved", "committed", "fixed", "graph", "total", "pinned", "winners_high_water",
        "pools", "instances"}


@pytest.fixture(scope="module")
def graph():
    return random_ctc_graph(np.random.default_rng(0), 60, 8, 4, 0.3)


def test_cpu_decoder_reports_host_memory_and_no_device_memory(graph):
    st = Decoder(graph).memory_stats()
    assert KEYS <= set(st)
    assert st["device"] == "cpu" and st["memory"] == "host"
    assert all(st[k] == 0 for k in ("reserved", "committed", "fixed", "graph", "total", "pinned"))
    a = graph.arrays
    # the graph in host memory: CSR, arcs (dest + ilabel interleaved), weights, word labels
    assert st["host_graph"] >= a.row_splits.nbytes + a.final_count.nbytes + 8 * a.num_arcs + a.weight.nbytes
    assert "no device memory" in st["note"]


def test_streaming_memory_stats_with_and_without_a_stream(graph):
    rng = np.random.default_rng(1)
    sd = StreamingDecoder(graph, DecoderOptions(max_active_states=100))
    assert sd.memory_stats()["streams"] == 0 and sd.memory_stats()["winners_held"] == 0
    a, b = sd.open_stream(), sd.open_stream()
    lp = random_log_probs(rng, 2, 30, 8, peaky=True)
    sd.advance([a, b], [lp[0], lp[1, :10]])
    per = [sd.memory_stats(s) for s in (a, b)]
    assert per[0]["frames"] == 30 and per[1]["frames"] == 10
    whole = sd.memory_stats()
    assert whole["streams"] == 2 and whole["winners_held"] == per[0]["winners"] + per[1]["winners"] > 0
    sd.finalize(a)
    assert sd.memory_stats()["streams"] == 1
    with pytest.raises(ValueError, match="finalized or released"):
        sd.memory_stats(a)


def test_an_idle_stream_holds_no_winners(graph):
    """The CPU twin of issue 9's idle-lane bar (the GPU's: test_gpu_memory.py
    test_idle_streams_and_free_lanes_commit_no_winners_memory): a stream that receives no chunk
    holds no search-log entries while another advances, and what the decoder holds is the
    active stream's alone."""
    rng = np.random.default_rng(4)
    sd = StreamingDecoder(graph, DecoderOptions(max_active_states=100))
    idle, busy = sd.open_stream(), sd.open_stream()
    lp = random_log_probs(rng, 1, 48, 8, peaky=False)
    for t in range(0, 48, 16):
        sd.advance([busy], [lp[0, t : t + 16]])
        assert sd.memory_stats(idle) == {"frames": 0, "winners": 0}
        assert sd.memory_stats()["winners_held"] == sd.memory_stats(busy)["winners"] > 0
    sd.release(idle)
    sd.finalize(busy)


def test_memory_option_and_environment(graph, monkeypatch):
    monkeypatch.delenv("CUWFST_MEMORY", raising=False)
    assert resolve_memory(None) == "lazy" and MEMORY_MODES == ("lazy", "eager", "pooled")
    monkeypatch.setenv("CUWFST_MEMORY", "eager")
    assert resolve_memory(None) == "eager" and resolve_memory("lazy") == "lazy"
    monkeypatch.setenv("CUWFST_MEMORY", "pooled")
    assert resolve_memory(None) == "pooled" and resolve_memory("eager") == "eager"
    monkeypatch.setenv("CUWFST_MEMORY", "vmm")
    with pytest.raises(ValueError, match="CUWFST_MEMORY must be one of"):
        resolve_memory(None)
    with pytest.raises(ValueError, match="memory must be one of"):
        Decoder(graph, memory="paged")  # checked on the CPU too, so a typo fails everywhere


@pytest.mark.parametrize("bad", [-1, 4097, 1.5, True, "64"])
def test_gc_interval_is_checked(graph, bad):
    with pytest.raises(ValueError, match="gc_interval"):
        Decoder(graph, gc_interval=bad)


def test_lane_pool_mode(monkeypatch):
    monkeypatch.delenv("CUWFST_LANE_POOL", raising=False)
    # lazy keeps the static lanes, pooled pools where it pays (auto), eager never pools
    assert lane_pool_mode("lazy") == 0 and lane_pool_mode("pooled") == 2 and lane_pool_mode("eager") == 0
    monkeypatch.setenv("CUWFST_LANE_POOL", "on")
    assert lane_pool_mode("lazy") == 1 and lane_pool_mode("pooled") == 1 and lane_pool_mode("eager") == 0
    monkeypatch.setenv("CUWFST_LANE_POOL", "off")
    assert lane_pool_mode("lazy") == 0 and lane_pool_mode("pooled") == 0
    monkeypatch.setenv("CUWFST_LANE_POOL", "yes")
    with pytest.raises(ValueError, match="CUWFST_LANE_POOL"):
        lane_pool_mode("lazy")


def test_pool_handout_mode(monkeypatch):
    """CUWFST_POOL_HANDOUT: where the pooled hand-out after the max runs, "lastblock" (the
    default: MaxKernel's last block) or "kernel" (PoolHandOutKernel after MaxKernel); the
    native flag is its index."""
    from cuwfst.decoder.memory import POOL_HANDOUTS, pool_handout_mode

    assert POOL_HANDOUTS.index("lastblock") == 0 and POOL_HANDOUTS.index("kernel") == 1
    monkeypatch.delenv("CUWFST_POOL_HANDOUT", raising=False)
    assert pool_handout_mode() == "lastblock"
    monkeypatch.setenv("CUWFST_POOL_HANDOUT", "")
    assert pool_handout_mode() == "lastblock"
    monkeypatch.setenv("CUWFST_POOL_HANDOUT", "kernel")
    assert pool_handout_mode() == "kernel"
    monkeypatch.setenv("CUWFST_POOL_HANDOUT", "scan")
    with pytest.raises(ValueError, match="CUWFST_POOL_HANDOUT"):
        pool_handout_mode()


def test_mem_stats_names_match_the_native_layout():
    """decoder/memory.py names GpuDecoder::MemStats's entries in order: as many as the
    native side writes, and in the order its comment gives."""
    import re
    from pathlib import Path

    from cuwfst.decoder.memory import MEM_STATS

    header = (Path(__file__).resolve().parent.parent / "cuwfst" / "csrc" / "gpu_decoder.cuh").read_text()
    n = int(re.search(r"kMemStats = (\d+);", header).group(1))
    assert len(MEM_STATS) == n == len(set(MEM_STATS))
    source = (Path(__file__).resolve().parent.parent / "cuwfst" / "csrc" / "gpu_decoder.cu").read_text()
    body = source[source.index("void GpuDecoder::MemStats"):]
    written = {int(i) for i in re.findall(r"out\[(\d+)\]", body)}
    written |= {23 + k for k in range(3)} | {26 + k for k in range(3)}  # the pools' loop
    assert written == set(range(n)), sorted(set(range(n)) - written)


def test_pooled_first_capacities_follow_the_sizing_rules():
    """The first pieces' capacities (helpers.pooled_first_capacities, from Allocate and
    CommitPools): the 192-lane tiny HLG decoder of tests/test_gpu_memory.py (131,072 tokens,
    262,144 claims and hash slots, below the static worst case, so its pools grow); and the
    4-lane, 12,000-state decoder the pooled variant tests once used, whose 13 pool arrays each
    fit one 2 MiB piece (the H200: 27,262,976 bytes reserved = committed), so its pools were
    whole from the first commit and could never grow (grows 0)."""
    from cuwfst import Graph
    from cuwfst.decoder.gpu import lane_capacities
    from conftest_data import TINY

    tiny = Graph.load(TINY / "HLG.img")
    most, first = pooled_first_capacities(192, *lane_capacities(tiny.num_states, 32 * 10000))
    assert first == {"tokens": 131072, "claims": 262144, "hash": 262144}
    assert all(most[k] > first[k] for k in POOLS), most
    most, first = pooled_first_capacities(4, *lane_capacities(12001, 32 * 400))
    assert first == most, (first, most)


@pytest.mark.parametrize("seed,T,lens", [
    (4103, 20, [20, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 1, 0]),  # test_gpu_variants.test_pooled_layout
    (4116, 20, [20, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 1, 0]),
    (6200, 12, [12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 1, 0]),  # test_gpu_lattice's pause and resume
])
def test_pooled_growth_batches_outgrow_the_first_pieces(seed, T, lens):
    """The GPU tests that must see a pooled batch pause and grow: their batches ask more of a
    pool in one step than its first pieces hold (computed from the CPU's frontiers with the
    sizing rules; the GPU tests check it again against the decoder's own capacities)."""
    from cuwfst.decoder.gpu import lane_capacities

    graph, lp, lens, opts = outgrowing_pooled_batch(seed, T, lens)
    caps = lane_capacities(graph.num_states, 32 * opts.max_active_states)
    most, first = pooled_first_capacities(POOLED_LANES, *caps)
    need = pooled_step_asks(graph, opts, lp, lens, *caps)
    assert need["hash"] > first["hash"] and need["tokens"] > first["tokens"], (need, first)
    assert all(need[k] <= most[k] for k in POOLS), (need, most)  # a step never asks past the static layout


def test_memory_benchmark_pooled_default_is_what_users_get(monkeypatch):
    """benchmarks.memory's "pooled-default" builds memory="pooled" with every pool variable out of
    the environment, so the library's defaults apply (claims-finalize-ahead, the log on the device,
    lanes of 2 x main_q), even where the environment held other values; they come back after."""
    from benchmarks.memory import POOL_VARS, mode_env, pool_env
    from cuwfst.decoder.memory import pool_bound_mode, pool_lane_factor, winners_log_mode

    assert mode_env("pooled-default") == ("pooled", dict.fromkeys(POOL_VARS))
    monkeypatch.setenv("CUWFST_POOL_BOUND", "anchor")
    monkeypatch.setenv("CUWFST_WINNERS_LOG", "host")
    monkeypatch.setenv("CUWFST_POOL_LANE_Q", "1")
    with pool_env("pooled-default") as memory:
        assert memory == "pooled" and not any(k in os.environ for k in POOL_VARS)
        assert (pool_bound_mode(), winners_log_mode(), pool_lane_factor()) == ("claims-finalize-ahead", "device", 2)
    assert (os.environ["CUWFST_POOL_BOUND"], os.environ["CUWFST_WINNERS_LOG"], os.environ["CUWFST_POOL_LANE_Q"]) == \
        ("anchor", "host", "1")
    with pool_env("pooled"):  # (the harness's "pooled" is the anchor bound, not the default)
        assert pool_bound_mode() == "anchor"


def test_memory_benchmark_modes_name_their_settings():
    """benchmarks.memory's mode names: a pooled variant sets its pool environment, NAME-gc adds
    the long form's winners-log GC to ordinary batches, a plain mode sets nothing."""
    from benchmarks.memory import MODES, mode_env, mode_gc

    assert mode_gc("pooled-gc", 128) == ("pooled", 128) and mode_gc("lazy-gc", 64) == ("lazy", 64)
    assert mode_gc("pooled", 128) == ("pooled", 0) and mode_gc("eager", 128) == ("eager", 0)
    assert mode_env("pooled")[1]["CUWFST_POOL_BOUND"] == "anchor" and mode_env("lazy") == ("lazy", {"CUWFST_PAYLOAD": "token",
                                                                                                         "CUWFST_POOL_FULL": "none",
                                                                                                         "CUWFST_POOL_LANE_Q": "1"})
    assert mode_env("pooled-admit")[1]["CUWFST_POOL_BOUND"] == "admit"
    # pooled-handout: pooled with the hand-out in a kernel of its own; every other pooled mode
    # pins the default (lastblock), so a stray environment cannot change what a row measures
    assert mode_env("pooled-handout") == ("pooled", {"CUWFST_POOL_BOUND": "anchor", "CUWFST_POOL_HINTS": "adaptive",
                                                     "CUWFST_POOL_HANDOUT": "kernel", "CUWFST_RESCUE_TRIM": "on",
                                                     "CUWFST_MAIN_TRIM": "on", "CUWFST_WINNERS_LOG": "host",
                                                     "CUWFST_LANE_VMM": "auto", "CUWFST_PAYLOAD": "token",
                                                     "CUWFST_POOL_FULL": "none", "CUWFST_POOL_LANE_Q": "1"})
    assert all(mode_env(m)[1]["CUWFST_POOL_HANDOUT"] == "lastblock"
               for m in ("pooled", "pooled-bins", "pooled-slots", "pooled-fixedhints", "pooled-keep"))
    # pooled-keep: pooled whose instances keep what they grew; pooled-maintrimoff: the main
    # instance keeps its pools while the rescue runs; every other mode trims both
    assert mode_env("pooled-keep")[1]["CUWFST_RESCUE_TRIM"] == "off" == mode_env("pooled-keep")[1]["CUWFST_MAIN_TRIM"]
    assert mode_env("pooled-maintrimoff")[1]["CUWFST_RESCUE_TRIM"] == "on"
    assert mode_env("pooled-maintrimoff")[1]["CUWFST_MAIN_TRIM"] == "off"
    pinned = [m for m in MODES if m != "pooled-default"]  # (pooled-default pins nothing: the test above)
    pooled = [m for m in pinned if m.startswith("pooled")]
    assert all(mode_env(m)[1]["CUWFST_RESCUE_TRIM"] == "on" for m in pooled if not m.endswith("-keep"))
    assert all(mode_env(m)[1]["CUWFST_MAIN_TRIM"] == "on" for m in pooled if not m.endswith("-keep") and m != "pooled-maintrimoff")
    # pooled-devlog, pooled-slots-devlog and pooled-late: the winners log on the device; every
    # other pooled mode pins the host log
    devlog = ("pooled-devlog", "pooled-slots-devlog", "pooled-late", "pooled-late-fin", "pooled-late-ahead",
              "pooled-late-ahead-eager", "pooled-late-ahead-slot", "pooled-late-ahead-fullclaims",
              "pooled-late-ahead-fullhash", "pooled-late-ahead-fulltokens", "pooled-late-ahead-fullall",
              "pooled-late-ahead-hash2x", "pooled-late-ahead-hash4x", "pooled-late-ahead-keep",
              "pooled-late-ahead-lq2", "pooled-late-ahead-lq4")
    assert all(mode_env(m)[1]["CUWFST_WINNERS_LOG"] == "device" for m in devlog)
    assert mode_env("pooled-slots-devlog")[1]["CUWFST_POOL_BOUND"] == "slots"
    assert mode_env("pooled-late")[1]["CUWFST_POOL_BOUND"] == "claims"
    assert mode_env("pooled-late-fin")[1]["CUWFST_POOL_BOUND"] == "claims-finalize"
    assert mode_env("pooled-late-ahead")[1]["CUWFST_POOL_BOUND"] == "claims-finalize-ahead"
    # NAME-keep: NAME with both trims off ("pooled-keep" is "pooled"'s)
    for m in ("pooled-late-ahead", "pooled-late-ahead-hostlog"):
        assert mode_env(m + "-keep") == ("pooled", dict(mode_env(m)[1], CUWFST_RESCUE_TRIM="off", CUWFST_MAIN_TRIM="off"))
    assert mode_env("pooled-keep") == ("pooled", dict(mode_env("pooled")[1], CUWFST_RESCUE_TRIM="off", CUWFST_MAIN_TRIM="off"))
    with pytest.raises(ValueError, match="-keep"):
        mode_env("lazy-keep")
    # pooled-late-ahead-hostlog: pooled-late-ahead with the host log
    assert mode_env("pooled-late-ahead-hostlog") == ("pooled", dict(mode_env("pooled-late-ahead")[1],
                                                                     CUWFST_WINNERS_LOG="host"))
    assert all(mode_env(m)[1]["CUWFST_WINNERS_LOG"] == "host" for m in pooled if m not in devlog)
    # pooled-late-ahead-eager: pooled-late-ahead on eager pools; every other pooled mode pins VMM
    # pools (auto); lazy-vmm: lazy's static lanes on one VMM reservation
    eager = mode_env("pooled-late-ahead-eager")
    assert eager[1] == dict(mode_env("pooled-late-ahead")[1], CUWFST_LANE_VMM="off") and eager[0] == "pooled"
    assert all(mode_env(m)[1]["CUWFST_LANE_VMM"] == "auto" for m in pooled if m != "pooled-late-ahead-eager")
    assert mode_env("lazy-vmm") == ("lazy", {"CUWFST_LANE_VMM": "on", "CUWFST_PAYLOAD": "token", "CUWFST_POOL_FULL": "none",
                                             "CUWFST_POOL_LANE_Q": "1"})
    # NAME-lqF: NAME whose pooled lanes may hold F x main_q; every other mode pins 1
    for m in ("pooled-late-ahead-lq2", "pooled-late-ahead-hostlog-lq2", "pooled-late-ahead-lq4"):
        base, f = m.rsplit("-lq", 1)
        assert mode_env(m) == ("pooled", dict(mode_env(base)[1], CUWFST_POOL_LANE_Q=f)), m
    assert all(mode_env(m)[1]["CUWFST_POOL_LANE_Q"] == "1" for m in pinned if "-lq" not in m)
    # NAME-slot: NAME with the emitting payloads holding the slot; every other mode pins token
    # payloads (the default)
    for m in ("lazy-slot", "pooled-late-ahead-slot"):
        base = m[: -len("-slot")]
        assert mode_env(m) == (mode_env(base)[0], dict(mode_env(base)[1], CUWFST_PAYLOAD="slot")), m
    assert all(mode_env(m)[1]["CUWFST_PAYLOAD"] == "token" for m in pinned if not m.endswith("-slot"))
    # pooled-late-ahead-fullKIND: pooled-late-ahead with those regions at the static sizes; every
    # other mode pins CUWFST_POOL_FULL=none
    for kind in ("fullclaims", "fullhash", "fulltokens", "fullall", "hash2x", "hash4x"):
        m = f"pooled-late-ahead-{kind}"
        assert mode_env(m) == ("pooled", dict(mode_env("pooled-late-ahead")[1],
                                              CUWFST_POOL_FULL=kind.removeprefix("full"))), m
    assert all(mode_env(m)[1]["CUWFST_POOL_FULL"] == "none" for m in pinned if "-full" not in m and "-hash" not in m)
    for m in MODES:
        base, _ = mode_gc(m, 128)
        memory, _ = mode_env(base)
        assert memory in ("pooled", "lazy", "eager"), m


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trimmed_slot_model_keeps_every_admitted_arc(seed):
    """benchmarks/pool_trimmed.py's per-step counts on random CTC graphs: its claims are the
    reference decoder's (ref_decode_step_sizes), and its trimmed slots (the GPU's trim rule,
    replayed) lie between the admitted arcs, which the trim must keep, and the untrimmed slots.
    The per-batch accounting asks less for next frontiers sized by the claims than by the
    trimmed slots, and the same claims lists and tables."""
    from benchmarks import pool_accounting as pa
    from benchmarks.pool_trimmed import account, row_counts
    from benchmarks.roofline import graph_tables

    rng = np.random.default_rng(seed)
    g = random_ctc_graph(rng, 300, 30, 24, 0.2)  # out-degrees past 8, so the trim takes arcs away
    dec = Decoder(g, DecoderOptions(search_beam=4.0), num_threads=1)
    tb = graph_tables(g, dec.eps_iterations)
    rows, kept, total = [], 0, 0
    for _ in range(4):
        T = int(rng.integers(3, 25))
        lp = random_log_probs(rng, 1, T, 30, bool(rng.random() < 0.5))[0]
        mine, ref = row_counts(dec, tb, lp, T), pa.step_sizes(dec, lp, T)
        assert np.array_equal(mine[:-1, 1], ref[:-1, 2])
        assert np.all(ref[:-1, 3] <= mine[:-1, 0]) and np.all(mine[:-1, 0] <= ref[:-1, 1])
        kept, total = kept + int(mine[:-1, 0].sum()), total + int(ref[:-1, 1].sum())
        rows.append(mine)
    assert kept < total, (kept, total)  # the trim took arcs away
    trimmed, used = (account(rows, 2, r, 320000, 320000, 1 << 20) for r in ("trimmed", "trimmed+used"))
    t, u = trimmed["step_peak_entries"], used["step_peak_entries"]
    assert u["tokens"] < t["tokens"] and (u["claims"], u["hash"]) == (t["claims"], t["hash"]), (u, t)


def test_memory_pooled_defaults_are_the_benchmarks_pooled_late_ahead_lq2(monkeypatch):
    """memory="pooled" with nothing in the environment runs what benchmarks.memory names
    "pooled-late-ahead-lq2" (the rows docs/benchmarks.md reports for the default): each pinned
    setting is the resolver's default."""
    from benchmarks.memory import mode_env
    from cuwfst.decoder.memory import (pool_bound_mode, pool_full_mode, pool_handout_mode, pool_hints_mode,
                                       pool_lane_factor, payload_mode, winners_log_mode)

    memory, env = mode_env("pooled-late-ahead-lq2")
    for k in env:
        monkeypatch.delenv(k, raising=False)
    assert memory == "pooled"
    assert env["CUWFST_POOL_BOUND"] == pool_bound_mode() and env["CUWFST_POOL_HINTS"] == pool_hints_mode()
    assert env["CUWFST_POOL_HANDOUT"] == pool_handout_mode() and env["CUWFST_WINNERS_LOG"] == winners_log_mode()
    assert env["CUWFST_PAYLOAD"] == payload_mode() and pool_full_mode() == 0 == ["none"].index(env["CUWFST_POOL_FULL"])
    assert int(env["CUWFST_POOL_LANE_Q"]) == pool_lane_factor() == 2
    # (GpuBackend and the native side: the trims on, VMM lane pools where the driver has them)
    assert env["CUWFST_RESCUE_TRIM"] == env["CUWFST_MAIN_TRIM"] == "on" and env["CUWFST_LANE_VMM"] == "auto"
