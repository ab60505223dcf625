#!/usr/bin/env bash
# GPU machine: issue 10, what the rest of test_gpu_lattice.py says under CUWFST_LATTICE_RECORDS=after
# (s121/s122 ran its -k after tests and the goldens, pruning, long-input and random-lattice tests):
# the other tests, to learn which read the in-step stage's own counters before the switch could be
# the default. No full tier. Until END (default 230) s. Carry .device. $OUT: rest.log, tests_rest.log
. scripts/device_common.sh
END=${END:-230}
NO_FULL=1 device_setup rest.log
CUWFST_LATTICE_RECORDS=after gpu_tests tests_rest.log $(left $((END - 5))) "the rest under after" \
  tests/test_gpu_lattice.py -k "not after and not goldens and not pruning and not long_inputs and not random_lattices_gpu_equals_cpu"
grep -E "^FAILED|^ERROR" $OUT/tests_rest.log | cut -c1-200 | head -40 | tee -a $L
