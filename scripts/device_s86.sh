#!/usr/bin/env bash
# GPU machine (~9 minutes), issues 10 and 11: the trim's weights-only search (scan.cuh
# TrimSearchWeights, Workspace::trim_weights). Prediction: docs/speed-notes.md "The trim's search,
# weights only", written before.
#   while the full tier builds: test_gpu_trim.py whole (the new weights-only cases), test_gpu.py -k
#   random, the lattice subset, test_gpu_lanes.py + test_gpu_epsilon.py whole; then lattice_speed
#   --utts 256 --profile --env-ab tw (one process), the same with the group-of-four module
#   (.device/ab_g4, a second process), the peers (feed all, 256 utterances)
# Carry .device. $OUT: s86.log, lat.jsonl, lat_g4.jsonl, peers.*, tests.tgz
. scripts/device_common.sh
device_setup s86.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 90 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
grep -E "^E |label bound:|assert " $OUT/tests1.log | head -16 | cut -c1-240 | tee -a $L
gpu_tests tests2.log 30 "test_gpu.py -k random" tests/test_gpu.py -k random
gpu_tests tests3.log 70 "test_gpu_lattice.py subset" tests/test_gpu_lattice.py -k "not (cand or random_lattices or gpu_pruning)"
gpu_tests tests4.log 120 "test_gpu_lanes.py test_gpu_epsilon.py (whole)" tests/test_gpu_lanes.py tests/test_gpu_epsilon.py
wait_full 340; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 420 --utts 256 --profile --env-ab tw:CUWFST_TRIM_WEIGHTS=off
echo "[$(since) s] lattice_speed" | tee -a $L
ab_init .device/ab_g4; ab_use other
lat_speed lat_g4.jsonl 480 --utts 256 --profile --env-ab tw:CUWFST_TRIM_WEIGHTS=off
echo "[$(since) s] lattice_speed, group of four" | tee -a $L
ab_use own
peers 570 cuwfst-gpu cuwfst-gpu-lattice riva
echo "[$(since) s] peers" | tee -a $L
pack_logs 'tests*.log'
echo "[$(since) s] done" | tee -a $L
