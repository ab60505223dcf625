#!/usr/bin/env bash
# GPU machine, one call on a fresh machine (~8 minutes): refill="device" as continuous
# batching's default (segment 256), checked and timed.
#   background: the full tier (~200 s)
#   1. racecheck (SAN_CAP s each) on scripts/sanitize_case.py 1 --lanes (continuous, epsilon-free,
#      now the device's refill) and 1 --eps --lanes (does the epsilon + continuous case stop
#      under racecheck as sanitize_refill.py does?)
#   2. GPU tests TESTS (TEST_CAP s)
#   3. benchmarks.continuous, full HLG, 32 lanes, stored order: stored, decode_all (host refill,
#      segment 32), decode_all_refill (the new default: device refill, segment 256)
# Carry .device and .cache. $OUT: final.log, tests.log, continuous.jsonl/md, racecheck logs
. scripts/device_common.sh
device_setup final.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for args in "1 --lanes" "1 --eps --lanes"; do
  n=rc-${args// /}; t0=$(since)
  timeout ${SAN_CAP:-50} "$CS" --tool racecheck --error-exitcode 9 --log-file $OUT/$n.txt python3 -X faulthandler \
    scripts/sanitize_case.py $args > $OUT/$n-app.txt 2>&1
  echo "racecheck sanitize_case $args rc=$? $(( $(since) - t0 )) s; app: $(tail -c 300 $OUT/$n-app.txt | tr '\n' ' ')" | tee -a $L
  grep -E "SUMMARY|Error" $OUT/$n.txt | head -3 | tee -a $L
done
echo "[$(since) s] sanitizers" | tee -a $L
TESTS=${TESTS:-tests/test_gpu_lanes.py tests/test_gpu_host.py tests/test_gpu_faults.py tests/test_gpu_memory.py tests/test_streaming_bench.py}
timeout -s INT ${TEST_CAP:-240} python3 -m pytest -q -p no:cacheprovider -m gpu $TESTS -s -rf --maxfail=20 > $OUT/tests.log 2>&1
grep -sE "passed|failed|GPU vs CPU|lanes:|rows compared" $OUT/tests.log | tail -8 | cut -c1-240 | tee -a $L
grep -sE "^FAILED" $OUT/tests.log | head -20 | cut -c1-240 | tee -a $L
echo "[$(since) s] tests" | tee -a $L
wait_full ${FULL_WAIT:-330}
S=$C/sim/shard-00000.npz
timeout -s INT $(left ${CONT_END:-470}) python3 -m benchmarks.continuous --graph $C/HLG.img --log-probs $S --lanes 32 --reps 3 \
  --baseline stored --modes decode_all decode_all_refill --segment 32 --refill-segment 256 --check 4 \
  --json $OUT/continuous.jsonl --md $OUT/continuous.md 2>&1 | grep -v "^{" | tail -5 | tee -a $L
echo "[$(since) s] done" | tee -a $L
