#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 12:35, after s193 (side against async: 38.11 against 38.35 ms a
# lattice batch on average, within the run's spread) and four refused starts. async is the default again
# (side opt-in), so the suite's other groups run the code they ran at 12f16c7. 1. The begin's tests (three
# modes, short and long rows; the late side bucketing and its control, which now takes the IndexError the
# overwritten records raise). 2. More sides of the A/B: async (default) / side alternating, five each.
# 3. device_s192.sh's question: the whole call with the per-time block rank path (CUWFST_PRUNE_SORT=block,
# read at each finish: its own process), its tail against the default's in 2.
# Prediction (written before the run): 1. all pass; 2. side 0.1-0.5 ms a lattice batch below async (the async
# begin left ~0.55 ms of the bucketing's 1.3 on the path, s189); 3. block's finishes beside the decodes slower
# (s47-s52), the lattice batch longer; the last job's finish alone 0.7-1.3x the lanes'.
# $OUT: s195.log, tests_begin.log, ab_full.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s195.log
gpu_tests tests_begin.log 150 "begin tests" tests/test_gpu_lattice.py -k "pipelined or side_bucketing"
echo "[$(since) s] begin tests" | tee -a $L
wait_full 260; echo "[$(since) s] full tier" | tee -a $L
env_ab full $C/HLG.img $C/sim/shard-00000.npz 200 --env-ab side:CUWFST_PRUNE_BEGIN=side \
  async:CUWFST_PRUNE_BEGIN=async side2:CUWFST_PRUNE_BEGIN=side async2:CUWFST_PRUNE_BEGIN=async \
  side3:CUWFST_PRUNE_BEGIN=side async3:CUWFST_PRUNE_BEGIN=async side4:CUWFST_PRUNE_BEGIN=side \
  async4:CUWFST_PRUNE_BEGIN=async side5:CUWFST_PRUNE_BEGIN=side
echo "[$(since) s] A/B" | tee -a $L
# (3., the block path's tail, dropped after five more refused starts left ~520 s of device time)
