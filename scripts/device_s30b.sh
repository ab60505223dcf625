#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): the tree after call 1 of the session of
# 2026-12-02 10:08 (scripts/device_s30.sh) took FindOrClaim's group reads out again (ExpandKernel
# +1.2-1.4 ms a batch in every mode), keeping the one-pass hand-out and the hints' shift in
# LaneCounters::hint_ok.
#   while the HLG of the full tier builds: the walkers' other files (test_gpu_walk_entry,
#   test_gpu_trim, test_gpu_lanes; capped at TEST_CAP1 s), the lattice walk's k2 goldens
#   (test_gpu_lattice -k golden), then test_gpu_memory.py's pooled tests with every decoder
#   pooled by the slots until TEST_END
#   then HLG uniform 32 x 250, --profile, lazy / pooled-slots-devlog / pooled, one process a
#   module: own, other (.device/ab_old: main before the change), other, own
# Carry .device; .device/ab_old staged as scripts/device_s30.sh says. $OUT: s30b.log, tests*.log, ab.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s30b.log
timeout -s INT ${TEST_CAP1:-150} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_walk_entry.py \
  tests/test_gpu_trim.py tests/test_gpu_lanes.py -s -rf > $OUT/tests1.log 2>&1
echo "walk_entry + trim + lanes exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests1.log | grep -v "^E " | head -4; grep -E "^FAILED" $OUT/tests1.log | head -6; } | cut -c1-220 | tee -a $L
timeout -s INT $(left ${LAT_END:-230}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k golden \
  -s -rf > $OUT/tests2.log 2>&1
echo "lattice goldens exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -6; } | cut -c1-220 | tee -a $L
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=slots timeout -s INT $(left ${TEST_END:-290}) \
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_memory.py -k pool -s -rf > $OUT/tests3.log 2>&1
echo "pooled memory tests (every decoder pooled, slots) exit $?: $(grep -E "passed|failed" $OUT/tests3.log | tail -1)" | tee -a $L
grep -E "^FAILED" $OUT/tests3.log | head -6 | cut -c1-220 | tee -a $L
wait_full 320; echo "[$(since) s] full tier" | tee -a $L
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
