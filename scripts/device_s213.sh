#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 22:19, with ~350 s of device time left (device_s211/s212 never ran):
# the octets' walk as the default, the GPU tests outside test_gpu_lattice.py that decode lattices (test_gpu_lattice.py
# ran whole under the octets in s210), in two processes; no full tier, no timing.
# Prediction: they pass.
# $OUT: s213.log, tests_a.log, tests_b.log
. scripts/device_common.sh
NO_FULL=1 device_setup s213.log
( gpu_tests tests_a.log 95 "trim, walk entry, memory (-k lattice)" tests/test_gpu_trim.py tests/test_gpu_walk_entry.py \
    tests/test_gpu_memory.py -k lattice ) &
( gpu_tests tests_b.log 95 "cli, k2 order/structure, blank skip, chain, epsilon (-k lattice)" tests/test_cli.py \
    tests/test_k2_order.py tests/test_k2_structure.py tests/test_blank_skip.py tests/test_gpu_chain.py \
    tests/test_gpu_epsilon.py -k lattice ) &
wait
grep -hE "^FAILED" $OUT/tests_a.log $OUT/tests_b.log | head -6 | cut -c1-220 | tee -a $L
echo "[$(since) s] end" | tee -a $L
