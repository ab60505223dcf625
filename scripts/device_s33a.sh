#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine), for the next session (issue 9): do the
# pooled layout's 2-3 us a step come from its VMM-mapped pools? Nsight Compute timed
# pooled-late-ahead's kernels alone as fast as lazy's (session of 2026-12-02 14:43, calls 3-4),
# while back-to-back runs, in one process or one a mode, put it 1.03-1.06x lazy over the 256 rows.
# Lazy's lanes are cudaMalloc'd; the pooled ones are VMM reservations mapped piece by piece.
# CUWFST_LANE_VMM=off (benchmark mode pooled-late-ahead-eager) makes the pools eager regions
# (cudaMalloc'd, moved and re-captured on growth: the fallback where VMM is refused), and
# CUWFST_LANE_VMM=on (lazy-vmm) puts lazy's static lanes on one VMM reservation: the question
# asked from both sides. Each gpu_speed row also says how many pool growths its timed runs made.
#   while the full tier builds: test_gpu.py with every decoder pooled by claims-finalize-ahead on
#   eager pools, then with every decoder lazy on VMM lanes; memcheck over the first way
#   then memory at batch 32 (fresh process) of pooled-late-ahead-eager
#   then the 256 rows and the uniform 32 x 250: lazy / lazy-vmm / pooled-late-ahead /
#   pooled-late-ahead-eager, one process, then reversed (gpu_speed --profile --reps 5)
# Carry .device. $OUT: s33a.log, tests.log, tests2.log, memcheck.log, memory.jsonl, speed.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s33a.log
CUWFST_LANE_VMM=off CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead \
  gpu_tests tests.log 100 "test_gpu (pooled, claims-finalize-ahead, eager pools)" tests/test_gpu.py
CUWFST_LANE_VMM=on gpu_tests tests2.log 100 "test_gpu (lazy, static lanes on VMM)" tests/test_gpu.py
CUWFST_LANE_VMM=off CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead \
  memcheck_case memcheck.log 80 "memcheck 3 (pooled, eager pools)" 3
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
mem_fresh pooled-late-ahead-eager --modes pooled-late-ahead-eager --skip riva speed long
M="lazy lazy-vmm pooled-late-ahead pooled-late-ahead-eager"; R="pooled-late-ahead-eager pooled-late-ahead lazy-vmm lazy"
for shape in "--utts 256" "--uniform 250 --utts 32"; do
  for order in "$M" "$R"; do
    timeout -s INT $(left ${END:-570}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
      $shape --batch 32 --reps 5 --check 1 --profile --memory $order > /tmp/sp.txt 2>&1
    grep -vE "^\{" /tmp/sp.txt | grep -E "kernel ms|B=32|CPU check|Error" \
      | sed -E 's/kernel ms per batch of 32 \(launch by launch, CUDA events\): //; s/ \([0-9]+%\)//g' \
      | sed "s/^/[$shape] /" | cut -c1-250 | tee -a $L
    grep -E "^\{" /tmp/sp.txt | sed "s/^/{\"shape\": \"$shape\", \"order\": \"$order\", \"row\": /; s/$/}/" >> $OUT/speed.jsonl
  done
done
echo "[$(since) s] done" | tee -a $L
