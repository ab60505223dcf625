#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 12:35. The pruning's bucketing on its own stream beside the
# next decode (CUWFST_PRUNE_BEGIN=side, the new default): the next decode's records pass waits for it, its
# search does not. 1. The begin's tests (side / async / sync, short and long rows; the late side bucketing
# and its control) beside the full tier's build. 2. lattice_speed --env-ab on the full HLG, 256 sim rows,
# batch 32, one call, sides interleaved: default (side), async, side, async, side, async.
# 3. test_gpu_lattice.py whole.
# Prediction (written before the run): the bucketing's ~1.2 ms a sub-batch (s188: init 0.13 + bucket 1.17)
# leaves the decode stream; beside the search it costs some of that back: side 0.5-1.1 ms a lattice batch
# below async, the 1-best the same (within 0.3).
# $OUT: s193.log, tests_*.log, ab_full.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s193.log
gpu_tests tests_begin.log 200 "begin tests" tests/test_gpu_lattice.py -k "pipelined or side_bucketing"
echo "[$(since) s] begin tests" | tee -a $L
wait_full 260; echo "[$(since) s] full tier" | tee -a $L
env_ab full $C/HLG.img $C/sim/shard-00000.npz 200 --env-ab async:CUWFST_PRUNE_BEGIN=async \
  side:CUWFST_PRUNE_BEGIN=side async2:CUWFST_PRUNE_BEGIN=async side2:CUWFST_PRUNE_BEGIN=side \
  async3:CUWFST_PRUNE_BEGIN=async
echo "[$(since) s] A/B" | tee -a $L
gpu_tests tests_lat.log $(left 585) "test_gpu_lattice.py" tests/test_gpu_lattice.py
echo "[$(since) s] end" | tee -a $L
