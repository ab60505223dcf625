#!/usr/bin/env bash
# GPU machine, a short call (~2 minutes), after 76e7aa6's refactor of the pruning job's arrays and
# the pruned bindings' helpers (no behaviour change meant): the GPU lattice path (random lattices
# against the CPU, the GPU pruning against the replay, many sub-batches through the pipeline) and
# test_gpu.py's random rows. Carry .device/wheels, .device/pylib, .device/COMMIT and .cache (the
# modules built here). $OUT: s69.log, tests*.log.
export NO_FULL=1
. scripts/device_common.sh
device_setup s69.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 75 "test_gpu_lattice.py -k 'random_lattices or gpu_pruning'" tests/test_gpu_lattice.py \
  -k "random_lattices or gpu_pruning"
gpu_tests tests2.log 30 "test_gpu.py -k random" tests/test_gpu.py -k random
echo "[$(since) s] done" | tee -a $L
