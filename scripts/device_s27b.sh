#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine): branch graph-pack (prediction:
# docs/speed-notes.md, "Each arc's destination and label in one uint32").
#   while the full tier builds: the new test, then test_gpu, test_gpu_epsilon, test_gpu_chain and
#   test_gpu_lattice (lattice walks and the pruning read destinations), capped at TEST_CAP s
#   then fresh-process memory at batch 32: riva, pooled, pooled-slots, and pooled with
#   CUWFST_GRAPH_PACK=off
#   then HLG uniform 32 x 250 and TLG 64 utterances, packed / unpacked / packed / unpacked (the same
#   module; one process each, the setting read at the graph's upload)
# Carry .device and the module. $OUT: s27b.log, tests.log, memory.jsonl.
. scripts/device_common.sh
device_setup s27b.log
timeout -s INT $(left ${TEST_CAP:-260}) python3 -m pytest -q -p no:cacheprovider -m gpu \
  "tests/test_gpu_epsilon.py::test_packed_and_unpacked_arcs_decode_alike" tests/test_gpu.py tests/test_gpu_epsilon.py \
  tests/test_gpu_chain.py tests/test_gpu_lattice.py -s -rf > $OUT/tests.log 2>&1
echo "tests exit $?" | tee -a $L
{ grep -E "mismatch|identical" $OUT/tests.log | grep -v "^E " | head -6; grep -E "^FAILED" $OUT/tests.log | head -4
  grep -E "passed|failed" $OUT/tests.log | tail -1; } | cut -c1-220 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
for m in pooled pooled-slots; do mem_fresh $m --modes $m --skip riva speed long; done
CUWFST_GRAPH_PACK=off mem_fresh pooled-unpacked --modes pooled --skip riva speed long
for pack in on off on off; do
  [ $(since) -gt ${END:-540} ] && break
  for g in "HLG.img --uniform 250 --utts 32 --reps 5" "TLG.img --utts 64 --reps 3"; do
    set -- $g
    CUWFST_GRAPH_PACK=$pack timeout -s INT 60 python3 -m benchmarks.gpu_speed --graph $C/$1 --batch 32 --check 1 \
      --variants new --log-probs $C/sim/shard-00000.npz "${@:2}" > /tmp/ab.txt 2>&1
    grep -E "B=32|CPU check" /tmp/ab.txt | sed "s/^/[pack $pack $1] /" | cut -c1-170 | tee -a $L
  done
done
echo "[$(since) s] done" | tee -a $L
