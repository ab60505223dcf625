#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine), issues 10, 11: the sub-batches' rows read
# in place by the lanes (gpu_decode_rows, the pipelined lattice begin; CUWFST_ROW_GATHER), A/B
# against the packed copy, 1-best and lattice, with the calling thread's trace and a diagnostic
# without the worker's host work. Prediction: docs/speed-notes.md "The rows read in place",
# written before.
#   while the full tier (HLG) builds: test_gpu.py whole, test_gpu_lattice.py subset
#   then lattice_speed --utts 256 --pipeline-ab --gather-ab --host-off-diag
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s67.log, tests*.log, lat.jsonl.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s67.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 80 "test_gpu.py (whole)" tests/test_gpu.py
gpu_tests tests2.log 90 "test_gpu_lattice.py subset" tests/test_gpu_lattice.py \
  -k "random_lattices or k2_lattice or gpu_pruning or fail"
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 440 --utts 256 --pipeline-ab --gather-ab --host-off-diag
echo "[$(since) s] done" | tee -a $L
