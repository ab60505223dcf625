"""Continuous batching against padded batches, same run: every utterance of a shard through
L lanes in stored order, decoded by each mode asked for:

- stored (--baseline stored): today's padded batches in file order: rows 0..L-1, L..2L-1,
  ... each one `Decoder.decode` call (a batch runs as many steps as its longest row);
- padded: one `Decoder.decode` over all rows with batching="padded" (sub-batches of
  similar lengths, longest first);
- continuous: one `Decoder.decode` over all rows with batching="continuous" (the next
  utterance enters a lane the moment one finishes);
- decode_all: `Decoder.decode_all(utterances)` over [T, V] rows in stored order, the
  continuous path behind the dataset API (its chunks are packed on the host);
- refill, decode_all_refill: continuous and decode_all with refill="device" (a lane takes its
  next row on the GPU in the step after its row ends) and segments of --refill-segment steps.

python -m benchmarks.continuous --graph HLG.img --log-probs shard.npz [--lanes 32] [--reps 3] \\
    [--baseline stored] [--modes padded continuous decode_all] [--md out.md] [--json out.jsonl]

Speed is the median of --reps timed passes after one warm-up pass; ratios are taken against
the stored baseline when it ran (else against padded), in the same run. Every mode's rows
are compared with the first mode's (words and float32 score), and the first --check rows
of every mode with the CPU decoder. --device cpu runs the same modes on the CPU decoder
(threads over rows; lanes only shape the stored batches), for tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.stream_tools import is_gpu, load_shard, same_result, torch_cuda  # noqa: E402
from cuwfst import Decoder, DecoderOptions, Graph  # noqa: E402

MODES = ("stored", "padded", "continuous", "decode_all", "refill", "decode_all_refill")


def run_mode(dec: Decoder, mode: str, lp, lens: np.ndarray, lanes: int):
    """One pass of a mode over every row; the hypotheses in row order."""
    B = len(lens)
    if mode == "stored":
        hyps = []
        for s in range(0, B, lanes):
            hyps += dec.decode(lp[s : s + lanes], lens[s : s + lanes])
        return hyps
    if mode in ("decode_all", "decode_all_refill"):
        return list(dec.decode_all((lp[i, : int(lens[i])] for i in range(B)), progress=False))
    return dec.decode(lp, lens)  # padded or continuous: the decoder's batching


# --phases: the host-side calls whose wall time a pass spends, (module, class, attribute); the
# native decode calls hold the GPU's time too (they return when the rows are done)
PHASES = (("cuwfst.decoder.gpu", "GpuInstance", "decode_many"), ("cuwfst.decoder.gpu", "GpuInstance", "decode"),
          ("cuwfst.decoder.gpu", "GpuBackend", "_collect"), ("cuwfst.decoder.gpu", "GpuBackend", "to_device"),
          ("cuwfst.decoder.gpu", "GpuBackend", "check_finite"), ("cuwfst.decoder.offline", None, "prepare_offline"),
          ("cuwfst.decoder.offline", None, "pad_on_device"))
# the winners log's size after a mode's passes (MemStats; entries unless bytes)
LOG_STATS = ("arena_capacity", "arena_high_water", "winners_committed", "winners_live_max")


class PhaseTimer:
    """Wall time a pass spends in each of PHASES (seconds, summed over calls), by wrapping
    them in place; undo() puts the originals back."""

    def __init__(self):
        import importlib

        self.spent, self._undo = {}, []
        for mod_name, cls_name, attr in PHASES:
            owner = importlib.import_module(mod_name)
            if cls_name is not None:
                owner = getattr(owner, cls_name)
            raw = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
            static = isinstance(raw, staticmethod)
            fn = raw.__func__ if static else raw
            key = attr if cls_name is None else f"{cls_name}.{attr}"
            self.spent[key] = 0.0

            def wrapped(*args, _fn=fn, _key=key, **kw):
                t0 = time.perf_counter()
                try:
                    return _fn(*args, **kw)
                finally:
                    self.spent[_key] += time.perf_counter() - t0

            setattr(owner, attr, staticmethod(wrapped) if static else wrapped)
            self._undo.append((owner, attr, raw))

    def reset(self):
        self.spent = dict.fromkeys(self.spent, 0.0)

    def undo(self):
        for owner, attr, raw in reversed(self._undo):
            setattr(owner, attr, raw)


PASS_STATS = ("gc_rounds", "gc_us", "gc_mark_us", "gc_live_total", "arena_grows", "arena_grow_us", "refills")


# the rescue's counters a pass adds to (GpuBackend.stats: rows the main decode flagged, the
# re-decodes they took)
RESCUE_STATS = ("flagged_rows", "arena_batches", "rescue_batches", "rescued_rows")


def pass_stats(dec: Decoder) -> dict:
    """The GPU decoder's counters that a pass adds to (MemStats, the rescue's), zeros on the CPU."""
    gpu = getattr(dec, "_gpu", None)
    if gpu is None:
        return dict.fromkeys(PASS_STATS + RESCUE_STATS, 0)
    st = gpu.main.mem_stats()
    return {**{k: int(st[k]) for k in PASS_STATS}, **{k: int(gpu.stats.get(k, 0)) for k in RESCUE_STATS}}


def md_table(rows, header: str) -> str:
    ref = "stored" if any(r["batching"] == "stored" for r in rows) else "padded"
    out = [header, "", f"| lanes | mode | seconds | RTFx | vs {ref} | rows identical to {rows[0]['batching']} "
                       f"| CPU check | overflow rows | GC rounds (ms) a pass | log MiB (high water) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        ratio = r.get(f"vs_{ref}")
        out.append(f"| {r['lanes']} | {r['batching']} | {r['seconds']:.3f} | {r['rtfx']:,.1f} | "
                   f"{'-' if ratio is None else f'{ratio:.2f}x'} | {r['identical_to_first']}/{r['rows']} | "
                   f"{r.get('cpu_identical', '-')}/{r.get('cpu_checked', '-')} | {r['overflow_rows']} | "
                   f"{r.get('pass_gc_rounds', 0):g} ({r.get('pass_gc_us', 0) / 1000:.2f}) | "
                   + (f"{r['log_winners_committed'] / 2**20:.1f} ({r['log_arena_high_water'] * 8 / 2**20:.1f}) |"
                      if "log_winners_committed" in r else "- |"))
    for r in rows:  # --phases
        if r.get("phase_ms"):
            out.append(f"\n{r['batching']} (lanes {r['lanes']}), ms a pass: "
                       + ", ".join(f"{k} {v:.2f}" for k, v in r["phase_ms"].items())
                       + f"; rows flagged for a re-decode a pass {r.get('pass_flagged_rows', 0):g} (bits "
                         f"{r.get('flagged_bits', 0)}), re-decodes {r.get('pass_arena_batches', 0):g} on the main "
                         f"instance, {r.get('pass_rescue_batches', 0):g} on the rescue's")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graph", required=True)
    p.add_argument("--log-probs", required=True)
    p.add_argument("--lanes", type=int, nargs="+", default=[32])
    p.add_argument("--utts", type=int, default=None)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--segment", type=int, default=32)
    p.add_argument("--refill-segment", type=int, nargs="+", default=[256],
                   help="segment lengths of the refill modes (several: one row each, named MODE@SEGMENT)")
    p.add_argument("--baseline", choices=["none", "stored"], default="none",
                   help="stored: also today's padded batches of --lanes rows in file order, one decode call each")
    p.add_argument("--modes", nargs="+", choices=MODES[1:], default=["padded", "continuous"])
    p.add_argument("--device", default="cuda")
    p.add_argument("--threads", type=int, default=16, help="threads of the CPU decoder (the check, --device cpu)")
    p.add_argument("--check", type=int, default=8, help="rows also compared with the CPU decoder")
    p.add_argument("--phases", action="store_true",
                   help="also time the host-side calls of each pass (PHASES: ms a pass, medians in the JSON)")
    p.add_argument("--md", help="write the table here (markdown)")
    p.add_argument("--json", help="append one JSON line per row here")
    a = p.parse_args(argv)
    if a.reps < 1 or min(a.lanes) < 1:
        p.error("--reps and --lanes must be >= 1")
    from benchmarks.peers.measure import git_commit, machine

    modes = (["stored"] if a.baseline == "stored" else []) + [m for m in a.modes if m != "stored"]
    g = Graph.load(a.graph)
    lp, lens = load_shard(a.log_probs)
    if a.utts:
        lp, lens = lp[: a.utts], lens[: a.utts]
    gpu = is_gpu(a.device)
    torch = torch_cuda() if gpu else None
    lp_dev = torch.from_numpy(lp).cuda() if torch is not None else lp

    def sync():
        if torch is not None:
            torch.cuda.synchronize()

    audio_s = float(lens.sum()) * 0.04
    opts = DecoderOptions()
    mach = machine()
    commit = git_commit()
    header = (f"{a.graph}: {lp.shape[0]} utts, mean T {lens.mean():.0f}, max {lens.max()}, stored order; "
              f"{mach['gpu'] if gpu else mach['cpu']} ({a.device}); commit {commit}")
    print(header, flush=True)
    rows, results = [], {}
    for L in a.lanes:
        first = None
        runs = []  # (mode, segment, row label): the refill modes once per --refill-segment value
        for m in modes:
            if m not in ("refill", "decode_all_refill"):
                runs.append((m, a.segment, m))
                continue
            runs += [(m, s, m if len(a.refill_segment) == 1 else f"{m}@{s}") for s in a.refill_segment]
        for mode, segment, label in runs:
            refill = mode in ("refill", "decode_all_refill")
            batching = "continuous" if mode in ("continuous", "decode_all") or refill else "padded"
            dec = Decoder(g, opts, device=a.device, num_threads=a.threads, max_lanes=L, batching=batching,
                          segment=segment, refill="device" if refill else "segment")
            run_mode(dec, mode, lp_dev, lens, L)  # warm-up: build, capture
            st0 = pass_stats(dec)
            times, phases = [], []
            timer = PhaseTimer() if a.phases else None
            try:
                for _ in range(a.reps):
                    sync()
                    if timer:
                        timer.reset()
                    t0 = time.perf_counter()
                    hyps = run_mode(dec, mode, lp_dev, lens, L)
                    sync()
                    times.append(time.perf_counter() - t0)
                    if timer:
                        phases.append(dict(timer.spent))
            finally:
                if timer:
                    timer.undo()
            med = statistics.median(times)
            results[(L, label)] = hyps
            first = first or hyps
            st1 = pass_stats(dec)
            # the winners log's GC rounds and growths a timed pass ran (host microseconds, the GPU idle)
            per_pass = {k: round((st1[k] - st0[k]) / a.reps, 1) for k in st0}
            row = dict(bench="continuous", lanes=L, batching=label, seconds=med, rtfx=audio_s / med, rows=len(hyps),
                       **{f"pass_{k}": v for k, v in per_pass.items()},
                       overflow_rows=sum(1 for h in hyps if h.overflow),
                       identical_to_first=sum(1 for x, y in zip(first, hyps) if same_result(x, y)))
            gpu_dec = getattr(dec, "_gpu", None)
            if gpu_dec is not None:  # the log's size, and every overflow bit the main decode flagged (any pass)
                st = gpu_dec.main.mem_stats()
                row.update({f"log_{k}": int(st[k]) for k in LOG_STATS})
                row["flagged_bits"] = int(gpu_dec.stats.get("flagged_bits", 0))
            if phases:  # ms a pass, the median over passes of each call's total
                row["phase_ms"] = {k: round(1000 * statistics.median(p[k] for p in phases), 3)
                                   for k in phases[0] if any(p[k] for p in phases)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            del dec
        ref = "stored" if "stored" in modes else "padded"
        by_mode = {r["batching"]: r for r in rows if r["lanes"] == L}
        for r in by_mode.values():
            for base in ("stored", "padded"):
                if base in by_mode:
                    r[f"vs_{base}"] = round(r["rtfx"] / by_mode[base]["rtfx"], 3)
        if ref in by_mode:
            print(f"lanes {L}: " + ", ".join(f"{m} / {ref} speed {r['rtfx'] / by_mode[ref]['rtfx']:.2f}x"
                                             for m, r in by_mode.items() if m != ref)
                  + f"; rows identical to {modes[0]}: "
                  + ", ".join(f"{m} {r['identical_to_first']}/{r['rows']}" for m, r in by_mode.items()))
    status = 0
    if a.check:
        k = min(a.check, lp.shape[0])
        cpu = Decoder(g, opts, num_threads=a.threads).decode(lp[:k], lens[:k])
        for r in rows:
            hyps = results[(r["lanes"], r["batching"])]
            r.update(cpu_checked=k, cpu_identical=sum(1 for c, h in zip(cpu, hyps) if same_result(c, h)))
            status |= r["cpu_identical"] != k
        print("exactness: " + ", ".join(f"{r['batching']} (lanes {r['lanes']}) {r['cpu_identical']}/{k}" for r in rows)
              + " rows identical to the CPU decoder")
    status |= any(r["identical_to_first"] != r["rows"] for r in rows)
    if a.json:
        with open(a.json, "a") as f:
            for r in rows:
                f.write(json.dumps(dict(r, graph=a.graph, device=a.device, commit=commit)) + "\n")
    if a.md:
        Path(a.md).write_text(md_table(rows, header))
    print(md_table(rows, header))
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
