#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine), issue 10: the pruning per lane, v2: in-group ranks by bitmaps, phase clocks
# (CUWFST_PRUNE_SORT=lanes: PrLaneForwardKernel, PrLaneWindowsKernel) and the ranks by counting
# (CUWFST_PRUNE_SORT=count, PrCountRankKernel) against the block sort (the default).
# Prediction: docs/speed-notes.md "The in-group ranks by bitmaps (lanes v2)", written before.
#   while the full tier (HLG) builds: the rank-sort and bucketing tests (block, radix, segmented,
#   count, lanes, lanes:64 in every case: whole batches and bounded passes)
#   then prune_split.py block / lanes / block (64 utterances, batches of 32), lattice_speed
#   --one-call with lanes and with the default; then, as time allows, a broad lattice subset with
#   CUWFST_PRUNE_SORT=lanes and memcheck over sanitize_case.py 3 --lattice with it
# Carry .device (wheels, COMMIT, data). $OUT: s46.log, tests*.log, prune_split.txt, lat_*.jsonl,
# memcheck1.log.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s46.log
gpu_tests tests1.log 170 "rank-sort and bucketing tests (count, lanes, lanes:64 added)" tests/test_gpu_lattice.py -k "prune_rank or prune_bucket"
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
S=$C/sim/shard-00000.npz
timeout -s INT $(left 330) python3 scripts/prune_split.py $C/HLG.img $S 64 on,block,warp on,lanes,warp on,block,warp 2> $OUT/prune_split.txt
grep -E "prune split|prune lane|ranked|filter" $OUT/prune_split.txt | cut -c1-240 | tee -a $L
for sort in lanes block; do echo "[$sort]" | tee -a $L; CUWFST_PRUNE_SORT=$sort lat_speed lat_$sort.jsonl $(( $(since) + 90 )); done
CUWFST_PRUNE_SORT=lanes gpu_tests tests2.log $(left 540) "test_gpu_lattice subset, CUWFST_PRUNE_SORT=lanes" tests/test_gpu_lattice.py \
  -k "random_lattices or k2_lattice or gpu_pruning or bounded_lattice or filter_keeps or lattice_trim_on"
CUWFST_PRUNE_SORT=lanes memcheck_case memcheck1.log $(left 590) "memcheck 3 --lattice (lanes)" 3 --lattice
echo "[$(since) s] done" | tee -a $L
