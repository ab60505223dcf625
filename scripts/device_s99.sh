#!/usr/bin/env bash
# GPU machine (session of 2026-12-04 07:55, the last ~240 s of device time): issue 7's proof on the
# small tier's TLG, GPU against CPU row by row (the tiny TLG is in tests/test_gpu_epsilon.py, the
# full TLG in gpu_speed's checks of earlier sessions).
#   1. wheels; the module built (no full tier)
#   2. the small tier (HLG and TLG) and 64 simulated utterances in /tmp/corpus-small
#   3. gpu_speed on the small TLG and HLG: 64 utterances, batch 32, one timed pass, every row compared
#      with the CPU decoder (--check 64: words, arcs, float32 score)
# Carry .device. $OUT: s99.log, small.jsonl
. scripts/device_common.sh
NO_FULL=1 device_setup s99.log
S=/tmp/corpus-small
python3 -m benchmarks.corpus.build --tier small --out $S --arpa .device/data/en-us-3gram.arpa.xz \
  --bpe-model cuwfst/data/tiny/bpe.model --graphs hlg,tlg > /tmp/small.log 2>&1
grep -E "^  (HLG|TLG)|Error" /tmp/small.log | tail -3 | tee -a $L
python3 -m benchmarks.corpus.simulate --corpus $S --out $S/sim --num-utts 64 --shard-size 64 --seed 0 > /dev/null 2>&1
echo "[$(since) s] small tier" | tee -a $L
for G in TLG HLG; do
  timeout -s INT 60 python3 -m benchmarks.gpu_speed --graph $S/$G.img --log-probs $S/sim/shard-00000.npz --utts 64 \
    --batch 32 --reps 1 --check 64 --variants new --json $OUT/small.jsonl 2>&1 | grep -E "B=32|CPU check|Error" \
    | cut -c1-200 | sed "s/^/[small $G] /" | tee -a $L
done
echo "[$(since) s] done" | tee -a $L
