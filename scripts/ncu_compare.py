"""Compares Nsight Compute raw CSVs (ncu --csv --page raw, scripts/device_s29b.sh) of the same
launches under two or more modes: per kernel (template arguments dropped), the median of each
metric over its launches, side by side, and the metrics that differ most.
Usage: python scripts/ncu_compare.py BASE.csv OTHER.csv [...] [--top N]"""
import argparse
import csv
import re
import statistics
import sys
from collections import defaultdict

KEY = ["gpu__time_duration.sum", "smsp__inst_executed.sum", "lts__t_sectors_op_read.sum", "lts__t_sectors_op_write.sum",
       "lts__t_sectors_op_atom.sum", "lts__t_sectors_op_red.sum", "lts__t_sector_hit_rate.pct", "dram__bytes_read.sum",
       "dram__bytes_write.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
       "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
       "smsp__average_warp_latency_per_inst_issued.ratio", "launch__grid_size", "launch__registers_per_thread"]


def load(path):
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    r = list(csv.reader(lines))
    head = r[0]
    for row in r[2:]:  # r[1]: units
        rows.append(dict(zip(head, row)))
    per = defaultdict(lambda: defaultdict(list))
    for row in rows:
        k = re.sub(r"<.*?>", "", row["Kernel Name"]).split("(")[0].replace("void ", "")
        for m, v in row.items():
            try:
                x = float(v.replace(",", ""))
            except ValueError:
                continue
            per[k][m].append(x)
    return {k: {m: statistics.median(v) for m, v in d.items()} for k, d in per.items()}


# not measurements of the kernel: the profiled process, the row, the replayer's own bookkeeping
SKIP = ("ID", "Process ID", "device__", "profiler__")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="+", help="raw CSVs, the first is the base")
    p.add_argument("--top", type=int, default=12, help="metrics listed by their difference from the base")
    a = p.parse_args()
    args, top = a.csv, a.top
    if len(args) < 2:
        p.error("give the base and at least one other CSV")
    data = [load(path) for path in args]
    names = [path.rsplit("/", 1)[-1].removeprefix("ncu_").removesuffix(".csv") for path in args]
    for k in sorted(data[0]):
        print(f"\n## {k}")
        print("| metric | " + " | ".join(names) + " |")
        print("|---|" + "---|" * len(names))
        base = data[0][k]
        for m in KEY:
            if m in base:
                print(f"| {m} | " + " | ".join(f"{d.get(k, {}).get(m, float('nan')):,.4g}" for d in data) + " |")
        diffs = []
        for m, v in base.items():
            if m in KEY or m.startswith(SKIP) or v == 0:
                continue
            o = data[1].get(k, {}).get(m)
            if o is None:
                continue
            diffs.append((abs(o - v) / abs(v), m))
        diffs.sort(reverse=True)
        print(f"top {top} relative differences ({names[1]} vs {names[0]}):")
        for r, m in diffs[:top]:
            print(f"  {m}: " + " / ".join(f"{d.get(k, {}).get(m, float('nan')):,.4g}" for d in data) + f"  ({r:+.0%})")


if __name__ == "__main__":
    main()
