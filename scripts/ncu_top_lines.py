"""The top source lines of an Nsight Compute source page (ncu -i REP --page source --csv
--print-source cuda,sass), by warp-state samples (scripts/device_ncu_source.sh, device_s32c.sh).
The page holds one table per source file (a "File Name" or, in ncu 2025.3, "File Path" row, then
a header with "Line No", "Source", "Address", "Source", the sampling and instruction columns...);
a CUDA line's row names the line, the SASS rows below it (no line number) carry the counts. This
sums each SASS row's counts into the CUDA line above it and prints the lines with the most
samples, as shares of all samples (the page of ncu 2025.3 on the H200, session of 2026-11-30
19:51: the first version of this script sorted SASS rows and lost the lines).
With --diff OTHER.csv (the same kernel's page in another mode): every line's warp instructions,
samples and divergent branches side by side, the lines whose instructions differ most first
(docs/benchmarks.md, session of 2026-12-02 14:43: lazy against pooled-late-ahead).
Usage: python3 scripts/ncu_top_lines.py SOURCE.csv [N] [--diff OTHER.csv]
(SOURCE.csv may be gzipped: *.gz)"""
import csv
import gzip
import sys
from collections import defaultdict

SAMPLES, INSTRUCTIONS, DIVERGENT = "samples", "Instructions Executed", "Divergent Branches"


def number(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return None


def lines(path):
    """{(file, line): {samples, instructions, divergent}} and {(file, line): source text}."""
    agg = defaultdict(lambda: defaultdict(float))
    text = {}
    file, hdr, line = "?", None, None
    cols = {}
    addr = None
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="", errors="replace") as f:
        rows = list(csv.reader(f))
    cuda_rows = any(len(r) > 2 and r[0].strip().isdigit() and r[2].strip() == "-" for r in rows)
    for r in rows:
        if r and r[0] in ("File Name", "File Path"):
            file = r[1] if len(r) > 1 else "?"
            line = None
            continue
        if r and r[0] == "Line No":
            hdr = r
            samp = [i for i, c in enumerate(r) if "Sampling (All" in c] or [i for i, c in enumerate(r) if "Sampl" in c]
            cols = {SAMPLES: samp[0] if samp else None,
                    INSTRUCTIONS: r.index(INSTRUCTIONS) if INSTRUCTIONS in r else None,
                    DIVERGENT: r.index(DIVERGENT) if DIVERGENT in r else None}
            addr = r.index("Address") if "Address" in r else None
            continue
        if hdr is None or len(r) != len(hdr):
            continue
        if r[0].strip():
            line = (file.rsplit("/", 1)[-1], r[0].strip())
            text[line] = r[1].strip()
        # the counts: a CUDA line's own row where the page has one (Address "-": ncu's sums
        # for the line); SASS rows (an address) only on a page without them
        if line is None or (addr is not None and (r[addr].strip() != "-") == cuda_rows):
            continue
        for name, c in cols.items():
            v = number(r[c]) if c is not None else None
            if v:
                agg[line][name] += v
    return agg, text


def main(path, n=40):
    agg, text = lines(path)
    total = sum(v[SAMPLES] for v in agg.values())
    print(f"{sum(1 for v in agg.values() if v[SAMPLES])} source lines with samples, {total:.0f} samples")
    for key, v in sorted(agg.items(), key=lambda kv: -kv[1][SAMPLES])[:n]:
        if v[SAMPLES]:
            print(f"{v[SAMPLES]:8.0f} {100 * v[SAMPLES] / max(total, 1):5.1f}%  {key[0]}:{key[1]:<5}  {text.get(key, '')[:180]}")


def diff(path, other, n=40):
    a, ta = lines(path)
    b, tb = lines(other)
    ia, ib = (sum(v[INSTRUCTIONS] for v in x.values()) for x in (a, b))
    print(f"warp instructions {ia:.0f} / {ib:.0f} ({100 * (ib / max(ia, 1) - 1):+.2f}%)")
    zero = defaultdict(float)
    keys = sorted(set(a) | set(b), key=lambda k: -abs(b.get(k, zero)[INSTRUCTIONS] - a.get(k, zero)[INSTRUCTIONS]))
    for k in keys[:n]:
        x, y = a.get(k, zero), b.get(k, zero)
        print(f"{k[0][:16]}:{k[1]:<5} inst {x[INSTRUCTIONS]:11.0f} {y[INSTRUCTIONS]:11.0f} "
              f"{y[INSTRUCTIONS] - x[INSTRUCTIONS]:+10.0f}  samples {x[SAMPLES]:6.0f} {y[SAMPLES]:6.0f}  "
              f"divergent {x[DIVERGENT]:6.0f} {y[DIVERGENT]:6.0f}  {(ta.get(k) or tb.get(k) or '')[:70]}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--diff" in args:
        i = args.index("--diff")
        other = args[i + 1]
        del args[i : i + 2]
        diff(args[0], other, int(args[1]) if len(args) > 1 else 40)
    else:
        main(args[0], int(args[1]) if len(args) > 1 else 40)
