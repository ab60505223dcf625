#!/usr/bin/env bash
# GPU machine: issue 10, the records after the search (CUWFST_LATTICE_RECORDS=after,
# cuwfst/csrc/include/cuwfst/lattice_after.cuh), its first run, in one call:
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. test_gpu_lattice.py -k after (the switch's own tests: random batches, large frontiers in every
#      table class, the log's and tables' growth, the pooled pause); then, the whole process under
#      CUWFST_LATTICE_RECORDS=after, the k2 goldens, the GPU-pruning tests and the random lattices
#   3. compute-sanitizer memcheck over the lattice sanitize cases under the switch
#   4. lattice_speed --utts 256 --env-ab after: the default decoder (in-step stage) against the pass,
#      the two sides' lattices compared, same call
# Until END (default 590) s. Carry .device. $OUT: after.log, tests_*.log, memcheck.log, lat.jsonl
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup after.log
gpu_tests tests_after.log 150 "records-after tests" tests/test_gpu_lattice.py -k "after"
CUWFST_LATTICE_RECORDS=after gpu_tests tests_env.log 150 "lattice tests under after" \
  tests/test_gpu_lattice.py -k "goldens or pruning or long_inputs or random_lattices_gpu_equals_cpu"
CUWFST_LATTICE_RECORDS=after lattice_memcheck 90
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl $((END - 5)) --utts 256 --env-ab after:CUWFST_LATTICE_RECORDS=after
echo "[$(since) s] lattice_speed" | tee -a $L
