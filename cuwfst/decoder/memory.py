"""What a decoder holds in memory (`Decoder.memory_stats`, `StreamingDecoder.memory_stats`)
and how its memory is managed (the `memory` option).

memory="lazy" (the default): the GPU decoder's winners log is a lazily committed region
(CUDA virtual memory management: the worst case is reserved as address space, physical
memory is mapped as batches need it, and growth never moves a pointer, so no captured CUDA
graph is re-made); the lanes keep every lane's worst case (the static layout), committed on
first use. memory="pooled": offline batches on epsilon-free graphs take the lanes'
frontiers, claims lists and hash tables from pools shared by all lanes, handed out step by
step as each lane needs them and committed to what batches use (a batch whose step outgrows a
pool pauses before that step and resumes from it once the pool has grown); since the pools are
shared, one lane may hold twice main_q (pool_lane_factor), so a rare row whose frontier outgrows
main_q stays in its batch instead of being decoded again on the rescue instance. Streams,
continuous batching, snapshots, lattice decodes' lane caps and epsilon graphs keep the static
layout's sizes. The rescue instance gives its pools back after each rescue and the main
instance its pools before one, so their growths never stack (GpuBackend.main_trim). H200, full
tier, fresh processes (session of 2026-12-04 12:11, 57f0458's code): a peak of 458 MiB at batch 32
against riva's 460 in the same call (the lazy layout: 2,506 MiB), 1,302 MiB at batch 256; at
batch 32 1.000-1.005x the lazy layout's time over the 256 utterances and 1.007x on uniform
32 x 250 rows (same call, one process a run, both orders).
With CUWFST_WINNERS_LOG=host (winners_log_mode) the log lies in pinned host memory mapped for the
kernels: 340 MiB at batch 32, 578 MiB at 256 (2026-12-04). memory="eager":
everything in plain device buffers, every lane's worst case up front, the log replaced by a
larger one when a batch needs more (the winners log takes this path anyway where the driver
has no VMM).
`CUWFST_MEMORY` in the environment selects the mode of decoders built without an explicit
`memory`, and `CUWFST_LANE_POOL` (on / off / auto) overrides the lane layout of the lazy and
pooled modes. Results are identical either way. A pooled step's claims list and hash
table are sized by its slots and its next frontier by the claims its expansion made, handed
out by FinalizeKernel (`CUWFST_POOL_BOUND=claims-finalize-ahead`, pool_bound_mode, the
default); `CUWFST_POOL_BOUND=anchor` sizes all three by the arcs MaxKernel finds admissible
against a lower bound of the step's cutoff taken from the trim's anchor (the default before),
`CUWFST_POOL_BOUND=admit` counts against the scans' best token instead (the rule before),
`CUWFST_POOL_BOUND=slots` sizes them by every arc of the step (the rule before that), and
`CUWFST_POOL_BOUND=bins` by the token-level bins bound (the scans bin the tokens, MaxKernel
reads no arc for it), and `CUWFST_POOL_BOUND=claims` sizes the claims lists and tables by
the slots and each next frontier by the claims the expansion made (`claims-finalize`: the same,
handed out in FinalizeKernel); `CUWFST_POOL_HINTS=fixed`
keeps the pooled slot hints at every 32nd slot, and `CUWFST_POOL_HANDOUT=kernel` hands the
regions out in a kernel of its own after MaxKernel instead of in its last block (for same-run
A/B: benchmarks/memory.py --modes pooled pooled-admit pooled-bins pooled-slots
pooled-fixedhints pooled-handout lazy eager).

Every figure is in bytes unless its name says entries. On the GPU:

  reserved   address space held: lazy regions' reservations plus every eager buffer
  committed  device memory the decoder holds (its workspace, winners log, path buffers)
  fixed      of which the fixed per-lane workspace
  graph      the uploaded graph (shared by every decoder of that graph on the device;
             not in `committed`)
  total      committed + graph
  winners_high_water   the most winners-log entries a decode used (8 bytes each)
  pinned     host memory the decoder holds pinned (staging buffers; under memory="pooled"
             the winners log of offline batches, pools.winners.host_committed, which is
             not in `committed`: see winners_log_mode)
  restores   (per instance) the commits that gave a decode back what a trim took
  pools      per pool: winners (log + GC tags; advance_rounds: the launch rounds stream
             advances took, more than one where the arena guard made steps wait; grows: its
             growths, of which ahead_grows were committed ahead of need while a stream
             advance's kernels ran (CUWFST_ARENA_AHEAD); grow_us: host microseconds of the
             other growths, each before a launch could go on; ahead_us: of the ahead ones;
             gc_rounds and gc_us: the GC rounds of streams and continuous batching), lanes
             (frontiers, scratch, claims, hash tables: capacities and high water in
             entries), workspace, paths, lattice (the records and buffers of lattice decodes,
             allocated by the first decode(lattice=True); of which prune_committed: the GPU
             output-beam pruning's work buffers, gpu_lattice_prune.cu, kept at their high
             water, about 21 bytes per record of a batch and 25 per token, plus a quarter;
             its pinned readback of the kept states and arcs is in `pinned`)
  prune_lane_times   the times the GPU lattice pruning ranked in its per-lane kernel, which runs
             a batch's (or a bounded pass's) forward, ranks and windows one CTA a lane (the
             default; CUWFST_PRUNE_SORT=lanes)
  prune_block_times / prune_sort_times   the times it ranked with a launch a time
             (CUWFST_PRUNE_SORT=block, radix, segmented): by a block sort in shared memory, one
             CTA a lane (lanes of at most 8,192 tokens), or by a device-wide sort
  instances  the same figures per native instance (main; rescue once built)
"""

