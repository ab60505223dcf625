"""Where the persistent split scan's time goes, phase by phase, on the GPU (issues 7, 11).

python -m benchmarks.scan_trace --graph HLG.img --log-probs shard.npz [--uniform 250] [--utts 32]
    [--batch 32] [--steps 1024] [--reps 3] [--json out.jsonl] [--md out.md]

Builds two decoders on the graph: one with the scan's phase trace (CUWFST_SCAN_TRACE, scan.cuh
ScanTraceMark: thread 0 of every CTA of ScanSplitKernel writes the %globaltimer at each phase of
its first item) and one without. Both decode the same rows (one warm-up pass, then --reps
passes alternating, CUDA events around each pass); their rows must be identical (the trace only
writes timestamps) and the ratio of their times says what the trace itself costs. Then, for every
launch of the scan the trace kept (its ring holds the last --steps; the passes decode the same
rows) that had tokens (the launches that end a captured graph's bucket, every lane idle, do not
count):

- t0 = the earliest CTA's entry (the kernel before it is done: griddepcontrol.wait), end = the
  grid's last CTA's tail (the lanes' steps and the slot space written), scan = end - t0;
- for each phase, the time from t0 until the LAST CTA with an item reached it (the phase's
  critical path) and until the median CTA did;
- the item with the most tokens (the hot lane's chunk): its phases from t0;
- the rest of the step = the next launch's t0 - this end (Max, Expand, Finalize and, on
  epsilon graphs, the closure, with their launch gaps).

Medians over the launches with at least one item are printed and written (--md, --json). The
globaltimer's resolution is reported as the smallest nonzero difference seen between two marks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import numpy as np

from cuwfst import Decoder, DecoderOptions, Graph

MARKS = ("entry", "plan", "ticket", "trim", "degrees", "look_back", "emit", "lane_done", "grid_last", "tail")
INFO, TOKENS = len(MARKS), len(MARKS) + 1


def launch_phases(ring: np.ndarray) -> list[dict]:
    """Per launch (ring [launches, grid, words], oldest first): the phase times in us from t0."""
    out = []
    ends = []
    for k in range(ring.shape[0]):
        w = ring[k].astype(np.int64)
        entry = w[:, 0]
        if not (entry > 0).any():
            ends.append(None)
            out.append(None)
            continue
        t0 = entry[entry > 0].min()
        tail = w[:, MARKS.index("tail")]
        end = tail.max() if (tail > 0).any() else 0
        has_item = w[:, MARKS.index("ticket")] > 0
        row = dict(items=int(has_item.sum()), scan_us=(end - t0) / 1e3 if end else float("nan"))
        for m, name in enumerate(MARKS):
            if name in ("grid_last", "tail"):
                col = w[:, m]
                row[f"{name}_last"] = (col.max() - t0) / 1e3 if (col > 0).any() else float("nan")
                continue
            col = w[has_item, m] if name not in ("entry", "plan") else w[entry > 0, m]
            col = col[col > 0]
            row[f"{name}_last"] = (col.max() - t0) / 1e3 if col.size else float("nan")
            row[f"{name}_median"] = (float(np.median(col)) - t0) / 1e3 if col.size else float("nan")
        toks = w[:, TOKENS]
        if has_item.any():
            hot = int(np.argmax(np.where(has_item, toks, -1)))
            row["hot_tokens"] = int(toks[hot])
            row["hot_one_round"] = bool((int(w[hot, INFO]) >> 28) & 1)
            for m, name in enumerate(MARKS[:8]):
                row[f"hot_{name}"] = (w[hot, m] - t0) / 1e3 if w[hot, m] > 0 else float("nan")
        row["tokens_total"] = int(toks[has_item].sum())
        out.append(row)
        ends.append((t0, end))
    for k in range(len(out) - 1):
        if out[k] is not None and ends[k + 1] is not None and ends[k][1]:
            out[k]["rest_us"] = (ends[k + 1][0] - ends[k][1]) / 1e3
    # (the launches that end a captured graph's bucket, every lane idle, hold no tokens)
    return [r for r in out if r is not None and r["tokens_total"] > 0]


def resolution_ns(ring: np.ndarray) -> int:
    t = ring[..., : len(MARKS)].astype(np.int64).ravel()
    t = np.unique(t[t > 0])
    d = np.diff(t)
    d = d[d > 0]
    return int(d.min()) if d.size else 0


def med(rows: list[dict], key: str) -> float:
    v = [r[key] for r in rows if key in r and r[key] == r[key]]
    return statistics.median(v) if v else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--log-probs", required=True)
    ap.add_argument("--uniform", type=int, default=0, help="rows of this many frames (benchmarks.gpu_speed's uniform rows)")
    ap.add_argument("--utts", type=int, default=32)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--eps-iterations", type=int, default=None)
    ap.add_argument("--steps", type=int, default=1024, help="launches the trace keeps (a ring)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args(argv)
    import torch

    from benchmarks.gpu_speed import load_rows
    from benchmarks.peers.measure import git_commit

    g = Graph.load(a.graph)
    lp, lens = load_rows(a.log_probs, a.utts, a.uniform)
    lp_dev = torch.from_numpy(np.ascontiguousarray(lp)).cuda()
    opts = DecoderOptions(eps_iterations=a.eps_iterations)
    os.environ["CUWFST_SCAN_TRACE"] = str(a.steps)
    traced = Decoder(g, opts, device="cuda", max_lanes=a.batch)
    del os.environ["CUWFST_SCAN_TRACE"]
    plain = Decoder(g, opts, device="cuda", max_lanes=a.batch)
    if traced._gpu.main.scan_trace() is None:
        raise SystemExit("the trace is off: the decoder does not run the persistent scan (scan_order)")
    decs = {"traced": traced, "plain": plain}

    def run(dec):
        hyps = []
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for s in range(0, lp_dev.shape[0], a.batch):
            hyps += dec.decode(lp_dev[s : s + a.batch], lens[s : s + a.batch])
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop), hyps

    hyps = {k: run(dec)[1] for k, dec in decs.items()}  # warm-up
    ms = {k: [] for k in decs}
    for _ in range(a.reps):
        for k, dec in decs.items():
            t, hyps[k] = run(dec)
            ms[k].append(t)
    same = sum(1 for x, y in zip(hyps["traced"], hyps["plain"]) if x.words == y.words and x.score == y.score)
    steps, ring = traced._gpu.main.scan_trace()
    nb = (len(lens) + a.batch - 1) // a.batch
    rows = launch_phases(ring)  # every kept launch with tokens (the passes decode the same rows)
    summary = dict(commit=git_commit(), device=torch.cuda.get_device_name(0), graph=os.path.basename(a.graph),
                   batch=a.batch, utts=len(lens), launches_traced=steps, launches_analysed=len(rows),
                   grid=int(ring.shape[1]), timer_resolution_ns=resolution_ns(ring),
                   ms_per_pass_traced=statistics.median(ms["traced"]), ms_per_pass_plain=statistics.median(ms["plain"]),
                   rows_identical=f"{same}/{len(lens)}", batches_per_pass=nb)
    keys = ["items", "tokens_total", "scan_us", "rest_us"] + [f"{m}_{s}" for m in MARKS[:8] for s in ("median", "last")] + \
        ["grid_last_last", "tail_last", "hot_tokens"] + [f"hot_{m}" for m in MARKS[:8]]
    summary["median_us"] = {k: round(med(rows, k), 2) for k in keys}
    summary["hot_one_round_share"] = round(sum(1 for r in rows if r.get("hot_one_round")) / max(len(rows), 1), 3)
    print(json.dumps(summary))
    lines = [f"scan trace on {summary['device']}, commit {summary['commit']}: {summary['graph']}, {len(lens)} rows, "
             f"batch {a.batch}, {len(rows)} launches analysed (grid {summary['grid']} CTAs), globaltimer resolution "
             f"{summary['timer_resolution_ns']} ns; pass {summary['ms_per_pass_traced']:.2f} ms traced against "
             f"{summary['ms_per_pass_plain']:.2f} plain; rows identical {summary['rows_identical']}", "",
             "| phase | median CTA reached it (us from t0) | last CTA reached it | the hot item |",
             "| --- | --- | --- | --- |"]
    mu = summary["median_us"]
    for m in MARKS[:8]:
        lines.append(f"| {m} | {mu[f'{m}_median']} | {mu[f'{m}_last']} | {mu[f'hot_{m}']} |")
    lines.append(f"| grid_last | | {mu['grid_last_last']} | |")
    lines.append(f"| tail (scan end) | | {mu['tail_last']} | |")
    lines += ["", f"Medians a launch: items {mu['items']}, tokens {mu['tokens_total']}, hot item {mu['hot_tokens']} tokens "
              f"(one round in {summary['hot_one_round_share']:.0%} of launches); scan {mu['scan_us']} us, the rest of the "
              f"step {mu['rest_us']} us."]
    print("\n".join(lines))
    if a.md:
        with open(a.md, "a") as f:
            f.write("\n".join(lines) + "\n\n")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(summary) + "\n")
    return 0 if same == len(lens) else 1


if __name__ == "__main__":
    raise SystemExit(main())
