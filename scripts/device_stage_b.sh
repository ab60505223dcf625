#!/usr/bin/env bash
# GPU machine, second call (right after stage a, machine still warm): wait for the full
# corpus, then speed + kernel breakdown and the peers table on the full HLG/TLG.
set -uo pipefail
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/stage_b.log
for i in $(seq 1 60); do grep -q FULL-DONE /tmp/full/build.log 2>/dev/null && break; sleep 5; done
grep -E "HLG|TLG|stages|Error|error" /tmp/full/build.log | tail -8 | tee $L
cp /tmp/corpus-full/stats.json $OUT/full_stats.json 2>/dev/null
git log --oneline -1 | tee -a $L
timeout 200 python3 -m benchmarks.gpu_speed --graph /tmp/corpus-full/HLG.img --log-probs /tmp/corpus-full/sim/shard-00000.npz --utts 128 --batch 1 8 32 --walkers ${WALKERS:-warp thread} --reps 3 --check 16 --profile --json $OUT/speed_full.jsonl 2>&1 | tail -12 | tee -a $L
timeout ${PEERS_TIMEOUT:-330} python3 -m benchmarks.peers.run --corpus /tmp/corpus-full --batch 1 8 32 --utts 128 --cpu-utts 32 --reps 2 --decoders ${DECODERS:-cuwfst-gpu riva greedy kaldi-decoder cuwfst-cpu} --md $OUT/bench_full.md --json $OUT/peers_full.jsonl 2>&1 | tail -25 | tee -a $L
