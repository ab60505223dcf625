#!/usr/bin/env bash
# GPU machine: issue 10, the records pass without its instrumentation (lean) and with its candidates
# queued (queue) against pipe, all checked by their records read back (docs/speed-notes.md,
# "Session of 2026-12-04 17:08"). 5 timed passes a batch, until END (default 225) s: written for the
# session's last device seconds, which ran out (run it with END=590).
# Carry .device. $OUT: post.log, post.{txt,jsonl}
. scripts/device_common.sh
END=${END:-225}
FULL_GRAPHS=hlg device_setup post.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
wait_full $((END - 45)); echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left $((END - 3))) python3 -m benchmarks.lattice_post $C/HLG.img $C/sim/shard-00000.npz --utts 256 \
  --batch 32 --reps 5 --check-batches 1 --procs 16 --variants pipe lean queue --json $OUT/post.jsonl > $OUT/post.txt 2>&1
echo "lattice_post exit $?" | tee -a $L
grep -vE "^\{" $OUT/post.txt | tail -5 | cut -c1-300 | tee -a $L
grep -oE '"check": "[A-Z a-z]*"|"records": \{[^}]*\}' $OUT/post.txt | head -4 | tee -a $L
echo "[$(since) s] done" | tee -a $L
