"""Where a GPU decode's time goes beyond its kernels (GpuDecoder::Decode's host phases,
CUWFST_DECODE_SPLIT): python3 scripts/decode_split.py HLG.img shard.npz [utts] -- the rows in one
decode() call with 32 lanes (padded sub-batches), 1-best then lattice, each after a warm-up;
prints per mode the mean of each sub-batch's phases (setup, the runs with their syncs, the
results and lattice readback) and the call's wall time a sub-batch, and where the module prints them
the setup's parts. Each `--side NAME:VAR=VALUE[,VAR=VALUE...]` after the arguments runs both modes
again with those environment variables set (e.g. --side rtrim:CUWFST_RESCUE_TRIM=off;
DECODE_SPLIT_STREAM=side runs the calls on a PyTorch stream of their own). A lattice call also prints
each sub-batch's stamps (ms from the call's start): the calling thread's drain and begin, the
worker's finish and host work; and the pruning's begin after each Decode, in its parts (the host's
offsets, the job's buffers, the copies queued, the kernels queued, the sync that waits for them; and
the device's time of its init kernels and of its bucketing, from timing events)."""
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np


def child(graph, shard, n, lattice):
    from cuwfst import Decoder, DecoderOptions, Graph

    g = Graph.load(graph)
    d = np.load(shard)
    lp, lens = d["log_probs"][:n], d["lengths"][:n].astype(np.int32)
    dec = Decoder(g, DecoderOptions(output_beam=8.0), device="cuda", max_lanes=32)
    import torch
    x = torch.from_numpy(lp).cuda()
    # DECODE_SPLIT_STREAM=side: the calls on a PyTorch stream of their own, not the legacy default one
    import contextlib
    ctx = torch.cuda.stream(torch.cuda.Stream()) if os.environ.get("DECODE_SPLIT_STREAM") == "side" else \
        contextlib.nullcontext()
    with ctx:
        dec.decode(x, lens, lattice=lattice)  # warm-up (growth, capture)
        torch.cuda.synchronize()
        os.environ["CUWFST_DECODE_SPLIT"] = "1"
        be = dec._gpu
        be.lattice_trace, be.lattice_trace_worker = [], []
        t0 = time.perf_counter()
        dec.decode(x, lens, lattice=lattice)
        torch.cuda.synchronize()
    print(f"call ms {1000 * (time.perf_counter() - t0):.2f}", file=sys.stderr, flush=True)
    ms = lambda t: f"{1000 * (t - t0):.1f}"  # noqa: E731
    for k, (_, _, a, b, c) in enumerate(be.lattice_trace):  # (the calling thread: drain, begin)
        print(f"trace main {k}: drain {ms(a)}-{ms(b)} begin {ms(b)}-{ms(c)}", file=sys.stderr, flush=True)
    for k, (w0, w1, w2, w5, _, _) in enumerate(be.lattice_trace_worker):  # (the finish, the host work)
        print(f"trace worker {k}: finish {ms(w0)}-{ms(w1)} host {ms(w2)}-{ms(w5)}", file=sys.stderr, flush=True)


def main():
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("shard")
    ap.add_argument("utts", nargs="?", type=int, default=256)
    ap.add_argument("--child", choices=("0", "1"), help=argparse.SUPPRESS)
    ap.add_argument("--side", action="append", default=[], metavar="NAME:VAR=VALUE[,VAR=VALUE...]")
    a = ap.parse_args()
    if a.child is not None:
        child(a.graph, a.shard, a.utts, a.child == "1")
        return
    sides = [("default", {})]
    for spec in a.side:
        name, _, assigns = spec.partition(":")
        sides.append((name, dict(kv.split("=", 1) for kv in assigns.split(","))))
    for side, env in sides:
        if len(sides) > 1:
            print(f"side {side}: {env}", flush=True)
        split_modes(a.graph, a.shard, str(a.utts), dict(os.environ, **env))


def split_modes(graph, shard, n, env):
    for lattice in ("0", "1"):
        p = subprocess.run([sys.executable, __file__, graph, shard, n, "--child", lattice],
                           capture_output=True, text=True, env=env)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("decode split ms")]
        call = [ln for ln in p.stderr.splitlines() if ln.startswith("call ms")]
        for ln in p.stderr.splitlines():
            if ln.startswith("trace "):
                print("  " + ln)
        if p.returncode != 0 or not lines:
            print(p.stderr[-2000:])
            continue
        vals = [[float(m[1]) for m in re.findall(r"(setup|runs|results) ([0-9.]+)", ln)] for ln in lines]
        mean = [statistics.mean(v[k] for v in vals) for k in range(3)]
        wall = float(call[0].split()[-1]) / len(lines) if call else float("nan")
        print(f"{'lattice' if lattice == '1' else '1-best'}: {len(lines)} sub-batches, ms a sub-batch: setup "
              f"{mean[0]:.2f}, runs {mean[1]:.2f}, results {mean[2]:.2f}; the call's wall {wall:.2f} a sub-batch")
        parts = [dict((k, float(v)) for k, v in re.findall(r"(ensure|wait|record|static|filter|upload) ([0-9.]+)", ln))
                 for ln in lines]
        if parts and all(parts):  # (the setup's parts, where the module prints them)
            print("  setup parts, mean ms: " + ", ".join(f"{k} {statistics.mean(p[k] for p in parts):.3f}"
                                                        for k in parts[0]))
            print("  setup a sub-batch, ms: " + " ".join(f"{v[0]:.2f}" for v in vals))
        # a lattice call: the pruning's begin after each Decode (GpuDecoder::PruneBeginLocked's parts),
        # and what of the calling thread's begin stamps neither accounts for (the Python wrapper, the binding)
        begins = [dict((k, float(v)) for k, v in re.findall(r"(host|buffers|copies|kernels|sync) ([0-9.]+)", ln))
                  for ln in p.stderr.splitlines() if ln.startswith("prune begin ms")]
        if begins:
            keys = list(begins[0])
            print(f"  prune begin, mean ms over {len(begins)}: " + ", ".join(
                f"{k} {statistics.mean(b[k] for b in begins):.3f}" for k in keys) +
                f"; total {statistics.mean(sum(b.values()) for b in begins):.3f}")
            dev = [tuple(float(v) for v in m) for m in
                   re.findall(r"device init ([0-9.]+), bucket ([0-9.]+)", p.stderr)]
            if dev:  # (the begin's kernels on the device, from timing events: init, then the bucketing)
                print(f"  prune begin on the device, mean ms: init {statistics.mean(d[0] for d in dev):.3f}, "
                      f"bucket {statistics.mean(d[1] for d in dev):.3f}")
            print("  prune begin a sub-batch, ms: " + " ".join(f"{sum(b.values()):.2f}" for b in begins))
            spans = [float(m[1]) - float(m[0]) for m in
                     re.findall(r"^trace main \d+: drain [0-9.]+-[0-9.]+ begin ([0-9.]+)-([0-9.]+)", p.stderr, re.M)]
            if spans:
                print(f"  the calling thread's begin calls, mean {statistics.mean(spans):.2f} ms over {len(spans)}")


if __name__ == "__main__":
    main()
