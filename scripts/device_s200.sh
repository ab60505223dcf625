#!/usr/bin/env bash
# GPU machine: issue 10, after the session of 2026-12-06 14:13. Claimed tokens (the compacted records walk's
# warps claiming their item's tokens) became the default after s199, where its own tests and
# test_gpu_lattice.py -k "after or k2" ran under the switch; the packed walk (CUWFST_LATTICE_AFTER_PACKED=on,
# built after the session's device time ran out) has never run. 1. The whole GPU suite at the new defaults
# (five groups side by side, beside the full tier's build; test_gpu_lattice.py holds the packed walk's test;
# test_gpu_faults.py's free-memory bound can see the other groups' allocations, so it runs again alone if it
# fails). 2. lattice_speed on the full HLG: packed / default alternating, and a stride side.
# Prediction (written before any run): every test passes; the packed walk ~10-15 fewer instructions a round
# of ~80 (the predicated second layout and the uniform checks gone), the pass 2-6 % shorter, a lattice batch
# 0.1-0.4 ms below the default; stride ~0.5 ms above the default (s199).
# $OUT: s200.log, tests.tgz, tests_faults.log, ab_full.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s200.log
gpu_suite 400
gpu_suite_wait
echo "[$(since) s] suite" | tee -a $L
grep -q "test_gpu_faults" $OUT/s200.log && gpu_tests tests_faults.log 100 "test_gpu_faults.py alone" tests/test_gpu_faults.py
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 580) --env-ab packed:CUWFST_LATTICE_AFTER_PACKED=on \
  claim:CUWFST_LATTICE_AFTER_PACKED=off packed2:CUWFST_LATTICE_AFTER_PACKED=on claim2:CUWFST_LATTICE_AFTER_PACKED=off \
  packed3:CUWFST_LATTICE_AFTER_PACKED=on stride:CUWFST_LATTICE_AFTER_TOKENS=stride
echo "[$(since) s] end" | tee -a $L
