#!/usr/bin/env bash
# GPU machine, one short call (~2.5 minutes on a fresh machine, no full tier): exactness of
# CUWFST_POOL_BOUND=claims-finalize-ahead (FinalizeKernel<true, true>, the prefix beside the
# first round's claim loads): the claims test by name for it (192 and 32 lanes: the 32-lane case
# pauses inside the ahead path), then test_gpu.py with every decoder pooled by it, then memcheck
# over scripts/sanitize_case.py 3 the same way, each capped.
# Carry .device. $OUT: s31d.log, tests*.log, memcheck.log.
export NO_FULL=1
. scripts/device_common.sh
device_setup s31d.log
timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider -m gpu -k "claims-finalize-ahead" \
  "tests/test_gpu_memory.py::test_pooled_next_frontiers_by_the_claims_pause_after_the_expansion" -s -rf \
  > $OUT/tests1.log 2>&1
echo "ahead claims tests exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
grep -E "^FAILED|^E  " $OUT/tests1.log | head -8 | cut -c1-250 | tee -a $L
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead timeout -s INT $(left ${GPU_END:-160}) \
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu (every decoder pooled, claims-finalize-ahead) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -6; } | cut -c1-220 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead timeout -s INT $(left ${END:-200}) "$CS" --tool memcheck \
  --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 3 > $OUT/memcheck.log 2>&1
echo "memcheck 3 (pooled, claims-finalize-ahead) exit $?: $(tail -2 $OUT/memcheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
echo "[$(since) s] done" | tee -a $L
