#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): the lattice decode's host part and the
# trim's cost in the scan.
#   background: the full tier (HLG, TLG) and its simulated set (~200 s)
#   1. tests/test_gpu_lattice.py -k "$TESTS_K" (default: the numbering, trim and k2-golden tests)
#   2. scripts/attach_threads.py: word times and confidences of one batch of 32 GPU lattices on
#      1, 2, 4, 8 and 16 threads
#   3. gpu_speed, full HLG, uniform 32 x 250, variants "new untrimmed" (--profile: the kernels,
#      launch by launch), --check 2
#   4. benchmarks.lattice_speed, full HLG, batch 32, 64 utterances (the split, profile, 8 rows vs the CPU)
# Carry .device and .cache. $OUT: host.log (summary), tests.log, speed.jsonl, lattice_speed.jsonl
. scripts/device_common.sh
device_setup host.log
timeout -s INT $(left 200) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py \
  -k "${TESTS_K:-numbering or trim or goldens}" -s -rf --maxfail=10 > $OUT/tests.log 2>&1
grep -sE "passed|failed|lattice trim|goldens on the GPU|GPU lattices vs CPU" $OUT/tests.log | tail -5 | tee -a $L
grep -sE "^FAILED" $OUT/tests.log | head -8 | cut -c1-240 | tee -a $L
echo "[$(since) s] tests" | tee -a $L
wait_full ${FULL_WAIT:-330}
S=$C/sim/shard-00000.npz
timeout -s INT $(left 400) python3 scripts/attach_threads.py $C/HLG.img $S 32 1 2 4 8 16 2>&1 | tail -7 | tee -a $L
timeout -s INT $(left 500) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $S --uniform 250 \
  --utts 32 --batch 32 --reps 5 --check 2 --profile --variants new untrimmed --json $OUT/speed.jsonl 2>&1 \
  | grep -v "^{" | tail -16 | tee -a $L
timeout -s INT $(left 590) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $S --utts 64 --batch 32 \
  --cpu-utts 0 --profile --no-replay --check 8 --reps 3 --json $OUT/lattice_speed.jsonl 2>&1 | grep -v "^{" \
  | tail -8 | tee -a $L
echo "[$(since) s] done" | tee -a $L
