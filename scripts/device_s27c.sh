#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine): main with pool-anchor as the pooled
# default and graph-pack merged (both on by default).
#   while the full tier builds: test_gpu_memory whole (the pooled tests now under the anchor
#   bound by default), test_gpu_faults, test_cli's GPU test, test_gpu_lattice's pruning tests
#   that the caa5e1a call's cap cut, capped at TEST_CAP s
#   then fresh-process memory: riva, pooled at batch 32 and pooled at batch 256 (arcs packed)
#   then HLG uniform 32 x 250, one process, --profile: lazy / pooled / pooled-admit / pooled-slots
#   then lattice mode against the 1-best, 64 utterances in one call (issue 10's ratio, arcs packed)
# Carry .device. $OUT: s27c.log, tests.log, memory.jsonl, lat_speed.jsonl.
. scripts/device_common.sh
device_setup s27c.log
timeout -s INT $(left ${TEST_CAP:-250}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_memory.py \
  tests/test_gpu_faults.py tests/test_cli.py tests/test_gpu_lattice.py \
  -k "not test_gpu_lattice or bucket_per_warp or bounded_runs or radix_equals_segmented" -s -rf > $OUT/tests.log 2>&1
echo "tests exit $?" | tee -a $L
{ grep -E "mismatch|identical" $OUT/tests.log | grep -v "^E " | head -6; grep -E "^FAILED" $OUT/tests.log | head -6
  grep -E "passed|failed" $OUT/tests.log | tail -1; } | cut -c1-220 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
timeout -s INT 120 python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 256 \
  --reps 1 --check 0 --modes pooled --skip riva speed long > /tmp/mem256.txt 2>&1
grep -E "^\{" /tmp/mem256.txt | sed "s/^/{\"run\": \"b256\", \"row\": /; s/$/}/" >> $OUT/memory.jsonl
grep -E "^\{|Error" /tmp/mem256.txt | cut -c1-400 | sed "s/^/[b256] /" | tee -a $L
timeout -s INT 120 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --uniform 250 --utts 32 --batch 32 --reps 5 --check 2 --profile --memory lazy pooled pooled-admit pooled-slots > /tmp/uni.txt 2>&1
grep -vE "^\{" /tmp/uni.txt | tail -30 | cut -c1-200 | tee -a $L
echo "[$(since) s] uniform" | tee -a $L
timeout -s INT $(left 570) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 64 --batch 32 --reps 3 --cpu-utts 0 --check 4 --one-call --json $OUT/lat_speed.jsonl 2>&1 \
  | grep -v "^{" | tail -16 | tee -a $L
echo "[$(since) s] done" | tee -a $L
