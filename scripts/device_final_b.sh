#!/usr/bin/env bash
# GPU machine, right after device_final_a.sh on the warm machine (~6 minutes; the full tier is
# reused, else built first): issue 8 and issue 7's same-run figures.
#   1. streaming capacity, full HLG, N = STREAMS (default 1024 2048), 16-frame chunks, 16 streams
#      checked against the CPU; riva's online decoder at the same N on TLG.fst
#   2. one hour-long stream (90,000 frames), memory every chunk, result written for a CPU check
#   3. peers on the full TLG: cuwfst-gpu-tlg and riva (TLG.fst), cuwfst-gpu on the HLG, batch 32
# $OUT: b.log, results.jsonl, long_stream.csv, long_stream_result.json, peers.jsonl, *.md
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
left() { local l=$(( $1 - $(since) )); echo $(( l > 10 ? l : 10 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; L=$OUT/b.log; J=$OUT/results.jsonl
if [ ! -f $C/sim/shard-00000.npz ]; then
  echo "no full tier here: building it" | tee $L
  python3 -m benchmarks.corpus.build --tier full --out $C --arpa .device/data/en-us-3gram.arpa.xz \
    --bpe-model cuwfst/data/tiny/bpe.model > /tmp/full.log 2>&1
  python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 --shard-size 256 --seed 0 >> /tmp/full.log 2>&1
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT [$(since) s]"; } | tee -a $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
G=$C/HLG.img; S=$C/sim/shard-00000.npz; N=${STREAMS:-1024 2048}
timeout -s INT $(left 110) python3 -m benchmarks.streaming --graph $G --log-probs $S --streams $N --ticks 30 \
  --warmup-ticks 3 --seconds 50 --total-seconds 95 --check 16 --json $J --md $OUT/streaming.md 2>&1 | grep -v "^{" | tail -8 | tee -a $L
echo "[$(since) s] streams" | tee -a $L
timeout -s INT $(left 180) python3 -m benchmarks.streaming --graph $G --log-probs $S --streams $N --ticks 30 \
  --warmup-ticks 3 --seconds 30 --riva-only --riva-graph $C/TLG.fst --riva-total-seconds 60 \
  --json $J --md $OUT/riva_online.md 2>&1 | grep -v "^{" | tail -6 | tee -a $L
echo "[$(since) s] riva online" | tee -a $L
timeout -s INT $(left 270) python3 -m benchmarks.long_stream --graph $G --log-probs $S --frames 90000 --chunk 16 \
  --max-seconds 75 --no-check --result-out $OUT/long_stream_result.json --csv $OUT/long_stream.csv \
  --json $J --md $OUT/long.md 2>&1 | grep -v "^{" | tail -8 | tee -a $L
echo "[$(since) s] long stream" | tee -a $L
timeout -s INT $(left 350) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 64 --reps 3 \
  --decoders cuwfst-gpu-tlg riva cuwfst-gpu --json $OUT/peers.jsonl --md $OUT/peers.md 2>&1 | grep -v "^{" | tail -12 | tee -a $L
echo "[$(since) s] done" | tee -a $L
