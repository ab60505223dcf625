#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): the handover of the lane pools'
# physical pieces between the main and rescue instances (CUWFST_POOL_HANDOVER=on,
# GpuDecoder::SharePieces) in place of releasing and creating them in the trims around a rescue.
# Prediction: docs/speed-notes.md "The pieces handed over instead of released", written before.
#   while the full tier builds: test_gpu_memory.py + test_gpu_faults.py (default settings, the
#   new handover test included); test_gpu_faults.py again with CUWFST_POOL_HANDOVER=on (every
#   pooled backend sharing; exploratory: a test that counts given-back memory may fail by design)
#   then fresh-process memory at batch 32: riva, pooled-late-ahead-handover,
#   pooled-late-ahead-hostlog-handover
#   then gpu_speed --profile, one process, then reversed: lazy / pooled-late-ahead / -keep /
#   -handover / pooled-late-ahead-hostlog / -hostlog-handover over the 256 rows in padded
#   batches of 32; lazy / pooled-late-ahead / -handover on the uniform 32 x 250
# RAN at eeaca4a (session of 2026-12-02 21:25); the switch, its modes and tests were removed
# after it (no speed gain: docs/speed-notes.md), so this script runs only at that commit.
# Carry .device (wheels, COMMIT, data). $OUT: s42.log, tests*.log, memory.jsonl, speed42.jsonl.
. scripts/device_common.sh
device_setup s42.log
gpu_tests tests1.log 230 "test_gpu_memory + test_gpu_faults (defaults)" tests/test_gpu_memory.py tests/test_gpu_faults.py
CUWFST_POOL_HANDOVER=on gpu_tests tests2.log 80 "test_gpu_faults (CUWFST_POOL_HANDOVER=on)" tests/test_gpu_faults.py
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
for m in pooled-late-ahead-handover pooled-late-ahead-hostlog-handover; do mem_fresh $m --modes $m --skip riva speed long; done

echo "[$(since) s] memory" | tee -a $L
A=pooled-late-ahead
speed_both speed42.jsonl "lazy $A $A-keep $A-handover $A-hostlog $A-hostlog-handover" --utts 256
speed_both speed42.jsonl "lazy $A $A-handover" --uniform 250 --utts 32
echo "[$(since) s] done" | tee -a $L
