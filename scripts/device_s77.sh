#!/usr/bin/env bash
# GPU machine, the session's last call (~5.5 minutes), issue 10: the candidates at 16 cursors
# (kCandShards; CUWFST_CAND_SHARDS=1 keeps the one cursor). Prediction: docs/speed-notes.md "The
# candidates at 16 cursors", written before.
#   while the full tier (HLG) builds: test_gpu_trim.py whole, the lattice subset (the candidate
#   tests with segments that overflow), test_gpu.py's random rows, memcheck over --lattice
#   then lattice_speed --utts 256 --profile --env-ab one_cursor
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s77.log, tests*.log, memcheck.log, lat.jsonl.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s77.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 45 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 70 "test_gpu_lattice.py -k 'cand or random_lattices or gpu_pruning or grow'" tests/test_gpu_lattice.py \
  -k "cand or random_lattices or gpu_pruning or grow"
gpu_tests tests3.log 30 "test_gpu.py -k random" tests/test_gpu.py -k random
lattice_memcheck 80
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 420 --utts 256 --profile --env-ab one_cursor:CUWFST_CAND_SHARDS=1
echo "[$(since) s] done" | tee -a $L
