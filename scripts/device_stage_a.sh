#!/usr/bin/env bash
# GPU machine, first call: install, start the full corpus build in the background (it
# outlives this call while the machine stays warm), GPU tests, small-tier corpus, speed
# and peers on the small tier, then compute-sanitizer with what time is left.
set -uo pipefail
T0=$(date +%s); left() { echo $(( ${1} - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/stage_a.log
ARPA=.device/data/en-us-3gram.arpa.xz
mkdir -p /tmp/full && cp -r . /tmp/full/repo 2>/dev/null
( cd /tmp/full/repo && setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier full --out /tmp/corpus-full --arpa $ARPA --bpe-model cuwfst/data/tiny/bpe.model && python3 -m benchmarks.corpus.simulate --corpus /tmp/corpus-full --out /tmp/corpus-full/sim --num-utts 256 --shard-size 256 --seed 0 && echo FULL-DONE" > /tmp/full/build.log 2>&1 < /dev/null & )
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; git log --oneline -1; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -3 | tee -a $L
timeout 240 python3 -m pytest -q tests -x 2>&1 | tail -15 | tee -a $L
python3 -m benchmarks.corpus.build --tier small --out /tmp/cs --arpa $ARPA --bpe-model cuwfst/data/tiny/bpe.model 2>&1 | tail -4 | tee -a $L
python3 -m benchmarks.corpus.simulate --corpus /tmp/cs --out /tmp/cs/sim --num-utts 128 --shard-size 128 --seed 0 > /dev/null 2>&1
timeout 120 python3 -m benchmarks.gpu_speed --graph /tmp/cs/HLG.img --log-probs /tmp/cs/sim/shard-00000.npz --utts 128 --batch 1 8 32 --walkers warp thread --reps 3 --check 16 --profile --json $OUT/speed.jsonl 2>&1 | tail -12 | tee -a $L
timeout 200 python3 -m benchmarks.peers.run --corpus /tmp/cs --batch 1 8 32 --utts 128 --cpu-utts 32 --reps 2 --md $OUT/bench_small.md --json $OUT/peers.jsonl 2>&1 | tail -25 | tee -a $L
R=$(left 560); [ $R -gt 60 ] && timeout $R bash scripts/device_sanitize.sh 2>&1 | tail -12 | tee -a $L
tail -3 /tmp/full/build.log | tee -a $L
