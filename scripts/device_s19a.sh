#!/usr/bin/env bash
# GPU machine, session of 2026-12-01 19:44, call 2: main with lat-cand merged and the candidate
# records folded into LatPersistKernel (LatCandRecords). In order, until TEST_END seconds:
#   1. the lattice candidate tests (every lanes / buffer case), goldens, records, GPU pruning, filter
#   2. compute-sanitizer memcheck over scripts/sanitize_case.py 1 --lattice --lattice-wide
#   3. the 1-best and epsilon GPU files on the merged ExpandKernel: test_gpu.py, test_gpu_epsilon.py,
#      test_gpu_chain.py, test_gpu_trim.py (each capped)
#   4. once the full tier is built (in the background from the start): lattice_speed --one-call
#      --cand-ab --profile with the old sources (.device/old_src: the separate LatCandKernel),
#      the new, the old again (one process each; the old module is built here, ~45 s)
#   5. test_gpu_walk_entry.py, then test_gpu_variants.py until TEST_END
# Carry .device and .cache. $OUT: s19a.log and the logs of each part.
. scripts/device_common.sh  # the clock (since, left), start_full
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/s19a.log; END=${TEST_END:-560}; C=/tmp/corpus-full
start_full
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | cut -c1-160 | tee -a $L
gpu_file() {  # gpu_file LOG CAP FILE [pytest args]: one capped pytest run, its tally into L
  local log=$1 cap=$2; shift 2
  timeout -s INT $cap python3 -m pytest -q -p no:cacheprovider -m gpu "$@" -s -rf --maxfail=5 > $OUT/$log 2>&1
  grep -sE "passed|failed|no tests ran" $OUT/$log | tail -1 | cut -c1-200 | sed "s/^/$log: /" | tee -a $L
  grep -sE "^FAILED|^ERROR" $OUT/$log | head -5 | cut -c1-240 | tee -a $L
  echo "[$(since) s]" | tee -a $L
}
K="candidates or golden or records_are or gpu_pruning_equals or filter_keeps"
gpu_file lat1.log 150 tests/test_gpu_lattice.py -k "$K"
grep -sE "candidate|goldens" $OUT/lat1.log | cut -c1-240 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 60 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lattice \
  --lattice-wide 2>&1 | tail -3 | tee $OUT/memcheck.log | tee -a $L
echo "memcheck exit ${PIPESTATUS[0]}; [$(since) s]" | tee -a $L
gpu_file gpu.log $(left 200) tests/test_gpu.py
gpu_file eps.log $(left 235) tests/test_gpu_epsilon.py tests/test_gpu_chain.py
gpu_file trim.log $(left 255) tests/test_gpu_trim.py
while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ $(since) -lt 330 ]; do sleep 2; done
grep -E "^  (HLG|TLG)|Error" /tmp/full.log | tail -3 | tee -a $L; echo "[$(since) s] full tier" | tee -a $L
if [ -d .device/old_src ] && [ -f $C/sim/shard-00000.npz ]; then
  ab_init .device/old_src
  for side in old new old; do
    ab_use $([ $side = old ] && echo other || echo own)
    timeout -s INT 90 python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --utts 64 \
      --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call --cand-ab --profile > $OUT/lat_speed_$side.txt 2>&1
    grep -E "^batch 32 \(one call\)|exactness|kernel ms" $OUT/lat_speed_$side.txt | cut -c1-330 | sed "s/^/$side: /" | tee -a $L
    echo "[$(since) s] $side" | tee -a $L
  done
  ab_use own
fi
gpu_file walk.log $(left $((END - 60))) tests/test_gpu_walk_entry.py
gpu_file variants.log $(left $END) tests/test_gpu_variants.py
echo "[$(since) s] done" | tee -a $L