from __future__ import annotations

import os

MEMORY_MODES = ("lazy", "eager", "pooled")
WINNER_BYTES = 8  # one winners-log entry {prev, arc}

# GpuDecoder::MemStats, in its order
MEM_STATS = ("reserved", "committed", "fixed", "arena_high_water", "pinned", "cached_graphs", "graph_captures",
             "graph_evictions", "graph_bytes", "winners_committed", "winners_reserved", "arena_capacity", "vmm",
             "granularity", "path_bytes", "arena_grows", "gc_rounds", "winners_live", "winners_live_max",
             "pool_committed", "pool_reserved", "pooled", "pool_grows", "pool_cap_tokens", "pool_cap_claims",
             "pool_cap_hash", "pool_high_tokens", "pool_high_claims", "pool_high_hash", "advance_rounds",
             "scan_split", "closure_lists", "finalize_split", "lattice_bytes", "fused_max", "lattice_prune_bytes",
             "lattice_live_records", "lattice_runs", "arena_grow_us", "arena_ahead_grows", "arena_ahead_us",
             "gc_us", "lattice_grows", "lattice_capacity", "trims_arcs", "slots", "refills", "pdl",
             "scan_round", "scan_order", "refill_kernel", "gc_mark_us",
             "gc_live_total", "lattice_filter_reruns", "lattice_filter_dropped", "prune_block_times",
             "prune_sort_times", "lattice_cand_steps", "lattice_cand_over", "winners_host_committed",
             "winners_on_host", "winners_host_ok", "restores", "payload_tok", "prune_lane_times",
             "max_anchor", "max_known_slots", "max_blocks", "expand_blocks", "lat_blocks",
             "lat_append_block", "lat_cand_final", "lattice_cand_final_steps",
             "expand_min_blocks", "lat_min_blocks", "label_bound", "trim_weights", "lat_clear_keys",
             "lattice_after_decodes", "lat_reserve", "lat_tab_packed", "lat_log_fold", "lat_one_grid",
             "lat_c14_index", "lat_log_extra", "lat_chunk", "lat_compact", "lat_token_claims", "lat_packed_walk",
             "lat_octet_walk")


LANE_POOL = {"off": 0, "on": 1, "auto": 2}


def lane_pool_mode(memory: str) -> int:
    """The native lane_pool flag: off under memory="eager"; otherwise $CUWFST_LANE_POOL
    (on / off / auto), else off under "lazy" and auto under "pooled": pooled where the static
    layout is larger than twice what the pools' first 2 MiB pieces take (a small decoder
    holds less with every lane's worst case)."""
    if memory == "eager":
        return LANE_POOL["off"]
    v = os.environ.get("CUWFST_LANE_POOL") or ("auto" if memory == "pooled" else "off")
    if v not in LANE_POOL:
        raise ValueError(f"CUWFST_LANE_POOL must be one of {', '.join(map(repr, LANE_POOL))}, got {v!r}")
    return LANE_POOL[v]


def _env_choice(name: str, choices, default: str) -> str:
    """$name, one of `choices` (unset or empty: `default`); anything else is a ValueError."""
    v = os.environ.get(name) or default
    if v not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {v!r}")
    return v


POOL_BOUNDS = ("admit", "slots", "bins", "anchor", "claims", "claims-finalize", "claims-finalize-ahead")  # the native pool_bound, in its order (types.cuh kPoolBound*)


