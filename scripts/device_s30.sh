#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine): main with the pooled layout's three
# cheap changes (FindOrClaim's group reads in the emitting expansion, the one-pass hand-out in
# the scan's tail at <= 32 lanes, the hints' shift kept in LaneCounters::hint_ok); prediction:
# docs/speed-notes.md "The pooled layout's own cost, again on main", written before this call.
#   while the HLG of the full tier builds: test_gpu.py and test_gpu_epsilon.py in the default
#   environment (capped at TEST_CAP1 s), then test_gpu.py and test_gpu_memory.py's pooled tests
#   with every decoder pooled by the slots (CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=slots: the
#   one-pass hand-out) until TEST_END
#   then HLG uniform 32 x 250, --profile, lazy / pooled-slots-devlog / pooled, in one process a
#   module: this tree (own) and main before the change (other: .device/ab_old), own, other,
#   other, own
# Carry .device; stage the old side first (from the checkout's root, with HEAD~N the commit before):
#   for f in common expand scan epsilon finalize types; do
#     git show BASE:cuwfst/csrc/include/cuwfst/$f.cuh > .device/ab_old/cuwfst/csrc/include/cuwfst/$f.cuh; done
# $OUT: s30.log, tests*.log, ab.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s30.log
timeout -s INT ${TEST_CAP1:-120} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py \
  tests/test_gpu_epsilon.py -s -rf > $OUT/tests1.log 2>&1
echo "test_gpu + test_gpu_epsilon exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests1.log | grep -v "^E " | head -4; grep -E "^FAILED" $OUT/tests1.log | head -6; } | cut -c1-220 | tee -a $L
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=slots timeout -s INT $(left ${TEST_END:-230}) \
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_gpu_memory.py -k "pool or not test_gpu_memory" \
  -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu + pooled memory tests (every decoder pooled, slots) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -6; } | cut -c1-220 | tee -a $L
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
ab_init .device/ab_old
for side in own other other own; do
  ab_use $side > /dev/null
  timeout -s INT $(left 590) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    --uniform 250 --utts 32 --batch 32 --reps 7 --check 1 --profile --memory lazy pooled-slots-devlog pooled > /tmp/uni.txt 2>&1
  grep -vE "^\{" /tmp/uni.txt | grep -E "kernel ms|B=32|CPU check|Error" | sed "s/^/[$side] /" | cut -c1-230 | tee -a $L
  grep -E "^\{" /tmp/uni.txt | sed "s/^/{\"side\": \"$side\", \"row\": /; s/$/}/" >> $OUT/ab.jsonl
  echo "[$(since) s] $side" | tee -a $L
done
echo "[$(since) s] done" | tee -a $L
