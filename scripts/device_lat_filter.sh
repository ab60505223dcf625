#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine): the lattice records' filter
# (csrc/include/cuwfst/lattice.cuh LatFilterFor) against the CPU and the unfiltered records.
#   background: the full tier (HLG, TLG) and its simulated set (~200 s)
#   1. tests/test_gpu_lattice.py, the filter's tests first (-k filter), then the rest (TEST_END s
#      from the start); GPU_SUITES (default tests/test_gpu.py): each capped at 40 s
#   2. benchmarks.lattice_speed on the full HLG, batch 32, LAT_UTTS utterances (default 64), once
#      per LAT_CHUNKS value (CUWFST_LATTICE_CHUNK, default "auto 0"): the filter on against off in
#      one run (--filter-ab), the pruning path's split, kernel profile, LAT_CHECK rows vs the CPU;
#      once per LAT_SORTS value too (CUWFST_PRUNE_SORT, default "radix")
#   SPLIT=1: scripts/prune_split.py (the pruning's phases, filter on and off), last
#   SANITIZE=1: compute-sanitizer memcheck over scripts/sanitize_case.py SANITIZE_SEEDS --lattice, after the tests
# Carry .device and .cache. $OUT: latf.log (summary), tests.log, lattice_speed.jsonl
. scripts/device_common.sh
device_setup latf.log
timeout -s INT $(left 120) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "filter or rank_sort" \
  -s -rf --maxfail=10 > $OUT/tests.log 2>&1
grep -sE "passed|failed|records' filter" $OUT/tests.log | tail -4 | tee -a $L
timeout -s INT $(left ${TEST_END:-330}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py \
  -k "not filter and not rank_sort" -s -rf --maxfail=10 >> $OUT/tests.log 2>&1
grep -sE "passed|failed|GPU lattices vs CPU|goldens on the GPU" $OUT/tests.log | tail -5 | tee -a $L
grep -sE "^FAILED" $OUT/tests.log | head -12 | cut -c1-240 | tee -a $L
for f in ${GPU_SUITES:-tests/test_gpu.py}; do
  timeout -s INT 40 python3 -m pytest -q -p no:cacheprovider -m gpu $f 2>&1 | tail -1 | tee -a $L
done
echo "[$(since) s] tests" | tee -a $L
[ -n "${SANITIZE:-}" ] && lattice_memcheck ${SANITIZE_CAP:-200}  # the lattice decodes under memcheck
wait_full ${FULL_WAIT:-330}
for ch in ${LAT_CHUNKS:-auto 0}; do  # CUWFST_LATTICE_CHUNK per run ("auto": decoder/gpu.py auto_lattice_chunk)
  for sort in ${LAT_SORTS:-radix}; do  # CUWFST_PRUNE_SORT per run (segmented: the path before)
    echo "CUWFST_LATTICE_CHUNK=$ch CUWFST_PRUNE_SORT=$sort" | tee -a $L
    CUWFST_LATTICE_CHUNK=$ch CUWFST_PRUNE_SORT=$sort timeout -s INT $(left ${BENCH_END:-560}) python3 -m benchmarks.lattice_speed \
      --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --utts ${LAT_UTTS:-64} --batch 32 --reps ${LAT_REPS:-3} --cpu-utts 0 \
      --check ${LAT_CHECK:-8} --profile --no-replay --filter-ab --json $OUT/lattice_speed.jsonl 2>&1 | grep -v "^{" | tail -12 | tee -a $L
  done
done
if [ -n "${SPLIT:-}" ]; then  # the pruning's device passes phase by phase (scripts/prune_split.py)
  timeout -s INT $(left ${SPLIT_END:-590}) python3 scripts/prune_split.py $C/HLG.img $C/sim/shard-00000.npz 64 2>&1 \
    | grep -E "filter|prune split" | tee -a $L
fi
echo "[$(since) s] done" | tee -a $L
