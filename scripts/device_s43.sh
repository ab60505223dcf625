#!/usr/bin/env bash
# GPU machine, one call (~5 minutes on a fresh machine), issue 10: where the GPU pruning's
# device passes (23.6 ms a batch of 32, s41) go, phase by phase and kernel by kernel, for the
# next design. Prediction: docs/speed-notes.md "Issue 10: the pruning's per-time kernels",
# written before.
#   prune_split.py (filter on, block rank, bucketing per warp), 64 utterances in batches of 32
#   ncu over one lattice batch: PrForwardKernel / PrBlockRankKernel / PrBackwardKernel (90
#   launches after the first 300), then LatPersistKernel / ExpandKernel (40 after the first 200):
#   duration, SM and DRAM throughput, grid, achieved occupancy
# Carry .device (wheels, COMMIT, data). $OUT: s43.log, prune_split.txt, ncu_prune.csv, ncu_lat.csv.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s43.log
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
S=$C/sim/shard-00000.npz
timeout -s INT 150 python3 scripts/prune_split.py $C/HLG.img $S 64 on,block,warp 2> $OUT/prune_split.txt
grep -E "prune split|ranked|filter" $OUT/prune_split.txt | cut -c1-240 | tee -a $L
echo "[$(since) s] split" | tee -a $L
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
MET=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active
ncu_run() {  # ncu_run OUTFILE REGEX SKIP COUNT CAP
  timeout -s INT $5 $NCU --target-processes all --kernel-name "regex:$2" --launch-skip $3 --launch-count $4 \
    --metrics $MET --csv python3 scripts/prune_split.py $C/HLG.img $S 32 on,block,warp > $OUT/$1 2> $OUT/$1.err
  echo "ncu $2 exit $?: $(grep -c '"gpu__time_duration.sum"' $OUT/$1) rows" | tee -a $L
  tail -3 $OUT/$1.err | cut -c1-200 | tee -a $L
}
ncu_run ncu_prune.csv "PrForwardKernel|PrBlockRankKernel|PrBackwardKernel" 300 90 $(left 480)
ncu_run ncu_lat.csv "LatPersistKernel|ExpandKernel" 200 40 $(left 580)
echo "[$(since) s] done" | tee -a $L
