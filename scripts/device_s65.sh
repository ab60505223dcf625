#!/usr/bin/env bash
# GPU machine, one call (~9.5 minutes on a fresh machine), issue 10: the pruning beside the next
# decode (GpuDecoder::PruneBegin / PruneFinish, CUWFST_LATTICE_PIPELINE), and b4af8b2's host code
# (SetArenaGuard) on a GPU. Prediction: docs/speed-notes.md "Session of 2026-12-03 13:53",
# written before.
#   while the full tier (HLG) builds: test_gpu_lattice.py whole (the pipelined path is the default
#   for every lattice decode with the host overlap), test_gpu_lanes.py whole, test_gpu_memory.py
#   -k 'stream or idle or ahead', test_gpu_trim.py, test_gpu_walk_entry.py
#   then lattice_speed over the 256 utterances (--one-call --profile --pipeline-ab: pipeline on,
#   off, on again in one process; the lattice and the 1-best kernel split), and memcheck over
#   sanitize_case.py 2 --lattice (the pipelined finisher on its own stream)
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s65.log, tests*.log, lat.jsonl, memcheck1.log.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s65.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 230 "test_gpu_lattice.py (whole)" tests/test_gpu_lattice.py
echo "[$(since) s]" | tee -a $L
gpu_tests tests2.log 70 "test_gpu_lanes.py (whole)" tests/test_gpu_lanes.py
gpu_tests tests3.log 30 "test_gpu_memory.py -k 'stream or idle or ahead'" tests/test_gpu_memory.py -k "stream or idle or ahead"
gpu_tests tests4.log 40 "test_gpu_trim.py + test_gpu_walk_entry.py" tests/test_gpu_trim.py tests/test_gpu_walk_entry.py
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 540 --utts 256 --profile --pipeline-ab
echo "[$(since) s]" | tee -a $L
memcheck_case memcheck1.log $(left 590) "memcheck 2 --lattice (pipelined)" 2 --lattice
echo "[$(since) s] done" | tee -a $L
