#!/usr/bin/env bash
# GPU machine, one call on a fresh machine (~9.5 minutes): the device-side refill (branch refill)
# checked and timed, and the source lines of last session's HLG Nsight Compute report.
#   background: the full tier (~200 s)
#   0. (when .device/rep/hlg.ncu-rep was carried) its source page, top lines by warp-state samples
#   1. compute-sanitizer memcheck and racecheck on scripts/sanitize_refill.py
#   2. GPU tests TESTS (default: lanes with -k refill first, then the lanes and host files; TEST_CAP s)
#   3. benchmarks.continuous, full HLG, 32 lanes, stored order: padded, continuous, decode_all, refill,
#      decode_all_refill (REFILL_SEGMENTS: refill segment lengths, one run each)
#   4. GPU tests TESTS2 until the call's end (END2 s)
# Carry .device and .cache. $OUT: refill.log, tests.log, tests2.log, continuous.jsonl/md, hlg_top.txt, sanitizer logs
. scripts/device_common.sh
device_setup refill.log
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for rep in .device/rep/*.ncu-rep; do
  [ -f "$rep" ] && [ -n "$NCU" ] || break
  n=$(basename $rep .ncu-rep)
  "$NCU" -i $rep --page source --csv --print-source cuda,sass > /tmp/${n}_source.csv 2>/tmp/${n}.err
  python3 scripts/ncu_top_lines.py /tmp/${n}_source.csv 80 > $OUT/${n}_top.txt 2>&1
  echo "[$(since) s] $rep: $(wc -l < /tmp/${n}_source.csv) lines" | tee -a $L; head -30 $OUT/${n}_top.txt | cut -c1-220 | tee -a $L
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout ${SAN_CAP:-90} "$CS" --tool $tool --error-exitcode 9 python3 scripts/sanitize_refill.py > $OUT/refill-$tool.log 2>&1
  echo "sanitize_refill $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|refill|bad' $OUT/refill-$tool.log | tail -3 | tr '\n' ' ')" | cut -c1-300 | tee -a $L
done
echo "[$(since) s] sanitizers" | tee -a $L
timeout -s INT ${TEST_CAP:-200} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lanes.py -k refill -s -rf --maxfail=10 > $OUT/tests.log 2>&1
grep -sE "passed|failed|refill|rows" $OUT/tests.log | tail -6 | cut -c1-240 | tee -a $L
grep -sE "^FAILED" $OUT/tests.log | head -10 | cut -c1-240 | tee -a $L
echo "[$(since) s] refill tests" | tee -a $L
wait_full ${FULL_WAIT:-300}
S=$C/sim/shard-00000.npz
for seg in ${REFILL_SEGMENTS:-256}; do
  timeout -s INT $(left ${CONT_END:-470}) python3 -m benchmarks.continuous --graph $C/HLG.img --log-probs $S --lanes 32 --reps 3 \
    --baseline stored --modes ${CONT_MODES:-padded continuous decode_all refill decode_all_refill} --segment 32 --refill-segment $seg --check 4 \
    --json $OUT/continuous.jsonl --md $OUT/continuous.md 2>&1 | grep -v "^{" | tail -10 | tee -a $L
done
echo "[$(since) s] continuous" | tee -a $L
TESTS2=${TESTS2:-tests/test_gpu_lanes.py tests/test_gpu_host.py}
timeout -s INT $(left ${END2:-585}) python3 -m pytest -q -p no:cacheprovider -m gpu $TESTS2 -s -rf --maxfail=20 > $OUT/tests2.log 2>&1
grep -sE "passed|failed|GPU vs CPU|lanes:|rows compared|variants" $OUT/tests2.log | tail -8 | cut -c1-240 | tee -a $L
grep -sE "^FAILED" $OUT/tests2.log | head -20 | cut -c1-240 | tee -a $L
echo "[$(since) s] done" | tee -a $L
