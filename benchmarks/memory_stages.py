"""Where a process's device memory goes, stage by stage, around the GPU decoder (issue 9).

python -m benchmarks.memory_stages --graph HLG.img --log-probs shard.npz [--batch 32]
    [--memory pooled] [--json out.jsonl]

benchmarks.memory measures a decoder's device memory as cudaMemGetInfo's used memory after its
decodes less before it was built. The first decoder built in a process showed about 134 MiB
more than the module's own counters, and later decoders 26-56 MiB (docs/benchmarks.md, session
of 2026-12-01 21:38). This script finds the stage that adds it. It runs in one fresh process
and records, after each stage, cudaMemGetInfo's used memory (PyTorch's cache emptied first) and
the native module's live device bytes (cuwfst::live::device_bytes):

  torch       CUDA initialised by PyTorch, the log-probs on the device (the baseline)
  module      the GPU module loaded (its first call, gpu_memory_info)
  decoder     Decoder(graph, device="cuda", max_lanes=batch, memory=...) built
  decode 1    its first decode of --batch rows (graph capture, lazily loaded kernels)
  decode 2    a second decode of the same rows
  rest        every remaining batch of the file decoded
  decoder 2   a second Decoder on a graph of its own, built and decoding --batch rows
  freed       both decoders and graphs deleted, gc run

Each row gives the used memory's growth since the stage before, the module's growth, and
"outside" (the used memory's growth the module's counters do not hold: the driver's, the
CUDA graphs', lazily loaded code, local memory). CUDA_MODULE_LOADING is printed too: under
LAZY (the default since CUDA 11.7) each kernel's code is loaded on its first launch.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

MiB = 2**20
STAGES = ("torch", "module", "decoder", "decode 1", "decode 2", "rest", "decoder 2", "freed")


def stage_rows(samples: list[tuple[str, int, int]]) -> list[dict]:
    """samples: (stage, used bytes, module bytes) in order; the first is the baseline. Each
    later stage's growth since the one before, in MiB, and the part outside the module."""
    rows = []
    for (_, used0, mod0), (name, used1, mod1) in zip(samples, samples[1:]):
        d_used, d_mod = (used1 - used0) / MiB, (mod1 - mod0) / MiB
        rows.append(dict(stage=name, used_mib=round(d_used, 1), module_mib=round(d_mod, 1),
                         outside_mib=round(d_used - d_mod, 1), total_used_mib=round((used1 - samples[0][1]) / MiB, 1)))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--log-probs", required=True)
    ap.add_argument("--utts", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--memory", default="pooled", help="the decoders' memory mode")
    ap.add_argument("--check-log-probs", choices=("on", "off"), default="on",
                    help="the decoders' check_log_probs (its sampled rows are read with PyTorch's indexing)")
    ap.add_argument("--warm", choices=("none", "torch-sample"), default="none",
                    help="torch-sample: before the baseline, PyTorch's ops of check_log_probs' sampled read "
                         "(advanced indexing, a cast, a copy to the host) run once on the log-probs, so code "
                         "they load lazily is in the baseline")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import torch

    from benchmarks.gpu_speed import load_rows
    from benchmarks.memory import _module_bytes, _used
    from cuwfst import Decoder, Graph

    lp_host, lens = load_rows(a.log_probs, a.utts)
    torch.cuda.init()
    lp = torch.from_numpy(np.ascontiguousarray(lp_host)).cuda()
    if a.warm == "torch-sample":
        idx = torch.zeros(2, dtype=torch.int64).cuda()
        lp[idx, idx].double().cpu()
    samples: list[tuple[str, int, int]] = []

    def sample(name: str, with_module: bool = True) -> None:
        # (benchmarks.memory's measures: used memory with PyTorch's cache emptied, live module bytes)
        samples.append((name, _used(torch), _module_bytes() if with_module else 0))

    sample("torch", with_module=False)
    sample("module")  # (_module_bytes loads the module)
    g = Graph.load(a.graph)
    check = a.check_log_probs == "on"
    dec = Decoder(g, device="cuda", max_lanes=a.batch, memory=a.memory, check_log_probs=check)
    sample("decoder")
    B = a.batch
    dec.decode(lp[:B], lens[:B])
    sample("decode 1")
    dec.decode(lp[:B], lens[:B])
    sample("decode 2")
    for s in range(B, lp.shape[0], B):
        dec.decode(lp[s : s + B], lens[s : s + B])
    sample("rest")
    g2 = Graph.load(a.graph)
    dec2 = Decoder(g2, device="cuda", max_lanes=a.batch, memory=a.memory, check_log_probs=check)
    dec2.decode(lp[:B], lens[:B])
    sample("decoder 2")
    del dec, dec2, g, g2
    sample("freed")
    rows = stage_rows(samples)
    head = dict(device=torch.cuda.get_device_name(0), graph=os.path.basename(a.graph), batch=B, memory=a.memory,
                cuda_module_loading=os.environ.get("CUDA_MODULE_LOADING", "(unset: LAZY)"), utts=len(lens),
                check_log_probs=a.check_log_probs, warm=a.warm)
    print(json.dumps(head))
    print("| stage | used MiB (growth) | module MiB (growth) | outside the module MiB | used since torch MiB |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['stage']} | {r['used_mib']} | {r['module_mib']} | {r['outside_mib']} | {r['total_used_mib']} |")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps({**head, "stages": rows}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
