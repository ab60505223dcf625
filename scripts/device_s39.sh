#!/usr/bin/env bash
# GPU machine, one call (~4 minutes; no full tier): memory="pooled" on its new default bound,
# claims-finalize-ahead (memory.py pool_bound_mode; anchor before), run where the pooled
# layout meets the lattice stage, the kernel variants and the walkers' lane entries, none of
# which had run on that bound: test_gpu_lattice.py -k pooled, test_gpu_variants.py -k pooled,
# test_gpu_walk_entry.py, then memcheck over sanitize_case.py 3 --lattice with the lanes pooled.
# No CUWFST_POOL_BOUND in the environment: the default is what runs.
# Carry .device/wheels, .device/COMMIT and the GPU module built here (.cache/cuwfst/cuwfst_gpu_sm90-*).
# $OUT: s39.log, tests*.log, memcheck1.log.
export NO_FULL=1
. scripts/device_common.sh
device_setup s39.log
unset CUWFST_POOL_BOUND
python3 -c "from cuwfst.decoder.memory import pool_bound_mode as p; print('pool bound', p())" | tee -a $L
gpu_tests tests1.log 120 "test_gpu_lattice -k pooled (default bound)" tests/test_gpu_lattice.py -k pooled
gpu_tests tests2.log 100 "test_gpu_variants -k pooled (default bound)" tests/test_gpu_variants.py -k pooled
gpu_tests tests3.log 100 "test_gpu_walk_entry (default bound)" tests/test_gpu_walk_entry.py
CUWFST_LANE_POOL=on memcheck_case memcheck1.log $(left 330) "memcheck 3 --lattice (lanes pooled, default bound)" 3 --lattice
echo "[$(since) s] done" | tee -a $L
