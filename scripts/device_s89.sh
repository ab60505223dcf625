#!/usr/bin/env bash
# GPU machine (~2.5 minutes, no full tier), the session's remaining device time: test_gpu_trim.py
# whole after its label-bound and weights-only cases moved onto one helper (_on_against_off).
# Carry .device. $OUT: s89.log, tests.tgz
NO_FULL=1
. scripts/device_common.sh
device_setup s89.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 45 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
grep -E "^E |label bound:" $OUT/tests1.log | head -12 | cut -c1-240 | tee -a $L
pack_logs 'tests*.log'
echo "[$(since) s] done" | tee -a $L
