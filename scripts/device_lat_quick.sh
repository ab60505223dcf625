#!/usr/bin/env bash
# GPU machine, one short call (~3 minutes, no benchmark tier): the GPU lattice tests, the
# filter's and rank sort's first, then the bounded path's, then the rest (capped at CAP s).
# Carry .device and .cache. $OUT: quick.log, tests.log
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/quick.log
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "commit $(cat .device/COMMIT)"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
for k in "filter or rank_sort" "bounded" "not filter and not rank_sort and not bounded"; do
  left=$(( ${CAP:-190} - $(since) )); [ $left -gt 5 ] || break
  timeout -s INT $left python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "$k" -s -rf \
    --maxfail=10 >> $OUT/tests.log 2>&1
  echo "[-k $k]" | tee -a $L
  grep -sE "passed|failed" $OUT/tests.log | tail -1 | tee -a $L
done
grep -sE "^FAILED|GPU lattices vs CPU|goldens on the GPU" $OUT/tests.log | head -12 | cut -c1-240 | tee -a $L
echo "[$(since) s] done" | tee -a $L
