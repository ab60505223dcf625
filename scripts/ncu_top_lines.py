"""The top source lines of an Nsight Compute source page (ncu -i REP --page source --csv
--print-source cuda,sass), by warp-state samples (scripts/device_ncu_source.sh). The page
holds one table per source file ("File Name" row, then a header with "Line No", "Source",
"Address", "Source", the sampling columns...); a CUDA line's row names the line, the SASS rows
below it (no line number) carry the samples. This sums each SASS row's samples into the CUDA
line above it and prints the lines with the most samples, as shares of all samples (the page
of ncu 2025.3 on the H200, session of 2026-11-30 19:51: the first version of this script sorted
SASS rows and lost the lines).
Usage: python3 scripts/ncu_top_lines.py SOURCE.csv [N]"""
import csv
import sys
from collections import defaultdict


def number(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return None


def main(path, n=40):
    agg = defaultdict(float)
    text = {}
    file, hdr, line = "?", None, None
    col = addr = lno = None
    for r in csv.reader(open(path, newline="", errors="replace")):
        if r and r[0] == "File Name":
            file = r[1] if len(r) > 1 else "?"
            line = None
            continue
        if r and r[0] == "Line No":
            hdr = r
            samp = [i for i, c in enumerate(r) if "Sampling (All" in c] or [i for i, c in enumerate(r) if "Sampl" in c]
            col = samp[0] if samp else None
            addr = r.index("Address") if "Address" in r else None
            lno = 0
            continue
        if hdr is None or col is None or len(r) != len(hdr):
            continue
        if r[lno].strip():
            line = (file.rsplit("/", 1)[-1], r[lno].strip())
            text[line] = r[1].strip()
        v = number(r[col])
        if v and line is not None and (addr is None or r[addr].strip()):
            agg[line] += v
    total = sum(agg.values())
    print(f"{len(agg)} source lines with samples, {total:.0f} samples")
    for key, v in sorted(agg.items(), key=lambda kv: -kv[1])[:n]:
        print(f"{v:8.0f} {100 * v / max(total, 1):5.1f}%  {key[0]}:{key[1]:<5}  {text.get(key, '')[:180]}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
