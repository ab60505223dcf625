#!/usr/bin/env bash
# GPU machine, one call: full corpus build in the background; meanwhile build + all tests;
# then speed with the kernel breakdown and the peers table on the full tier (stored order
# and longest-first order), and torchaudio's CUDA CTC decoder in its own process.
set -uo pipefail
T0=$(date +%s); left() { echo $(( ${1} - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/run.log; C=/tmp/corpus-full
ARPA=.device/data/en-us-3gram.arpa.xz
( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier full --out $C --arpa $ARPA --bpe-model cuwfst/data/tiny/bpe.model && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 --shard-size 256 --seed 0 && echo FULL-DONE" > /tmp/full.log 2>&1 < /dev/null & )
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | tee -a $L
timeout 200 python3 -m pytest -q tests -x -p no:cacheprovider 2>&1 | tail -6 | tee -a $L
python3 -m cuwfst.cli demo 2>&1 | tail -2 | tee -a $L
while ! grep -q FULL-DONE /tmp/full.log && [ $(left 330) -gt 0 ]; do sleep 3; done
grep -E "^  (HLG|TLG)|stages" /tmp/full.log | tee -a $L; cp $C/stats.json $OUT/full_stats.json
timeout 150 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --utts 128 --batch 1 8 32 --walk-blocks ${WALK_BLOCKS:-0} --reps 3 --check 16 --profile --json $OUT/speed.jsonl 2>&1 | tail -9 | tee -a $L
timeout $(left 520) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 1 8 32 --utts 128 --cpu-utts 32 --reps 2 --decoders cuwfst-gpu riva greedy kaldi-decoder cuwfst-cpu --md $OUT/bench_given.md 2>&1 | grep -E "^\[peers\]" | tee -a $L
timeout $(left 570) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 8 32 --utts 128 --reps 2 --order length --decoders cuwfst-gpu riva --md $OUT/bench_length.md 2>&1 | grep -E "^\[peers\]" | tee -a $L
for b in ${CTC_BEAMS:-10 4 1}; do timeout 25 python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 64 --reps 1 --ctc-beam $b --decoders torchaudio-ctc 2>&1 | grep -E "^\[peers\]|Error|rror" | tail -3 | tee -a $L; done