def pool_bound_mode() -> str:
    """What pooled lanes size a step's claims list, table and next frontier by:
    $CUWFST_POOL_BOUND, "claims-finalize-ahead" (the default since 2026-12-02: the claims lists
    and tables by the step's slots, each next frontier by the claims the expansion made, handed
    out by FinalizeKernel's CTAs with each working CTA's prefix over the lanes computed beside
    its first claim loads; a step whose claims do not fit pauses after its expansion; types.cuh
    Workspace::pool_late; at most 32 lanes, else as claims-finalize), "claims-finalize" (the
    same with the prefix before the loads), "claims" (the same sizes, handed out by
    ExpandKernel's last CTA), "anchor" (the default before: the arcs MaxKernel finds
    admissible against a lower bound of the cutoff taken from the trim's anchor, so the scans
    do no best-token reduction or walk for it; types.cuh Workspace::pool_anchor; as admit where
    the step does not trim), "admit" (the same count against the scans' best token, the rule of
    2026-12-01/02), "slots" (every arc of the step, the rule before that), "bins" (the slots of
    the tokens whose upper bound can pass the exact cutoff, to a 0.25 bin: the scans bin the
    tokens, MaxKernel reads no arc for it; cuwfst/csrc/include/cuwfst/pool_bins.h). H200, full
    tier, batch 32, fresh processes, same call (session of 2026-12-02 19:45): with the host
    winners log claims-finalize-ahead peaks at 354 MiB against anchor's 362 (riva 460) and
    takes 1.035-1.075x lazy's time against anchor's 1.094-1.118x (686 MiB at batch 256). All
    are kept for same-run A/B. Under fused_max (no MaxKernel) always the slots (and the claims
    bounds size the frontiers by them too)."""
    return _env_choice("CUWFST_POOL_BOUND", POOL_BOUNDS, "claims-finalize-ahead")


POOL_HINTS = ("adaptive", "fixed")


def pool_hints_mode() -> str:
    """The pooled layout's slot hints: $CUWFST_POOL_HINTS, "adaptive" (the default: sampled
    coarser where a frontier's region is small, so they cover 512 slots a token; types.cuh
    HintShiftOf) or "fixed" (every 32nd slot, as the static layout and 2f568a0: steps with more
    than 128 slots a region token fall back to binary searches)."""
    return _env_choice("CUWFST_POOL_HINTS", POOL_HINTS, "adaptive")


POOL_HANDOUTS = ("lastblock", "kernel")  # the native pool_handout, in its order


def pool_handout_mode() -> str:
    """Where the pooled hand-out after the max runs (wherever MaxKernel hands the regions out:
    not under fused_max or CUWFST_POOL_BOUND=slots, where ScanKernel's last block does):
    $CUWFST_POOL_HANDOUT, "lastblock" (the default: the last of MaxKernel's blocks to finish,
    after every block's counter increment and fence) or "kernel" (PoolHandOutKernel, one warp
    launched right after MaxKernel; profiled as "handout"). Results are identical either way:
    the same hand-out from the same counts, only where it runs changes."""
    return _env_choice("CUWFST_POOL_HANDOUT", POOL_HANDOUTS, "lastblock")


WINNERS_LOGS = ("host", "device")


def winners_log_mode() -> str:
    """Where the winners log of a memory="pooled" decoder lies while it runs pooled offline
    batches only: $CUWFST_WINNERS_LOG, "device" (the default since 2026-12-03 08:47: with pooled
    lanes of 2 x main_q it keeps memory="pooled" under riva's memory and within 3% of lazy's
    time) or "host" (pinned host memory mapped into the log's device addresses, where the
    driver can place VMM pieces there; the kernels append to it over the bus and the backtrack
    reads one entry a hop, so it takes no device memory: ~100 MiB less on the full tier at
    batch 32, ~4% slower on uniform batches; the default before; benchmarks/memory.py --modes
    pooled-late-ahead-lq2 pooled-late-ahead-hostlog-lq2). The first stream, continuous batch or snapshot moves the log to the
    device for good (their GC rounds read it hard); the lazy and eager modes (also lazy with
    CUWFST_LANE_POOL=on) keep it on the device always. Results are identical either way."""
    return _env_choice("CUWFST_WINNERS_LOG", WINNERS_LOGS, "device")


GRAPH_CHUNKS = ("on", "off")


GRAPH_PACK = ("on", "off")


