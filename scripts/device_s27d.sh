#!/usr/bin/env bash
# GPU machine, one short call (no full tier): the tests that device_s27c.sh's cap cut, listed in
# scripts/s27d_tests.txt (test_gpu_faults whole, test_cli's GPU test, test_gpu_lattice's pruning
# tests, test_gpu_memory from its 29th test on), capped at TEST_CAP s. Carry .device (the ARPA
# can stay behind) and the module built here.
NO_FULL=1
. scripts/device_common.sh
device_setup s27d.log
set -f
timeout -s INT $(left ${TEST_CAP:-300}) python3 -m pytest -v -p no:cacheprovider -m gpu $(cat scripts/s27d_tests.txt) \
  -s -rf > $OUT/tests.log 2>&1
echo "tests exit $?" | tee -a $L
{ grep -E "mismatch|identical" $OUT/tests.log | grep -v "^E " | head -6; grep -E "^FAILED" $OUT/tests.log | head -6
  grep -cE " PASSED" $OUT/tests.log; grep -E " PASSED| FAILED" $OUT/tests.log | tail -1; grep -E "passed|failed" $OUT/tests.log | tail -1; } | cut -c1-220 | tee -a $L
echo "[$(since) s] done" | tee -a $L
