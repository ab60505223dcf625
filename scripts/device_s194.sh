#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 12:35, after s193 (side against async: 38.11 against 38.35 ms a
# lattice batch on average, within the run's spread). 1. The whole GPU suite (five groups side by side, the
# side begin the default) and test_gpu_eps_prune.py, beside the full tier's build; the lat group holds the
# late side bucketing's tests (the control now takes the IndexError the overwritten records raise). 2. More
# sides of the same A/B: async / side alternating, four each (plus the default, side, at both ends).
# 3. device_s192.sh's question, unrun last session: the tail job's device passes with the per-time rank paths
# (block, radix) against the per-lane kernels, the whole call under each (separate processes:
# CUWFST_PRUNE_SORT is read at each finish), as the clock allows.
# Prediction (written before the run): 1. all pass; 2. side 0.1-0.5 ms a lattice batch below async (the async
# begin left ~0.55 ms of the bucketing's 1.3 on the path, s189); 3. block's and radix's finishes beside the
# decodes slower (s47-s52), the lattice batch longer; the last job's finish alone 0.7-1.3x the lanes'.
# $OUT: s194.log, tests.tgz, ab_full.{txt,err,jsonl}, lat_*.jsonl
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s194.log
gpu_suite 390
gpu_tests tests_epsprune.log 300 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
gpu_suite_wait
echo "[$(since) s] suite" | tee -a $L
wait_full 480; echo "[$(since) s] full tier" | tee -a $L
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 560) --env-ab async:CUWFST_PRUNE_BEGIN=async \
  side:CUWFST_PRUNE_BEGIN=side async2:CUWFST_PRUNE_BEGIN=async side2:CUWFST_PRUNE_BEGIN=side \
  async3:CUWFST_PRUNE_BEGIN=async side3:CUWFST_PRUNE_BEGIN=side async4:CUWFST_PRUNE_BEGIN=async \
  side4:CUWFST_PRUNE_BEGIN=side
echo "[$(since) s] A/B" | tee -a $L
[ $(since) -lt 540 ] && CUWFST_PRUNE_SORT=block lat_speed sim lat_block.jsonl 592 block
echo "[$(since) s] end" | tee -a $L
