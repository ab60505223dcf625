#!/usr/bin/env bash
# GPU machine, one call (~9 minutes) on branch next2 (main + lattice-overlap):
#   background: the full tier (~200 s on a fresh machine)
#   1. the 17 memory tests the last session's cap cut off (rescue growth, alternating layouts,
#      gc_interval, the auto layout), then the faults file, TEST_CAP s
#   2. gpu_speed, full HLG, uniform 32 x 250: memory lazy / pooled / lazy (the pooled lanes' cost
#      under today's kernels), profiled
#   3. lattice_speed --one-call --overlap-ab (64 utterances, 32 lanes: two sub-batches a call)
#   4. peers at batch 32, 64 utterances: cuwfst-gpu-tlg and riva, --feed batch then --feed all
# Carry .device and .cache. $OUT: call2.log, mem_tests.log, speed.jsonl, lat_speed.jsonl, peers*.{jsonl,md}
. scripts/device_common.sh
device_setup call2.log
timeout -s INT ${TEST_CAP:-170} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_memory.py \
  -k "rescue or alternate or gc_interval or auto" -s -rf --maxfail=20 > $OUT/mem_tests.log 2>&1
grep -sE "passed|failed" $OUT/mem_tests.log | tail -3 | tee -a $L
grep -sE "^FAILED" $OUT/mem_tests.log | head -20 | cut -c1-240 | tee -a $L
echo "[$(since) s] memory tests" | tee -a $L
wait_full ${FULL_WAIT:-300}
S=$C/sim/shard-00000.npz
timeout -s INT $(left ${HLG_END:-300}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $S --uniform 250 \
  --utts 32 --batch 32 --reps 5 --check 2 --profile --variants new --memory lazy pooled lazy \
  --json $OUT/speed.jsonl 2>&1 | grep -v "^{" | tail -12 | tee -a $L
echo "[$(since) s] speed" | tee -a $L
timeout -s INT $(left ${LAT_SPEED_END:-370}) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $S \
  --utts 64 --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call --overlap-ab \
  --json $OUT/lat_speed.jsonl 2>&1 | grep -E "^batch 32|exactness" | tee -a $L
echo "[$(since) s] lattice speed" | tee -a $L
for feed in batch all; do
  timeout -s INT $(left $([ $feed = batch ] && echo ${PEERS1_END:-460} || echo ${PEERS2_END:-560})) python3 -m benchmarks.peers.run \
    --corpus $C --set sim --batch 32 --utts 64 --reps 3 --feed $feed --decoders ${PEERS:-cuwfst-gpu-tlg riva} \
    --json $OUT/peers_$feed.jsonl --md $OUT/peers_$feed.md 2>&1 | grep -E "^\[peers\]|Error" | tail -6 | tee -a $L
  echo "[$(since) s] peers --feed $feed" | tee -a $L
done
