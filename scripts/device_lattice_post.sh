#!/usr/bin/env bash
# GPU machine: issue 10, the lattice records as one bulk pass after the search
# (benchmarks/lattice_post.py + lattice_post.cu), timed beside the in-step lattice stage's kernels on
# the same 256 utterances (docs/speed-notes.md, "Session of 2026-12-04 15:19"; its calls ran
# scripts/device_s109.sh to device_s114.sh, kept in the commits named with each result, of which
# this is the common form).
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. full HLG, 256 utterances, batches of 32: lattice_post $POST_ARGS (default: every variant,
#      10 timed passes a batch; e.g. POST_ARGS="--variants pipe --reps 3 --overlap pipe"), the
#      frontiers by the reference decoder in 16 processes, the first batch's counts checked against numpy
#   3. unless LAT_SPEED=0, the same utterances: lattice_speed --one-call --profile (the in-step
#      stage's kernels, lattice and 1-best, launch by launch)
# Until END seconds (default 590). Carry .device. $OUT: post.log, post.{txt,jsonl}, lat.jsonl
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup post.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left $((END - 150))) python3 -m benchmarks.lattice_post $C/HLG.img $C/sim/shard-00000.npz --utts 256 \
  --batch 32 --reps 10 --check-batches 1 --procs 16 ${POST_ARGS:-} --json $OUT/post.jsonl > $OUT/post.txt 2>&1
echo "lattice_post exit $?" | tee -a $L
grep -vE "^\{" $OUT/post.txt | tail -8 | tee -a $L
echo "[$(since) s] post pass" | tee -a $L
[ "${LAT_SPEED:-1}" = 0 ] || lat_speed lat.jsonl $END --utts 256 --profile
echo "[$(since) s] done" | tee -a $L
