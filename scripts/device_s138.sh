#!/usr/bin/env bash
# GPU machine: issue 10, the last call of the session of 2026-12-05 04:55 (~280 s of device time left:
# no full tier). EarlyRescue (CUWFST_LATTICE_EARLY_RESCUE, off by default) checked on the GPU before it
# is measured: the new test_rows_rescued_beside_the_next_sub_batches (nine rows, sub-batches of 2, most
# rows overflowing the main instance: early on and off, finish worker and thread, the CPU's lattices),
# the lattice rescue tests, and test_k2_structure.py's GPU case, with the option on for the files.
# $OUT: s138.log, tests.tgz
. scripts/device_common.sh
NO_FULL=1 device_setup s138.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
echo "[$(since) s] built" | tee -a $L
timeout -s INT 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "rescue" -rf \
  > $OUT/tests_rescue.log 2>&1; echo "exit $?" >> $OUT/tests_rescue.log
CUWFST_LATTICE_EARLY_RESCUE=on timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/test_k2_structure.py tests/test_gpu_lattice.py -k "structure or overflowed_rows or radix_equals_segmented" -x -rf \
  > $OUT/tests_on.log 2>&1; echo "exit $?" >> $OUT/tests_on.log
for n in rescue on; do
  echo "[$n] $(tail -n 1 $OUT/tests_$n.log) $(grep -E "passed|failed" $OUT/tests_$n.log | tail -n 1)" | cut -c1-200 | tee -a $L
  grep -E "^FAILED|Error" $OUT/tests_$n.log | head -6 | cut -c1-220 | tee -a $L
done
pack_logs 'tests_*.log'
echo "[$(since) s] end" | tee -a $L
