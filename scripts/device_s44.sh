#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine), issue 10: the pruning's ranks by
# counting (CUWFST_PRUNE_SORT=count, PrCountRankKernel) against the block sort (the default).
# Prediction: docs/speed-notes.md "The ranks by counting", written before. NOT RUN YET (session
# of 2026-12-02 21:25: three refused machine starts used the device time it was written for).
#   while the full tier (HLG) builds: the rank-sort and bucketing tests (the count path added to
#   every case); a broad lattice subset with CUWFST_PRUNE_SORT=count (random GPU == CPU, the k2
#   goldens, the GPU pruning, bounded runs, the filter); memcheck over sanitize_case.py 3 --lattice
#   with it
#   then prune_split.py block / count / block (64 utterances, batches of 32), and lattice_speed
#   --one-call with the default and with count
# Carry .device (wheels, COMMIT, data). $OUT: s44.log, tests*.log, memcheck1.log, prune_split.txt,
# lat_block.jsonl, lat_count.jsonl.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s44.log
gpu_tests tests1.log 120 "rank-sort and bucketing tests (count added)" tests/test_gpu_lattice.py -k "prune_rank or prune_bucket"
CUWFST_PRUNE_SORT=count gpu_tests tests2.log 150 "test_gpu_lattice subset, CUWFST_PRUNE_SORT=count" tests/test_gpu_lattice.py \
  -k "random_lattices or k2_lattice or gpu_pruning or bounded_lattice or filter_keeps or lattice_trim_on"
CUWFST_PRUNE_SORT=count memcheck_case memcheck1.log 80 "memcheck 3 --lattice (count)" 3 --lattice
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
S=$C/sim/shard-00000.npz
timeout -s INT $(left 480) python3 scripts/prune_split.py $C/HLG.img $S 64 on,block,warp on,count,warp on,block,warp 2> $OUT/prune_split.txt
grep -E "prune split|ranked|filter" $OUT/prune_split.txt | cut -c1-240 | tee -a $L
for sort in count block; do echo "[$sort]" | tee -a $L; CUWFST_PRUNE_SORT=$sort lat_speed lat_$sort.jsonl 570; done
echo "[$(since) s] done" | tee -a $L
