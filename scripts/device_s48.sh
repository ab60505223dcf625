#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine), issue 10: the final state of the session's
# lane kernels (the default) under the sanitizers, and the lattice ratio over 64 and 256 utterances.
# Prediction: docs/speed-notes.md "The sanitizers on the lane kernels, and 256 utterances", written before.
#   while the full tier (HLG) builds: the rank-sort and bucketing tests; compute-sanitizer memcheck
#   over sanitize_case.py 1 --lattice --lattice-wide at the default and with the lane rank's shared
#   memory lowered to 64 tokens (CUWFST_PRUNE_LANE_CAP: the global scratch path); racecheck over
#   the same case
#   then lattice_speed --one-call, 64 and 256 utterances, the default (lanes) and block
# Carry .device (wheels, COMMIT, data). $OUT: s48.log, tests1.log, memcheck*.log, racecheck.log,
# lat_*.jsonl.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s48.log
gpu_tests tests1.log 90 "rank-sort and bucketing tests" tests/test_gpu_lattice.py -k "prune_rank or prune_bucket"
memcheck_case memcheck1.log 70 "memcheck 1 --lattice --lattice-wide (lanes)" 1 --lattice --lattice-wide
CUWFST_PRUNE_LANE_CAP=64 memcheck_case memcheck2.log 70 "memcheck 1 --lattice --lattice-wide (lanes, cap 64)" 1 --lattice --lattice-wide
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT $(left 300) "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lattice --lattice-wide \
  > $OUT/racecheck.log 2>&1
echo "racecheck 1 --lattice --lattice-wide (lanes) exit $?: $(tail -2 $OUT/racecheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
for n in 64 256; do
  echo "[lanes $n]" | tee -a $L; lat_speed lat_lanes_$n.jsonl $(( $(since) + 60 )) --utts $n
  echo "[block $n]" | tee -a $L; CUWFST_PRUNE_SORT=block lat_speed lat_block_$n.jsonl $(( $(since) + 60 )) --utts $n
done
echo "[$(since) s] done" | tee -a $L
