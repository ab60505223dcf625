#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 22:19 (device_s211.sh never ran: the device time left was too
# little for the whole suite). The octets' walk as the default: 1. beside the full tier's build, the GPU tests
# outside test_gpu_lattice.py that decode lattices (test_gpu_lattice.py ran whole under the octets in s210), in
# two processes; 2. on the full HLG, three sides each of off / on alternating, each traced once (the call's end
# split by the frame's locals, dropped one at a time), and the bar's paired verdict (--paired 9) on the default.
# Prediction (written before the run): the tests pass; on sides ~1-1.5 ms a batch under off sides, ratios ~x1.47;
# paired median x1.46-1.48; a gap (if a side draws one) in `overlap`'s drop or after the drops.
# $OUT: s212.log, tests_*.log, ab_full.*
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s212.log
( gpu_tests tests_a.log 220 "trim, walk entry, memory (-k lattice)" tests/test_gpu_trim.py tests/test_gpu_walk_entry.py \
    tests/test_gpu_memory.py -k lattice ) &
( gpu_tests tests_b.log 220 "cli, k2 order/structure/lattice, blank skip, chain, epsilon (-k lattice)" tests/test_cli.py \
    tests/test_k2_lattice.py tests/test_k2_order.py tests/test_k2_structure.py tests/test_blank_skip.py tests/test_gpu_chain.py \
    tests/test_gpu_epsilon.py -k lattice ) &
wait
grep -hE "^FAILED" $OUT/tests_a.log $OUT/tests_b.log | head -6 | cut -c1-220 | tee -a $L
echo "[$(since) s] tests" | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
O=CUWFST_LATTICE_AFTER_OCTETS
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 520) --trace-sides --paired 9 --env-ab \
  off:$O=off on:$O=on off2:$O=off on2:$O=on off3:$O=off on3:$O=on
grep -E "paired passes" $OUT/ab_full.txt | cut -c1-300 | tee -a $L
grep -E "decode call [0-9]" $OUT/ab_full.txt | sed -E 's/.*\((side [a-z0-9_]*|rows in place)\).*decode call ([0-9.]+) ms.*/\1 \2/' | tr '\n' ';' | tee -a $L; echo | tee -a $L
grep -E "from the rescue's end|frame's locals dropped" $OUT/ab_full.txt | cut -c1-230 | tee -a $L
echo "[$(since) s] end" | tee -a $L
