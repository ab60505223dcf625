#!/usr/bin/env bash
# GPU machine, one short call (no full tier): s63's one failure after its test's fix
# (test_streams_commit_the_log_ahead_of_need_and_stay_exact: an ahead growth inside mapped pieces
# may take 0 us) and the streams' memory tests beside it.
# Carry .device/wheels, .device/pylib, .device/COMMIT and .cache. $OUT: s64.log, mem.log.
export NO_FULL=1
. scripts/device_common.sh
device_setup s64.log
gpu_tests mem.log 90 "test_gpu_memory.py -k 'stream or idle or ahead'" tests/test_gpu_memory.py -k "stream or idle or ahead"
echo "[$(since) s] done" | tee -a $L
