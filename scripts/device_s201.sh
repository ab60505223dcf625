#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 16:23. s200 (H100, 04cb9c1) measured the packed records walk
# (CUWFST_LATTICE_AFTER_PACKED=on) 36.12 / 36.67 / 36.15 ms a lattice batch against the claimed tokens' 37.52
# / 37.68 / 37.55, and the last sub-batch's host split (CUWFST_LATTICE_HOST_SPLIT=last) 37.36 / 37.38 / 36.98
# against off 37.80 / 37.75 / 37.92; both are the defaults since. 1. The whole GPU suite at those defaults
# (five groups side by side, beside the full tier's build; test_gpu_faults.py alone again if it fails).
# 2. lattice_speed on the full HLG: the new defaults against both off (the defaults before), alternating.
# Prediction (written before the run): every test passes; the new defaults ~1.5-2 ms a lattice batch below
# the old (s200: -1.3 packed, -0.5 split), ~35.8 ms against a 1-best of ~23.8, x1.50-1.52.
# $OUT: s201.log, tests.tgz, tests_faults.log, ab_full.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s201.log
gpu_suite 400
gpu_suite_wait
echo "[$(since) s] suite" | tee -a $L
grep -q "test_gpu_faults" $OUT/s201.log && gpu_tests tests_faults.log 100 "test_gpu_faults.py alone" tests/test_gpu_faults.py
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
O=CUWFST_LATTICE_AFTER_PACKED=off,CUWFST_LATTICE_HOST_SPLIT=off
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 590) --env-ab old:$O new:CUWFST_LATTICE_HOST_SPLIT=last \
  old2:$O new2:CUWFST_LATTICE_HOST_SPLIT=last old3:$O new3:CUWFST_LATTICE_HOST_SPLIT=last
echo "[$(since) s] end" | tee -a $L
