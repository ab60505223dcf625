#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): the checks calls 1-2 of the session of
# 2026-12-02 10:08 left on the one-pass hand-out (8c3e61f and after):
#   while the HLG of the full tier builds: compute-sanitizer memcheck over scripts/sanitize_case.py 3
#   with every decoder pooled by the slots (4 lanes: the one-pass hand-out), the pooled memory
#   tests call 2's cap left (bins, the hand-out kernel, the rescue, the host log, auto; default
#   environment), test_gpu_faults.py
#   then the 256 utterances a call per 32 (benchmarks.memory's speed part, 3 passes):
#   pooled-slots-devlog against lazy, and the memory rows of both
# Carry .device. $OUT: s30c.log, memcheck.log, tests.log, faults.log, memory.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s30c.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=slots timeout -s INT 100 "$CS" --tool memcheck --leak-check no --error-exitcode 9 \
  python3 scripts/sanitize_case.py 3 > $OUT/memcheck.log 2>&1
echo "memcheck 3 (pooled, slots) exit $?: $(tail -2 $OUT/memcheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_memory.py \
  -k "bins_bound or handout_kernel or rescue_gives or host_memory or auto_keeps" -rf > $OUT/tests.log 2>&1
echo "pooled memory tests left by call 2 exit $?: $(grep -E "passed|failed" $OUT/tests.log | tail -1)" | tee -a $L
grep -E "^FAILED" $OUT/tests.log | head -4 | cut -c1-200 | tee -a $L
timeout -s INT 70 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_faults.py -rf > $OUT/faults.log 2>&1
echo "test_gpu_faults exit $?: $(grep -E "passed|failed" $OUT/faults.log | tail -1)" | tee -a $L
grep -E "^FAILED" $OUT/faults.log | head -4 | cut -c1-200 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left 560) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
  --reps 3 --check 2 --modes pooled-slots-devlog lazy --skip riva long > /tmp/mem_speed.txt 2>&1
grep -E "^\{" /tmp/mem_speed.txt | sed "s/^/{\"run\": \"speed\", \"row\": /; s/$/}/" >> $OUT/memory.jsonl
grep -vE "^\{" /tmp/mem_speed.txt | tail -16 | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
