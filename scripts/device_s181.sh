#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 07:39, last call (diagnostic). s180 (H200): a lattice
# sub-batch's decode spends 1.48 ms (small HLG) / 3.13 ms (full) in its setup, before its first run,
# against 0.04-0.05 for the 1-best. CUWFST_DECODE_SPLIT now also prints the setup's parts (the buffers
# ensured, the caller's stream, the static layout and restores, the lattice filter's copy, the rows and
# the upload); scripts/decode_split.py averages them. Small HLG only (no time for the full tier).
# Prediction: the filter's copy (a pageable cudaMemcpyAsync, which waits for stream_ to drain) or the
# wait on the caller's stream holds most of it.
# Stage: .device/wheels. Carry .device. $OUT: s181.log
. scripts/device_common.sh
NO_FULL=1 device_setup s181.log
small_tier
echo "[$(since) s] small tier" | tee -a $L
timeout 120 python3 scripts/decode_split.py /tmp/corpus-small/HLG.img /tmp/corpus-small/sim/shard-00000.npz 256 2>&1 \
  | sed "s/^/[small] /" | tee -a $L
echo "[$(since) s] end" | tee -a $L
