#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 18:40, the third call. s158 (5ad233f, H200): the small TLG's
# lattice batch 73.0 / 73.1 ms with the GPU pruning and its records' filter, 85.2 without the filter,
# 322.9 with the replay (1-best 25.9); peers: cuwfst-gpu-tlg-lattice 4,090.2 RTFx against riva 3,737.4.
# Exact everywhere except the guard test, whose scaled log-probs the input check refused (fixed:
# check_log_probs=False). This call: the whole GPU suite (lattice kernels changed: LatPersistKernel's
# mode-2 branch, LatStepEndKernel, the candidates' allocation, SetLatticeFilter), test_gpu_eps_prune.py
# again. Prediction: every test passes; the guard fires on seeds 0 and 1 at least (the CPU's replay guard
# sends 4 rows back on those, checked here).
# Any staging. Carry .device. $OUT: s159.log, eps_tests.log, tests.tgz
. scripts/device_common.sh
END=${END:-560}
NO_FULL=1 device_setup s159.log
gpu_suite 420
gpu_tests eps_tests.log 120 "eps GPU pruning" tests/test_gpu_eps_prune.py
gpu_suite_wait
echo "[$(since) s] end" | tee -a $L
