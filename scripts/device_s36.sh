#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): where the pooled layout's fixed cost a
# step lies, by handing out one region kind at a time at the static layout's size
# (CUWFST_POOL_FULL, types.cuh Workspace::pool_full; built and compiled in the session of
# 2026-12-02 18:17, never run on a GPU). Prediction: docs/speed-notes.md "The pooled regions at
# the static sizes", written before.
#   while the full tier builds: test_gpu.py with every decoder pooled by claims-finalize-ahead
#   (regions by their bounds, then all three region kinds full), and with the hash tables alone full; memcheck over
#   sanitize_case.py 3 pooled with all full
#   then gpu_speed --profile, one process, then reversed: lazy / pooled-late-ahead /
#   -fullclaims / -fullhash / -fulltokens / -fullall over the full tier's 256 rows in padded
#   batches of 32, and lazy / pooled-late-ahead / -fullall on the uniform 32 x 250
# Carry .device (wheels, COMMIT). $OUT: s36.log, tests*.log, memcheck1.log, speed36.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s36.log
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead \
  gpu_tests tests0.log 90 "test_gpu (pooled, regions by their bounds: the default, whose PooledAskOf changed)" tests/test_gpu.py
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead CUWFST_POOL_FULL=all \
  gpu_tests tests1.log 90 "test_gpu (pooled, every region full)" tests/test_gpu.py
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead CUWFST_POOL_FULL=hash \
  gpu_tests tests2.log 90 "test_gpu (pooled, hash tables full)" tests/test_gpu.py
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead CUWFST_POOL_FULL=all \
  memcheck_case memcheck1.log 80 "memcheck 3 (pooled, every region full)" 3
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
A="pooled-late-ahead"
speed_both speed36.jsonl "lazy $A $A-fullclaims $A-fullhash $A-fulltokens $A-fullall" --utts 256
speed_both speed36.jsonl "lazy $A $A-fullall" --uniform 250 --utts 32
echo "[$(since) s] done" | tee -a $L
