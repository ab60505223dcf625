#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 14:13, after s197 (the compacted records walk: 37.0 against 37.6
# ms a lattice batch, three sides each, no overlap; the pass's span 8.52 -> 8.08 ms). The compacted walk is now
# the default. 1. The whole GPU suite at the new default (five groups side by side, beside the full tier's
# build). 2. The records kernels' SASS (cuobjdump) and Nsight Compute over the compacted kernel (one launch of
# scripts/ncu_lattice_case.py: instruction counts, warp states, source counters) for the next step.
# Prediction (written before the run): every test passes (the default walk's records are the tests' only
# change); the kernel's top stall is long scoreboard (the arcs' loads), issue active under 60 %.
# $OUT: s198.log, tests.tgz, records.sass, ncu.txt, ncu_src.csv
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s198.log
SO=$(ls .cache/cuwfst/cuwfst_gpu_sm90-*/cuwfst_gpu_sm90.so | head -1)
OBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
echo "cuobjdump: $OBJ" | tee -a $L
[ -n "$OBJ" ] && "$OBJ" -sass "$SO" 2>/dev/null | awk '/Function : .*LatRecordsKernelILin1E/{p=1} /Function : /{if($0 !~ /LatRecordsKernelILin1E/) p=0} p' > $OUT/records.sass
echo "sass lines $(wc -l < $OUT/records.sass 2>/dev/null)" | tee -a $L
gpu_suite 400
gpu_suite_wait
echo "[$(since) s] suite" | tee -a $L
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
ncu_records 575
echo "[$(since) s] end" | tee -a $L
