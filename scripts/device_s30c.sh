#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine; trimmed to the session's last 547 s of
# device time: no riva row, HLG only, one speed order): the next frontiers sized by the claims
# (CUWFST_POOL_BOUND=claims, types.cuh Workspace::pool_late; benchmark mode pooled-late = that with
# the winners log on the device); prediction: docs/speed-notes.md "Next frontiers by the claims,
# handed out by ExpandKernel's last CTA", written before this call.
#   while the full tier builds: the claims test by name (192 lanes: the two-round hand-out; 32
#   lanes: the one-round one), test_gpu.py with every decoder pooled by the claims (capped),
#   compute-sanitizer memcheck over scripts/sanitize_case.py 3 pooled by the claims
#   then fresh-process memory at batch 32: pooled-late (RIVA=1: riva first, which needs the TLG)
#   then HLG uniform 32 x 250, --profile, one process: lazy / pooled-slots-devlog / pooled-late
#   (REVERSE=1: then reversed; DATASET=1: then the 256 utterances a call per 32, pooled-late
#   against lazy, until END)
# Carry .device. $OUT: s30c.log, tests*.log, memcheck.log, memory.jsonl.
[ -n "${RIVA:-}" ] || export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s30c.log
timeout -s INT 110 python3 -m pytest -q -p no:cacheprovider -m gpu \
  "tests/test_gpu_memory.py::test_pooled_next_frontiers_by_the_claims_pause_after_the_expansion" -s -rf \
  > $OUT/tests1.log 2>&1
echo "claims test exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
grep -E "^FAILED|^E  " $OUT/tests1.log | head -8 | cut -c1-250 | tee -a $L
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims timeout -s INT $(left ${TEST_END:-210}) \
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu (every decoder pooled, claims) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -6; } | cut -c1-220 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims timeout -s INT $(left ${MEMCHECK_END:-270}) "$CS" --tool memcheck --leak-check no \
  --error-exitcode 9 python3 scripts/sanitize_case.py 3 > $OUT/memcheck.log 2>&1
echo "memcheck 3 (pooled, claims) exit $?: $(tail -2 $OUT/memcheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
wait_full 340; echo "[$(since) s] full tier" | tee -a $L
[ -z "${RIVA:-}" ] || mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled-late --modes pooled-late --skip riva speed long
echo "[$(since) s] memory" | tee -a $L
ORDERS=("lazy pooled-slots-devlog pooled-late")
[ -z "${REVERSE:-}" ] || ORDERS+=("pooled-late pooled-slots-devlog lazy")
for order in "${ORDERS[@]}"; do
  timeout -s INT $(left ${UNIFORM_END:-425}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    --uniform 250 --utts 32 --batch 32 --reps 7 --check 1 --profile --memory $order > /tmp/uni.txt 2>&1
  grep -vE "^\{" /tmp/uni.txt | grep -E "kernel ms|B=32|CPU check|Error" | cut -c1-230 | tee -a $L
  grep -E "^\{" /tmp/uni.txt | sed "s/^/{\"order\": \"$order\", \"row\": /; s/$/}/" >> $OUT/uniform.jsonl
done
echo "[$(since) s] uniform" | tee -a $L
if [ -n "${DATASET:-}" ]; then
  timeout -s INT $(left ${END:-580}) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    --batch 32 --reps 3 --check 2 --modes pooled-late lazy --skip riva long > /tmp/mem_speed.txt 2>&1
  grep -E "^\{" /tmp/mem_speed.txt | sed "s/^/{\"run\": \"speed\", \"row\": /; s/$/}/" >> $OUT/memory.jsonl
  grep -vE "^\{" /tmp/mem_speed.txt | tail -14 | cut -c1-200 | tee -a $L
fi
echo "[$(since) s] done" | tee -a $L
