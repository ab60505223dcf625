#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 20:37, the session's last call: the whole GPU suite at the
# session's end (8b7bc50 or later: the epsilon lattice trim on by default, the packed rounds reverted),
# test_gpu_eps_prune.py beside it (not in gpu_suite's groups), and compute-sanitizer memcheck of lattice
# decodes on epsilon graphs (the trim's path) and epsilon-free ones.
# Prediction: every test passes (the k2 goldens 0 mismatches), memcheck 0 errors.
# Stage: .device/wheels. Carry .device. $OUT: s166.log, tests.tgz, memcheck_*.log
. scripts/device_common.sh
END=${END:-585}
NO_FULL=1 device_setup s166.log
gpu_suite 420
gpu_tests tests_epsprune.log 300 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
gpu_suite_wait
memcheck_case memcheck_eps.log 120 "memcheck eps lattice" 3 --eps --lattice
memcheck_case memcheck_lat.log 100 "memcheck lattice" 3 --lattice
echo "[$(since) s] end" | tee -a $L
