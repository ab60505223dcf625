#!/usr/bin/env bash
# GPU machine (~7 minutes, no full tier), the session's last call: the reverted scan.cuh (s86's:
# the weights-only search, two tokens a group, 8-ary in every round) over test_gpu_trim.py whole,
# test_gpu.py -k random, test_gpu_variants.py whole, compute-sanitizer memcheck and racecheck over
# sanitize_trim.py, and the GPU lattice file's k2 goldens, candidates and GPU pruning.
# Carry .device. $OUT: s88.log, tests.tgz
NO_FULL=1
. scripts/device_common.sh
device_setup s88.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 50 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
grep -E "^E |label bound:" $OUT/tests1.log | head -12 | cut -c1-240 | tee -a $L
gpu_tests tests2.log 30 "test_gpu.py -k random" tests/test_gpu.py -k random
gpu_tests tests3.log 165 "test_gpu_variants.py (whole)" tests/test_gpu_variants.py
grep -E "mismatch|rows" $OUT/tests3.log | grep -v "^E " | tail -2 | cut -c1-200 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout -s INT 60 "$CS" --tool $tool --error-exitcode 9 python3 scripts/sanitize_trim.py > $OUT/tests_$tool.log 2>&1
  echo "$tool sanitize_trim exit $?: $(tail -2 $OUT/tests_$tool.log | tr '\n' ' ')" | cut -c1-300 | tee -a $L
done
gpu_tests tests4.log $(left 440) "test_gpu_lattice.py -k 'cand or random_lattices or gpu_pruning or k2'" tests/test_gpu_lattice.py \
  -k "cand or random_lattices or gpu_pruning or k2"
pack_logs 'tests*.log'
echo "[$(since) s] done" | tee -a $L
