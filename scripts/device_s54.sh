#!/usr/bin/env bash
# GPU machine, one call (~10 minutes on a fresh machine), issue 9: pooled lanes past main_q
# (CUWFST_POOL_LANE_Q, DecoderConfig::pool_q), so row 211 of the full tier (a 429,091-token
# frontier, main_q 320,000) needs no rescue. Prediction: docs/speed-notes.md "Pooled lanes past
# main_q", written before.
#   while the full tier (HLG and TLG) builds: test_gpu_memory.py (the new test included);
#   test_gpu.py with every decoder pooled at 4 x main_q; memcheck over the new test
#   then fresh-process memory at batch 32: riva, pooled-late-ahead-lq2, pooled-late-ahead-hostlog-lq2
#   then gpu_speed --profile, one process, then reversed: lazy / pooled-late-ahead / -lq2 /
#   -hostlog-lq2 over the 256 rows in padded batches of 32; lazy / -lq2 / -hostlog-lq2 on the
#   uniform 32 x 250 (one order)
# Carry .device (wheels, COMMIT, data). $OUT: s54.log, tests*.log, memcheck1.log, memory.jsonl, speed54.jsonl.
. scripts/device_common.sh
device_setup s54.log
gpu_tests tests1.log 150 "test_gpu_memory.py (whole)" tests/test_gpu_memory.py
CUWFST_MEMORY=pooled CUWFST_LANE_POOL=on CUWFST_POOL_LANE_Q=4 gpu_tests tests2.log 70 \
  "test_gpu.py, every decoder pooled, lanes 4 x main_q" tests/test_gpu.py
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 90 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/test_gpu_memory.py -k "outgrow_main_q and not None" > $OUT/memcheck1.log 2>&1
echo "memcheck over the new test exit $?: $(grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck1.log | tail -2 | tr '\n' ' ')" | cut -c1-250 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
for m in pooled-late-ahead-lq2 pooled-late-ahead-hostlog-lq2; do mem_fresh $m --modes $m --skip riva speed long; done
echo "[$(since) s] memory" | tee -a $L
A=pooled-late-ahead
speed_both speed54.jsonl "lazy $A $A-lq2 $A-hostlog-lq2" --utts 256
echo "[$(since) s] speed 256" | tee -a $L
END=592 speed_modes speed54.jsonl "lazy $A-lq2 $A-hostlog-lq2" --uniform 250 --utts 32
echo "[$(since) s] done" | tee -a $L
