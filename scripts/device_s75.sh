#!/usr/bin/env bash
# GPU machine, one call (~9.5 minutes on a fresh machine), issues 10 and 11: MaxKernel's grid at 32
# CTAs a lane (MaxBlocksFor) and LatPersistKernel's candidate records appended per CTA
# (LatCandRecordsBlock), both defaults now; the old ones by CUWFST_MAX_BLOCKS=2048 and
# CUWFST_LATTICE_APPEND=warp. Prediction: docs/speed-notes.md "The records appended per CTA".
#   while the full tier (HLG, TLG) builds: test_gpu_trim.py whole (the grids/appends test), the
#   lattice subset, test_gpu.py's random rows
#   then lattice_speed --utts 256 --profile --env-ab, and the peers (feed all, 256 utterances)
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s75.log, tests*.log, lat.jsonl, peers.*.
FULL_GRAPHS=hlg,tlg
. scripts/device_common.sh
device_setup s75.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 60 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 80 "test_gpu_lattice.py -k 'random_lattices or gpu_pruning or cand or grow'" tests/test_gpu_lattice.py \
  -k "random_lattices or gpu_pruning or cand or grow"
gpu_tests tests3.log 40 "test_gpu.py -k random" tests/test_gpu.py -k random
wait_full 335; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 455 --utts 256 --profile --env-ab max2048:CUWFST_MAX_BLOCKS=2048 \
  warp_append:CUWFST_LATTICE_APPEND=warp
timeout -s INT $(left 590) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $OUT/peers.txt 2>&1
echo "peers exit $?" | tee -a $L
grep -E "^\[peers\]" $OUT/peers.txt | tail -4 | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
