#!/usr/bin/env bash
# GPU machine, session of 2026-12-01 18:37, call 2 (~7 minutes), branch block-rank-8k:
#   1. tests/test_gpu_walk_entry.py (every walker, so LaunchWith's cooperative and PDL launches)
#      and the lattice file's rank/bucket tests
#   2. gpu_speed, full HLG, uniform 32 x 250: memory lazy / pooled / pooled-slots / pooled-bins /
#      lazy (the pooled bounds' cost now that the slots are trimmed), median of 5, profiled
#   3. benchmarks.memory --batch 32 256 --skip long riva --modes pooled pooled-slots lazy
# Carry .device and .cache. $OUT: s18b.log, walk.log, mem_speed.jsonl, mem_speed.txt, memory.md, memory.jsonl
. scripts/device_common.sh
device_setup s18b.log
timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_walk_entry.py -s -rf --maxfail=10 \
  > $OUT/walk.log 2>&1
grep -sE "passed|failed|walk entry" $OUT/walk.log | tail -3 | tee -a $L; grep -sE "^FAILED|Error" $OUT/walk.log | head -8 | cut -c1-300 | tee -a $L
echo "[$(since) s] walk entry" | tee -a $L
wait_full 250
S=$C/sim/shard-00000.npz
timeout -s INT 150 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $S --uniform 250 --utts 32 --batch 32 \
  --reps 5 --check 2 --profile --variants new --memory lazy pooled pooled-slots pooled-bins lazy \
  --json $OUT/mem_speed.jsonl > $OUT/mem_speed.txt 2>&1
grep -E "kernel ms|B=32|CPU check" $OUT/mem_speed.txt | cut -c1-260 | tee -a $L
echo "[$(since) s] memory speed" | tee -a $L
timeout -s INT $(left 560) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $S --batch 32 256 --reps 3 \
  --check 2 --skip long riva --modes pooled pooled-slots lazy --json $OUT/memory.jsonl --md $OUT/memory.md > $OUT/memory.txt 2>&1
tail -30 $OUT/memory.md | tee -a $L
echo "[$(since) s] done" | tee -a $L
