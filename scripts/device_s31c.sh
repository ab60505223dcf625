#!/usr/bin/env bash
# GPU machine, one call (~6 minutes): the tests of test_gpu_memory.py and test_gpu_faults.py that
# device_s31b.sh's 200 s cap left (.device/rest_ids.txt, in collection order), capped at CAP s.
export NO_FULL=1
. scripts/device_common.sh
device_setup s31c.log
timeout -s INT ${CAP:-300} python3 -m pytest -q -p no:cacheprovider -m gpu $(cat .device/rest_ids.txt) -s -rf \
  > $OUT/tests.log 2>&1
echo "rest of memory + faults exit $?: $(grep -E "passed|failed" $OUT/tests.log | tail -1)" | tee -a $L
grep -E "^FAILED|^E  " $OUT/tests.log | head -8 | cut -c1-250 | tee -a $L
grep -oE "^tests/[^ ]+ (PASSED|FAILED)" $OUT/tests.log | tail -2 | tee -a $L
echo "[$(since) s] done" | tee -a $L
