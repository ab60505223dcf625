#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): the trim search's loads (scan.cuh
# TrimKeeps: an arc's label and weight read together, against the label then the weight,
# CUWFST_TRIM_LOADS=serial), as processes that alternate in one call.
#   background: the full tier (HLG, TLG) and its simulated set (~200 s)
#   1. tests/test_gpu_trim.py, tests/test_gpu.py (40 s caps), tests/test_gpu_lattice.py -k "trim or numbering"
#   2. gpu_speed, full HLG, uniform 32 x 250, variant new, --profile: "paired serial paired serial"
#      (ROUNDS), one process each; then the full TLG, 64 utterances at batch 32: "paired serial"
# Carry .device and .cache. $OUT: loads.log (summary), tests.log, speed.jsonl
. scripts/device_common.sh
device_setup loads.log
for f in tests/test_gpu_trim.py tests/test_gpu.py; do
  echo "$f: $(timeout -s INT 40 python3 -m pytest -q -p no:cacheprovider -m gpu $f 2>&1 | tail -1)" | tee -a $L
done
timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "trim or numbering" \
  -s -rf --maxfail=5 > $OUT/tests.log 2>&1
grep -sE "passed|failed|lattice trim" $OUT/tests.log | tail -3 | tee -a $L
echo "[$(since) s] tests" | tee -a $L
wait_full ${FULL_WAIT:-330}
S=$C/sim/shard-00000.npz
for mode in ${ROUNDS:-paired serial paired serial}; do
  if [ "$mode" = serial ]; then export CUWFST_TRIM_LOADS=serial; else unset CUWFST_TRIM_LOADS; fi
  echo "HLG, trim loads $mode" | tee -a $L
  timeout -s INT $(left 480) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $S --uniform 250 --utts 32 \
    --batch 32 --reps 5 --check 2 --profile --variants new --json $OUT/speed.jsonl 2>&1 | grep -E "kernel ms|B=32|CPU check" \
    | tee -a $L
done
for mode in ${TLG_ROUNDS:-paired serial}; do
  if [ "$mode" = serial ]; then export CUWFST_TRIM_LOADS=serial; else unset CUWFST_TRIM_LOADS; fi
  echo "TLG, trim loads $mode" | tee -a $L
  timeout -s INT $(left 580) python3 -m benchmarks.gpu_speed --graph $C/TLG.img --log-probs $S --utts 64 --batch 32 \
    --reps 3 --check 2 --variants new --json $OUT/speed.jsonl 2>&1 | grep -E "B=32|CPU check" | tee -a $L
done
unset CUWFST_TRIM_LOADS
echo "[$(since) s] done" | tee -a $L