def graph_pack_mode() -> str:
    """How a graph's arcs are uploaded: $CUWFST_GRAPH_PACK, "on" (the default: each arc's
    destination and label in one uint32 where the graph's states and labels fit in 32 bits
    together, 2 bytes an arc less than the two arrays; the full HLG's 23 M arcs take 44 MiB
    less) or "off" (an int32 destination and a uint16 label array, the rule before, and the
    rule on graphs that do not fit). Read at a graph's first upload to a device; results are
    identical either way."""
    return _env_choice("CUWFST_GRAPH_PACK", GRAPH_PACK, "on")


def graph_chunks_mode() -> str:
    """How a decoder replays long captured sequences: $CUWFST_GRAPH_CHUNKS, "on" (the default:
    a sequence of more than 128 steps replays captured chunks of 64, 8 and 1 steps, its head
    and tail launched plainly, so the CUDA-graph executables a decoder holds are a few chunks'
    worth of steps whatever the lengths it has seen) or "off" (one executable a step bucket,
    up to graph_cache_size of them: the rule before, for same-run A/B). Results are identical
    either way: every step launches the same kernels with the same arguments."""
    return _env_choice("CUWFST_GRAPH_CHUNKS", GRAPH_CHUNKS, "on")


PAYLOADS = ("slot", "token")


def payload_mode() -> str:
    """The low word of the emitting steps' hash payloads on the GPU: $CUWFST_PAYLOAD, "token" (the
    default since 2026-12-02: {token : index among its slots}, which names the arc's token with no
    search; taken where every such word stays below 2^31, else slots: memory_stats' per-instance
    payload_tok says which ran) or "slot" (the arc's slot, whose token FinalizeKernel finds by a
    search over the offsets: the rule before, for same-run A/B). Results are identical either
    way: both order a lane's candidates as their slots do. (H200, same run, full tier HLG,
    padded batches of 32 over the 256 rows: 37.00 / 36.80 ms a batch against slots' 38.43 /
    37.81, every row the same; docs/benchmarks.md.)"""
    return _env_choice("CUWFST_PAYLOAD", PAYLOADS, "token")


# the native pool_full mask (types.cuh kPoolFull*, kPoolHash2x/4x)
POOL_FULL = {"claims": 1, "hash": 2, "tokens": 4, "hash2x": 8, "hash4x": 16}


def pool_full_mode() -> int:
    """A diagnostic of the pooled layout: $CUWFST_POOL_FULL, "none" (the default: every region
    sized by its step's bound) or region kinds joined by "+" ("claims", "hash", "tokens", e.g.
    "hash+tokens"; "all": the three) that a stepping lane is handed at the static layout's size
    (types.cuh Workspace::pool_full), from the pools as before, which grow to the static sizes on
    the first steps; "hash2x" / "hash4x": hash tables of the power of two >= 4 x / 8 x the claims
    bound instead of 2 x. For same-run A/B of what the small regions cost (benchmarks.memory's
    pooled-late-ahead-full* and -hash2x / -hash4x modes); results are identical either way.
    Returns the mask."""
    v = os.environ.get("CUWFST_POOL_FULL") or "none"
    if v == "none":
        return 0
    names = ["claims", "hash", "tokens"] if v == "all" else v.split("+")
    if not names or any(n not in POOL_FULL for n in names) or len(set(names)) != len(names):
        raise ValueError("CUWFST_POOL_FULL must be 'none', 'all' or region kinds joined by '+' "
                         f"({', '.join(map(repr, POOL_FULL))}), got {v!r}")
    return sum(POOL_FULL[n] for n in names)


def pool_lane_factor() -> int:
    """$CUWFST_POOL_LANE_Q: how many times main_q one lane of a pooled 1-best batch may hold
    (GpuBackend's main instance; native DecoderConfig::pool_q), an int in [1, 16]: 2 (the
    default since 2026-12-03 08:47) or 1 (main_q, as the static layout). It matters only where
    the lanes are pooled (memory="pooled"). The pools are shared by the lanes, so a factor past
    1 lets the rare row whose frontier outgrows main_q stay in its batch instead of being decoded
    again on the rescue instance; memory is still committed as steps use it (the reservation,
    address space only, grows by the factor). Results are identical either way."""
    v = os.environ.get("CUWFST_POOL_LANE_Q") or "2"
    try:
        f = int(v)
    except ValueError:
        f = 0
    if not 1 <= f <= 16:
        raise ValueError(f"CUWFST_POOL_LANE_Q must be an int in [1, 16], got {v!r}")
    return f


ARENA_AHEAD = ("on", "off")


