#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 09:00, third call (after device_s183b.sh, whose env A/B sides all ran pinned: lattice_speed sets a side's environment only while it makes the decoder, and Readback read CUWFST_READBACK at each copy; the decoder now reads it when it is made): the
# pinned readbacks against CUWFST_READBACK=pageable on the full HLG: decode_split (the setups, the
# stamps), then lattice_speed --env-ab interleaved (default, then pageable and pinned sides in turn, default again).
# Predictions: the full HLG's lattice setup ~0.05 ms a sub-batch at the default (3.0 under pageable), and
# the lattice batch ~2-3 ms lower than under pageable; the 1-best unchanged within the noise (~0.8 ms).
# Stage: .device/wheels. Carry .device. $OUT: s183c.log, ab_full.*
. scripts/device_common.sh
END=${END:-300}
FULL_GRAPHS=hlg device_setup s183c.log
wait_full $((END - 200))
grep -q FULL-DONE /tmp/full.log && timeout 120 python3 scripts/decode_split.py $C/HLG.img $C/sim/shard-00000.npz 256 \
  --side pageable:CUWFST_READBACK=pageable 2>&1 | sed "s/^/[full] /" | tee -a $L
echo "[$(since) s] full split" | tee -a $L
grep -q FULL-DONE /tmp/full.log && env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left $END) --env-ab \
  "pageable:CUWFST_READBACK=pageable" "pinned:CUWFST_READBACK=pinned" "pageable2:CUWFST_READBACK=pageable" "pinned2:CUWFST_READBACK=pinned" "pageable3:CUWFST_READBACK=pageable"
echo "[$(since) s] end" | tee -a $L
