#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine), issue 10: where the lattice mode stands
# against riva (bar: 3x riva at equal or better WER) and the 1-best, in one run (last measured
# 2026-12-01: 1.28x riva, before the pruning per lane). A shorter device_s51.sh (no tests, no
# lat_speed, no racecheck: no lattice code changed since s53's checks).
#   benchmarks.peers.run --feed all, batch 32, 256 utterances: cuwfst-gpu and cuwfst-gpu-lattice
#   on HLG.img, riva on TLG.fst, same log-probs and beams
# Carry .device (wheels, COMMIT, data). $OUT: s56.log, peers.md, peers.jsonl, peers.txt.
. scripts/device_common.sh
device_setup s56.log
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
R=/tmp/raw; mkdir -p $R
timeout -s INT $(left 585) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $R/peers.txt 2>&1
echo "peers exit $?" | tee -a $L
grep -E "^\[peers\]|Error" $R/peers.txt | tail -6 | cut -c1-200 | tee -a $L; grep -E "^\|" $OUT/peers.md | tail -5 | tee -a $L
cp $R/peers.txt $OUT/ 2>/dev/null
echo "[$(since) s] done" | tee -a $L
