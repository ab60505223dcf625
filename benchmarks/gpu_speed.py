"""GPU decoder speed and exactness on one graph, kernel variants side by side in one run.

python -m benchmarks.gpu_speed [--graph HLG.img | --arcs 1000000] --batch 1 8 32 --utts 64 \
    --variants old new [--check 16] [--profile]

Variants (cuwfst.decoder.gpu.KERNEL_VARIANTS): "old" (one scan CTA per lane, EpsScan every
closure pass), "new" (split scan, closure lists, wider Finalize), "split", "lists", "wide" (one
change alone), "fused" ("new" without MaxKernel: the expansion finds each step's max), and
"split:N" / "new:N" / "fused:N" (N scan CTAs per lane; "new:N:R" / "new::R": R-token granules
of the split scan's chunks, scan_round). Every variant of a batch size is built before any
is timed, and the timed passes alternate between them (old, new, old, new, ...), so drift of
the clocks hits all alike. A pass decodes all --utts rows in batches of B; its time is taken
with CUDA events around the pass (the transfer of results to the host included) and,
separately, the host clock; medians after one warm-up pass. --check N compares each variant's
first N rows with the CPU decoder, and every variant's rows with the first variant's.

--blank-skip P [P ...] adds DecoderOptions.blank_skip as a second axis: every (variant, P)
is a configuration ("new", "new+skip0.95"), all timed alternately in the one run; rows are
compared with the first variant's of the same P and with the CPU decoder under the same P.
RTFx counts the rows' audio, us/step the steps actually run (the kept frames), and
`decoded_fraction` says how many frames were kept. Results with P > 0 differ from the exact
decoder's; their WER: benchmarks.peers.run --blank-skip P.

--memory MODE [MODE ...] adds the memory mode as a third axis ("new+pooled", "new+eager"; the
default mode's configurations keep their plain names): the lanes' layout and its kernels'
cost (with --profile, each mode's kernel split), results identical across modes.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph
from cuwfst.decoder.gpu import kernel_variant

from benchmarks.memory import MODES as MEMORY_MODES


def variant_kwargs(name: str) -> dict:
    """Decoder keywords of a variant name (cuwfst.decoder.gpu.kernel_variant: a KERNEL_VARIANTS
    key, 'KEY:N' for N scan CTAs a lane, 'KEY:N:R' / 'KEY::R' for R-token scan granules)."""
    try:
        return kernel_variant(name)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def same_rows(a, b) -> tuple[int, int, int]:
    """(identical, exact-score ties, mismatches) between two lists of hypotheses: identical =
    same float32 score, words and search statistics; a tie = same score and statistics,
    other words (an equal-score path)."""
    same = ties = bad = 0
    for x, y in zip(a, b):
        stats = (x.frontier_total, x.closure_added, x.max_frontier) == (y.frontier_total, y.closure_added, y.max_frontier)
        if np.float32(x.score) == np.float32(y.score) and stats and x.overflow == y.overflow:
            if x.words == y.words:
                same += 1
            else:
                ties += 1
        else:
            bad += 1
    return same, ties, bad


def uniform_rows(lp: np.ndarray, lengths: np.ndarray, n: int, T: int):
    """n rows of exactly T frames: the utterances' valid frames laid end to end in stored
    order (cycling when the set runs out), cut into rows of T."""
    frames = np.concatenate([lp[i, : int(lengths[i])] for i in range(len(lengths))]).astype(np.float32)
    need = n * T
    if len(frames) < need:
        frames = np.concatenate([frames] * (need // len(frames) + 1))
    return frames[:need].reshape(n, T, -1), np.full(n, T, np.int32)


def load_rows(path: str, utts: int, uniform: int = 0):
    """The first `utts` rows of a log-probs .npz (log_probs or log_probs_fp16, and lengths), or
    with `uniform` > 0, `utts` rows of exactly that many frames (uniform_rows)."""
    d = np.load(path)
    key = "log_probs" if "log_probs" in d else "log_probs_fp16"
    if uniform:
        return uniform_rows(d[key], d["lengths"], utts, uniform)
    return d[key][:utts], d["lengths"][:utts].astype(np.int32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--graph")
    p.add_argument("--arcs", type=int, default=1_000_000)
    p.add_argument("--log-probs", help=".npz with log_probs [N, T, V] and lengths")
    p.add_argument("--frames", type=int, default=250)
    p.add_argument("--uniform", type=int, default=0,
                   help="with --log-probs: rows of exactly this many frames, each made of the set's utterances "
                        "laid end to end in stored order (e.g. 250: the design's 32 x 250-frame figure)")
    p.add_argument("--utts", type=int, default=64)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--check", type=int, default=16, help="rows compared with the CPU decoder")
    p.add_argument("--json", help="append results as JSON lines here")
    p.add_argument("--profile", action="store_true", help="kernel time breakdown per variant at the largest batch")
    p.add_argument("--variants", nargs="+", default=["new"], help="kernel variants timed side by side")
    p.add_argument("--walkers", nargs="+", default=["warp"], help="slot walkers (each is a separate row)")
    p.add_argument("--eps-iterations", type=int, default=None,
                   help="closure passes on graphs with epsilon arcs (default: the graph's longest chain)")
    p.add_argument("--walk-blocks", type=int, nargs="+", default=[0],
                   help="grids of the walker kernels (each is a separate row; 0: the spec's formula)")
    p.add_argument("--blank-skip", type=float, nargs="+", default=[0.0], metavar="P",
                   help="DecoderOptions.blank_skip values timed side by side (0: off, the exact decoder)")
    p.add_argument("--memory", nargs="+", default=[None],
                   choices=[m for m in MEMORY_MODES if not m.endswith("-gc")],
                   help="memory modes timed side by side (default: the decoder's default; the pooled "
                        "variants as benchmarks.memory's modes: CUWFST_POOL_BOUND / CUWFST_POOL_HINTS / "
                        "CUWFST_POOL_HANDOUT / CUWFST_WINNERS_LOG)")
    a = p.parse_args()
    import torch

    rng = np.random.default_rng(0)
    if a.graph:
        g = Graph.load(a.graph)
    else:
        from benchmarks.reference_speed import random_ctc_graph
        g = random_ctc_graph(rng, a.arcs // 8, 8, 500)
    if a.log_probs:
        lp_all, lens_all = load_rows(a.log_probs, a.utts, a.uniform)
    else:
        from benchmarks.reference_speed import peaky_log_probs
        lp_all = peaky_log_probs(rng, a.utts, a.frames, g.vocab_size)
        lens_all = np.full(a.utts, a.frames, np.int32)
    a.utts = len(lens_all)
    opts_of = {p: DecoderOptions(eps_iterations=a.eps_iterations, blank_skip=p) for p in a.blank_skip}
    configs = {v + (f"+skip{p:g}" if p else "") + (f"+{m}" if m else ""): (v, p, m)
               for m in a.memory for p in a.blank_skip for v in a.variants}
    from benchmarks.peers.measure import git_commit
    commit = git_commit()
    dev = torch.cuda.get_device_name(0)
    gname = (a.graph or f"random{a.arcs}").split("/")[-1]
    print(f"graph {a.graph or 'random'}: {g.num_states} states, {g.num_arcs} arcs, "
          f"{g.num_epsilon_arcs} epsilon arcs; {a.utts} utts, "
          f"mean T {lens_all.mean():.0f}; {dev}; commit {commit}; variants {' '.join(a.variants)}; "
          f"blank_skip {' '.join(f'{p:g}' for p in a.blank_skip)}")
    lp_gpu = torch.from_numpy(lp_all).cuda()
    audio_s = float(lens_all.sum()) * 0.04
    results, table = [], []
    first_hyps: dict[str, list] = {}  # configuration -> rows of its first timed configuration
    for walker, wb, B in [(w, wb, b) for w in a.walkers for wb in a.walk_blocks for b in a.batch]:
        from benchmarks.memory import pool_env

        def build(v, p, m):
            with pool_env(m or "") as memory:  # (a pooled variant's settings, read at construction)
                return Decoder(g, opts_of[p], device="cuda", max_lanes=B, walker=walker, walk_blocks=wb,
                               **({"memory": memory} if m else {}), **variant_kwargs(v))

        decs = {c: build(v, p, m) for c, (v, p, m) in configs.items()}
        nb = (a.utts + B - 1) // B

        def run(dec):
            out = []
            for s in range(0, a.utts, B):
                out += dec.decode(lp_gpu[s : s + B], lens_all[s : s + B])
            return out

        hyps = {v: run(dec) for v, dec in decs.items()}  # warm-up: build, capture
        # the frames each configuration decodes (all of them without blank_skip): its steps
        dec_lens = {c: np.array([h.frames_decoded for h in hyps[c]], np.int64) for c in decs}
        steps_per_batch = {c: float(np.mean([n[s : s + B].max() + 1 for s in range(0, a.utts, B)]))
                           for c, n in dec_lens.items()}
        ev_ms = {v: [] for v in decs}
        wall = {v: [] for v in decs}
        slots0 = {v: dec._gpu.main.mem_stats()["slots"] for v, dec in decs.items()}  # the walkers' slots
        # pooled lanes: pool growths (each a paused step, resumed) during the timed runs; 0 once warm
        grows0 = {v: dec.memory_stats()["pools"]["lanes"]["grows"] for v, dec in decs.items()}
        for _ in range(a.reps):
            for v, dec in decs.items():
                torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                e0.record()
                hyps[v] = run(dec)
                e1.record()
                e1.synchronize()
                wall[v].append(time.perf_counter() - t0)
                ev_ms[v].append(e0.elapsed_time(e1))
        for v, dec in decs.items():
            hs = hyps[v]
            variant, skip, _mem = configs[v]
            base = next(c for c, (_, p, _m) in configs.items() if p == skip)  # the first configuration, same P
            med_ms = statistics.median(ev_ms[v])
            stats = dec._gpu.main.mem_stats()
            steps = float((dec_lens[v] + 1).sum())
            added = sum(h.closure_added for h in hs)
            total = sum(h.frontier_total for h in hs)
            same, ties, bad = same_rows(hyps[base], hs)
            slots_run = (stats["slots"] - slots0[v]) / a.reps  # (the rescue instance's, if any, not counted)
            row = dict(config=v, variant=variant, blank_skip=skip, memory=dec.memory_stats()["memory"],
                       trim=stats["trims_arcs"], slots_per_step=slots_run / (nb * steps_per_batch[v]),
                       decoded_fraction=float(dec_lens[v].sum() / lens_all.sum()),
                       scan_split=stats["scan_split"], closure_lists=stats["closure_lists"],
                       fused_max=stats["fused_max"], walker=walker,
                       walk_blocks=wb, batch=B, ms_per_batch=med_ms / nb,
                       us_per_step=med_ms / nb / steps_per_batch[v] * 1000,
                       ms_per_batch_spread=(max(ev_ms[v]) - min(ev_ms[v])) / nb,
                       wall_ms_per_batch=statistics.median(wall[v]) * 1000 / nb, rtfx=audio_s / (med_ms / 1000),
                       max_frontier=max(h.max_frontier for h in hs), mean_frontier=total / steps,
                       closure_growth=(total / (total - added)) if g.has_epsilon and total > added else 1.0,
                       overflow_rows=sum(1 for h in hs if h.overflow), mem_fixed_mib=stats["fixed"] / 2**20,
                       arena_high_water=stats["arena_high_water"], vs_first=dict(same=same, ties=ties, mismatches=bad),
                       pool_grows_timed=dec.memory_stats()["pools"]["lanes"]["grows"] - grows0[v],
                       peak_gpu_mib=torch.cuda.max_memory_allocated() / 2**20)
            results.append(row)
            print(json.dumps(row))
            first_hyps.setdefault(v, hs)
            table.append(row)
        if a.profile and B == max(a.batch):  # (every walker grid: --walk-blocks A/Bs want each split)
            for v, dec in decs.items():
                inst = dec._gpu.main
                before = inst.profile(True)
                run(dec)
                after = inst.profile(False)
                ms = {k: (after[k] - before[k]) / nb for k in after}
                tot = max(sum(ms.values()), 1e-9)
                tag = v if len(a.walk_blocks) == 1 else f"{v} walk_blocks={wb}"
                print(f"[{tag}] kernel ms per batch of {B} (launch by launch, CUDA events): " +
                      ", ".join(f"{k} {x:.2f} ({100 * x / tot:.0f}%)" for k, x in ms.items() if x > 0) + f"; sum {tot:.2f}")
                prof = dict(config=v, variant=configs[v][0], blank_skip=configs[v][1],
                            memory=dec.memory_stats()["memory"], walk_blocks=wb, profile_batch=B, profile_ms=ms,
                            profile_sum_ms=tot,
                            us_per_step={k: x / steps_per_batch[v] * 1000 for k, x in ms.items() if x > 0})
                if g.has_epsilon:
                    closure = sum(ms[k] for k in ("eps_scan", "eps_expand", "eps_resolve", "clear_claims", "eps_link"))
                    prof.update(emit_us_per_step=(tot - closure) / steps_per_batch[v] * 1000,
                                closure_us_per_step=closure / steps_per_batch[v] * 1000)
                    print(f"[{tag}] per step (mean {steps_per_batch[v]:.0f} steps per batch): emitting "
                          f"{prof['emit_us_per_step']:.1f} us, closure passes {prof['closure_us_per_step']:.1f} us "
                          f"({100 * closure / tot:.0f}% of kernel time)")
                results.append(prof)
        del decs
    checks = []
    if a.check:
        n = min(a.check, a.utts)
        cpu = {p: Decoder(g, opts_of[p], num_threads=16).decode(lp_all[:n], lens_all[:n]) for p in a.blank_skip}
        for v, hs in first_hyps.items():
            same, ties, bad = same_rows(cpu[configs[v][1]], hs[:n])
            print(f"exactness [{v}]: {same}/{n} rows identical to the CPU decoder (score, words, search statistics), "
                  f"{ties} exact-score ties, {bad} mismatches")
            checks.append(dict(config=v, variant=configs[v][0], blank_skip=configs[v][1], check_rows=n, cpu_same=same,
                               cpu_ties=ties, cpu_mismatches=bad))
        results += checks
    if a.json:
        with open(a.json, "a") as f:
            for r in results:
                f.write(json.dumps(dict(r, graph=gname, commit=commit, device=dev, host=platform.node())) + "\n")
    # the short table last (a device call returns the end of the output)
    print(f"\n{gname} ({commit}, {dev}): ms per batch (median of {a.reps}, CUDA events), us per step, "
          f"rows vs {next(iter(configs))} (of the same blank_skip), frames decoded")
    for r in table:
        vs = r["vs_first"]
        print(f"  B={r['batch']:<4} {r['config']:<13} {r['ms_per_batch']:8.2f} ms  {r['us_per_step']:7.1f} us/step  "
              f"RTFx {r['rtfx']:9.1f}  slots/step {r['slots_per_step']:10.0f}  spread {r['ms_per_batch_spread']:.2f}  same {vs['same']} ties {vs['ties']} "
              f"mismatch {vs['mismatches']}  frames {100 * r['decoded_fraction']:.1f}%  pool grows {r['pool_grows_timed']}")
    for c in checks:
        print(f"  CPU check [{c['config']}]: {c['cpu_same']}/{c['check_rows']} identical, {c['cpu_ties']} ties, "
              f"{c['cpu_mismatches']} mismatches")


if __name__ == "__main__":
    main()
