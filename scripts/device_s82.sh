#!/usr/bin/env bash
# GPU machine, the session's closing call (~4 minutes, no full tier): the rest of test_gpu_lattice.py
# (what s80 and s81's subsets did not run: bounded runs, pooled layouts, the filter's guard, the
# lattice trim, variants, allocation failures) on the final kernels (LatBlocksFor, LatPersistSmem,
# final candidates). Carry .device. $OUT: s82.log, tests1.log
NO_FULL=1
. scripts/device_common.sh
device_setup s82.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log $(left 215) "test_gpu_lattice.py -k 'not (cand or random_lattices or gpu_pruning or k2)'" \
  tests/test_gpu_lattice.py -k "not (cand or random_lattices or gpu_pruning or k2)"
echo "[$(since) s] done" | tee -a $L
