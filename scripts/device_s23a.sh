#!/usr/bin/env bash
# GPU machine, one call (~2 minutes; no full tier): what the first decode's ~100 MiB outside the
# module's counters is (docs/benchmarks.md, session of 2026-12-01 22:51), and the native input
# check's fuzz test with 7bd5dfa's guard.
#   1. tests/test_gpu.py -k "native_input_check or input_errors or zero_frames" (the fuzz test stopped
#      at one random case at 9e2d264; a whole batch of T = 0 through decode is untested)
#   2. benchmarks.memory_stages on the tiny HLG, 4 lanes, lazy, each a fresh process: as is;
#      check_log_probs off (its sampled read is PyTorch's indexing, cast and copy); PyTorch's
#      sampled-read ops run once before the baseline; CUDA_MODULE_LOADING=EAGER
# Carry .device and .cache. $OUT: s23a.log, tests.log, stages.jsonl.
. scripts/device_common.sh
# (FULL=1: the full tier's build starts in the background for device_s23c.sh / device_s23b.sh in the
# next call on the same machine)
if [ -n "${FULL:-}" ]; then device_setup s23a.log; else NO_FULL=1 device_setup s23a.log; fi
timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k "native_input_check or input_errors or zero_frames" \
  -s > $OUT/tests.log 2>&1
echo "tests exit $?" | tee -a $L
{ grep -E "^FAILED|^E " $OUT/tests.log | head -6; grep -E "passed|failed" $OUT/tests.log | tail -1; } | cut -c1-220 | tee -a $L
stages() {  # stages NAME ARGS...: one fresh process
  local name=$1; shift
  timeout -s INT 60 python3 -m benchmarks.memory_stages --graph cuwfst/data/tiny/HLG.img \
    --log-probs cuwfst/data/demo/tiny_utts.npz --batch 4 --memory lazy --json $OUT/stages.jsonl "$@" 2>&1 \
    | grep -E "^\| (decoder|decode 1|freed) " | sed "s/^/[$name] /" | tee -a $L
}
stages plain
stages check-off --check-log-probs off
stages torch-warm --warm torch-sample
CUDA_MODULE_LOADING=EAGER stages eager
stages plain
echo "[$(since) s] done" | tee -a $L
