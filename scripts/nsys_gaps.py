"""Per-kernel durations and the gaps before them, from an Nsight Systems GPU trace exported as
CSV (nsys stats --report cuda_gpu_trace --format csv; scripts/device_s32e.sh), over the kernels
of the last decode: those after the trace's last idle gap of at least 20 ms (nsys_case.py sleeps
0.1 s before its last decode), or the last KEEP kernels. For each kernel
name (template arguments dropped): launches, median and total duration, median and total gap
from the previous kernel's end to its start (the time the GPU ran none of them).
Usage: python3 scripts/nsys_gaps.py TRACE.csv [KEEP]"""
import csv
import re
import statistics
import sys
from collections import defaultdict


def rows(path):
    with open(path, newline="", errors="replace") as f:
        lines = f.read().splitlines()
    start = next(i for i, l in enumerate(lines) if "Start" in l and "Duration" in l and "Name" in l)
    r = list(csv.DictReader(lines[start:]))
    key = {k: next(c for c in r[0] if c.startswith(k)) for k in ("Start", "Duration", "Name")}
    out = []
    for x in r:
        try:
            out.append((float(x[key["Start"]]), float(x[key["Duration"]]), x[key["Name"]]))
        except (TypeError, ValueError):
            continue
    return out


def main(path, keep=None):
    k = sorted((r for r in rows(path) if not r[2].startswith("[CUDA mem")), key=lambda r: r[0])
    if keep:
        k = k[-int(keep):]
    else:
        idle = [i for i in range(1, len(k)) if k[i][0] - (k[i - 1][0] + k[i - 1][1]) >= 20e6]
        k = k[idle[-1]:] if idle else k
    dur, gap = defaultdict(list), defaultdict(list)
    for prev, cur in zip(k, k[1:]):
        name = re.sub(r"<.*", "", cur[2]).split("(")[0].strip()
        dur[name].append(cur[1] / 1e3)
        gap[name].append(max(0.0, cur[0] - (prev[0] + prev[1])) / 1e3)
    span = (k[-1][0] + k[-1][1] - k[0][0]) / 1e3
    print(f"{path}: {len(k)} kernels over {span:.1f} us; busy {sum(sum(v) for v in dur.values()):.1f} us")
    print(f"{'kernel':28s} {'n':>5s} {'med us':>8s} {'sum us':>9s} {'gap med':>8s} {'gap sum':>9s}")
    for name in sorted(dur, key=lambda n: -sum(dur[n])):
        print(f"{name[:28]:28s} {len(dur[name]):5d} {statistics.median(dur[name]):8.2f} {sum(dur[name]):9.1f} "
              f"{statistics.median(gap[name]):8.2f} {sum(gap[name]):9.1f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
