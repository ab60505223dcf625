#!/usr/bin/env bash
# GPU machine: issue 10, for the session after 2026-12-06 07:39 (written then, not yet run). The setup stall
# s181 found: one sub-batch of each lattice call (the second) waited 11.8 ms (small HLG) inside
# Wait(caller_stream), two CUDA calls that should not block, while the finish thread ran sub-batch 1's
# pruning (the small HLG rescues no row; on the full HLG the early rescue also regrows a rescue instance the
# last call trimmed, CUWFST_RESCUE_TRIM). One call:
#   1. scripts/decode_split.py (one call of 256 rows after a warm-up; the setup's parts, Wait's record and
#      wait apart) on the small HLG at the default, under CUWFST_RESCUE_TRIM=off and under
#      CUWFST_EARLY_RESCUE=off (and, small HLG only, with the pruning in the decode's own call,
#      CUWFST_LATTICE_PIPELINE=off, and with no host overlap, CUWFST_LATTICE_OVERLAP=off: if the stall is
#      not the rescue's, these say whether it is the worker's finish);
#   2. the same on the full HLG; both also with the calls on a PyTorch stream of their own (sstream:
#      DECODE_SPLIT_STREAM=side: is it the legacy default stream's record?), and each lattice call's
#      stamps (the calling thread's begins, the finish thread's finishes) to line the stall up with;
#   3. lattice_speed --env-ab on the full HLG with those two sides.
# Predictions (written before any run): the small HLG's stall stays under the rescue sides (it rescues no
# row) and goes under PIPELINE=off (no finish beside the next setup); Wait's record holds it. On the full
# HLG the rescue sides may shorten it; the lattice batch within 1 ms of the default under them.
# Stage: .device/wheels. Carry .device. $OUT: s182.log, ab_full.*
. scripts/device_common.sh
END=${END:-560}
FULL_GRAPHS=hlg device_setup s182.log
small_tier
echo "[$(since) s] small tier" | tee -a $L
SIDES=(--side rtrim:CUWFST_RESCUE_TRIM=off --side noearly:CUWFST_EARLY_RESCUE=off)
timeout 200 python3 scripts/decode_split.py /tmp/corpus-small/HLG.img /tmp/corpus-small/sim/shard-00000.npz 256 \
  "${SIDES[@]}" --side nopipe:CUWFST_LATTICE_PIPELINE=off --side nooverlap:CUWFST_LATTICE_OVERLAP=off \
  --side sstream:DECODE_SPLIT_STREAM=side 2>&1 \
  | sed "s/^/[small] /" | tee -a $L
echo "[$(since) s] small split" | tee -a $L
wait_full $((END - 150))
grep -q FULL-DONE /tmp/full.log && timeout 120 python3 scripts/decode_split.py $C/HLG.img $C/sim/shard-00000.npz 256 \
  "${SIDES[@]}" --side sstream:DECODE_SPLIT_STREAM=side 2>&1 | sed "s/^/[full] /" | tee -a $L
echo "[$(since) s] full split" | tee -a $L
grep -q FULL-DONE /tmp/full.log && env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left $END) --env-ab \
  "rtrim:CUWFST_RESCUE_TRIM=off" "noearly:CUWFST_EARLY_RESCUE=off"
echo "[$(since) s] end" | tee -a $L
