#!/usr/bin/env bash
# (Written 2026-12-03 08:47 and not run: that session's device time ran out.) GPU machine, one
# call (~9 minutes on a fresh machine), issue 9: the GPU files that touch the pooled layout, whole,
# at memory="pooled"'s new defaults (pooled lanes of 2 x main_q, the device log), with the pool
# models' caps fixed (GpuInstance.pool_caps). s55 ran test_gpu.py pooled whole (334 passed), 43
# tests of the variants/lattice pooled subset and 43 of test_gpu_memory.py's 61 (19 failed on the
# model's caps; s57 re-ran 6 of those: passed); the rest never ran at these defaults.
#   test_gpu_memory.py (whole), test_gpu_variants.py -k pooled, test_gpu_lattice.py -k pooled,
#   test_gpu_faults.py, and test_gpu_lanes.py under CUWFST_MEMORY=pooled (streams and continuous
#   batching on a pooled decoder take the static layout), then memcheck over sanitize_case.py 2 with
#   every decoder pooled
# Carry .device (wheels, COMMIT, data). $OUT: s58.log, tests*.log, memcheck1.log.
export NO_FULL=1
. scripts/device_common.sh
device_setup s58.log
gpu_tests tests1.log 300 "test_gpu_memory.py (whole)" tests/test_gpu_memory.py
gpu_tests tests2.log 120 "test_gpu_variants.py + test_gpu_lattice.py -k pooled" tests/test_gpu_variants.py \
  tests/test_gpu_lattice.py -k pooled
CUWFST_MEMORY=pooled gpu_tests tests3.log 100 "test_gpu_faults.py + test_gpu_lanes.py, memory pooled" \
  tests/test_gpu_faults.py tests/test_gpu_lanes.py
CUWFST_MEMORY=pooled CUWFST_LANE_POOL=on memcheck_case memcheck1.log 40 "memcheck 2, every decoder pooled" 2
echo "[$(since) s] done" | tee -a $L
