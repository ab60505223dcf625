#!/usr/bin/env bash
# GPU machine, branch lat-cand: exactness first (no full tier needed), in priority order,
# for a short call (TEST_END seconds, default 200):
#   1. tests/test_gpu_lattice.py -k "candidates or golden or records_are or gpu_pruning_equals
#      or filter_keeps": candidates on / off / overflowing vs the CPU, k2 goldens, records,
#      GPU pruning vs replay and CPU, the filter's cases
#   2. compute-sanitizer memcheck over scripts/sanitize_case.py 1 --lattice --lattice-wide
#   3. the walk-entry file (every walker: the cooperative ones take no candidates)
#   4. the rest of the lattice file until TEST_END
# The speed A/B needs the full tier: SPEED=1 adds (after 1-3) `lattice_speed --one-call --cand-ab
# --profile` and waits for the full tier first, then the 1-best's cost: gpu_speed on the HLG
# 32 x 250 with main's module, this branch's, main's again (three processes). For that, save
# main's versions of the files the branch changes here first (on the development machine):
#   git diff --name-only main lat-cand -- cuwfst | while read f; do mkdir -p .device/main_src/$(dirname $f);
#     git show main:$f > .device/main_src/$f; done
# (the package's files only: never this script; main's module is built on the machine, about
# 45 s; the branch's comes from the carried cache). With SPEED=1 give TEST_END=560 or so.
# Carry .device and .cache. $OUT: cand.log, lat1.log, memcheck.log, walk.log, lat2.log, lat_speed.txt
. scripts/device_common.sh  # the clock (since, left), start_full
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/cand.log; END=${TEST_END:-200}
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "commit $(cat .device/COMMIT 2>/dev/null)"; } | tee $L
C=/tmp/corpus-full
if [ "${SPEED:-0}" = 1 ]; then  # the full tier builds in the background while the tests run
  start_full
fi
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | cut -c1-160 | tee -a $L
K="candidates or golden or records_are or gpu_pruning_equals or filter_keeps"
timeout -s INT $(left $((END - 60))) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "$K" -s -rf \
  --maxfail=5 > $OUT/lat1.log 2>&1
grep -sE "passed|failed|candidate lane-steps|goldens|GPU lattices vs CPU" $OUT/lat1.log | tail -6 | cut -c1-300 | tee -a $L
grep -sE "^FAILED|Error" $OUT/lat1.log | head -6 | cut -c1-300 | tee -a $L
echo "[$(since) s] lattice tests (candidates first)" | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 40 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lattice \
  --lattice-wide 2>&1 | tail -3 | tee $OUT/memcheck.log | tee -a $L
echo "memcheck exit ${PIPESTATUS[0]}; [$(since) s]" | tee -a $L
timeout -s INT 40 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_walk_entry.py -s -rf --maxfail=5 > $OUT/walk.log 2>&1
grep -sE "passed|failed|walk entry" $OUT/walk.log | tail -2 | tee -a $L; grep -sE "^FAILED" $OUT/walk.log | head -4 | cut -c1-240 | tee -a $L
echo "[$(since) s] walk entry" | tee -a $L
if [ "${SPEED:-0}" = 1 ]; then
  while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ $(since) -lt 400 ]; do sleep 2; done
  grep -E "^  (HLG|TLG)|Error" /tmp/full.log | tail -3 | tee -a $L; echo "[$(since) s] full tier" | tee -a $L
  timeout -s INT 150 python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --utts 64 \
    --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call --cand-ab --profile > $OUT/lat_speed.txt 2>&1
  grep -E "^batch 32|exactness|kernel ms" $OUT/lat_speed.txt | cut -c1-400 | tee -a $L
  echo "[$(since) s] speed" | tee -a $L
  if [ -d .device/main_src ]; then  # the 1-best's cost: main / branch / main, one process each
    ab_init .device/main_src
    for side in main branch main; do
      ab_use $([ $side = main ] && echo other || echo own)
      timeout -s INT 120 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
        --uniform 250 --utts 32 --batch 32 --reps 7 --check 2 --variants new > $OUT/best_$side.txt 2>&1
      grep -E "B=32|CPU check" $OUT/best_$side.txt | sed "s/^/$side: /" | cut -c1-200 | tee -a $L
    done
    ab_use own
    echo "[$(since) s] 1-best main / branch / main" | tee -a $L
  fi
fi
timeout -s INT $(left $END) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "not ($K)" -s -rf \
  --maxfail=5 > $OUT/lat2.log 2>&1
grep -sE "passed|failed" $OUT/lat2.log | tail -2 | cut -c1-300 | tee -a $L; grep -sE "^FAILED" $OUT/lat2.log | head -6 | cut -c1-240 | tee -a $L
echo "[$(since) s] done" | tee -a $L
