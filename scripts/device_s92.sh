#!/usr/bin/env bash
# GPU machine (~9 minutes), session of 2026-12-04 02:28 (issues 10 and 11): the search's empty
# pairs and the top three by extraction (scan.cuh; prediction in docs/speed-notes.md "The search's
# empty pairs", written before). Side A is main's scan.cuh before the change (.device/ab_old).
#   while the full tier builds: test_gpu_trim.py whole, test_gpu.py -k random, the lattice subset
#   (k2 goldens, candidates, GPU pruning), test_gpu_variants.py (capped); both modules built; then
#   lattice_speed --utts 256 --profile new / old / new (one process each), the peers (feed all,
#   256 utterances, riva on the TLG)
# Carry .device. $OUT: s92.log, lat_new.jsonl, lat_old.jsonl, lat_new2.jsonl, peers.*, tests.tgz
. scripts/device_common.sh
device_setup s92.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 60 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
grep -E "^E |label bound:" $OUT/tests1.log | head -12 | cut -c1-240 | tee -a $L
gpu_tests tests2.log 30 "test_gpu.py -k random" tests/test_gpu.py -k random
gpu_tests tests3.log 60 "test_gpu_lattice.py -k 'cand or random_lattices or gpu_pruning or k2'" tests/test_gpu_lattice.py \
  -k "cand or random_lattices or gpu_pruning or k2"
gpu_tests tests4.log 150 "test_gpu_variants.py (whole, capped)" tests/test_gpu_variants.py
grep -E "mismatch|rows" $OUT/tests4.log | grep -v "^E " | tail -2 | cut -c1-200 | tee -a $L
ab_init .device/ab_old; ab_use other; ab_use own
wait_full 380; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat_new.jsonl 420 --utts 256 --profile
ab_use other; lat_speed lat_old.jsonl 455 --utts 256 --profile
ab_use own; lat_speed lat_new2.jsonl 490 --utts 256 --profile
echo "[$(since) s] lattice_speed x3" | tee -a $L
peers 585 cuwfst-gpu cuwfst-gpu-lattice riva
echo "[$(since) s] peers" | tee -a $L
pack_logs 'tests*.log'
echo "[$(since) s] done" | tee -a $L
