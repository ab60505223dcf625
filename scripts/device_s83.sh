#!/usr/bin/env bash
# GPU machine (~9.5 minutes), issues 10 and 11: the trims' label bound (scan.cuh LabelBounds,
# CUWFST_LABEL_BOUND=off for the A/B side). Prediction: docs/speed-notes.md "The label bound on the
# GPU", written before.
#   while the full tier (HLG, TLG) builds: test_gpu_trim.py whole (test_label_bound_*), test_gpu.py's
#   random rows, the lattice subset, test_gpu_lanes.py and test_gpu_epsilon.py whole (owed), memcheck
#   and racecheck over sanitize_trim.py (a 700-label graph too); then lattice_speed --utts 256 --profile --env-ab nolb, the peers (feed all, 256
#   utterances), and batch-32 memory (pooled, riva) in fresh processes
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s83.log, tests*.log, memcheck.log, racecheck.log, lat.jsonl,
# peers.*, memory.jsonl
FULL_GRAPHS=hlg,tlg
. scripts/device_common.sh
device_setup s83.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 60 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 30 "test_gpu.py -k random" tests/test_gpu.py -k random
gpu_tests tests3.log 60 "test_gpu_lattice.py -k 'cand or random_lattices or gpu_pruning or k2'" tests/test_gpu_lattice.py \
  -k "cand or random_lattices or gpu_pruning or k2"
gpu_tests tests4.log 60 "test_gpu_lanes.py test_gpu_epsilon.py (whole)" tests/test_gpu_lanes.py tests/test_gpu_epsilon.py
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout -s INT 60 "$CS" --tool $tool --error-exitcode 9 python3 scripts/sanitize_trim.py > $OUT/$tool.log 2>&1
  echo "$tool sanitize_trim exit $?: $(tail -3 $OUT/$tool.log | tr '\n' ' ')" | cut -c1-300 | tee -a $L
done
wait_full 345; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 430 --utts 256 --profile --env-ab nolb:CUWFST_LABEL_BOUND=off
echo "[$(since) s] lattice_speed" | tee -a $L
timeout -s INT $(left 490) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $OUT/peers.txt 2>&1
echo "peers exit $?" | tee -a $L
grep -E "^\[peers\]" $OUT/peers.txt | tail -4 | cut -c1-200 | tee -a $L
echo "[$(since) s] peers" | tee -a $L
[ $(since) -lt 500 ] && mem_fresh pooled --modes pooled --skip riva speed long
[ $(since) -lt 540 ] && mem_fresh riva --riva-dir $C --skip memory speed long
echo "[$(since) s] done" | tee -a $L
