#!/usr/bin/env bash
# GPU machine: issue 10, for the session after 2026-12-06 04:15. One call:
#   1. test_gpu_lattice.py whole under CUWFST_LATTICE_AFTER_C14=index (the one grid's c14 steps in shared
#      index-only tables; s174 ran them exact but capped, 857 of 1,016) beside the small tier; then the
#      records tests at the default;
#   2. the small HLG (256 sim rows, batch 32, --profile): the default (one grid, c14 on global tables)
#      against c14index, the host split, the classes, each profiled side beside it;
#   3. the full HLG: the same, once its build is done (NO_FULL=1 skips; SUITE=1 runs the whole GPU suite
#      and test_gpu_eps_prune.py beside the full tier's build first).
# Predictions (written before any run): exact. c14index against the default: the one launch's warp
# cycles -2 to -4 % (c14's 3.0 G a pass under the classes in shared memory; on global tables its share
# of the one launch's +4.6 G), the build 0.31 -> 0.2-0.25 ms on the full HLG, the lattice batch -0.2
# to -0.5 ms (inside a run's spread: read the profile's bucket and the timeline). The split: the
# batch unchanged within 0.5 ms (s174). Classes: +1 ms on the full HLG (s173). logx (each step's log copy
# run twice, the same values): +0.3 to +1.0 ms a lattice batch on the full HLG, the copy's cost on the
# step's chain, so what taking it off the chain (speed-notes, Next 3) could save at most.
# Stage: .device/wheels. Carry .device. $OUT: s175.log, tests.tgz, ab_small.*, ab_full.*
. scripts/device_common.sh
END=${END:-585}
FULL_GRAPHS=hlg device_setup s175.log
small_tier &
CUWFST_LATTICE_AFTER_C14=index gpu_tests tests_c14.log ${TEST_CAP:-240} \
  "test_gpu_lattice.py under CUWFST_LATTICE_AFTER_C14=index" tests/test_gpu_lattice.py
K="records_after or one_grid or phase_sums"
gpu_tests tests_default.log 90 "test_gpu_lattice.py -k '$K'" tests/test_gpu_lattice.py -k "$K"
wait
echo "[$(since) s] small tier, tests" | tee -a $L
# (TL_SIDES: the A/B's sides as unquoted words, in place of these; SUITE=1 (here 0 by default), SUITE_CAP,
# NO_FULL: ab_suite_full)
SIDES=("c14:CUWFST_LATTICE_AFTER_C14=index" "c14prof:CUWFST_LATTICE_AFTER_C14=index,CUWFST_LATTICE_AFTER_PROF=on"
       "prof:CUWFST_LATTICE_AFTER_PROF=on" "split:CUWFST_LATTICE_HOST_SPLIT=on" "classes:CUWFST_LATTICE_AFTER_GRID=classes"
       "logx:CUWFST_LATTICE_LOG_EXTRA=copy")
SUITE=${SUITE:-0} ab_suite_full 150 "${SIDES[@]}"
[ "${SUITE:-0}" != 0 ] || pack_logs 'tests_*.log'  # (the suite's wait packs them)
echo "[$(since) s] end" | tee -a $L
