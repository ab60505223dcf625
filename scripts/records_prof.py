"""Sums CUWFST_LATTICE_AFTER_PROF's stderr lines ([records-prof], GpuDecoder::PrintRecordsProfile) by
table class: passes, items a pass, the warps' cycles a phase (share of the three), the CTAs' active
time against the class's span; then the pass's timeline: each kernel's mean start and end (ms from
the pass's first start) over the passes it ran in. Usage: python scripts/records_prof.py LOG..."""
import collections
import sys


def main(paths):
    acc = collections.defaultdict(lambda: collections.defaultdict(float))
    times = collections.defaultdict(list)  # kernel -> [(start, end)]
    order = []
    for path in paths:
        for line in open(path, errors="replace"):
            if not line.startswith("[records-prof]"):
                continue
            f = line.split()
            if f[1] == "timeline":
                for name, a, b in zip(f[2::3], f[3::3], f[4::3]):
                    if name not in times:
                        order.append(name)
                    times[name].append((float(a), float(b)))
                continue
            v = dict(zip(f[2::2], f[3::2]))
            a = acc[f[1]]
            a["passes"] += 1
            for k in ("items", "wait_mcyc", "setup_mcyc", "walk_mcyc", "active_ms", "span_ms"):
                a[k] += float(v[k])
            a["ctas"] = float(v["ctas"])
    for cls, a in sorted(acc.items()):
        n = a["passes"]
        cyc = a["wait_mcyc"] + a["setup_mcyc"] + a["walk_mcyc"]
        share = " ".join(f"{k[:-5]} {a[k] / cyc * 100:.1f}%" for k in ("wait_mcyc", "setup_mcyc", "walk_mcyc"))
        print(f"{cls}: {n:.0f} passes, {a['items'] / n:.0f} items a pass, warp Mcycles a pass "
              f"{cyc / n:.1f} ({share}), active {a['active_ms'] / n:.2f} ms of {a['span_ms'] / n:.3f} ms span x "
              f"{a['ctas']:.0f} CTAs ({a['active_ms'] / max(a['span_ms'] * a['ctas'], 1e-9) * 100:.0f}% busy)")
    if times:
        print("timeline (mean ms from the pass's first start, passes): " + "; ".join(
            f"{k} {sum(a for a, _ in times[k]) / len(times[k]):.3f}-{sum(b for _, b in times[k]) / len(times[k]):.3f}"
            f" ({len(times[k])})" for k in order))


if __name__ == "__main__":
    main(sys.argv[1:])
