#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): branch pool-anchor. Predictions:
# docs/speed-notes.md, "The admissible count against the trim's anchor" (pooled-anchor 1.14-1.17x
# lazy on the uniform rows, peak 408-420 MiB).
#   while the full tier builds: the anchor test by name, then the pooled-bound tests and
#   test_gpu.py under CUWFST_POOL_BOUND=anchor, capped at TEST_CAP s
#   then fresh-process memory: riva, pooled, pooled-anchor at batch 32
#   then HLG uniform 32 x 250, one process, --profile: lazy / pooled / pooled-anchor / pooled-slots
#   (where pooled-slots' 6.4% goes is the other half of issue 9: the kernel split says which)
#   then the 256 utterances a call per 32: benchmarks.memory's speed part (builds its decoders in
#   its memory part: do not skip memory)
# Carry .device and the module. $OUT: s27.log, tests*.log, memory.jsonl.
. scripts/device_common.sh
device_setup s27.log
timeout -s INT 120 python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/test_gpu_memory.py::test_pooled_regions_counted_against_the_trims_anchor -s -rf > $OUT/tests1.log 2>&1
echo "anchor test exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
grep -E "^FAILED|Error" $OUT/tests1.log | head -6 | cut -c1-250 | tee -a $L
CUWFST_POOL_BOUND=anchor timeout -s INT $(left ${TEST_CAP:-200}) python3 -m pytest -q -p no:cacheprovider -m gpu \
  tests/test_gpu.py tests/test_gpu_memory.py -k "not counted_against_the_trims_anchor" -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu + test_gpu_memory (anchor in the environment) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -4; } | cut -c1-220 | tee -a $L
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
for m in pooled pooled-anchor; do mem_fresh $m --modes $m --skip riva speed long; done
timeout -s INT 120 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --uniform 250 --utts 32 --batch 32 --reps 5 --check 2 --profile --memory lazy pooled pooled-anchor pooled-slots > /tmp/uni.txt 2>&1
grep -vE "^\{" /tmp/uni.txt | tail -30 | cut -c1-200 | tee -a $L
timeout -s INT $(left 585) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
  --reps 3 --check 2 --modes pooled pooled-anchor lazy --skip riva long > /tmp/mem_speed.txt 2>&1
grep -E "^\{" /tmp/mem_speed.txt | sed "s/^/{\"run\": \"speed\", \"row\": /; s/$/}/" >> $OUT/memory.jsonl
grep -vE "^\{" /tmp/mem_speed.txt | tail -14 | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
