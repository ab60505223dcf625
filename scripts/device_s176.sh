#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 06:26. One call:
#   1. the new test (CUWFST_LATTICE_LOG=side: each step's copy of S_t on a side stream, its
#      FinalizeKernel writing the scalars and a copy job) and the log tests at the default; then
#      test_gpu_lattice.py whole under CUWFST_LATTICE_LOG=side (capped), beside the small tier's build;
#   2. the small and the full HLG (256 sim rows, batch 32, --profile): the default against side,
#      c14 (CUWFST_LATTICE_AFTER_C14=index, s175: within noise), side+c14, split, the default again.
# Predictions (written before any run): exact. side against the default: the full HLG's lattice batch
# -0.5 to -1.0 ms (s175: a second copy on the chain cost +1.1 ms; the copy leaves the chain, the scalars
# stay in FinalizeKernel's last CTA, which s172's fold showed costs little apart from the copy); the
# small HLG -0.3 to -0.8 ms; the 1-best unchanged. If side is no faster, the copy's cost was its launch
# on the chain and the fork/join (two event nodes a step) costs as much.
# Stage: .device/wheels. Carry .device. $OUT: s176.log, tests.tgz, ab_small.*, ab_full.*
. scripts/device_common.sh
END=${END:-585}
FULL_GRAPHS=hlg device_setup s176.log
small_tier &
gpu_tests tests_side_new.log 120 "the side log's test and the log tests (default env)" tests/test_gpu_lattice.py \
  -k "log_on_a_side_stream or log_in_finalize or one_grid or measurement_switches"
CUWFST_LATTICE_LOG=side gpu_tests tests_side.log ${TEST_CAP:-250} \
  "test_gpu_lattice.py under CUWFST_LATTICE_LOG=side" tests/test_gpu_lattice.py
wait
echo "[$(since) s] small tier, tests" | tee -a $L
SIDES=("side:CUWFST_LATTICE_LOG=side" "c14:CUWFST_LATTICE_AFTER_C14=index"
       "sidec14:CUWFST_LATTICE_LOG=side,CUWFST_LATTICE_AFTER_C14=index" "split:CUWFST_LATTICE_HOST_SPLIT=on")
SUITE=${SUITE:-0} ab_suite_full 150 "${SIDES[@]}"
[ "${SUITE:-0}" != 0 ] || pack_logs 'tests_*.log'
echo "[$(since) s] end" | tee -a $L
