#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine), issues 10 and 11: the step's max from the
# trim's anchor, token-major (MaxTokensKernel; CUWFST_MAX_ANCHOR=slots: s70's slot walk from the
# anchor; off: the walk from -inf). Prediction: docs/speed-notes.md "The max token-major", written before.
#   while the full tier builds: test_gpu_trim.py whole, the lattice subset, test_gpu.py random,
#   test_gpu_lanes.py whole, test_gpu_epsilon.py, test_gpu_memory.py (capped: the pooled layouts whose
#   max is the non-counting one take the new kernel too)
#   then lattice_speed --utts 256 --anchor-ab --profile, and the peers (feed all, 256 utterances)
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s71.log, tests*.log, lat.jsonl, peers.*.
FULL_GRAPHS=hlg,tlg
. scripts/device_common.sh
device_setup s71.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 60 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 60 "test_gpu_lattice.py -k 'random_lattices or gpu_pruning'" tests/test_gpu_lattice.py \
  -k "random_lattices or gpu_pruning"
gpu_tests tests3.log 40 "test_gpu.py -k random" tests/test_gpu.py -k random
gpu_tests tests4.log 100 "test_gpu_lanes.py (whole)" tests/test_gpu_lanes.py
gpu_tests tests5.log 60 "test_gpu_epsilon.py (whole)" tests/test_gpu_epsilon.py
gpu_tests tests6.log 80 "test_gpu_memory.py (capped)" tests/test_gpu_memory.py
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 470 --utts 256 --anchor-ab --profile
timeout -s INT $(left 585) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $OUT/peers.txt 2>&1
echo "peers exit $?" | tee -a $L
grep -E "^\[peers\]" $OUT/peers.txt | tail -4 | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
