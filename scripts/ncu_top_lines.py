"""The top source lines of an Nsight Compute source page (ncu -i REP --page source --csv),
by warp-state samples (scripts/device_ncu_source.sh). The page's columns differ between ncu
versions, so this finds them by name: the sampling columns ("Warp Stall Sampling (All
Samples)", else any column with "Sampl"), the source text and its line or address.
Usage: python3 scripts/ncu_top_lines.py SOURCE.csv [N]"""
import csv
import sys


def number(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return None


def main(path, n=40):
    rows = list(csv.reader(open(path, newline="", errors="replace")))
    heads = [i for i, r in enumerate(rows) if any("Sampl" in c for c in r)]
    if not heads:
        print(f"no sampling column; first rows: {rows[:3]}")
        return
    # several kernels: one header per kernel's table; the rows up to the next header are its own
    for k, h in enumerate(heads):
        hdr = rows[h]
        end = heads[k + 1] if k + 1 < len(heads) else len(rows)
        body = [r for r in rows[h + 1:end] if len(r) == len(hdr)]
        samp = [i for i, c in enumerate(hdr) if "Sampling (All" in c] or [i for i, c in enumerate(hdr) if "Sampl" in c]
        col = samp[0]
        text = next((i for i, c in enumerate(hdr) if c.strip().lower() in ("source", "sass", "cuda")), None)
        where = next((i for i, c in enumerate(hdr) if c.strip().lower() in ("#", "line", "address", "# address")), 0)
        total = sum(number(r[col]) or 0 for r in body)
        print(f"== table {k} (row {h}): {len(body)} lines, {total:.0f} samples in '{hdr[col]}'; columns: "
              f"{', '.join(hdr)[:400]}")
        top = sorted(body, key=lambda r: -(number(r[col]) or 0))[:n]
        for r in top:
            v = number(r[col]) or 0
            src = r[text].strip() if text is not None else ""
            print(f"{v:8.0f} {100 * v / max(total, 1):5.1f}%  {r[where][:12]:>12}  {src[:200]}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
