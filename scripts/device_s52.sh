#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine), issue 10: s50's changes mended (the
# candidates' destinations in a side array of the shared buffer, the walk flag, the candidate
# branch only in GPU-pruned decodes) and the lane rank's in-group ranks in the groups' order.
# Prediction: docs/speed-notes.md "The candidates' destinations and the walk flag, again, ...",
# written before.
#   while the full tier (HLG) builds: the lattice subset (goldens, random lattices, GPU pruning
#   against the replay, long inputs, bounded runs, filter, trim, candidates, rank sorts), a
#   test_gpu.py subset
#   then the lane clocks (prune_split.py, CUWFST_PRUNE_SPLIT) and lattice_speed --one-call
#   --profile with the module before (.device/ab_old: ad8d617's files) / this one / before;
#   memcheck over sanitize_case.py 2 --lattice on this one
# Carry .device (wheels, COMMIT, data, ab_old). $OUT: s52.log, tests*.log, lat_*.jsonl,
# prune_split_*.txt, memcheck1.log.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s52.log
gpu_tests tests1.log 150 "test_gpu_lattice subset + candidates + rank sorts" tests/test_gpu_lattice.py \
  -k "random_lattices or k2_lattice or gpu_pruning or bounded_lattice or filter_keeps or lattice_trim_on or candidates or prune_rank or prune_bucket"
gpu_tests tests2.log 40 "test_gpu.py subset" tests/test_gpu.py -k "random or batch or tier"
ab_init .device/ab_old
ab_use other
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
split() {  # split NAME: the lane clocks of one decode of 64 utterances
  timeout -s INT 60 python3 scripts/prune_split.py $C/HLG.img $C/sim/shard-00000.npz 64 on,lanes,warp 2> $OUT/prune_split_$1.txt
  grep -E "prune split|prune lane" $OUT/prune_split_$1.txt | head -2 | cut -c1-240 | sed "s/^/[$1] /" | tee -a $L
}
split old
echo "[old]" | tee -a $L; lat_speed lat_old1.jsonl $(( $(since) + 75 )) --profile
ab_use own
split new
echo "[new]" | tee -a $L; lat_speed lat_new.jsonl $(( $(since) + 75 )) --profile
ab_use other
echo "[old]" | tee -a $L; lat_speed lat_old2.jsonl $(( $(since) + 75 )) --profile
ab_use own
memcheck_case memcheck1.log $(left 595) "memcheck 2 --lattice (new)" 2 --lattice
echo "[$(since) s] done" | tee -a $L
