#!/usr/bin/env bash
# GPU machine, one call (~10 minutes on a fresh machine), issue 10: a final step's arcs as candidates
# (LatCandFinalOn; CUWFST_LATTICE_CAND_FINAL=off walks final steps as before) and the decoder's stream
# at the device's greatest priority (CUWFST_STREAM_PRIORITY=default: as before). Prediction:
# docs/speed-notes.md "Final steps from candidates, and the decoder's stream priority", written before.
#   while the full tier (HLG, TLG) builds: test_gpu_trim.py whole (the grids test's new sides), the
#   lattice subset, test_gpu_lanes.py and test_gpu_epsilon.py (owed since s74), capped
#   then lattice_speed --utts 256 --profile --env-ab, and the peers (feed all, 256 utterances)
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s79.log, tests*.log, lat.jsonl, peers.*.
FULL_GRAPHS=hlg,tlg
. scripts/device_common.sh
device_setup s79.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 50 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 70 "test_gpu_lattice.py -k 'cand or random_lattices or gpu_pruning or grow or k2 or filter'" \
  tests/test_gpu_lattice.py -k "cand or random_lattices or gpu_pruning or grow or k2 or filter"
gpu_tests tests3.log 75 "test_gpu_lanes.py (whole, capped)" tests/test_gpu_lanes.py
gpu_tests tests4.log $(left 335) "test_gpu_epsilon.py (whole, capped)" tests/test_gpu_epsilon.py
wait_full 345; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 460 --utts 256 --profile --env-ab final_walked:CUWFST_LATTICE_CAND_FINAL=off \
  prio_default:CUWFST_STREAM_PRIORITY=default
echo "[$(since) s] lattice_speed" | tee -a $L
timeout -s INT $(left 592) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $OUT/peers.txt 2>&1
echo "peers exit $?" | tee -a $L
grep -E "^\[peers\]" $OUT/peers.txt | tail -4 | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
