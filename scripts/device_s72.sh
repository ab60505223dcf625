#!/usr/bin/env bash
# GPU machine, a short call (~5 minutes), the session's last: the final code (s70's GPU code: the
# max from the trim's anchor by MaxKernel's slot walk; MaxTokensKernel removed) through the GPU
# files s70 did not run on it: test_gpu_trim.py whole (the on/off test as it now stands),
# test_gpu_lanes.py whole (streams and continuous batching), test_gpu_epsilon.py, test_gpu_variants.py,
# test_gpu_memory.py (capped), and memcheck over a lattice case.
# Carry .device/wheels, .device/pylib, .device/COMMIT and .cache (the modules built here).
# $OUT: s72.log, tests*.log, memcheck.log.
export NO_FULL=1
. scripts/device_common.sh
device_setup s72.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 40 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 80 "test_gpu_lanes.py (whole)" tests/test_gpu_lanes.py
gpu_tests tests3.log 45 "test_gpu_epsilon.py (whole)" tests/test_gpu_epsilon.py
gpu_tests tests4.log 60 "test_gpu_variants.py (whole)" tests/test_gpu_variants.py
gpu_tests tests5.log 110 "test_gpu_memory.py (capped)" tests/test_gpu_memory.py
SANITIZE_SEEDS=2 lattice_memcheck 70
echo "[$(since) s] done" | tee -a $L
