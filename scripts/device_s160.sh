#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 18:40, the fourth call. s159 (519b345, H200): the whole GPU
# suite passed (lat 1,008, var 933, base 816, trim 208, mem 327; k2 goldens 0 mismatches) and
# test_gpu_eps_prune 83 of 84: the guard never fired at x300 log-probs, because the GPU's A (bounded by the
# beam: 2 (|max - beam|) + 4096 >= 12,096 at search_beam 4000) stayed above the first window's
# magnitudes (~10,000) where the CPU twin's exact A (8,644) did not. The test now scales by 3,000.
# Prediction: 84 passed, some rows sent back. Then the peers on the small TLG again (a second sample of
# s158's 4,090.2 against riva's 3,737.4; on whichever card this call gets).
# Stage: .device/wheels with riva's wheel. Carry .device. $OUT: s160.log, eps_tests.log, peers_sim*
. scripts/device_common.sh
END=${END:-500}
NO_FULL=1 device_setup s160.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
small_tier &
SMALL=$!
gpu_tests eps_tests.log 120 "eps GPU pruning" tests/test_gpu_eps_prune.py
grep -E "redone|GPU pruning on epsilon" $OUT/eps_tests.log | head -3 | tee -a $L
wait $SMALL
S=/tmp/corpus-small; C=$S
sweep sim 20 cuwfst-gpu-tlg-lattice riva cuwfst-gpu-tlg
echo "[$(since) s] end" | tee -a $L
