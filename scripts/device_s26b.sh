#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine): branch graph-chunks, chunks on against off
# (CUWFST_GRAPH_CHUNKS), one module. Prediction: docs/speed-notes.md, "Captured step chunks".
#   while the full tier builds: the new chunk test and the graph-cache test (test_gpu_faults), then
#   the files whose sequences pass 128 steps (test_gpu, test_gpu_lanes: 256-step segments,
#   test_gpu_epsilon: the start closure in the head), capped
#   then fresh-process batch-32 memory (riva, pooled with chunks on, pooled with chunks off), and
#   HLG uniform 32 x 250 and the 256 utterances' dataset path, chunks on / off alternating
# Carry .device (and the module if it fits). $OUT: s26b.log, tests.log, memory.jsonl, speed_*.txt.
. scripts/device_common.sh
device_setup s26b.log
timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_faults.py -k "chunks or graph_cache" \
  > $OUT/tests_chunks.log 2>&1
echo "chunk tests exit $?: $(grep -E "passed|failed" $OUT/tests_chunks.log | tail -1) [$(since) s]" | tee -a $L
grep -E "^FAILED|^E  " $OUT/tests_chunks.log | cut -c1-220 | head -6 | tee -a $L
timeout -s INT ${TEST_CAP:-150} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_gpu_lanes.py \
  tests/test_gpu_epsilon.py -s > $OUT/tests.log 2>&1
echo "tests exit $?: $(grep -E "passed|failed" $OUT/tests.log | tail -1) [$(since) s]" | tee -a $L
{ grep -E "mismatch|identical" $OUT/tests.log | grep -v "^E " | head -4; grep -E "^FAILED" $OUT/tests.log | head -4; } | cut -c1-220 | tee -a $L
wait_full ${FULL_END:-330}; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
export CUWFST_GRAPH_CHUNKS=on; mem_fresh chunks-on --modes pooled --skip riva speed long
export CUWFST_GRAPH_CHUNKS=off; mem_fresh chunks-off --modes pooled --skip riva speed long
for side in on off on off; do
  [ $(since) -gt ${END:-520} ] && break
  export CUWFST_GRAPH_CHUNKS=$side
  timeout -s INT 60 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --uniform 250 \
    --utts 32 --batch 32 --reps 5 --check 1 > $OUT/speed_uniform_$side.txt 2>&1
  grep -E "B=32|CPU check|Error" $OUT/speed_uniform_$side.txt | sed "s/^/[chunks $side] /" | cut -c1-200 | tee -a $L
done
unset CUWFST_GRAPH_CHUNKS
echo "[$(since) s] done" | tee -a $L
