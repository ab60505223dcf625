#!/usr/bin/env bash
# GPU machine, one call (~5 minutes on a fresh machine; no full tier), on mem-peak (main + the
# input fixes a55c035 / 5d22bc4, the rescue-trim knob 6543b7b): the GPU files whose decodes go
# through sub-batches (GpuBackend._take_rows now a view or per-row copies instead of
# index_select): test_gpu, test_gpu_lanes, test_gpu_faults, then test_gpu_lattice until CAP;
# and racecheck over scripts/sanitize_chain.py (the chain closure's kernels, with
# EpsChainResolveKernel's striped exchange of 2d67466's parent, not yet racechecked).
# Carry .device and .cache. $OUT: s24e.log, tests.log, lattice.log, racecheck.log.
. scripts/device_common.sh
NO_FULL=1 device_setup s24e.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 100 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_chain.py > $OUT/racecheck.log 2>&1
echo "racecheck sanitize_chain: exit $? [$(since) s]" | tee -a $L
grep -v "^=========     " $OUT/racecheck.log | tail -6 | cut -c1-200 | tee -a $L
timeout -s INT ${CAP1:-150} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py tests/test_gpu_lanes.py \
  tests/test_gpu_faults.py -s > $OUT/tests.log 2>&1
echo "gpu/lanes/faults exit $? [$(since) s]" | tee -a $L
{ grep -E "mismatch|identical" $OUT/tests.log | grep -v "^E " | head -6; grep -E "^FAILED" $OUT/tests.log | head -4
  grep -E "passed|failed" $OUT/tests.log | tail -1; } | cut -c1-220 | tee -a $L
timeout -s INT $(left ${END:-330}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -x -s \
  > $OUT/lattice.log 2>&1
echo "lattice exit $? [$(since) s]" | tee -a $L
{ grep -E "mismatch|identical|goldens" $OUT/lattice.log | grep -v "^E " | head -6; grep -E "^FAILED" $OUT/lattice.log | head -4
  grep -E "passed|failed" $OUT/lattice.log | tail -1; } | cut -c1-220 | tee -a $L
echo "[$(since) s] done" | tee -a $L
