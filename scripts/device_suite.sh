#!/usr/bin/env bash
# GPU machine: the whole GPU suite and compute-sanitizer, in two calls (PART=a, then PART=b on the
# same machine if it is still warm; either alone works). Every GPU-marked test file runs once:
#   a: tests/test_gpu.py, _scan_trace, _epsilon, _chain, _trim, _walk_entry, _faults, test_cli.py,
#      test_blank_skip.py, test_streaming_bench.py, test_gpu_variants.py (the longest, last); then memcheck over sanitize_case.py 2 --eps
#      --lanes and racecheck over sanitize_case.py 1 --lanes
#   b: tests/test_gpu_lanes.py, _lattice, _memory; then memcheck over sanitize_case.py 3 --lattice
#      and racecheck over sanitize_case.py 1 --lattice
# Each file's pass/fail line and its own tallies (lines with "mismatch") go to $OUT/suite_PART.log,
# its whole output to $OUT/PART_FILE.log (in $OUT/PART_logs.tgz at the end). Carry .device (wheels; pylib: kaldiio for the CLI's
# test data) and .cache. END (default 540): the sanitizers get what the tests leave, capped.
# FILES (test file names without .py) replaces the part's list; SAN_A / SAN_B the sanitizers' cases.
. scripts/device_common.sh
PART=${PART:-a}; END=${END:-540}
# (no full tier: the suite does not read it; FULL=1 starts its build in the background for a
# script that follows in the same call)
if [ -n "${FULL:-}" ]; then device_setup suite_$PART.log; else NO_FULL=1 device_setup suite_$PART.log; fi
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
if [ -n "${FILES:-}" ]; then
  SAN=("${SAN_A:-2 --eps --lanes}" "${SAN_B:-1 --lanes}")
elif [ $PART = a ]; then
  # (the short files before test_gpu_variants, the longest: a cap cuts its tail, not a whole file;
  # at 003113e END=420 cut it at 702 tests and test_gpu_faults never started)
  FILES="test_gpu test_gpu_scan_trace test_gpu_epsilon test_gpu_chain test_gpu_trim test_gpu_walk_entry test_gpu_faults \
    test_cli test_blank_skip test_streaming_bench test_gpu_variants"
  SAN=("2 --eps --lanes" "1 --lanes")
else
  FILES="test_gpu_lanes test_gpu_lattice test_gpu_memory"
  SAN=("3 --lattice" "1 --lattice")
fi
for f in $FILES; do
  timeout -s INT $(left $((END - 150))) python3 -m pytest -q -p no:cacheprovider -m gpu tests/$f.py -s -rf > $OUT/${PART}_$f.log 2>&1
  { grep -E "mismatch" $OUT/${PART}_$f.log | grep -v "^E " | sort | uniq -c | sort -rn | head -6 | cut -c1-220
    grep -E "^FAILED|^ERROR" $OUT/${PART}_$f.log | head -4 | cut -c1-220
    echo "$f: $(grep -E "passed|failed|error" $OUT/${PART}_$f.log | tail -1 | cut -c1-160) [$(since) s]"; } | tee -a $L
done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for i in 0 1; do
  tool=$([ $i = 0 ] && echo memcheck || echo racecheck); cap=$(( $(left $END) / (2 - i) ))
  timeout -s INT $cap "$CS" --tool $tool $([ $i = 0 ] && echo "--leak-check no") --error-exitcode 9 \
    python3 scripts/sanitize_case.py ${SAN[$i]} > $OUT/${PART}_$tool.log 2>&1
  echo "$tool (sanitize_case.py ${SAN[$i]}): exit $? within ${cap} s; $(tail -2 $OUT/${PART}_$tool.log | tr '\n' ' ' | cut -c1-200) [$(since) s]" | tee -a $L
done
# at most 8 files come back: the per-file logs in one archive
(cd $OUT && tar -czf ${PART}_logs.tgz ${PART}_*.log && rm -f ${PART}_*.log)
