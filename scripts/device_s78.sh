#!/usr/bin/env bash
# GPU machine, a short call with the last device time (~234 s): test_gpu_variants.py on the session's
# final GPU code (MaxBlocksFor, the per-CTA appends; module f9f35beb27fd52ff, built here and carried
# in .cache), capped. Carry .device/wheels, .device/pylib, .device/COMMIT, .cache. $OUT: s78.log, tests1.log.
export NO_FULL=1
. scripts/device_common.sh
device_setup s78.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 75 "test_gpu_variants.py (capped)" tests/test_gpu_variants.py
echo "[$(since) s] done" | tee -a $L