def arena_ahead_mode() -> str:
    """Whether stream advances commit a lazy (VMM) winners log ahead of need:
    $CUWFST_ARENA_AHEAD, "on" (the default: while an advance's first round runs, a log within
    1/8 of that round's room estimate maps up to 5/4 of it, so later advances seldom map
    memory before their launch; the log then holds up to a quarter more than the estimates
    asked) or "off" (each advance grows the log to its estimate before its launch, the rule at
    c0be1f0; for same-run A/B: benchmarks/streaming.py --arena-ahead on off). Results are
    identical either way; an eager log never grows ahead (a growth moves it)."""
    return _env_choice("CUWFST_ARENA_AHEAD", ARENA_AHEAD, "on")


def resolve_memory(memory: str | None) -> str:
    """The memory mode: the argument, else $CUWFST_MEMORY, else "lazy"."""
    if memory is None:
        memory = os.environ.get("CUWFST_MEMORY") or "lazy"
        where = "CUWFST_MEMORY"
    else:
        where = "memory"
    if memory not in MEMORY_MODES:
        raise ValueError(f"{where} must be one of {', '.join(map(repr, MEMORY_MODES))}, got {memory!r}")
    return memory


def gpu_memory_stats(backend) -> dict:
    """Figures of a GpuBackend: its main instance and, once built, its rescue instance."""
    insts = {"main": backend.main.mem_stats()}
    if backend._rescue is not None:
        insts["rescue"] = backend._rescue.mem_stats()

    def total(key):
        return sum(int(s[key]) for s in insts.values())

    main = insts["main"]
    graph = int(main["graph_bytes"])
    committed = total("committed")
    return {
        "device": str(backend.device),
        "memory": getattr(backend, "memory", "lazy") if main["vmm"] else "eager",
        "reserved": total("reserved"),
        "committed": committed,
        "fixed": total("fixed"),
        "graph": graph,
        "total": committed + graph,
        "pinned": total("pinned"),
        "winners_high_water": max(int(s["arena_high_water"]) for s in insts.values()),
        "pools": {
            "winners": {"reserved": total("winners_reserved"),
                        "committed": total("winners_committed") - total("winners_host_committed"),
                        "host_committed": total("winners_host_committed"),
                        "on_host": bool(main["winners_on_host"]),
                        "capacity_entries": int(main["arena_capacity"]),
                        "high_water_entries": int(main["arena_high_water"]),
                        "granularity": int(main["granularity"]), "grows": total("arena_grows"),
                        "advance_rounds": int(main["advance_rounds"]),
                        "ahead_grows": total("arena_ahead_grows"), "grow_us": total("arena_grow_us"),
                        "ahead_us": total("arena_ahead_us"), "gc_rounds": total("gc_rounds"),
                        "gc_us": total("gc_us")},
            "lanes": {"reserved": total("pool_reserved"), "committed": total("pool_committed"),
                      "pooled": bool(main["pooled"]), "grows": total("pool_grows"),
                      "capacity_entries": {k: int(main[f"pool_cap_{k}"]) for k in ("tokens", "claims", "hash")},
                      "high_water_entries": {k: int(main[f"pool_high_{k}"]) for k in ("tokens", "claims", "hash")}},
            "workspace": {"committed": total("fixed")},
            "paths": {"committed": total("path_bytes")},
            "lattice": {"committed": total("lattice_bytes"), "prune_committed": total("lattice_prune_bytes")},
        },
        "instances": insts,
    }


def cpu_memory_stats(graph, *, winners_held: int = 0) -> dict:
    """The CPU decoder's figures, with the GPU's keys: it holds no device memory (zeros);
    `host_graph` is the graph's arrays in host memory and `winners_held` the search-log
    entries its open streams hold (host memory; an offline decode frees its own on return,
    so `winners_high_water` is 0)."""
    a = graph.arrays
    host = sum(int(x.nbytes) for x in (a.row_splits, a.final_count, a.dest, a.ilabel, a.weight, a.aux_row_splits,
                                         a.aux_pool, a.eps_count, a.arc_id) if x is not None)
    return {
        "device": "cpu",
        "memory": "host",
        "reserved": 0, "committed": 0, "fixed": 0, "graph": 0, "total": 0, "pinned": 0,
        "winners_high_water": 0,
        "winners_held": int(winners_held),
        "host_graph": host,
        "note": "the CPU decoder holds no device memory (every device figure is 0); host_graph is the graph "
                "in host memory and winners_held the host search-log entries of open streams",
        "pools": {},
        "instances": {},
    }
