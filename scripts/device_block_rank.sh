#!/usr/bin/env bash
# GPU machine, one short call (~6 minutes) on branch block-rank (merged) or block-rank-8k: the block rank path's
# exactness, sanitizers and same-run A/B.
#   1. the rank-sort tests (block / radix / segmented, whole and bounded; which path ranked), the
#      bucketing tests (PlaceRecord) and the walk-entry file (every walker: LaunchWith's
#      cooperative and PDL launches)
#   2. compute-sanitizer memcheck and racecheck over scripts/sanitize_case.py $SAN_ARGS
#      (default "1 --lattice --lattice-wide": the wide case reaches every block-rank size)
#   3. prune_split.py: block / radix / block (filter on, bucketing per warp), full HLG, 64 utterances
#   4. lattice_speed --one-call (64 utterances, 32 lanes)
#   5. the rest of the lattice file until LAT_END s
# Carry .device and .cache. $OUT: block.log, tests.log, prune_split.txt, lat_speed.jsonl, lat_tests.log
. scripts/device_common.sh
device_setup block.log
timeout -s INT 160 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "rank_sort or bucket" \
  tests/test_gpu_walk_entry.py -s -rf --maxfail=10 > $OUT/tests.log 2>&1
grep -sE "passed|failed|walk entry" $OUT/tests.log | tail -3 | tee -a $L; grep -sE "^FAILED|Error" $OUT/tests.log | head -8 | cut -c1-300 | tee -a $L
echo "[$(since) s] rank tests" | tee -a $L
SAN_ARGS=${SAN_ARGS:-1 --lattice --lattice-wide}
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 60 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py $SAN_ARGS 2>&1 \
  | tail -3 | tee $OUT/memcheck.log | tee -a $L
echo "memcheck exit ${PIPESTATUS[0]}; [$(since) s]" | tee -a $L
timeout -s INT 80 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py $SAN_ARGS 2>&1 \
  | tail -3 | tee $OUT/racecheck.log | tee -a $L
echo "racecheck exit ${PIPESTATUS[0]}; [$(since) s]" | tee -a $L
wait_full 250
S=$C/sim/shard-00000.npz
timeout -s INT 60 python3 scripts/prune_split.py $C/HLG.img $S 64 on,block,warp on,radix,warp on,block,warp \
  2> $OUT/prune_split.txt > /dev/null
grep -E "bucketing|prune split|ranked" $OUT/prune_split.txt | cut -c1-220 | tee -a $L
echo "[$(since) s] prune split" | tee -a $L
timeout -s INT $(left 300) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $S --utts 64 --batch 32 \
  --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call --json $OUT/lat_speed.jsonl 2>&1 | grep -E "^batch 32|exactness" | tee -a $L
echo "[$(since) s] lattice speed" | tee -a $L
timeout -s INT $(left ${LAT_END:-390}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py \
  -k "not rank_sort and not bucket" -s -rf --maxfail=10 > $OUT/lat_tests.log 2>&1
grep -sE "passed|failed|goldens|GPU lattices vs CPU" $OUT/lat_tests.log | tail -4 | tee -a $L
grep -sE "^FAILED" $OUT/lat_tests.log | head -8 | cut -c1-240 | tee -a $L
echo "[$(since) s] done" | tee -a $L
