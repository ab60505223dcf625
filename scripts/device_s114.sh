#!/usr/bin/env bash
# GPU machine (session of 2026-12-04 15:19): issue 10, the bulk records pass beside the decoder's search, the
# search at the highest stream priority
# (benchmarks/lattice_post.py + lattice_post.cu), timed beside the in-step lattice stage's kernels on
# the same 256 utterances. Prediction in docs/speed-notes.md ("The decoder's search at the highest stream priority").
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. full HLG, 256 utterances, batches of 32: lattice_post, variant pipe, then pipe passes beside the 1-best decode (frontiers by the reference decoder in
#      16 processes, the first batch's counts checked against numpy, 3 timed passes a batch)
#   (no lattice_speed: calls s109-s113 ran it five times today, 44.30-45.42 ms of lattice kernels)
# Until END seconds (default 590). Carry .device. $OUT: s114.log, post.{txt,jsonl}
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup s114.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left $((END - 150))) python3 -m benchmarks.lattice_post $C/HLG.img $C/sim/shard-00000.npz --utts 256 \
  --batch 32 --reps 3 --check-batches 1 --procs 16 --variants pipe --overlap pipe --json $OUT/post.jsonl > $OUT/post.txt 2>&1
echo "lattice_post exit $?" | tee -a $L
{ grep -vE "^\{" $OUT/post.txt | tail -8; grep -E "^\{" $OUT/post.txt | head -2 | cut -c1-400; } | tee -a $L
echo "[$(since) s] post pass" | tee -a $L
echo "[$(since) s] done" | tee -a $L
