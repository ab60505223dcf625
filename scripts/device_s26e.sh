#!/usr/bin/env bash
# GPU machine, one short call: branch pool-anchor (prediction: docs/speed-notes.md, "The
# admissible count against the trim's anchor"). Exactness only (no full tier): the anchor test,
# the admit tests beside it, then test_gpu.py whole with CUWFST_POOL_BOUND=anchor. $OUT: s26e.log, tests*.log.
NO_FULL=1
. scripts/device_common.sh
device_setup s26e.log
# (the anchor test by name first: its first run, 99d5873, selected it with the admit tests by -k,
# which come first in the file, and the cap stopped the run before it)
timeout -s INT $(left 100) python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/test_gpu_memory.py::test_pooled_regions_counted_against_the_trims_anchor -s -rf > $OUT/tests1.log 2>&1
echo "memory tests exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
grep -E "^FAILED|Error" $OUT/tests1.log | head -6 | cut -c1-250 | tee -a $L
CUWFST_POOL_BOUND=anchor timeout -s INT $(left 215) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py \
  -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu.py (anchor) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -4; } | cut -c1-220 | tee -a $L
echo "[$(since) s] done" | tee -a $L
