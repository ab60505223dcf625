#!/usr/bin/env bash
# GPU machine (~7 minutes), issues 10 and 11: the label bound after s83 (its bitmap words loaded beside
# the search's first probes, LabelBitLoads / LabelBound). Prediction: docs/speed-notes.md "The label
# bound, second cut", written before.
#   while the full tier (HLG) builds: test_gpu_trim.py whole (s83's failing label-bound case shown),
#   test_gpu_lanes.py, test_gpu_epsilon.py, test_gpu_memory.py, test_gpu_faults.py and test_gpu_host.py
#   whole; then lattice_speed --utts 256 --profile --env-ab nolb (slots a pass now printed)
# Carry .device. $OUT: s84.log, lat.jsonl, tests.tgz (the pytest logs: the device returns few files)
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s84.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 60 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
grep -E "^E |label bound:|assert " $OUT/tests1.log | head -24 | cut -c1-240 | tee -a $L
gpu_tests tests2.log 130 "test_gpu_lanes.py test_gpu_epsilon.py (whole)" tests/test_gpu_lanes.py tests/test_gpu_epsilon.py
gpu_tests tests3.log 100 "test_gpu_memory.py (whole)" tests/test_gpu_memory.py
gpu_tests tests4.log 80 "test_gpu_faults.py test_gpu_host.py (whole)" tests/test_gpu_faults.py tests/test_gpu_host.py
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 440 --utts 256 --profile --env-ab nolb:CUWFST_LABEL_BOUND=off
echo "[$(since) s] lattice_speed" | tee -a $L
(cd $OUT && tar czf tests.tgz tests*.log && rm -f tests*.log)
echo "[$(since) s] done" | tee -a $L
