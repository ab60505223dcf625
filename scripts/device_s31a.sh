#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine), for the next session: the claims'
# hand-out in FinalizeKernel (CUWFST_POOL_BOUND=claims-finalize, benchmark mode pooled-late-fin),
# built in the session of 2026-12-02 10:08 and never run on a GPU; prediction in
# docs/speed-notes.md ("The claims' hand-out in FinalizeKernel").
#   while the HLG of the full tier builds: the claims test by name (both bounds, 192 and 32
#   lanes), test_gpu.py with every decoder pooled by claims-finalize, memcheck over
#   scripts/sanitize_case.py 3 the same way
#   then fresh-process memory at batch 32: pooled-late-fin (RIVA=1: riva first; needs the TLG)
#   then HLG uniform 32 x 250, --profile, one process: lazy / pooled-slots-devlog / pooled-late-fin /
#   pooled-late, then reversed
# Carry .device. $OUT: s31a.log, tests*.log, memcheck.log, memory.jsonl, uniform.jsonl.
[ -n "${RIVA:-}" ] || export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s31a.log
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -m gpu \
  "tests/test_gpu_memory.py::test_pooled_next_frontiers_by_the_claims_pause_after_the_expansion" -s -rf \
  > $OUT/tests1.log 2>&1
echo "claims tests exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
grep -E "^FAILED|^E  " $OUT/tests1.log | head -8 | cut -c1-250 | tee -a $L
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize timeout -s INT $(left 230) \
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu (every decoder pooled, claims-finalize) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -6; } | cut -c1-220 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize timeout -s INT $(left 290) "$CS" --tool memcheck --leak-check no \
  --error-exitcode 9 python3 scripts/sanitize_case.py 3 > $OUT/memcheck.log 2>&1
echo "memcheck 3 (pooled, claims-finalize) exit $?: $(tail -2 $OUT/memcheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
wait_full 340; echo "[$(since) s] full tier" | tee -a $L
[ -z "${RIVA:-}" ] || mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled-late-fin --modes pooled-late-fin --skip riva speed long
for order in "lazy pooled-slots-devlog pooled-late-fin pooled-late" "pooled-late pooled-late-fin pooled-slots-devlog lazy"; do
  timeout -s INT $(left ${END:-560}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    --uniform 250 --utts 32 --batch 32 --reps 7 --check 1 --profile --memory $order > /tmp/uni.txt 2>&1
  grep -vE "^\{" /tmp/uni.txt | grep -E "kernel ms|B=32|CPU check|Error" | cut -c1-230 | tee -a $L
  grep -E "^\{" /tmp/uni.txt | sed "s/^/{\"order\": \"$order\", \"row\": /; s/$/}/" >> $OUT/uniform.jsonl
done
echo "[$(since) s] done" | tee -a $L
