#!/usr/bin/env bash
# GPU machine (session of 2026-12-04 12:11): issue 10's lattice stage, two switches off by default:
# LatStepEndKernel clearing only the keys on epsilon-free graphs (CUWFST_LAT_CLEAR=keys,
# Workspace::lat_keys_only) and LatPersistKernel's candidates 2 or 4 a thread and round
# (CUWFST_LAT_ITEMS, LatCandRecordsBlockK). Prediction in docs/speed-notes.md.
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. while it builds: test_gpu_trim.py's grids/appends sides (the new switches among them) and
#      the switches' errors; test_gpu_lattice.py whole with CUWFST_LAT_CLEAR=keys CUWFST_LAT_ITEMS=4;
#      compute-sanitizer memcheck over sanitize_case.py 2 --lattice with the same two
#   3. full HLG, 256 utterances, batch 32: lattice_speed --one-call --profile --env-ab with the
#      switches' sides, the default timed before and after them
# Until END seconds (default 590). Carry .device. $OUT: s102.log, lat.jsonl, tests.tgz
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup s102.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests trim.log 120 "trim grids/appends + switches" tests/test_gpu_trim.py -k "grids_and_appends or switches_refuse"
CUWFST_LAT_CLEAR=keys CUWFST_LAT_ITEMS=4 gpu_tests lattice.log 170 "lattice (keys, items 4)" tests/test_gpu_lattice.py
CUWFST_LAT_CLEAR=keys CUWFST_LAT_ITEMS=4 memcheck_case memcheck.log 80 "memcheck lattice (keys, items 4)" 2 --lattice
echo "[$(since) s] tests" | tee -a $L
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl $END --utts 256 --profile --env-ab "keys:CUWFST_LAT_CLEAR=keys" "items2:CUWFST_LAT_ITEMS=2" \
  "items4:CUWFST_LAT_ITEMS=4" "keys4:CUWFST_LAT_CLEAR=keys,CUWFST_LAT_ITEMS=4" \
  "keys4g528:CUWFST_LAT_CLEAR=keys,CUWFST_LAT_ITEMS=4,CUWFST_LAT_BLOCKS=528"
pack_logs 'trim.log lattice.log memcheck.log'
echo "[$(since) s] done" | tee -a $L
