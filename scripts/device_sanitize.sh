#!/usr/bin/env bash
# On the GPU machine (after device_gpu_tests.sh installed the wheels): memcheck and racecheck.
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 240 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 4 2>&1 | tail -8 | tee "$OUT/memcheck.log"
echo "memcheck exit ${PIPESTATUS[0]}" | tee -a "$OUT/memcheck.log"
timeout 200 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 2>&1 | tail -8 | tee "$OUT/racecheck.log"
echo "racecheck exit ${PIPESTATUS[0]}" | tee -a "$OUT/racecheck.log"
