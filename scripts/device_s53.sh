#!/usr/bin/env bash
# GPU machine, one short call (~4 minutes, no full tier), issue 10: the session's final GPU code
# (ad8d617's search, PrLaneRank's in-group ranks in the groups' order) once more: the lattice
# subset with the candidate and rank-sort tests, memcheck at the default and over the lane
# rank's global scratch (CUWFST_PRUNE_LANE_CAP=64), racecheck while time is left.
# Carry .device (wheels, COMMIT). $OUT: s53.log, tests1.log, memcheck*.log, racecheck.log.
NO_FULL=1
. scripts/device_common.sh
device_setup s53.log
gpu_tests tests1.log 110 "test_gpu_lattice subset + candidates + rank sorts" tests/test_gpu_lattice.py \
  -k "random_lattices or k2_lattice or gpu_pruning or bounded_lattice or filter_keeps or lattice_trim_on or candidates or prune_rank or prune_bucket"
memcheck_case memcheck1.log 45 "memcheck 2 --lattice" 2 --lattice
CUWFST_PRUNE_LANE_CAP=64 memcheck_case memcheck2.log 45 "memcheck 1 --lattice --lattice-wide (cap 64)" 1 --lattice --lattice-wide
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT $(left 330) "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lattice --lattice-wide \
  > $OUT/racecheck.log 2>&1
echo "racecheck 1 --lattice --lattice-wide exit $?: $(tail -2 $OUT/racecheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
echo "[$(since) s] done" | tee -a $L
