#!/usr/bin/env bash
# GPU machine (session of 2026-12-04 13:30): issue 10, CUWFST_LAT_CLEAR=next (off by default): no
# LatStepEndKernel; its bookkeeping in LatPersistKernel's last CTA, the claims' keys cleared by the
# next step's MaxKernel (common.cuh LatClearNext). Prediction in docs/speed-notes.md.
# (Ran at 2fb16c8; b1b9ae2 removed the switch, so on later commits the decoder refuses "next".)
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. while it builds: test_gpu_trim.py's grids/appends sides (clear_next among them) and the
#      switches' errors; test_gpu_lattice.py whole with CUWFST_LAT_CLEAR=next
#   3. full HLG, 256 utterances, batch 32: lattice_speed --one-call --profile --env-ab next, the
#      default timed before and after it
#   4. compute-sanitizer memcheck over sanitize_case.py 2 --lattice with CUWFST_LAT_CLEAR=next
#   5. test_gpu_memory.py's last 18 tests (the suite's cap cut them in call 2), with what is left
# Until END seconds (default 590). Carry .device. $OUT: s107.log, lat.jsonl, tests.tgz
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup s107.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests trim.log 120 "trim grids/appends + switches" tests/test_gpu_trim.py -k "grids_and_appends or switches_refuse"
CUWFST_LAT_CLEAR=next gpu_tests lattice.log 200 "lattice (next)" tests/test_gpu_lattice.py
echo "[$(since) s] tests" | tee -a $L
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 520 --utts 256 --profile --env-ab "next:CUWFST_LAT_CLEAR=next"
CUWFST_LAT_CLEAR=next memcheck_case memcheck.log 80 "memcheck lattice (next)" 2 --lattice
echo "[$(since) s] memcheck" | tee -a $L
REST=$(python3 -m pytest -q --collect-only -p no:cacheprovider -m gpu tests/test_gpu_memory.py 2>/dev/null | grep :: | sed -n 46,63p)
gpu_tests memory.log $(left $END) "memory (last 18)" $REST
pack_logs 'trim.log lattice.log memcheck.log memory.log'
echo "[$(since) s] done" | tee -a $L
