#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine): the lattice trim (csrc/include/cuwfst/
# common.cuh LatTrimLow) against the CPU and the untrimmed walk, and the numbering on the device
# (gpu_lattice_prune.cu NumberOnDevice) against the host's.
#   0. the CPUs as the processes see them (nproc, os.cpu_count, the affinity mask, the cgroup quota)
#   background: the full tier (HLG, TLG) and its simulated set (~200 s)
#   1. tests/test_gpu_lattice.py, the filter's, trim's, numbering's and rank sort's tests first, then the rest
#      (until TEST_END s from the start); GPU_SUITES (default tests/test_gpu_trim.py tests/test_gpu.py),
#      each capped at 40 s
#   SANITIZE=1: compute-sanitizer memcheck over scripts/sanitize_case.py SANITIZE_SEEDS --lattice
#   2. benchmarks.lattice_speed on the full HLG, batch 32, LAT_UTTS utterances (default 64): the
#      lattice trim on against off and the numbering on the device against the host's, in one run
#      (--trim-ab --number-ab), the pruning path's split, kernel profile, LAT_CHECK rows vs the CPU
# Carry .device and .cache. $OUT: trim.log (summary), tests.log, lattice_speed.jsonl
. scripts/device_common.sh
device_setup trim.log
python3 - <<'PY' 2>&1 | tee -a $L
import os
quota = open("/sys/fs/cgroup/cpu.max").read().strip() if os.path.exists("/sys/fs/cgroup/cpu.max") else "n/a"
print(f"CPUs: os.cpu_count {os.cpu_count()}, affinity {len(os.sched_getaffinity(0))}, cgroup cpu.max {quota}")
PY
echo "nproc $(nproc), nproc --all $(nproc --all)" | tee -a $L
timeout -s INT $(left 150) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py \
  -k "filter or rank_sort or trim or numbering" -s -rf --maxfail=10 > $OUT/tests.log 2>&1
grep -sE "passed|failed|records' filter|lattice trim" $OUT/tests.log | tail -5 | tee -a $L
timeout -s INT $(left ${TEST_END:-330}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py \
  -k "not filter and not rank_sort and not trim and not numbering" -s -rf --maxfail=10 >> $OUT/tests.log 2>&1
grep -sE "passed|failed|GPU lattices vs CPU|goldens on the GPU" $OUT/tests.log | tail -5 | tee -a $L
grep -sE "^FAILED" $OUT/tests.log | head -12 | cut -c1-240 | tee -a $L
for f in ${GPU_SUITES:-tests/test_gpu_trim.py tests/test_gpu.py}; do
  echo "$f: $(timeout -s INT 40 python3 -m pytest -q -p no:cacheprovider -m gpu $f 2>&1 | tail -1)" | tee -a $L
done
echo "[$(since) s] tests" | tee -a $L
[ -n "${SANITIZE:-}" ] && lattice_memcheck ${SANITIZE_CAP:-150}  # the lattice decodes under memcheck
wait_full ${FULL_WAIT:-330}
echo "benchmark: --trim-ab --number-ab" | tee -a $L
timeout -s INT $(left ${BENCH_END:-580}) python3 -m benchmarks.lattice_speed --graph $C/HLG.img \
  --log-probs $C/sim/shard-00000.npz --utts ${LAT_UTTS:-64} --batch 32 --cpu-utts 0 --profile --no-replay --trim-ab \
  --number-ab --check ${LAT_CHECK:-8} --reps ${LAT_REPS:-3} --json $OUT/lattice_speed.jsonl 2>&1 | grep -v "^{" \
  | tail -14 | tee -a $L
echo "[$(since) s] done" | tee -a $L
