#!/usr/bin/env bash
# GPU machine, one call: every GPU test file, then compute-sanitizer memcheck and racecheck
# on epsilon graphs with continuous batching and streams. Carry .device (wheels) and .cache.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat .device/COMMIT; } | tee "$OUT/gpu.txt"
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2
timeout ${LANES_TIMEOUT:-150} python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu_lanes.py -s 2>&1 | grep -v "^TIE\|^$" | tail -15 | tee "$OUT/lanes_tests.log"
timeout ${GPU_TIMEOUT:-300} python3 -m pytest -q -p no:cacheprovider -m gpu tests --deselect tests/test_gpu_lanes.py -s 2>&1 | grep -v "^TIE\|^$" | grep -E "passed|failed|FAIL|Error|GPU vs CPU|lanes:|rows" | tail -15 | tee "$OUT/gpu_tests.log"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 120 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 2 --eps --lanes 2>&1 | tail -3 | tee "$OUT/memcheck.log"
echo "memcheck exit ${PIPESTATUS[0]}" | tee -a "$OUT/memcheck.log"
timeout 200 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lanes 2>&1 | tail -3 | tee "$OUT/racecheck.log"
echo "racecheck exit ${PIPESTATUS[0]}" | tee -a "$OUT/racecheck.log"
