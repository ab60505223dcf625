#!/usr/bin/env bash
# GPU machine, one call (issue 14's proof): the fault-injection tests, memcheck over the
# fault walks, the full soak (10,000 decodes), racecheck on the lanes case. Logs under $OUT.
set -uo pipefail
T0=$(date +%s); left() { echo $(( ${1} - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/rel.log
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_faults.py 2>&1 | tail -3 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_FREE_SLACK_MIB=1024 timeout 200 "$CS" --tool memcheck --leak-check no --report-api-errors no --error-exitcode 9 \
  python3 -m pytest -q -x tests/test_gpu_faults.py -p no:cacheprovider \
  -k "construction_site or growth_site or upload_freed or graph_cache or short_batches or arena_overflow or cannot_be_rescued" \
  2>&1 | grep -E "ERROR SUMMARY|passed|failed" | tail -3 | tee -a $L
echo "memcheck over the fault walks: exit ${PIPESTATUS[0]}" | tee -a $L
timeout $(left 520) python3 -m benchmarks.soak --decodes 10000 --max-len 20000 --max-seconds $(( $(left 500) )) \
  --out $OUT/soak.json --csv $OUT/soak.csv 2>&1 | tail -6 | tee -a $L
timeout $(left 585) "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lanes 2>&1 | grep -E "RACECHECK|mismatch" | tail -2 | tee -a $L
echo "racecheck exit ${PIPESTATUS[0]}" | tee -a $L
