#!/usr/bin/env bash
# GPU machine, session of 2026-12-01 18:37, call 4 (~5 minutes), branch s18: LatPersistKernel's
# prefilter (lattice.cuh: no hash probe for an arc that ends below (cutoff - output_beam) - slack)
#   1. lattice_speed --one-call --prefilter-ab --profile (full HLG, 64 utterances, 32 lanes): on /
#      off / on again, same decoder; the kernel split with it on; 4 lattices against the CPU
#   2. the kernel split with it off (CUWFST_LATTICE_PREFILTER=off, a second process)
#   3. compute-sanitizer memcheck over scripts/sanitize_case.py 1 --lattice --lattice-wide
#   4. tests/test_gpu_walk_entry.py (lattices under every walker) and the whole lattice file
# Carry .device and .cache. $OUT: s18d.log, lat_ab.txt, lat_off.txt, memcheck.log, walk.log, lat_tests.log
. scripts/device_common.sh
device_setup s18d.log
wait_full 250
S=$C/sim/shard-00000.npz
timeout -s INT 150 python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $S --utts 64 --batch 32 \
  --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call --prefilter-ab --profile --json $OUT/lat_ab.jsonl > $OUT/lat_ab.txt 2>&1
grep -E "^batch 32|exactness|kernel ms" $OUT/lat_ab.txt | cut -c1-400 | tee -a $L
echo "[$(since) s] prefilter A/B" | tee -a $L
CUWFST_LATTICE_PREFILTER=off timeout -s INT 90 python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $S \
  --utts 64 --batch 32 --reps 1 --cpu-utts 0 --check 0 --no-replay --one-call --profile > $OUT/lat_off.txt 2>&1
grep -E "kernel ms" $OUT/lat_off.txt | sed 's/^/prefilter off: /' | cut -c1-400 | tee -a $L
echo "[$(since) s] kernel split, prefilter off" | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 60 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lattice \
  --lattice-wide 2>&1 | tail -3 | tee $OUT/memcheck.log | tee -a $L
echo "memcheck exit ${PIPESTATUS[0]}; [$(since) s]" | tee -a $L
timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_walk_entry.py -s -rf --maxfail=10 \
  > $OUT/walk.log 2>&1
grep -sE "passed|failed|walk entry" $OUT/walk.log | tail -2 | tee -a $L; grep -sE "^FAILED" $OUT/walk.log | head -5 | cut -c1-240 | tee -a $L
timeout -s INT $(left ${LAT_END:-470}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py \
  -s -rf --maxfail=10 > $OUT/lat_tests.log 2>&1
grep -sE "passed|failed|goldens|GPU lattices vs CPU|filter:|trim:" $OUT/lat_tests.log | tail -6 | cut -c1-300 | tee -a $L
grep -sE "^FAILED" $OUT/lat_tests.log | head -8 | cut -c1-240 | tee -a $L
echo "[$(since) s] done" | tee -a $L
