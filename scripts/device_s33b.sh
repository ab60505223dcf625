#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine): FinalizeKernel's claims range once and
# kAhead's instance at 64 registers (prediction: docs/speed-notes.md, written before the call).
#   while the HLG builds: test_gpu.py default, then pooled by claims-finalize-ahead; memcheck
#   over sanitize_case.py 3 pooled by claims-finalize-ahead
#   then gpu_speed --profile, lazy and pooled-late-ahead, one process a side: the full tier's 256
#   rows in padded batches of 32 (sides other own nolb nolb own other) and the uniform 32 x 250
#   (other own own other). own = this tree; other = .device/ab_old (finalize.cuh before the
#   change); nolb = own with .device/ab_nolb's finalize.cuh (the range once, no launch bounds)
# Stage: git show BASE:cuwfst/csrc/include/cuwfst/finalize.cuh > .device/ab_old/cuwfst/csrc/include/cuwfst/finalize.cuh
# Carry .device. $OUT: s33b.log, tests.log, tests2.log, memcheck.log, ab.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s33b.log
gpu_tests tests.log 80 "test_gpu (default)" tests/test_gpu.py
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead \
  gpu_tests tests2.log 80 "test_gpu (pooled, claims-finalize-ahead)" tests/test_gpu.py
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead \
  memcheck_case memcheck.log 80 "memcheck 3 (pooled, claims-finalize-ahead)" 3
ab_init .device/ab_old; ab_use other; ab_use nolb; ab_use own
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
run_side() {  # run_side SIDE SHAPE...
  local side=$1; shift
  ab_use $side > /dev/null
  timeout -s INT $(left ${END:-560}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    "$@" --batch 32 --reps 5 --check 1 --profile --memory lazy pooled-late-ahead > /tmp/sp.txt 2>&1
  grep -vE "^\{" /tmp/sp.txt | grep -E "kernel ms|B=32|CPU check|Error" \
    | sed -E 's/kernel ms per batch of 32 \(launch by launch, CUDA events\): //; s/ \([0-9]+%\)//g' \
    | sed "s/^/[$side $*] /" | cut -c1-230 | tee -a $L
  grep -E "^\{" /tmp/sp.txt | sed "s/^/{\"side\": \"$side\", \"shape\": \"$*\", \"row\": /; s/$/}/" >> $OUT/ab.jsonl
}
for side in other own nolb nolb own other; do run_side $side --utts 256; done
for side in other own own other; do run_side $side --uniform 250 --utts 32; done
echo "[$(since) s] done" | tee -a $L
