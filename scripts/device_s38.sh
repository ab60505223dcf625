#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine): whether memory="pooled" should take
# claims-finalize-ahead as its default bound (today's default: anchor), and with which winners
# log. Prediction: docs/speed-notes.md "claims-finalize-ahead as the pooled default", written before.
#   while the full tier (HLG and TLG) builds: test_gpu_memory.py + test_gpu_faults.py with
#   CUWFST_POOL_BOUND=claims-finalize-ahead (what the flip makes every pooled decoder run)
#   then fresh-process memory at batch 32: riva, pooled (anchor, host log: today's default),
#   pooled-late-ahead (device log), pooled-late-ahead-hostlog; at batch 256: the last two
#   then gpu_speed --profile, one process, then reversed: lazy / pooled / pooled-late-ahead /
#   pooled-late-ahead-hostlog over the 256 rows in padded batches of 32 and the uniform 32 x 250
# Carry .device (wheels, COMMIT, data). $OUT: s38.log, tests*.log, memory.jsonl, speed38.jsonl.
. scripts/device_common.sh
device_setup s38.log
which nsys ncu 2>&1 | head -2 | tee -a $L
CUWFST_POOL_BOUND=claims-finalize-ahead gpu_tests tests1.log 230 \
  "test_gpu_memory + test_gpu_faults (pooled bound claims-finalize-ahead)" tests/test_gpu_memory.py tests/test_gpu_faults.py
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
for m in pooled pooled-late-ahead pooled-late-ahead-hostlog; do mem_fresh $m --modes $m --skip riva speed long; done
for m in pooled-late-ahead pooled-late-ahead-hostlog; do mem_fresh $m-256 --modes $m --skip riva speed long --batch 256; done
echo "[$(since) s] memory" | tee -a $L
M="lazy pooled pooled-late-ahead pooled-late-ahead-hostlog"
speed_both speed38.jsonl "$M" --utts 256
speed_both speed38.jsonl "$M" --uniform 250 --utts 32
echo "[$(since) s] done" | tee -a $L
