#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 18:40, the last call. 4fd1987 moved the redo of rows whose
# records' filter on an epsilon graph broke its guard into one method (GpuBackend._redo_eps_rows), which
# both the host replay and the GPU pruning call. Its tests: test_gpu_lattice.py -k eps_records (the
# replay's filter and guard) and test_gpu_eps_prune.py (the GPU pruning's). Prediction: all pass, both
# guards send rows back.
# Any staging. Carry .device. $OUT: s161.log, eps_tests.log, replay_tests.log
. scripts/device_common.sh
END=${END:-300}
NO_FULL=1 device_setup s161.log
gpu_tests eps_tests.log 120 "eps GPU pruning" tests/test_gpu_eps_prune.py
grep -E "rows redone|GPU pruning on epsilon" $OUT/eps_tests.log | head -3 | tee -a $L
gpu_tests replay_tests.log 150 "eps records replay" tests/test_gpu_lattice.py -k eps_records
grep -E "records' filter on epsilon" $OUT/replay_tests.log | head -2 | tee -a $L
echo "[$(since) s] end" | tee -a $L
