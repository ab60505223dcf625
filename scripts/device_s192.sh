#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 11:23. The tail job's device passes with another rank path: is the
# per-time path (CUWFST_PRUNE_SORT=block: a forward launch and a block-sort launch a time over all lanes,
# read at each finish) faster than the per-lane kernels (one CTA a lane, the default) when the last job's
# pruning runs alone on the GPU? lattice_speed --one-call (full HLG, 256 sim rows, batch 32), the default
# then block (then radix if the clock allows); each run prints every job's finish (the last one is the tail's).
# Prediction (written before the run): beside the decodes block's finishes are slower (s47-s52: ~2x the
# lanes' device passes) and the lattice batch longer; the last job's finish alone 0.7-1.3x the lanes'.
# $OUT: s192.log, lat_*.jsonl
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s192.log
wait_full 230; echo "[$(since) s] full tier" | tee -a $L
lat_speed sim lat_lanes.jsonl 270 lanes
echo "[$(since) s] lanes" | tee -a $L
CUWFST_PRUNE_SORT=block lat_speed sim lat_block.jsonl 280 block
echo "[$(since) s] block" | tee -a $L
[ $(since) -lt 230 ] && CUWFST_PRUNE_SORT=radix lat_speed sim lat_radix.jsonl 280 radix
echo "[$(since) s] end" | tee -a $L
