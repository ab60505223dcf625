#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 07:39, last call (diagnostic, at the default). Where a
# lattice sub-batch's decode call spends the ~13 ms it takes over the 1-best's in graph mode (the
# profile, launch by launch, cannot say: s179b's PIPELINE=off side showed its search kernels as slow
# without the pruning beside): scripts/decode_split.py (CUWFST_DECODE_SPLIT: each sub-batch's setup, runs
# with their syncs, results; 1-best then lattice, 256 rows, 32 lanes, one call after a warm-up) on the
# small HLG, then on the full HLG if its tier is built in time.
# Prediction: runs(lattice) - runs(1-best) = the records pass (~6.4 small / ~8.7 full) + 0.5-1.5 ms;
# setup and results within 1 ms of each other, the rest of the gap in PruneBegin (outside Decode's split).
# Stage: .device/wheels. Carry .device. $OUT: s180.log
. scripts/device_common.sh
END=${END:-440}
FULL_GRAPHS=hlg device_setup s180.log
small_tier
echo "[$(since) s] small tier" | tee -a $L
timeout 120 python3 scripts/decode_split.py /tmp/corpus-small/HLG.img /tmp/corpus-small/sim/shard-00000.npz 256 2>&1 \
  | sed "s/^/[small] /" | tee -a $L
echo "[$(since) s] small split" | tee -a $L
wait_full $((END - 70))
grep -q FULL-DONE /tmp/full.log && timeout $(left $END) python3 scripts/decode_split.py $C/HLG.img $C/sim/shard-00000.npz 256 \
  2>&1 | sed "s/^/[full] /" | tee -a $L
echo "[$(since) s] end" | tee -a $L
