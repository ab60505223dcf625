#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine), issue 10: the lattice candidates in
# per-lane regions with their destinations, and LatPersistKernel's CTAs past the step's
# candidates returning at once unless ExpandKernel raised the step's walk flag; the lane rank's
# large groups ranked by per-word popcount prefixes (PrLaneRank).
# Predictions: docs/speed-notes.md "Candidates a lane, with their destinations" and "The large
# groups' prefixes", written before.
#   while the full tier (HLG) builds: the lattice subset (goldens, random lattices, pruning,
#   bounded runs, filter, trim) and the candidate tests, a test_gpu.py subset (ExpandKernel is
#   the 1-best's too)
#   then the module before the change (.device/ab_old: HEAD's versions of the changed files) and
#   this one, lattice_speed --one-call --profile old / new / old (64 utterances, batch 32); memcheck
#   over sanitize_case.py 2 --lattice on the new module
# Carry .device (wheels, COMMIT, data, ab_old). $OUT: s50.log, tests*.log, lat_*.jsonl, prune_split.txt,
# memcheck1.log.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s50.log
gpu_tests tests1.log 130 "test_gpu_lattice subset + candidates + rank sorts" tests/test_gpu_lattice.py \
  -k "random_lattices or k2_lattice or gpu_pruning or bounded_lattice or filter_keeps or lattice_trim_on or candidates or prune_rank or prune_bucket"
gpu_tests tests2.log 50 "test_gpu.py subset" tests/test_gpu.py -k "random or batch or tier"
ab_init .device/ab_old
ab_use other
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
echo "[old]" | tee -a $L; lat_speed lat_old1.jsonl $(( $(since) + 75 )) --profile
ab_use own
echo "[new]" | tee -a $L; lat_speed lat_new.jsonl $(( $(since) + 75 )) --profile
ab_use other
echo "[old]" | tee -a $L; lat_speed lat_old2.jsonl $(( $(since) + 75 )) --profile
ab_use own
CUWFST_PRUNE_SPLIT=1 timeout -s INT $(left 555) python3 scripts/prune_split.py $C/HLG.img $C/sim/shard-00000.npz 64 \
  on,lanes,warp 2> $OUT/prune_split.txt
grep -E "prune split|prune lane" $OUT/prune_split.txt | cut -c1-240 | tee -a $L
memcheck_case memcheck1.log $(left 595) "memcheck 2 --lattice (new)" 2 --lattice
echo "[$(since) s] done" | tee -a $L
