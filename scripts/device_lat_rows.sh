#!/usr/bin/env bash
# GPU machine, branch lat-rows (the pruned rows' arrays in one native call, on several threads).
# Before the call, on the development machine (main's versions of the files the branch changes):
#   rm -rf .device/main_src; git diff --name-only main lat-rows -- cuwfst | while read f; do
#     mkdir -p .device/main_src/$(dirname $f); git show main:$f > .device/main_src/$f; done
# Then, until END seconds (default 560):
#   1. tests/test_gpu_lattice.py -k "pruned_rows or golden or gpu_pruning_equals or candidates"
#      (the new binding's checks, k2 goldens, GPU pruning vs replay and CPU), then the whole
#      lattice file's rest at the end
#   2. the full tier (built in the background unless /tmp holds it), then lattice_speed
#      --one-call --profile with main's module, the branch's, main's again (one process each):
#      the rows stage (`rows` of prune_split_ms) and ms a lattice batch
# Carry .device and .cache. $OUT: rows.log, lat1.log, lat2.log, lat_speed_{main,branch}.txt
. scripts/device_common.sh  # since, left, start_full, ab_init, ab_use
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/rows.log; END=${END:-560}
start_full
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | cut -c1-140 | tee -a $L
K="pruned_rows or golden or gpu_pruning_equals or candidates"
timeout -s INT 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "$K" -s -rf --maxfail=5 \
  > $OUT/lat1.log 2>&1
grep -sE "passed|failed|goldens" $OUT/lat1.log | tail -3 | cut -c1-200 | tee -a $L
grep -sE "^FAILED" $OUT/lat1.log | head -4 | cut -c1-200 | tee -a $L
echo "[$(since) s] lattice tests" | tee -a $L
wait_full 330
if [ -d .device/main_src ] && [ -f $C/sim/shard-00000.npz ]; then
  ab_init .device/main_src
  for side in main branch main; do
    ab_use $([ $side = main ] && echo other || echo own)
    timeout -s INT 90 python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --utts 64 \
      --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call --profile > $OUT/lat_speed_$side.txt 2>&1
    grep -E "^batch 32|exactness" $OUT/lat_speed_$side.txt | cut -c1-300 | sed "s/^/$side: /" | tee -a $L
    echo "[$(since) s] $side" | tee -a $L
  done
  ab_use own
fi
timeout -s INT $(left $END) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "not ($K)" -s -rf \
  --maxfail=5 > $OUT/lat2.log 2>&1
grep -sE "passed|failed" $OUT/lat2.log | tail -1 | cut -c1-200 | tee -a $L; grep -sE "^FAILED" $OUT/lat2.log | head -4 | tee -a $L
echo "[$(since) s] done" | tee -a $L
