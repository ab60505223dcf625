#!/usr/bin/env bash
# GPU machine, one short call (~2 minutes, no full tier), issue 10: after the per-time counting
# rank (CUWFST_PRUNE_SORT=count) was removed: the rank-sort and bucketing tests (every remaining
# sort), a broad lattice subset at the default (lanes), memcheck over sanitize_case.py 2 --lattice.
# Carry .device (wheels, COMMIT). $OUT: s49.log, tests*.log, memcheck1.log.
NO_FULL=1
. scripts/device_common.sh
device_setup s49.log
gpu_tests tests1.log 60 "rank-sort and bucketing tests" tests/test_gpu_lattice.py -k "prune_rank or prune_bucket"
gpu_tests tests2.log 90 "test_gpu_lattice subset (default: lanes)" tests/test_gpu_lattice.py \
  -k "random_lattices or k2_lattice or gpu_pruning or bounded_lattice or filter_keeps or lattice_trim_on"
memcheck_case memcheck1.log 40 "memcheck 2 --lattice (lanes)" 2 --lattice
echo "[$(since) s] done" | tee -a $L
