#!/usr/bin/env bash
# GPU machine (session of 2026-12-04 07:55): the known lanes (Workspace::max_known) in the pooled
# layout too (the pooled scans' tail builds max_lane_offsets beside the hand-out), issue 9's
# speed bar. Prediction in docs/speed-notes.md "The known lanes in the pooled layout".
#   1. wheels; the full tier (HLG and TLG) in the background; the module built
#   2. while the tier builds, the pooled layout's GPU files: test_gpu_trim.py -k "max_from or
#      max_known" (48 + 1: lazy and pooled), test_gpu_memory.py, test_gpu_variants.py -k pooled,
#      test_gpu_lattice.py -k pooled, test_gpu_walk_entry.py, test_gpu.py -k payload,
#      test_gpu_faults.py -k pool; memcheck (3 seeds) and racecheck (1 seed) over sanitize_case.py
#      under CUWFST_MEMORY=pooled CUWFST_LANE_POOL=on
#   3. full HLG, batch 32, one process a run, both orders: gpu_speed --memory "lazy pooled" over the
#      256 utterances and over uniform 32 x 250 rows; benchmarks.memory: riva, pooled, pooled at 256
# Until END seconds (default 590). Carry .device. $OUT: s98.log, speed.jsonl, memory.jsonl, tests.tgz
. scripts/device_common.sh
END=${END:-590}
device_setup s98.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests trim.log 120 "trim max_from/max_known (lazy, pooled)" tests/test_gpu_trim.py -k "max_from or max_known"
gpu_tests memory.log 150 "memory" tests/test_gpu_memory.py
gpu_tests pooled.log 150 "variants/lattice pooled, walk_entry, payload, faults pool" tests/test_gpu_variants.py \
  tests/test_gpu_lattice.py tests/test_gpu_walk_entry.py tests/test_gpu.py tests/test_gpu_faults.py \
  -k "pooled or walk or payload or pool"
CUWFST_MEMORY=pooled CUWFST_LANE_POOL=on memcheck_case memcheck.log 90 "memcheck pooled" 3
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_MEMORY=pooled CUWFST_LANE_POOL=on timeout -s INT 120 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 \
  > $OUT/racecheck.log 2>&1; echo "racecheck pooled exit $?: $(tail -2 $OUT/racecheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
echo "[$(since) s] tests" | tee -a $L
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
END=$((END - 150)) speed_both speed.jsonl "lazy pooled" --utts 256
END=$((END - 90)) speed_both speed.jsonl "lazy pooled" --uniform 250 --utts 32
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
mem_fresh pooled-256 --modes pooled --skip riva speed long --batch 256
pack_logs 'trim.log memory.log pooled.log memcheck.log racecheck.log'
echo "[$(since) s] done" | tee -a $L
