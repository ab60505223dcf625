#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 10:05. Where the pruning's begin spends the decode call's time:
# PruneBeginLocked now prints its parts under CUWFST_DECODE_SPLIT (the host's offsets, the job's buffers, the
# copies queued, the kernels queued, the sync that waits for them), and decode_split.py their means beside
# the Decode's phases and the calling thread's begin calls. Full HLG, 256 sim rows, 32 lanes. Before it,
# test_gpu_lattice.py (the print is the only change to GPU code, behind the variable).
# Prediction: the sync (PrFillFlags, PrInitTokens, PrBucketKernel over ~15.6 M records a sub-batch) 0.5-1.5 ms,
# the rest under 0.3 ms; the begin calls ~1.5-2.5 ms longer than the Decode's phases.
# $OUT: s187.log, split.txt, lat.log
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s187.log
gpu_tests lat.log 240 "test_gpu_lattice.py" tests/test_gpu_lattice.py
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left 480) python3 scripts/decode_split.py $C/HLG.img $C/sim/shard-00000.npz 256 > $OUT/split.txt 2>&1
echo "[$(since) s] decode_split exit $?" | tee -a $L
grep -vE "^  trace" $OUT/split.txt | cut -c1-300 | tee -a $L
echo "[$(since) s] end" | tee -a $L
