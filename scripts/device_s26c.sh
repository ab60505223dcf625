#!/usr/bin/env bash
# GPU machine, one call: branch s26 (c983960), the GPU test files device_s26.sh did not run, capped,
# then compute-sanitizer memcheck (lattice case) and racecheck. $OUT: s26c.log, tests.log, *.log.
NO_FULL=1
. scripts/device_common.sh
device_setup s26c.log
timeout -s INT 330 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py tests/test_gpu_memory.py \
  tests/test_gpu_faults.py tests/test_gpu_variants.py tests/test_gpu_walk_entry.py tests/test_gpu_host.py \
  tests/test_gpu_trim.py tests/test_gpu_scan_trace.py -s > $OUT/tests.log 2>&1
echo "tests exit $?" | tee -a $L
{ grep -E "mismatch|identical" $OUT/tests.log | grep -v "^E " | head -8; grep -E "^FAILED" $OUT/tests.log | head -6
  grep -E "passed|failed" $OUT/tests.log | tail -1; } | cut -c1-220 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout $(left 500) "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 2 --lattice 2>&1 | tail -6 | tee $OUT/memcheck.log
echo "memcheck exit ${PIPESTATUS[0]}" | tee -a $L
timeout $(left 585) "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 2>&1 | tail -6 | tee $OUT/racecheck.log
echo "racecheck exit ${PIPESTATUS[0]}" | tee -a $L
echo "[$(since) s] done" | tee -a $L
