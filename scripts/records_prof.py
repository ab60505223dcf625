"""Sums CUWFST_LATTICE_AFTER_PROF's stderr lines ([records-prof], GpuDecoder::PrintRecordsProfile) by
the side of an --env-ab run (benchmarks/lattice_speed.py prints "[records-prof] side NAME" before each
side's decodes; the lines before any such line, or in a log without them, have no side name), the
records kernels' grid (CTAs) and table class (`one`: the one launch of CUWFST_LATTICE_AFTER_GRID=one),
so the sides of one run stay apart: passes, items a pass, the warps' cycles a phase (share of the three), the CTAs' active
time against the class's span; then a grid's timeline (the one launch's apart): each kernel's mean start and end (ms from the
pass's first start) over the passes it ran in, and the passes' mean last end. Usage:
python scripts/records_prof.py LOG..."""
import collections
import sys


def main(paths):
    acc = collections.defaultdict(lambda: collections.defaultdict(float))  # (side, grid, class) -> sums
    # (side, grid, "one" or "classes") -> kernel -> [(start, end)]
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    ends = collections.defaultdict(list)  # (side, grid, launches) -> [the pass's last end]
    for path in paths:
        side = ""
        for line in open(path, errors="replace"):
            if not line.startswith("[records-prof]"):
                continue
            f = line.split()
            if f[1] == "side":  # [records-prof] side NAME: the lines after it are that side's
                side = f[2] if len(f) > 2 else ""
                continue
            if f[1] == "timeline":  # [records-prof] timeline ctas N name start end ...
                spans = [(name, float(a), float(b)) for name, a, b in zip(f[4::3], f[5::3], f[6::3])]
                grid = (side, int(f[3]), "one" if any(name == "one" for name, _, _ in spans) else "classes")
                for name, a, b in spans:
                    times[grid][name].append((a, b))
                if spans:
                    ends[grid].append(max(b for _, _, b in spans))
                continue
            v = dict(zip(f[2::2], f[3::2]))
            a = acc[(side, int(v["ctas"]), f[1])]
            a["passes"] += 1
            for k in ("items", "wait_mcyc", "setup_mcyc", "walk_mcyc", "active_ms", "span_ms"):
                a[k] += float(v[k])
    for (side, grid, cls), a in sorted(acc.items()):
        n = a["passes"]
        cyc = a["wait_mcyc"] + a["setup_mcyc"] + a["walk_mcyc"]
        share = " ".join(f"{k[:-5]} {a[k] / cyc * 100:.1f}%" for k in ("wait_mcyc", "setup_mcyc", "walk_mcyc"))
        print(f"{side + ': ' if side else ''}grid {grid} {cls}: {n:.0f} passes, {a['items'] / n:.0f} items a pass, warp Mcycles a pass "
              f"{cyc / n:.1f} ({share}), active {a['active_ms'] / n:.2f} ms of {a['span_ms'] / n:.3f} ms span x "
              f"{grid} CTAs ({a['active_ms'] / max(a['span_ms'] * grid, 1e-9) * 100:.0f}% busy)")
    for key, kernels in sorted(times.items()):
        side, grid, launches = key
        print(f"{side + ': ' if side else ''}grid {grid} {launches} timeline (mean ms from the pass's first start, "
              "passes): " + "; ".join(
                  f"{k} {sum(a for a, _ in x) / len(x):.3f}-{sum(b for _, b in x) / len(x):.3f} ({len(x)})"
                  for k, x in kernels.items()) + f"; last end {sum(ends[key]) / len(ends[key]):.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
