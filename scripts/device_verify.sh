#!/usr/bin/env bash
# GPU machine, one call (~8 minutes): everything since the last full GPU run, verified.
#   the full tier builds in the background (~230 s) while
#   1. every GPU test runs (tests marked gpu: lanes with the arena guard and CUDA chunks,
#      faults, epsilon, offline), capped at 200 s
#   2. compute-sanitizer memcheck over the fault walks and over the lanes sanitize case
#   3. on the full tier: streaming capacity at 512..4096 streams with 16 sampled streams each
#      checked against the CPU (the arena guard's proof at scale: 0/16 before it)
# $OUT: verify.log, streams.md, results.jsonl
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; L=$OUT/verify.log
ARPA=.device/data/en-us-3gram.arpa.xz
if [ ! -f $C/sim/shard-00000.npz ]; then
( setsid nohup nice -n 5 bash -c "python3 -m benchmarks.corpus.build --tier full --out $C --arpa $ARPA --bpe-model cuwfst/data/tiny/bpe.model && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 --shard-size 256 --seed 0 && echo FULL-DONE" > /tmp/full.log 2>&1 < /dev/null & )
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests -s 2>&1 \
  | grep -E "passed|failed|FAILED|Error|GPU vs CPU|lanes:|rows compared" | tail -16 | tee -a $L
echo "[$(since) s] GPU tests" | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_FREE_SLACK_MIB=1024 timeout -s INT 100 "$CS" --tool memcheck --leak-check no --report-api-errors no \
  python3 -m pytest -q tests/test_gpu_faults.py -p no:cacheprovider \
  -k "construction_site or growth_site or upload_freed or graph_cache or short_batches or arena_overflow or cannot_be_rescued" 2>&1 \
  | grep -E "held now|alive|passed|failed|FAILED|ERROR SUMMARY" | head -12 | tee -a $L
timeout 60 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 2 --eps --lanes 2>&1 \
  | tail -2 | tee -a $L
echo "[$(since) s] memcheck" | tee -a $L
while [ ! -f $C/sim/shard-00000.npz ] && [ $(since) -lt 380 ]; do sleep 3; done
grep -E "^  (HLG|TLG)|stages|Error" /tmp/full.log | tail -3 | tee -a $L
timeout -s INT $(( 560 - $(since) )) python3 -m benchmarks.streaming --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --device cuda --streams 512 1024 2048 4096 --ticks 20 --warmup-ticks 3 --seconds 30 --check 16 \
  --json $OUT/results.jsonl --md $OUT/streams.md 2>&1 | grep -E "^\| cuwfst|Error|error" | tee -a $L
echo "[$(since) s] done" | tee -a $L
