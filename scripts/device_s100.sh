#!/usr/bin/env bash
# GPU machine (session of 2026-12-04 12:11): issue 9's speed and memory bars measured on
# memory="pooled" as users get it (benchmarks.memory's "pooled-default": every pool variable left
# to the library) against lazy, on main's code (57f0458). Prediction in docs/speed-notes.md
# "Session of 2026-12-04 12:11".
#   1. wheels; the full tier (HLG and TLG) in the background; the module built
#   2. while the tier builds: test_gpu_memory.py (whole) and the pooled subsets of the other files
#   3. full HLG, batch 32, one process a run, both orders: gpu_speed --profile --memory
#      "lazy pooled-default" over the 256 utterances and over uniform 32 x 250 rows
#   4. benchmarks.memory in fresh processes: riva, pooled-default at 32 and 256, lazy at 32
# Until END seconds (default 590). Carry .device. $OUT: s100.log, speed.jsonl, memory.jsonl, tests.tgz
. scripts/device_common.sh
END=${END:-590}
device_setup s100.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests memory.log 220 "memory (whole)" tests/test_gpu_memory.py
gpu_tests pooled.log 100 "variants/lattice pooled, faults pool" tests/test_gpu_variants.py \
  tests/test_gpu_lattice.py tests/test_gpu_faults.py -k "pooled or pool"
echo "[$(since) s] tests" | tee -a $L
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
END=$((END - 150)) speed_both speed.jsonl "lazy pooled-default" --utts 256
END=$((END - 90)) speed_both speed.jsonl "lazy pooled-default" --uniform 250 --utts 32
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled-default --modes pooled-default --skip riva speed long
mem_fresh lazy --modes lazy --skip riva speed long
mem_fresh pooled-default-256 --modes pooled-default --skip riva speed long --batch 256
pack_logs 'memory.log pooled.log'
echo "[$(since) s] done" | tee -a $L
