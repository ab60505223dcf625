#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine): what the session of 2026-12-02 10:08
# owed on its code and the 256-utterance speed of the claims' hand-out in FinalizeKernel.
#   while the HLG of the full tier builds: test_gpu_memory.py whole (default environment; the
#   pooled modes' tests, MaxKernel's last block through GridLastCta), test_gpu_faults.py,
#   test_gpu.py (default), racecheck over scripts/sanitize_case.py 1 pooled by claims-finalize
#   then benchmarks.memory --batch 32 (speed over the 256 utterances, memory, no riva, no long
#   form): lazy / pooled-late-fin / pooled-slots-devlog, one process
# Carry .device. $OUT: s31b.log, tests*.log, racecheck.log, memory.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s31b.log
timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_memory.py tests/test_gpu_faults.py \
  -s -rf > $OUT/tests1.log 2>&1
echo "memory + faults exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
grep -E "^FAILED|^E  " $OUT/tests1.log | head -8 | cut -c1-250 | tee -a $L
timeout -s INT $(left 330) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu (default) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -6; } | cut -c1-220 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize timeout -s INT $(left 390) "$CS" --tool racecheck \
  --error-exitcode 9 python3 scripts/sanitize_case.py 1 > $OUT/racecheck.log 2>&1
echo "racecheck 1 (pooled, claims-finalize) exit $?: $(tail -2 $OUT/racecheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left ${END:-570}) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --batch 32 --reps 3 --check 4 --skip riva long --modes lazy pooled-late-fin pooled-slots-devlog > /tmp/mem256.txt 2>&1
grep -vE "^\{" /tmp/mem256.txt | grep -E "\||Error|s a pass|mismatch" | cut -c1-230 | tee -a $L
grep -E "^\{" /tmp/mem256.txt >> $OUT/memory.jsonl
echo "[$(since) s] done" | tee -a $L
