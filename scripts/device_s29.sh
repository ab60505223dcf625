#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine): branch pool-late with FinalizeKernel<1>
# (the claims' hand-out only where it is needed) and <2> (CUWFST_POOL_TOKENS=claims-defer: inside
# the first round); predictions: docs/speed-notes.md on the branch, "The claims' hand-out only
# where it is needed" and "Deferred into the first round".
#   while the full tier builds: the late tests by name (the 192-lane one and the 32-lane
#   claims-defer one), test_gpu.py under claims-defer (TEST_CAP2 s), then test_gpu.py and test_gpu_memory.py's
#   pooled tests with every decoder's lanes pooled and the next frontiers by the claims
#   (CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=slots CUWFST_POOL_TOKENS=claims; the tests whose premise
#   is the bound's token ask pin CUWFST_POOL_TOKENS=bound themselves), capped at TEST_CAP s
#   then fresh-process memory at batch 32: riva, pooled-late, pooled-late-defer
#   then HLG uniform 32 x 250, one process, --profile: lazy / pooled-slots-devlog / pooled-late /
#   pooled-late-defer / pooled, then the same in the reverse order
#   then the 256 utterances a call per 32: pooled-late against lazy (benchmarks.memory's speed part)
# Carry .device (the module is built on the device: with it the tree passes the carry limit).
# $OUT: s29.log, tests*.log, memory.jsonl.
. scripts/device_common.sh
device_setup s29.log
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -m gpu \
  "tests/test_gpu_memory.py::test_pooled_next_frontiers_sized_by_the_claims_pause_after_the_expansion" \
  "tests/test_gpu_memory.py::test_claims_defer_hands_out_in_the_first_round_and_pauses_as_claims" -s -rf \
  > $OUT/tests1.log 2>&1
echo "late test exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
grep -E "^FAILED|Error" $OUT/tests1.log | head -6 | cut -c1-250 | tee -a $L
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=slots CUWFST_POOL_TOKENS=claims-defer timeout -s INT ${TEST_CAP2:-60} \
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s -rf > $OUT/tests3.log 2>&1
echo "test_gpu (claims-defer) exit $?: $(grep -E "passed|failed" $OUT/tests3.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests3.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests3.log | head -6; } | cut -c1-220 | tee -a $L
CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=slots CUWFST_POOL_TOKENS=claims timeout -s INT $(left ${TEST_CAP:-230}) \
  python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_gpu_memory.py -k "pool or not test_gpu_memory" \
  -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu + pooled memory tests (claims-sized) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -6; } | cut -c1-220 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
for m in pooled-late pooled-late-defer; do mem_fresh $m --modes $m --skip riva speed long; done
for order in "lazy pooled-slots-devlog pooled-late pooled-late-defer pooled" \
    "pooled pooled-late-defer pooled-late pooled-slots-devlog lazy"; do
  timeout -s INT 150 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    --uniform 250 --utts 32 --batch 32 --reps 7 --check 2 --profile --memory $order > /tmp/uni.txt 2>&1
  grep -vE "^\{" /tmp/uni.txt | grep -E "kernel ms|B=32|CPU check" | cut -c1-230 | tee -a $L
done
timeout -s INT $(left 585) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
  --reps 3 --check 2 --modes pooled-late pooled-late-defer lazy --skip riva long > /tmp/mem_speed.txt 2>&1
grep -E "^\{" /tmp/mem_speed.txt | sed "s/^/{\"run\": \"speed\", \"row\": /; s/$/}/" >> $OUT/memory.jsonl
grep -vE "^\{" /tmp/mem_speed.txt | tail -14 | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
