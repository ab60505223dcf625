#!/usr/bin/env bash
# GPU machine, the session's last call (~7-8 minutes), issues 10 and 11: LatPersistKernel's grid at 32
# CTAs a lane in candidate mode (LatBlocksFor) and its lanes in dynamic shared memory sized to
# max_lanes (LatPersistSmem); ExpandKernel and LatPersistKernel compiled for 6 CTAs a multiprocessor
# as opt-in A/B sides (CUWFST_EXPAND_MIN_BLOCKS=6, CUWFST_LAT_MIN_BLOCKS=6). Prediction:
# docs/speed-notes.md "Occupancy: registers and shared memory", written before.
#   while the full tier (HLG, TLG) builds: test_gpu_trim.py whole (the grids test's min_blocks side),
#   the lattice subset, test_gpu.py's random rows, memcheck and racecheck over --lattice;
#   then lattice_speed --utts 256 --profile --env-ab, and the peers (feed all, 256 utterances)
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s81.log, tests*.log, memcheck.log, racecheck.log,
# lat.jsonl, peers.*
FULL_GRAPHS=hlg,tlg
. scripts/device_common.sh
device_setup s81.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 45 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 60 "test_gpu_lattice.py -k 'cand or random_lattices or gpu_pruning or k2'" tests/test_gpu_lattice.py \
  -k "cand or random_lattices or gpu_pruning or k2"
gpu_tests tests3.log 30 "test_gpu.py -k random" tests/test_gpu.py -k random
lattice_memcheck 80
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 60 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lattice \
  > $OUT/racecheck.log 2>&1; echo "racecheck --lattice exit $?: $(tail -3 $OUT/racecheck.log | tr '\n' ' ')" | cut -c1-300 | tee -a $L
wait_full 345; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 440 --utts 256 --profile --env-ab lat2048:CUWFST_LAT_BLOCKS=2048 lat6:CUWFST_LAT_MIN_BLOCKS=6 \
  expand6:CUWFST_EXPAND_MIN_BLOCKS=6 both6:CUWFST_EXPAND_MIN_BLOCKS=6,CUWFST_LAT_MIN_BLOCKS=6
echo "[$(since) s] lattice_speed" | tee -a $L
timeout -s INT $(left 495) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $OUT/peers.txt 2>&1
echo "peers exit $?" | tee -a $L
grep -E "^\[peers\]" $OUT/peers.txt | tail -4 | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
