#!/usr/bin/env bash
# GPU machine, the session's last call (~9 minutes), issue 10: the decoder's stream as before (the
# priority of s79 removed) with the final steps' candidates kept: the GPU files over the changed
# paths, lattice_speed --utts 256 --profile (--env-ab: final steps walked; LatPersistKernel at 1,024
# CTAs now that no final step walks), the peers (feed all, 256 utterances), and Nsight Compute over
# a lattice decode's step kernels (durations, occupancy, stalls: what LatPersistKernel's ~30 us a
# step is made of). Prediction: docs/speed-notes.md "The last call", written before.
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s80.log, tests*.log, lat.jsonl, peers.*, ncu.txt
FULL_GRAPHS=hlg,tlg
. scripts/device_common.sh
device_setup s80.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 40 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 50 "test_gpu_faults.py + test_gpu_host.py" tests/test_gpu_faults.py tests/test_gpu_host.py
gpu_tests tests3.log 60 "test_gpu_lattice.py -k 'cand or random_lattices or gpu_pruning or k2'" tests/test_gpu_lattice.py \
  -k "cand or random_lattices or gpu_pruning or k2"
gpu_tests tests4.log 30 "test_gpu.py -k random" tests/test_gpu.py -k random
wait_full 345; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 420 --utts 256 --profile --env-ab final_walked:CUWFST_LATTICE_CAND_FINAL=off \
  lat1024:CUWFST_LAT_BLOCKS=1024
echo "[$(since) s] lattice_speed" | tee -a $L
timeout -s INT $(left 470) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $OUT/peers.txt 2>&1
echo "peers exit $?" | tee -a $L
grep -E "^\[peers\]" $OUT/peers.txt | tail -4 | cut -c1-200 | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout -s INT $(left 590) "$NCU" --target-processes all \
    --kernel-name "regex:ScanKernel|ScanSplitKernel|MaxKernel|ExpandKernel|FinalizeKernel|LatPersistKernel|LatStepEndKernel" \
    --launch-skip 700 --launch-count 14 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats python3 scripts/ncu_lattice_case.py $C/HLG.img $C/sim/shard-00000.npz > $OUT/ncu.txt 2>&1
  echo "ncu exit $?" | tee -a $L
  grep -E "^  [A-Za-z].*Kernel|^    Duration|Achieved Occupancy|Waves Per SM|Block Limit Shared|Theoretical Occupancy|Registers Per" \
    $OUT/ncu.txt | head -90 | tee -a $L
fi
echo "[$(since) s] done" | tee -a $L
