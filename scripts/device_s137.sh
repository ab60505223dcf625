#!/usr/bin/env bash
# GPU machine: issue 10, the third call of the session of 2026-12-05 04:55 (a fresh machine, ~640 s of
# device time left). On the merge of k2-numbering with the fix for CUWFST_PRUNE_CODE=arc (s136: 14 tests of
# test_gpu_lattice.py failed under code "arc": the forward's key took the image's arc id, not the source
# place; now PrKeyPlaces):
#   1. test_gpu_lattice.py (two processes) and test_k2_structure.py on the GPU, beside the full tier's build;
#   2. lattice_speed on the sim set (256 utterances, --check 4) with the tail's exit split once more: from
#      the overlap's exit to the rescue's end (lattice_trace_end), then to the return, and the rescue's
#      counts in the traced call (s135/s136: 25.8-27.5 ms from the exit to the return, unexplained).
# Stage: .device/wheels without riva, espeakng_loader, kaldi_native_fbank. Until END (default 400) s.
# $OUT: s137.log, tests.tgz, lat_sim.jsonl
. scripts/device_common.sh
END=${END:-400}
device_setup s137.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
K="prune_rank or code or bucket"
( timeout -s INT 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "$K" -rf \
    > $OUT/tests_lat1.log 2>&1; echo "exit $?" >> $OUT/tests_lat1.log ) &
( timeout -s INT 240 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "not ($K)" \
    tests/test_k2_structure.py -rf > $OUT/tests_lat2.log 2>&1; echo "exit $?" >> $OUT/tests_lat2.log ) &
wait
for n in lat1 lat2; do
  echo "[$n] $(tail -1 $OUT/tests_$n.log) $(grep -E "passed|failed" $OUT/tests_$n.log | tail -1)" | cut -c1-200 | tee -a $L
  grep -E "^FAILED" $OUT/tests_$n.log | head -6 | cut -c1-220 | tee -a $L
done
pack_logs 'tests_*.log'
echo "[$(since) s] tests" | tee -a $L
wait_full $((END - 60)); echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left $((END - 5))) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call --json $OUT/lat_sim.jsonl 2>&1 \
  | grep -E "vs 1-best|the tail|its tail|from the exit|collections|exactness|Error" | cut -c1-600 | tee -a $L
echo "[$(since) s] end" | tee -a $L
