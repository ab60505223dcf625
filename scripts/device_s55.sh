#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine), issue 9: memory="pooled" at its new
# defaults (pooled lanes up to 2 x main_q, CUWFST_POOL_LANE_Q=2; the winners log on the device)
# = benchmarks.memory's pooled-late-ahead-lq2. Prediction: docs/speed-notes.md "Result of
# device_s54.sh" and after, written before. (Cut down after two refused starts and a machine
# taken back mid-call: the HLG alone, no riva row, whose 460 MiB s54 measured beside the same
# pooled-late-ahead-lq2's 448.)
#   while the full tier's HLG builds: test_gpu_memory.py (whole); then test_gpu.py with every
#   decoder pooled at the defaults; test_gpu_variants.py and test_gpu_lattice.py -k pooled
#   then fresh-process memory: pooled-late-ahead-lq2 at batch 256
#   then gpu_speed --profile, one process, then reversed: lazy / pooled-late-ahead-lq2 over the
#   256 rows in padded batches of 32 and on the uniform 32 x 250
# Carry .device (wheels, COMMIT, data). $OUT: s55.log, tests*.log, memory.jsonl, speed55.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s55.log
gpu_tests tests1.log 200 "test_gpu_memory.py (whole)" tests/test_gpu_memory.py
CUWFST_MEMORY=pooled CUWFST_LANE_POOL=on gpu_tests tests2.log 60 \
  "test_gpu.py, every decoder pooled at the defaults" tests/test_gpu.py
gpu_tests tests3.log 60 "test_gpu_variants.py + test_gpu_lattice.py -k pooled" tests/test_gpu_variants.py \
  tests/test_gpu_lattice.py -k pooled
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
A=pooled-late-ahead-lq2
mem_fresh $A-256 --modes $A --skip riva speed long --batch 256
echo "[$(since) s] memory" | tee -a $L
speed_both speed55.jsonl "lazy $A" --utts 256
echo "[$(since) s] speed 256" | tee -a $L
END=560 speed_both speed55.jsonl "lazy $A" --uniform 250 --utts 32
echo "[$(since) s] done" | tee -a $L
