#!/usr/bin/env bash
# GPU machine, one short call (~5 minutes, no corpus): compute-sanitizer memcheck and racecheck
# on a trimmed decode (scripts/sanitize_trim.py; SAN_SCRIPTS: others too, e.g. sanitize_chain.py),
# then the GPU test files TESTS (TEST_CAP s).
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/final.log
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "commit $(cat .device/COMMIT)"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for script in ${SAN_SCRIPTS:-scripts/sanitize_trim.py}; do  # e.g. "scripts/sanitize_trim.py scripts/sanitize_chain.py"
  name=$(basename $script .py)
  for tool in memcheck racecheck; do
    timeout ${SAN_CAP:-60} "$CS" --tool $tool --error-exitcode 9 python3 $script > $OUT/$name-$tool.log 2>&1
    echo "$name $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|sanitize_' $OUT/$name-$tool.log | tr '\n' ' ')" | tee -a $L
  done
done
echo "[$(since) s] sanitizers" | tee -a $L
TESTS=${TESTS:-tests/test_gpu_trim.py tests/test_gpu_variants.py}
timeout -s INT ${TEST_CAP:-240} python3 -m pytest -q -p no:cacheprovider -m gpu $TESTS -s -rf --maxfail=20 > $OUT/tests.log 2>&1
grep -E "passed|failed|GPU vs CPU|lanes:|rows compared|GPU lattices|goldens|trimmed slots|variants" $OUT/tests.log | tail -10 | tee -a $L
grep -E "^FAILED" $OUT/tests.log | head -20 | cut -c1-240 | tee -a $L
echo "[$(since) s] done" | tee -a $L
