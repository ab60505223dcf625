#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 10:05. The mem group of the GPU suite (test_gpu_memory.py,
# test_gpu_lanes.py, test_gpu_walk_entry.py, test_gpu_faults.py) at the final GPU code: s183e ran the other
# four groups at 09c0e02 and had no time left for this one; no file under cuwfst/ changed since 09c0e02.
# Prediction: all pass (they passed at 0b4f528, whose GPU code differs only in when CUWFST_READBACK is read).
# $OUT: s186.log, tests.tgz
. scripts/device_common.sh
NO_FULL=1 device_setup s186.log
SUITE_GROUPS="mem" gpu_suite 420
SUITE_GROUPS="mem" gpu_suite_wait
echo "[$(since) s] end" | tee -a $L
