#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-04 20:07, third call: code as e55f41d (its records-after
# and other files' lattice tests ran in the second call; here the goldens and the filter's cases). The second call's A/B was disturbed (its first side 60.3 ms,
# the same default last 52.5): again with 4 repetitions, then the per-kind kernel split (--profile)
# of LatLogKernel on 8 (default) and 32 CTAs a lane.
# Until END (default 420) s. Carry .device. $OUT: s127.log, lat*.jsonl
. scripts/device_common.sh
END=${END:-420}
FULL_GRAPHS=hlg device_setup s127.log
# (while the full tier builds: the k2 goldens and the filter's 60 cases on e55f41d's LatLogKernel)
gpu_tests tests_goldens.log 90 "goldens and filter cases (default)" tests/test_gpu_lattice.py -k "golden or keeps_every"
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl $((END - 80)) --utts 256 --reps 4 --env-ab step:CUWFST_LATTICE_RECORDS=step \
  split32:CUWFST_LATTICE_LOG_SPLIT=32 stride:CUWFST_LATTICE_CLAIMS=stride
echo "[$(since) s] lattice_speed" | tee -a $L
lat_speed lat_prof8.jsonl $((END - 40)) --utts 64 --profile
CUWFST_LATTICE_LOG_SPLIT=32 lat_speed lat_prof32.jsonl $((END - 5)) --utts 64 --profile
echo "[$(since) s] profiles" | tee -a $L
