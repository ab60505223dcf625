#!/usr/bin/env bash
# GPU machine, one short call (~3.5 minutes): the streams' arena guard (tests/test_gpu_lanes.py,
# all of it), the fault walks under memcheck (issue 14), the streaming capacity check at 512 to
# 2048 streams on the small tier (built in the background), and time-capped runs of the
# offline GPU suites (ScanKernel reads the guard in every decode). $OUT: guard.log
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/guard.log
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl > /dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
echo "commit $(cat .device/COMMIT)" | tee $L
( python3 -m benchmarks.corpus.build --tier small --out /tmp/corpus-small --arpa .device/data/en-us-3gram.arpa.xz \
    --bpe-model cuwfst/data/tiny/bpe.model > /tmp/small.log 2>&1 && python3 -m benchmarks.corpus.simulate \
    --corpus /tmp/corpus-small --out /tmp/corpus-small/sim --num-utts 256 --shard-size 256 --seed 0 >> /tmp/small.log 2>&1 ) &
SMALL=$!
timeout -s INT 40 python3 -m pytest -q tests/test_gpu_lanes.py -p no:cacheprovider 2>&1 | tail -6 | tee -a $L
echo "[$(since) s] lanes tests done" | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_FREE_SLACK_MIB=1024 timeout -s INT 40 "$CS" --tool memcheck --leak-check no --report-api-errors no \
  python3 -m pytest -q tests/test_gpu_faults.py -p no:cacheprovider \
  -k "growth_site or upload_freed or graph_cache or short_batches or arena_overflow or cannot_be_rescued" 2>&1 \
  | grep -E "held now|alive|referred|passed|failed|FAILED|ERROR SUMMARY|Error" | head -20 | tee -a $L
echo "[$(since) s] memcheck done" | tee -a $L
wait $SMALL; tail -1 /tmp/small.log | tee -a $L
timeout -s INT 35 python3 -m benchmarks.streaming --graph /tmp/corpus-small/HLG.img --log-probs /tmp/corpus-small/sim/shard-00000.npz \
  --device cuda --streams 512 1024 2048 --ticks 10 --warmup-ticks 2 --seconds 10 --check 16 2>&1 | grep -E "^\| cuwfst|Error|error" | tee -a $L
echo "[$(since) s] streaming done" | tee -a $L
for f in tests/test_gpu.py tests/test_gpu_epsilon.py; do
  timeout -s INT 45 python3 -m pytest -q -x $f -p no:cacheprovider 2>&1 | tail -3 | tee -a $L
  echo "[$(since) s] $f (45 s cap)" | tee -a $L
done
