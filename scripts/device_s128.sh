#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-04 20:07, the last device seconds (code as e55f41d): the
# k2 goldens and the filter's 60 cases under the default while the full tier builds, then the A/B of
# the default (records after the search) against the in-step stage once more (call 3's was disturbed).
# Until END (default 200) s. Carry .device. $OUT: s128.log, tests_goldens.log, lat.jsonl
. scripts/device_common.sh
END=${END:-200}
FULL_GRAPHS=hlg device_setup s128.log
gpu_tests tests_goldens.log 90 "goldens and filter cases (default)" tests/test_gpu_lattice.py -k "golden or keeps_every"
wait_full $((END - 20)); echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl $((END - 3)) --utts 128 --reps 3 --env-ab step:CUWFST_LATTICE_RECORDS=step
echo "[$(since) s] lattice_speed" | tee -a $L
