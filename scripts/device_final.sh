#!/usr/bin/env bash
# GPU machine, one call: issue 14's remaining proof (fault tests, memcheck over the fault
# walks) first, alone on the GPU; then the model pipeline (issue 13, scripts/device_model.sh)
# in the background while the full soak runs (the soak measures the module's own memory,
# which another process's allocations do not change). Outputs: rel.log, soak.csv, soak.json,
# model.log, model.tgz (the model's eight outputs).
set -uo pipefail
T0=$(date +%s); left() { echo $(( ${1} - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/rel.log
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_faults.py 2>&1 | grep -E "passed|failed|FAILED|Error" | tail -6 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_FREE_SLACK_MIB=1024 timeout 120 "$CS" --tool memcheck --leak-check no --report-api-errors no --error-exitcode 9 \
  python3 -m pytest -q -x tests/test_gpu_faults.py -p no:cacheprovider \
  -k "construction_site or growth_site or upload_freed or graph_cache or short_batches or arena_overflow or cannot_be_rescued" \
  > /tmp/memcheck_faults.log 2>&1
echo "memcheck over the fault walks: exit $? ($(grep -E 'ERROR SUMMARY' /tmp/memcheck_faults.log | tail -1); $(grep -E 'passed|failed' /tmp/memcheck_faults.log | tail -1))" | tee -a $L
# the model in the background, the soak in the foreground
( MODEL_SCALE=base TRAIN_END=${TRAIN_END:-250} SMALL=/tmp/corpus-small OUT=/tmp/out-model SKIP_INSTALL=1 \
    bash scripts/device_model.sh > /tmp/model_run.log 2>&1; echo "MODEL-DONE rc=$?" >> /tmp/model_run.log ) &
timeout $(left 470) python3 -m benchmarks.soak --decodes 10000 --max-len 20000 --max-seconds $(left 440) \
  --out $OUT/soak.json --csv $OUT/soak.csv 2>&1 | tail -6 | tee -a $L
while ! grep -q MODEL-DONE /tmp/model_run.log && [ $(left 585) -gt 0 ]; do sleep 2; done
cp /tmp/model_run.log $OUT/model.log
tar czf $OUT/model.tgz -C /tmp out-model 2>/dev/null
tail -25 /tmp/model_run.log
