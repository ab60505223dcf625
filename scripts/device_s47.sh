#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine), issue 10: the lane kernels with no graph
# reads in the forward, batched record loads (windows; the forward at 512 threads), lanes the
# default. Prediction: docs/speed-notes.md "No graph reads in the forward, ...", written before.
#   while the full tier (HLG) builds: the whole of tests/test_gpu_lattice.py at the default (lanes,
#   1,024 threads; its rank-sort tests run every sort, lanes/512 and lanes:64/512 included)
#   then prune_split.py block / lanes / lanes 512 / block, lattice_speed --one-call with lanes
#   (default), lanes 512 and block; memcheck over sanitize_case.py 3 --lattice at the default and
#   with 512 threads
# Carry .device (wheels, COMMIT, data). $OUT: s47.log, tests1.log, prune_split.txt, lat_*.jsonl,
# memcheck*.log.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s47.log
gpu_tests tests1.log 200 "tests/test_gpu_lattice.py (default: lanes)" tests/test_gpu_lattice.py
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
S=$C/sim/shard-00000.npz
timeout -s INT $(left 400) python3 scripts/prune_split.py $C/HLG.img $S 64 on,block,warp on,lanes,warp on,lanes,warp,512 on,block,warp 2> $OUT/prune_split.txt
grep -E "prune split|prune lane|ranked|filter" $OUT/prune_split.txt | cut -c1-240 | tee -a $L
echo "[lanes]" | tee -a $L; lat_speed lat_lanes.jsonl $(( $(since) + 90 ))
echo "[lanes 512]" | tee -a $L; CUWFST_PRUNE_LANE_THREADS=512 lat_speed lat_lanes512.jsonl $(( $(since) + 90 ))
echo "[block]" | tee -a $L; CUWFST_PRUNE_SORT=block lat_speed lat_block.jsonl $(( $(since) + 90 ))
memcheck_case memcheck1.log $(left 560) "memcheck 3 --lattice (lanes)" 3 --lattice
CUWFST_PRUNE_LANE_THREADS=512 memcheck_case memcheck2.log $(left 595) "memcheck 3 --lattice (lanes 512)" 3 --lattice
echo "[$(since) s] done" | tee -a $L
