#!/usr/bin/env bash
# GPU machine, one call (issue 14): build, the fault-injection and scale tests, memcheck over
# the fault walks, the soak, and 1024 lanes on the tiny graph (and on the full tier when
# /tmp/corpus-full exists, as scripts/device_full_run.sh leaves it). Logs under $OUT.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | tee "$OUT/build.log"
timeout ${FAULT_TIMEOUT:-400} python3 -m pytest -q -rs tests/test_gpu_faults.py -p no:cacheprovider 2>&1 | tail -25 | tee "$OUT/faults.log"
# memcheck over the fault walks: the injected failures are real failed cudaMallocs, so API
# errors are not reports; the illegal-address test is left out (it faults on purpose).
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_FREE_SLACK_MIB=1024 timeout ${MEMCHECK_TIMEOUT:-400} "$CS" --tool memcheck --leak-check no --report-api-errors no --error-exitcode 9 \
  python3 -m pytest -q -x tests/test_gpu_faults.py -p no:cacheprovider \
  -k "construction_site or growth_site or upload_freed or graph_cache or short_batches or arena_overflow or cannot_be_rescued" \
  2>&1 | tail -12 | tee "$OUT/memcheck_faults.log"
echo "memcheck exit ${PIPESTATUS[0]}" | tee -a "$OUT/memcheck_faults.log"
timeout ${SOAK_TIMEOUT:-300} python3 -m benchmarks.soak --decodes ${SOAK_DECODES:-10000} --max-len 20000 \
  --max-seconds ${SOAK_SECONDS:-220} --out "$OUT/soak.json" --csv "$OUT/soak.csv" 2>&1 | tail -12 | tee "$OUT/soak.log"
timeout 200 python3 -m benchmarks.many_lanes --lanes 1024 --frames 1000 --check 16 --json "$OUT/many_lanes.jsonl" 2>&1 | tail -3 | tee "$OUT/many_lanes.log"
if [ -f /tmp/corpus-full/HLG.img ]; then
  timeout 400 python3 -m benchmarks.many_lanes --graph /tmp/corpus-full/HLG.img --log-probs /tmp/corpus-full/sim/shard-00000.npz \
    --lanes 1024 --check 16 --json "$OUT/many_lanes.jsonl" 2>&1 | tail -3 | tee -a "$OUT/many_lanes.log"
fi
