#!/usr/bin/env bash
# GPU machine: issue 10, does a lattice records pass hide beside the next batch's search?
# (docs/speed-notes.md, "Session of 2026-12-04 17:08")
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. while the tier builds: test_gpu_lattice's priority test, and with CUWFST_STREAM_PRIORITY=high
#      (the decoder's own streams at the device's greatest priority) its k2 goldens, records and
#      random-lattice tests
#   3. the full tier's 256 utterances, batches of 32: lattice_post's pass, pipe only, 3 timed passes a batch, then --overlap pipe
#      over grid caps 0 (a CTA a work item) 64 32 16 8: the decoder at default and high priority
# Carry .device. $OUT: post.log, tests.log, post.{txt,jsonl}
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup post.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests.log 60 "priority test" tests/test_gpu_lattice.py -k "stream_priority"
CUWFST_STREAM_PRIORITY=high gpu_tests tests_high.log 150 "lattice tests at high priority" tests/test_gpu_lattice.py \
  -k "goldens or records_are_the_cpu or random_lattices_gpu_equals_cpu"
echo "[$(since) s] tests" | tee -a $L
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left $((END - 10))) python3 -m benchmarks.lattice_post $C/HLG.img $C/sim/shard-00000.npz --utts 256 \
  --batch 32 --reps 3 --check-batches 1 --procs 16 --variants pipe --overlap pipe --grid-caps 0 64 32 16 8 \
  --json $OUT/post.jsonl > $OUT/post.txt 2>&1
echo "lattice_post exit $?" | tee -a $L
grep -vE "^\{" $OUT/post.txt | tail -14 | tee -a $L
echo "[$(since) s] done" | tee -a $L
