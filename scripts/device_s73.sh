#!/usr/bin/env bash
# GPU machine, a short call (~4 minutes), the session's last device time (~400 s): the known lanes
# left out of MaxKernel (Workspace::max_known). Exactness first, then a same-run A/B on the small
# tier (the full tier's build does not fit the time left). Prediction: docs/speed-notes.md "The
# known lanes left out of MaxKernel", written before.
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s73.log, tests*.log, lat.jsonl.
export NO_FULL=1
. scripts/device_common.sh
device_setup s73.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
S=/tmp/corpus-small
( python3 -m benchmarks.corpus.build --tier small --out $S --arpa .device/data/en-us-3gram.arpa.xz \
    --bpe-model cuwfst/data/tiny/bpe.model --graphs hlg && python3 -m benchmarks.corpus.simulate --corpus $S \
    --out $S/sim --num-utts 128 --shard-size 128 --seed 0 && echo SMALL-DONE ) > /tmp/small.log 2>&1 < /dev/null &
gpu_tests tests1.log 40 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 45 "test_gpu_lattice.py -k 'random_lattices or gpu_pruning'" tests/test_gpu_lattice.py \
  -k "random_lattices or gpu_pruning"
gpu_tests tests3.log 50 "test_gpu_lanes.py (whole)" tests/test_gpu_lanes.py
gpu_tests tests4.log 30 "test_gpu_epsilon.py (whole)" tests/test_gpu_epsilon.py
while ! grep -q SMALL-DONE /tmp/small.log && [ $(since) -lt 240 ]; do sleep 2; done
echo "[$(since) s] small tier: $(tail -1 /tmp/small.log)" | tee -a $L
timeout -s INT $(left 285) python3 -m benchmarks.lattice_speed --graph $S/HLG.img --log-probs $S/sim/shard-00000.npz \
  --utts 128 --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call --anchor-ab --profile \
  --json $OUT/lat.jsonl 2>&1 | grep -v "^{" | tail -16 | tee -a $L
gpu_tests tests5.log $(left 295) "test_gpu.py -k random" tests/test_gpu.py -k random
echo "[$(since) s] done" | tee -a $L
