#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 22:48, last call (~280 s of device time left): the final
# commit's records pass (prefetch reverted, phase sums kept) and the chain closure's new default in
# GPU-pruned lattice decodes, on a fresh module: test_gpu_lattice.py -k "records_after or wide_states or
# phase_sums or eps", test_gpu_eps_prune.py. No tier, no benchmark. $OUT: s172.log, tests_*.log
. scripts/device_common.sh
NO_FULL=1 device_setup s172.log
gpu_tests tests_after.log 110 "test_gpu_lattice.py -k 'records_after or wide_states or phase_sums or eps'" \
  tests/test_gpu_lattice.py -k "records_after or wide_states or phase_sums or eps" &
gpu_tests tests_eps.log 110 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
wait
echo "[$(since) s] end" | tee -a $L
