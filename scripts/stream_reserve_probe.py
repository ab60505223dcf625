"""What a stream's open, advance and finalize commit in the winners log.

Neither an open nor a finalize can be re-run, so each reserves its worst case before it
launches: an open 1 + eps_iterations x main_q entries a stream (its start token's closure), in
groups of as many streams as the log holds at the time (at least one); a finalize one entry a
stream (a final step's arcs all end in the final state). An advance's steps wait for room
(scan.cuh ArenaStepFits) and the log grows by what a held-back step needed. This opens N
streams on a graph at once, advances each by one chunk, and finalizes them together, printing
the winners log's capacity and committed bytes after each stage next to the open bound and
the old reservation of an advance (2 x N x (claims_cap + eps_iterations x main_q)) (GPU only).

    python scripts/stream_reserve_probe.py [--graphs cuwfst/data/tiny/HLG.img cuwfst/data/tiny/TLG.img]
        [--streams 1 64 1024] [--frames 16]
"""

from __future__ import annotations

import argparse

import numpy as np

from cuwfst import DecoderOptions, Graph, StreamingDecoder


def winners(sd) -> tuple[int, float]:
    w = sd.memory_stats()["pools"]["winners"]
    return int(w["capacity_entries"]), w["committed"] / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", nargs="+", default=["cuwfst/data/tiny/HLG.img", "cuwfst/data/tiny/TLG.img"])
    ap.add_argument("--streams", nargs="+", type=int, default=[1, 64, 1024])
    ap.add_argument("--frames", type=int, default=16)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    for path in a.graphs:
        graph = Graph.load(path)
        for n in a.streams:
            sd = StreamingDecoder(graph, DecoderOptions(), device="cuda", max_streams=n)
            gpu = sd._frontend._gpu
            inst = gpu.main
            e = inst.eps_iterations
            open_bound = n * (1 + e * inst.main_q)
            old_advance = 2 * n * (inst.claims_cap + e * inst.main_q)
            x = rng.standard_normal((n, a.frames, graph.vocab_size)).astype(np.float32) * 2
            x -= np.log(np.exp(x).sum(-1, keepdims=True))
            row = [f"{path.split('/')[-1]} n={n} eps_iterations={e} main_q={inst.main_q} claims_cap={inst.claims_cap}",
                   f"open bound {open_bound:,} entries, the old advance reservation {old_advance:,}"]
            c0 = winners(sd)
            streams = sd.open_streams(n)
            c1 = winners(sd)
            sd.advance(streams, list(x))
            c2 = winners(sd)
            hyps = sd.finalize(streams)
            c3 = winners(sd)
            row.append("capacity / committed MiB: before {} / {:.1f}, opened {} / {:.1f}, advanced {} / {:.1f}, "
                       "finalized {} / {:.1f}".format(*c0, *c1, *c2, *c3))
            row.append(f"{sum(not h.empty for h in hyps)}/{n} non-empty results")
            print("; ".join(row), flush=True)
            del sd


if __name__ == "__main__":
    main()
