#!/usr/bin/env bash
# GPU machine, one call: the epsilon-closure suite, the epsilon-free suite, and
# compute-sanitizer on epsilon graphs. Carry .device (wheels) and .cache (the build made
# on the CPU machine with nvcc; rebuilt here if the compilers differ).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat .device/COMMIT; } | tee "$OUT/gpu.txt"
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2
timeout ${EPS_TIMEOUT:-200} python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu_epsilon.py -s 2>&1 | grep -v "^TIE\|^$" | tail -25 | tee "$OUT/eps_tests.log"
timeout ${GPU_TIMEOUT:-150} python3 -m pytest -q -x -p no:cacheprovider tests/test_gpu.py tests/test_decoder_api.py 2>&1 | tail -8 | tee "$OUT/gpu_tests.log"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 100 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 3 --eps 2>&1 | tail -4 | tee "$OUT/memcheck.log"
echo "memcheck exit ${PIPESTATUS[0]}" | tee -a "$OUT/memcheck.log"
timeout 100 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --eps 2>&1 | tail -4 | tee "$OUT/racecheck.log"
echo "racecheck exit ${PIPESTATUS[0]}" | tee -a "$OUT/racecheck.log"
