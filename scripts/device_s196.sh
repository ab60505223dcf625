#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 12:35, the last ~340 s of device time. The begin's tests at the
# final commit (async the default again; the late side bucketing's control accepting the overwritten
# records' IndexError): test_prune_begin_without_wait_pipelined (7 cases x side / async / sync) and
# test_prune_side_bucketing_late (4 cases). No full tier.
# Prediction: all 25 pass.
# $OUT: s196.log, tests_begin.log
. scripts/device_common.sh
NO_FULL=1 device_setup s196.log
gpu_tests tests_begin.log 120 "begin tests" tests/test_gpu_lattice.py -k "pipelined or side_bucketing"
echo "[$(since) s] end" | tee -a $L
