#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 07:39, second call. At the commit in .device/COMMIT:
# CUWFST_LATTICE_LOG=scan is now the default (s178 / s178b: exact, test_gpu_lattice.py whole under it;
# the full HLG's lattice batch -1.2 ms at the medians of three sides against four). This call: the whole
# GPU suite at the new default (five groups, the mem group's cap 420 s so that its last tests run, s177
# cut 16 of them at 300 s) and test_gpu_eps_prune.py, beside the full tier's build (HLG only) for the
# A/B that follows on the warm machine (device_s179b.sh).
# Prediction: every group passes; the k2 goldens 0 mismatches.
# Stage: .device/wheels. Carry .device. $OUT: s179.log, tests.tgz
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s179.log
small_tier &
gpu_suite ${SUITE_CAP:-420}
gpu_tests tests_epsprune.log 200 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
gpu_suite_wait
echo "[$(since) s] suite, small tier; full tier: $(tail -1 /tmp/full.log)" | tee -a $L
