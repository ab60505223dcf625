#!/usr/bin/env bash
# (Written 2026-12-03 06:38 and not run that session: the device time went to s50, s52 and s53.)
# GPU machine, one call (~9 minutes on a fresh machine), issue 10: the session's lattice changes
# (candidates a lane with their destinations, the walk flag, the large groups' prefixes) over the
# whole GPU lattice file, then where the lattice mode stands against riva and the 1-best.
#   while the full tier (HLG and TLG) builds: the whole of tests/test_gpu_lattice.py
#   then benchmarks.peers.run --feed all, batch 32, 256 utterances: cuwfst-gpu and
#   cuwfst-gpu-lattice on HLG.img, riva on TLG.fst (issue 10's bar: the lattice mode 3x riva at
#   equal or better WER); lattice_speed --one-call over the 256 utterances (bar: 1.5x the 1-best);
#   racecheck over sanitize_case.py 1 --lattice --lattice-wide
# Carry .device (wheels, COMMIT, data). $OUT: s51.log, tests1.log, peers.md, peers.jsonl, lat_256.jsonl,
# racecheck.log.
. scripts/device_common.sh
device_setup s51.log
gpu_tests tests1.log 220 "tests/test_gpu_lattice.py (whole)" tests/test_gpu_lattice.py
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
R=/tmp/raw; mkdir -p $R
timeout -s INT $(left 470) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $R/peers.txt 2>&1
grep -E "^\[peers\]|Error" $R/peers.txt | tail -6 | cut -c1-200 | tee -a $L; grep -E "^\|" $OUT/peers.md | tail -5 | tee -a $L
echo "[$(since) s] peers" | tee -a $L
lat_speed lat_256.jsonl 545 --utts 256
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT $(left 595) "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lattice --lattice-wide \
  > $OUT/racecheck.log 2>&1
echo "racecheck 1 --lattice --lattice-wide exit $?: $(tail -2 $OUT/racecheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
cp $R/peers.txt $OUT/ 2>/dev/null
echo "[$(since) s] done" | tee -a $L
