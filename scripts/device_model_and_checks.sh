#!/usr/bin/env bash
# GPU machine, one call: the model pipeline (issue 13, scripts/device_model.sh, full tier built
# in the background) and, beside it, issue 12's torch-free GPU journey (scripts/device_notorch.sh)
# and issue 14's growth walk under compute-sanitizer memcheck with its live-object report.
# $OUT: model.npz (the weights, for later calls' make_set) and logs.tgz (everything else).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
export CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
W=/tmp/work; mkdir -p $W/model
( MODEL_SCALE=base FULL_BUILD=full FULL=/tmp/corpus-full SET_CORPORA=/tmp/corpus-full OUT=$W/model SKIP_INSTALL=1 \
    timeout ${MODEL_TIMEOUT:-540} bash scripts/device_model.sh > $W/model_run.log 2>&1; echo "MODEL-DONE rc=$?" >> $W/model_run.log ) &
MODEL=$!
OUT=$W bash scripts/device_notorch.sh > $W/notorch_run.log 2>&1
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_FREE_SLACK_MIB=1024 timeout 200 "$CS" --tool memcheck --leak-check no --report-api-errors no --error-exitcode 9 \
  python3 -m pytest -q -x tests/test_gpu_faults.py -p no:cacheprovider -k "growth_site or upload_freed or graph_cache" \
  > $W/memcheck_growth.log 2>&1
echo "memcheck exit $?" >> $W/memcheck_growth.log
wait $MODEL
cp $W/model/model.npz "$OUT/" 2>/dev/null
tar czf "$OUT/logs.tgz" -C $W --exclude model.npz --exclude model.int8.npz . 2>/dev/null
tail -5 $W/model_run.log; tail -3 $W/memcheck_growth.log; grep -E "device|identical|!=" $W/notorch.log | head
