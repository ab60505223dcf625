#!/usr/bin/env bash
# GPU machine, one call after `FULL=1 FILES=... bash scripts/device_suite.sh` in the same command
# (the full tier then builds while the tests run): where the pooled layout's batch-time gap over
# lazy exceeds its kernel-sum gap (docs/speed-notes.md "Where pooled's batch-time gap exceeds its
# kernel-sum gap", prediction written before). gpu_speed over the full tier's 256 rows in padded
# batches of 32, variants new (programmatic dependent launch) and new_nopdl, memory lazy and
# pooled-late-ahead (both on token payloads, the default), no launch-by-launch profile (it
# would remove the overlap it measures); one process, then the reverse order.
# Carry .device. $OUT: s35.log, speed35.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s35.log
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
run() {  # run VARIANTS MODES
  timeout -s INT $(left ${END:-240}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    --utts 256 --batch 32 --reps 7 --check 1 --variants $1 --memory $2 > /tmp/sp.txt 2>&1
  grep -E "B=32|CPU check|Error" /tmp/sp.txt | cut -c1-200 | tee -a $L
  grep -E "^\{" /tmp/sp.txt | sed "s/^/{\"order\": \"$1 | $2\", \"row\": /; s/$/}/" >> $OUT/speed35.jsonl
}
run "new new_nopdl" "lazy pooled-late-ahead"
run "new_nopdl new" "pooled-late-ahead lazy"
echo "[$(since) s] done" | tee -a $L
