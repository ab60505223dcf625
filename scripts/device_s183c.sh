#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 09:00, third call. device_s183b.sh's env A/B sides all
# ran pinned (lattice_speed sets a side's environment only while it makes the decoder, and Readback read
# CUWFST_READBACK at each copy; the decoder now reads it when it is made). This call, on a fresh machine:
# lattice_speed --env-ab on the small HLG while the full tier builds (its CPU load beside), then on the
# full HLG; sides interleaved: default, pageable, pinned, pageable2, pinned2, pageable3, default again.
# Predictions: the lattice batch ~2-3 ms lower pinned than pageable on the full HLG (s183b's decode_split:
# the call's wall 36.1 vs 40.3 ms a sub-batch), ~1.5 ms on the small HLG; the 1-best within the noise.
# Stage: .device/wheels. Carry .device. $OUT: s183c.log, ab_small.*, ab_full.*
. scripts/device_common.sh
END=${END:-540}
FULL_GRAPHS=hlg device_setup s183c.log
SIDES=("pageable:CUWFST_READBACK=pageable" "pinned:CUWFST_READBACK=pinned" "pageable2:CUWFST_READBACK=pageable"
  "pinned2:CUWFST_READBACK=pinned" "pageable3:CUWFST_READBACK=pageable")
small_tier
env_ab small /tmp/corpus-small/HLG.img /tmp/corpus-small/sim/shard-00000.npz 150 --env-ab "${SIDES[@]}"
echo "[$(since) s] small" | tee -a $L
wait_full $((END - 90))
grep -q FULL-DONE /tmp/full.log && env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left $END) --env-ab "${SIDES[@]}"
echo "[$(since) s] end" | tee -a $L
