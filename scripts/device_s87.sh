#!/usr/bin/env bash
# GPU machine (~9 minutes), issues 10 and 11: the trim's weights-only search with round 0's first
# probe at the first arc (scan.cuh TrimProbe / TrimRoundWeights). Prediction: docs/speed-notes.md
# "The first probe at the first arc", written before.
#   while the full tier (HLG) builds: test_gpu_trim.py whole (the slot equality on tie-free graphs),
#   test_gpu_epsilon.py + test_gpu_lanes.py whole (graph_upload_bytes fixed), test_gpu_variants.py
#   whole (ScanKernel and the other split scans), compute-sanitizer memcheck over sanitize_trim.py,
#   test_gpu_memory.py -k stats, test_gpu_faults.py + test_gpu_host.py; then lattice_speed --utts
#   256 --profile --env-ab tw with this module, then with s86's scan.cuh (.device/ab_s86, its own process)
# Carry .device. $OUT: s87.log, lat.jsonl, lat_s86.jsonl, tests.tgz
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s87.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 60 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
grep -E "^E |label bound:" $OUT/tests1.log | head -12 | cut -c1-240 | tee -a $L
gpu_tests tests2.log 100 "test_gpu_lanes.py test_gpu_epsilon.py (whole)" tests/test_gpu_lanes.py tests/test_gpu_epsilon.py
grep -E "^E " $OUT/tests2.log | head -6 | cut -c1-240 | tee -a $L
gpu_tests tests3.log 160 "test_gpu_variants.py (whole)" tests/test_gpu_variants.py
grep -E "mismatch|rows" $OUT/tests3.log | grep -v "^E " | tail -3 | cut -c1-200 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 70 "$CS" --tool memcheck --error-exitcode 9 python3 scripts/sanitize_trim.py > $OUT/tests4.log 2>&1
echo "memcheck sanitize_trim exit $?" | tee -a $L; tail -2 $OUT/tests4.log | cut -c1-200 | tee -a $L
gpu_tests tests5.log 40 "test_gpu_memory.py -k stats" tests/test_gpu_memory.py -k stats
gpu_tests tests6.log 70 "test_gpu_faults.py test_gpu_host.py (whole)" tests/test_gpu_faults.py tests/test_gpu_host.py
wait_full 520; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 530 --utts 256 --profile --env-ab tw:CUWFST_TRIM_WEIGHTS=off
echo "[$(since) s] lattice_speed" | tee -a $L
ab_init .device/ab_s86; ab_use other
lat_speed lat_s86.jsonl 590 --utts 256 --profile --env-ab tw:CUWFST_TRIM_WEIGHTS=off
echo "[$(since) s] lattice_speed, s86's scan" | tee -a $L
ab_use own >/dev/null
pack_logs 'tests*.log'
echo "[$(since) s] done" | tee -a $L
