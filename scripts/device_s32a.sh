#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine), for the next session: claims-finalize-ahead
# (built in the session of 2026-12-02 12:24, never run on a GPU; prediction in docs/speed-notes.md,
# "The prefix beside the first loads").
#   while the HLG of the full tier builds: the claims test for claims-finalize and -ahead (the
#   former's FinalizeLate was refactored onto LateSettle after its last GPU run), test_gpu.py
#   with every decoder pooled by claims-finalize-ahead, memcheck the same way
#   then fresh-process memory at batch 32: pooled-late-ahead (RIVA=1: riva first; needs the TLG)
#   then the full tier's 256 rows (gpu_speed --utts 256 --profile), lazy / pooled-late-fin /
#   pooled-late-ahead, one process, then reversed; then the uniform 32 x 250 the same way
# Carry .device. $OUT: s32a.log, tests*.log, memcheck.log, memory.jsonl, speed.jsonl.
[ -n "${RIVA:-}" ] || export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s32a.log
timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider -m gpu -k "claims-finalize" \
  "tests/test_gpu_memory.py::test_pooled_next_frontiers_by_the_claims_pause_after_the_expansion" -s -rf \
  > $OUT/tests1.log 2>&1
echo "claims-finalize(-ahead) claims tests exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
grep -E "^FAILED|^E  " $OUT/tests1.log | head -8 | cut -c1-250 | tee -a $L
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead timeout -s INT $(left 200) \
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu (every decoder pooled, claims-finalize-ahead) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -6; } | cut -c1-220 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead timeout -s INT $(left 260) "$CS" --tool memcheck \
  --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 3 > $OUT/memcheck.log 2>&1
echo "memcheck 3 (pooled, claims-finalize-ahead) exit $?: $(tail -2 $OUT/memcheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
[ -z "${RIVA:-}" ] || mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled-late-ahead --modes pooled-late-ahead --skip riva speed long
for shape in "--utts 256" "--uniform 250 --utts 32"; do
  for order in "lazy pooled-late-fin pooled-late-ahead" "pooled-late-ahead pooled-late-fin lazy"; do
    timeout -s INT $(left ${END:-570}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
      $shape --batch 32 --reps 5 --check 1 --profile --memory $order > /tmp/sp.txt 2>&1
    grep -vE "^\{" /tmp/sp.txt | grep -E "kernel ms|B=32|CPU check|Error" | sed "s/^/[$shape] /" | cut -c1-240 | tee -a $L
    grep -E "^\{" /tmp/sp.txt | sed "s/^/{\"shape\": \"$shape\", \"order\": \"$order\", \"row\": /; s/$/}/" >> $OUT/speed.jsonl
  done
done
echo "[$(since) s] done" | tee -a $L
