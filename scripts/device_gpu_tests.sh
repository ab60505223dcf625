#!/usr/bin/env bash
# On the GPU machine: install the carried wheels, build, run the GPU tests and a speed check.
# Usage: bash scripts/device_gpu_tests.sh [pytest -k expr]
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
git rev-parse HEAD >> "$OUT/gpu.txt" 2>/dev/null
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -5 | tee "$OUT/build.log"
timeout ${TEST_TIMEOUT:-300} python3 -m pytest -q -x tests/test_gpu.py ${1:+-k "$1"} -s 2>&1 | tail -60 | tee "$OUT/gpu_tests.log"
