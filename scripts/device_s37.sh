#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): whether the pooled hash tables' load is
# what costs ExpandKernel its ~0.45 ms a batch against lazy (device_s36.sh: -fullhash took 0.45 ms
# off ExpandKernel over the 256 rows), by tables 2x and 4x larger at the same bound
# (CUWFST_POOL_FULL=hash2x / hash4x: the power of two >= 4 x / 8 x the claims bound instead of 2 x;
# built in the session of 2026-12-02 19:45, never run on a GPU); what they cost in memory; and the
# lattice mode's split at this commit (issue 10). Prediction: docs/speed-notes.md "The hash
# tables' load", written before.
#   while the full tier (HLG and TLG) builds: test_gpu.py pooled with hash4x, then with hash2x
#   then fresh-process memory at batch 32: riva, pooled-late-ahead, -hash2x, -hash4x
#   then gpu_speed --profile, one process, then reversed: lazy / pooled-late-ahead / -hash2x /
#   -hash4x / -fullhash over the 256 rows in padded batches of 32; lazy / ahead / -hash2x on the
#   uniform 32 x 250; then lattice_speed --one-call --profile (64 utterances, batch 32)
# Carry .device (wheels, COMMIT, data). $OUT: s37.log, tests*.log, memory.jsonl, speed37.jsonl,
# lat_speed.jsonl.
. scripts/device_common.sh
device_setup s37.log
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead CUWFST_POOL_FULL=hash4x \
  gpu_tests tests1.log 90 "test_gpu (pooled, hash tables 4x)" tests/test_gpu.py
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead CUWFST_POOL_FULL=hash2x \
  gpu_tests tests2.log 90 "test_gpu (pooled, hash tables 2x)" tests/test_gpu.py
wait_full 360; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
for m in pooled-late-ahead pooled-late-ahead-hash2x pooled-late-ahead-hash4x; do
  mem_fresh $m --modes $m --skip riva speed long
done
echo "[$(since) s] memory" | tee -a $L
END=${END:-520}
A="pooled-late-ahead"
speed_both speed37.jsonl "lazy $A $A-hash2x $A-hash4x $A-fullhash" --utts 256
speed_both speed37.jsonl "lazy $A $A-hash2x" --uniform 250 --utts 32
echo "[$(since) s] speed" | tee -a $L
lat_speed lat_speed.jsonl 585 --profile
echo "[$(since) s] done" | tee -a $L
