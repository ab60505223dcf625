#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine), issue 10: the pipelined pruning's A/B
# with its "off" side fixed (s65's off side drained the host work before every sub-batch), where
# the calling thread's time goes (lattice_speed's trace, a shorter GIL switch interval,
# scripts/decode_split.py), and the lattice mode against riva in one run (peers, feed all).
# Prediction: docs/speed-notes.md "Session of 2026-12-03 13:53" (s66), written before.
#   while the full tier (HLG + TLG) builds: test_gpu_lattice.py subset (random lattices, goldens,
#   the GPU pruning, failures)
#   then lattice_speed --utts 256 --pipeline-ab --switch-us 200, decode_split.py over the 256
#   utterances, benchmarks.peers.run --feed all (cuwfst-gpu, cuwfst-gpu-lattice on HLG.img, riva
#   on TLG.fst)
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s66.log, tests1.log, lat.jsonl, split.txt,
# peers.md, peers.jsonl, peers.txt.
. scripts/device_common.sh
device_setup s66.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 150 "test_gpu_lattice.py subset" tests/test_gpu_lattice.py \
  -k "random_lattices or k2_lattice or gpu_pruning or fail or bounded"
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 420 --utts 256 --pipeline-ab --switch-us 200
echo "[$(since) s]" | tee -a $L
timeout -s INT 60 python3 scripts/decode_split.py $C/HLG.img $C/sim/shard-00000.npz 256 > $OUT/split.txt 2>&1
tail -4 $OUT/split.txt | tee -a $L
echo "[$(since) s]" | tee -a $L
R=/tmp/raw; mkdir -p $R
timeout -s INT $(left 585) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $R/peers.txt 2>&1
echo "peers exit $?" | tee -a $L
grep -E "^\[peers\]|Error" $R/peers.txt | tail -6 | cut -c1-200 | tee -a $L; grep -E "^\|" $OUT/peers.md | tail -5 | cut -c1-200 | tee -a $L
cp $R/peers.txt $OUT/ 2>/dev/null
echo "[$(since) s] done" | tee -a $L
