#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 12:35, after s193 (side against async: 38.11 against 38.35 ms a
# lattice batch on average, within the run's spread). 1. The late side bucketing's tests (the control now
# takes the IndexError the overwritten records raise) and the side begin's pipelined cases. 2. More sides of
# the same A/B: async / side alternating, four each (plus the default, side, at both ends). 3. device_s192.sh's
# question, unrun last session: the tail job's device passes with the per-time rank paths (block, radix)
# against the per-lane kernels, the whole call under each (separate processes: CUWFST_PRUNE_SORT is read at
# each finish).
# Prediction (written before the run): 2. side 0.1-0.5 ms a lattice batch below async (the async begin left
# ~0.55 ms of the bucketing's 1.3 on the path, s189); 3. block's and radix's finishes beside the decodes
# slower (s47-s52), the lattice batch longer; the last job's finish alone 0.7-1.3x the lanes'.
# $OUT: s194.log, tests_begin.log, ab_full.{txt,err,jsonl}, lat_*.jsonl
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s194.log
gpu_tests tests_begin.log 150 "begin tests" tests/test_gpu_lattice.py -k "side_bucketing or (pipelined and side)"
echo "[$(since) s] begin tests" | tee -a $L
wait_full 260; echo "[$(since) s] full tier" | tee -a $L
env_ab full $C/HLG.img $C/sim/shard-00000.npz 200 --env-ab async:CUWFST_PRUNE_BEGIN=async \
  side:CUWFST_PRUNE_BEGIN=side async2:CUWFST_PRUNE_BEGIN=async side2:CUWFST_PRUNE_BEGIN=side \
  async3:CUWFST_PRUNE_BEGIN=async side3:CUWFST_PRUNE_BEGIN=side async4:CUWFST_PRUNE_BEGIN=async \
  side4:CUWFST_PRUNE_BEGIN=side
echo "[$(since) s] A/B" | tee -a $L
lat_speed sim lat_lanes.jsonl $(( $(since) + 90 )) lanes
echo "[$(since) s] lanes" | tee -a $L
CUWFST_PRUNE_SORT=block lat_speed sim lat_block.jsonl $(( $(since) + 90 )) block
echo "[$(since) s] block" | tee -a $L
CUWFST_PRUNE_SORT=radix lat_speed sim lat_radix.jsonl $(( $(since) + 90 )) radix
echo "[$(since) s] end" | tee -a $L
