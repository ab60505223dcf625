#!/usr/bin/env bash
# GPU machine, one call (~3 minutes; no full tier): branch finite, the native NaN / +inf input
# check (gpu_check_finite, GpuDecoder::FirstNonFinite).
#   1. its tests and the tests its allocation touches: test_gpu.py's input tests, the fault
#      walks (construction and growth sites, the live counters against memory_stats),
#      test_gpu_memory.py's counters, the streaming CUDA-chunk test
#   2. the first decoder's device memory, stage by stage (benchmarks.memory_stages, tiny tier,
#      lazy), with main's torch check (.device/ab_old: main's decoder/gpu.py and gpu_host.py)
#      against the native one, each in a fresh process: own / other / own / other
#   3. the check's time on [32, 600, 501] float32 (torch's ops against the native kernel)
# Carry .device and .cache. $OUT: s22c.log, tests.log, stages.jsonl.
. scripts/device_common.sh
NO_FULL=1 device_setup s22c.log
timeout -s INT ${TEST_CAP:-120} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_gpu_faults.py \
  tests/test_gpu_memory.py tests/test_gpu_lanes.py -k "native_input_check or input_errors or default_stream or \
  fails_cleanly or short_batches or agree_with_the_module or cuda_chunks" -s > $OUT/tests.log 2>&1
echo "tests exit $?" | tee -a $L
{ grep -E "^FAILED|^ERROR" $OUT/tests.log | head -6; grep -E "passed|failed" $OUT/tests.log | tail -1; } | cut -c1-220 | tee -a $L
ab_init .device/ab_old
for side in own other own other; do
  ab_use $side > /dev/null
  timeout -s INT 60 python3 -m benchmarks.memory_stages --graph cuwfst/data/tiny/HLG.img \
    --log-probs cuwfst/data/demo/tiny_utts.npz --batch 4 --memory lazy --json $OUT/stages.jsonl 2>&1 \
    | grep -E "^\| (decoder|decode 1|freed) " | sed "s/^/[$side] /" | tee -a $L
done
ab_use own > /dev/null
timeout -s INT 60 python3 - <<'PY' 2>&1 | tail -4 | tee -a $L
import time, numpy as np, torch
from cuwfst import Decoder, Graph
from cuwfst.decoder.gpu import GpuBackend
dec = Decoder(Graph.load("cuwfst/data/tiny/HLG.img"), device="cuda", max_lanes=32)
lp = torch.randn(32, 600, 501, device="cuda"); lens = np.full(32, 600, np.int32)
def torch_check(lp, lens):  # main's check (decoder/gpu.py before this branch)
    T = lp.shape[1]
    valid = torch.arange(T, device=lp.device)[None, :] < torch.from_numpy(lens).to(lp.device)[:, None]
    bad = (torch.isnan(lp) | (lp == float("inf"))).any(dim=2) & valid
    return bool(bad.any())
for name, f in (("torch", torch_check), ("native", dec._gpu.check_finite), ("torch", torch_check), ("native", dec._gpu.check_finite)):
    for _ in range(3): f(lp, lens)
    ts = []
    for _ in range(30):
        torch.cuda.synchronize(); t0 = time.perf_counter(); f(lp, lens); torch.cuda.synchronize(); ts.append(time.perf_counter() - t0)
    print(f"input check {name}: median {1e6 * float(np.median(ts)):.1f} us over 30 (32 x 600 x 501 float32)")
PY
echo "[$(since) s] done" | tee -a $L
