#!/usr/bin/env bash
# GPU machine, one call on a fresh machine (~9.5 minutes): the claim-split kernels' rounds rule
# (Workspace::split_min) against even chunks ("new" vs "new_even"), same run, and the refill's
# racecheck again.
#   background: the full tier (~200 s)
#   1. racecheck on scripts/sanitize_refill.py (faulthandler on; SAN_CAP s), once per SAN_FILTERS kernel filter
#   2. GPU tests TESTS (TEST_CAP s)
#   3. gpu_speed, full HLG, uniform 32 x 250, variants new new_even; full TLG, 64 utts, batch 32, same
#   4. benchmarks.continuous, 32 lanes, stored order: stored, decode_all, decode_all_refill, once with
#      the default kernels and once with CUWFST_KERNELS=new_even
# Carry .device and .cache. $OUT: split.log, tests.log, speed.jsonl, continuous.jsonl/md, sanitizer logs
. scripts/device_common.sh
device_setup split.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
# SAN_FILTERS: racecheck runs of sanitize_refill.py, each with one kernel filter ("all": none;
# e.g. "kns=Refill" checks the refill kernels alone, "x:kns=Refill" all but them)
for f in ${SAN_FILTERS:-all}; do
  case $f in all) flt=();; x:*) flt=(--kernel-name-exclude "${f#x:}");; *) flt=(--kernel-name "$f");; esac
  t0=$(since)
  timeout ${SAN_CAP:-150} "$CS" --tool racecheck --error-exitcode 9 "${flt[@]}" python3 -X faulthandler scripts/sanitize_refill.py \
    > $OUT/racecheck-${f//[:=]/_}.log 2>&1
  echo "sanitize_refill racecheck [$f] rc=$? $(( $(since) - t0 )) s: $(grep -vE '^=========   ' $OUT/racecheck-${f//[:=]/_}.log | tail -4 | tr '\n' ' ')" | cut -c1-400 | tee -a $L
done
echo "[$(since) s] sanitizers" | tee -a $L
TESTS=${TESTS:-tests/test_gpu_variants.py tests/test_gpu_chain.py tests/test_gpu_epsilon.py tests/test_gpu.py}
timeout -s INT ${TEST_CAP:-200} python3 -m pytest -q -p no:cacheprovider -m gpu $TESTS ${TESTS_K:+-k "$TESTS_K"} -s -rf --maxfail=20 > $OUT/tests.log 2>&1
grep -sE "passed|failed|GPU vs CPU|rows compared|variants" $OUT/tests.log | tail -8 | cut -c1-240 | tee -a $L
grep -sE "^FAILED" $OUT/tests.log | head -10 | cut -c1-240 | tee -a $L
echo "[$(since) s] tests" | tee -a $L
wait_full ${FULL_WAIT:-300}
S=$C/sim/shard-00000.npz
timeout -s INT $(left ${HLG_END:-360}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $S --uniform 250 \
  --utts 32 --batch 32 --reps 5 --check 2 --profile --variants ${VARIANTS:-new new_even} --json $OUT/speed.jsonl 2>&1 \
  | grep -v "^{" | tail -22 | tee -a $L
[ "${TLG:-1}" = 0 ] || timeout -s INT $(left ${TLG_END:-420}) python3 -m benchmarks.gpu_speed --graph $C/TLG.img --log-probs $S \
  --utts 64 --batch 32 --reps 3 --check 2 --profile --variants ${VARIANTS:-new new_even} --json $OUT/speed.jsonl 2>&1 \
  | grep -v "^{" | tail -26 | tee -a $L
echo "[$(since) s] speed" | tee -a $L
for k in ${CONT_KERNELS:-new new_even}; do
  CUWFST_KERNELS=$k timeout -s INT $(left ${CONT_END:-585}) python3 -m benchmarks.continuous --graph $C/HLG.img --log-probs $S --lanes 32 --reps 3 \
    --baseline stored --modes ${CONT_MODES:-decode_all decode_all_refill} --segment 32 --refill-segment 256 --check 4 \
    --json $OUT/continuous.jsonl --md $OUT/continuous.md 2>&1 | grep -v "^{" | tail -5 | sed "s/^/[$k] /" | tee -a $L
done
echo "[$(since) s] done" | tee -a $L
