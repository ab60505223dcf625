#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 04:15. One call:
#   1. the records-pass tests (test_gpu_lattice.py -k "records_after or one_grid or phase_sums") under the
#      new default (the one grid) and again under CUWFST_LATTICE_AFTER_GRID=classes, beside the small tier;
#   2. the small HLG (256 sim rows, batch 32, --profile): the one grid (default) against the classes, each
#      also with CUWFST_LATTICE_AFTER_PROF=on (the timeline);
#   3. the whole GPU suite at the new default, and test_gpu_eps_prune.py, beside the full HLG's build;
#   4. the full HLG: the same as 2.
# Predictions (written before any run): exact everywhere, every test passes. s172's timeline put the
# classes' summed CTA time at ~3,730 CTA-ms a pass on the full HLG (7.1 ms at 528 resident CTAs) against
# a 9.5 ms pass (plan start to tail end); so the one grid's pass 7.3-8.0 ms there (the clear and build
# now alone before it, ~0.2 ms; c14's steps on global tables, +1-2 % of the warps' cycles), the profile's
# lat_persist bucket 9.6 -> 7.5-8.2, the lattice batch -1.4 to -2.1 ms (41.3 -> 39.2-39.9, x1.70-1.73).
# Small HLG: pass 6.7 -> 5.3-5.8 ms, lattice batch -0.9 to -1.4 ms.
# Stage: .device/wheels. Carry .device. $OUT: s173.log, tests.tgz, ab_small.*, ab_full.*
. scripts/device_common.sh
END=${END:-585}
FULL_GRAPHS=hlg device_setup s173.log
small_tier &
K="records_after or one_grid or phase_sums"
gpu_tests tests_one.log ${TEST_CAP:-120} "test_gpu_lattice.py -k '$K' (one grid)" tests/test_gpu_lattice.py -k "$K"
CUWFST_LATTICE_AFTER_GRID=classes gpu_tests tests_classes.log ${TEST_CAP:-120} \
  "test_gpu_lattice.py -k '$K' under CUWFST_LATTICE_AFTER_GRID=classes" tests/test_gpu_lattice.py -k "$K"
wait
echo "[$(since) s] small tier, records tests" | tee -a $L
# (TL_SIDES: the A/B's sides as unquoted words, in place of these; SUITE=0, SUITE_CAP, NO_FULL: ab_suite_full)
SIDES=("classes:CUWFST_LATTICE_AFTER_GRID=classes" "prof:CUWFST_LATTICE_AFTER_PROF=on"
       "clprof:CUWFST_LATTICE_AFTER_GRID=classes,CUWFST_LATTICE_AFTER_PROF=on")
ab_suite_full 120 "${SIDES[@]}"
echo "[$(since) s] end" | tee -a $L
