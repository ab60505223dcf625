#!/usr/bin/env bash
# GPU machine, one call of about 5 minutes: the kernel variants "old", "new" (split scan,
# closure lists, wider Finalize) and "fused" (new without MaxKernel; docs/speed-notes.md) side
# by side in one process, exact against the CPU.
# Carry .device (wheels, the ARPA) and .cache (the build made with nvcc 13.0 on the CPU
# machine; rebuilt here if the compilers differ):
#   run(command="bash scripts/device_speed_ab.sh", carry=[".device", ".cache"], timeout_s=600)
# Steps (each under a deadline, so the call ends by about 300 s whatever hangs):
#  1. the small tier builds in the background (or /tmp/corpus-full is used when it is there);
#     the full tier too, in the background, when FULL=1 (it takes ~150-200 s of the budget);
#  2. scripts/speed_smoke.py: every variant on three graphs (a hung kernel shows here);
#  3. tests/test_gpu_variants.py: every variant against the CPU decoder;
#  4. benchmarks.gpu_speed --variants old new fused split lists wide on the tier's TLG and HLG, batches
#     1 8 32, each variant's kernel profile at batch 32, 8 rows checked against the CPU;
#  5. with FULL=1 and the full tier built in time: old vs new vs fused (and new with 8 scan CTAs a lane)
#     at batch 32 on the full TLG (stored order) and HLG (uniform rows of 250 frames, issue 11).
# Files under $OUT (8 at most): gpu.txt, smoke.log, tests.log, speed_small.log,
# speed_full.log, speed.jsonl, corpus.log, summary.txt.
set -uo pipefail
T0=$(date +%s); left() { echo $(( ${1} - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; S=$OUT/summary.txt; : > $S
ARPA=.device/data/en-us-3gram.arpa.xz; BPE=cuwfst/data/tiny/bpe.model
F=/tmp/corpus-full
if [ -f $F/sim/shard-00000.npz ] && [ -f $F/TLG.img ]; then C=$F; else C=/tmp/corpus-small; fi
if [ ! -f $C/sim/shard-00000.npz ]; then
  ( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier small --out $C --arpa $ARPA --bpe-model $BPE && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 96 --shard-size 96 --seed 0 && echo SMALL-DONE" > /tmp/small.log 2>&1 < /dev/null & )
fi
if [ "${FULL:-0}" = 1 ] && [ $C != $F ]; then
  ( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier full --out $F --arpa $ARPA --bpe-model $BPE && python3 -m benchmarks.corpus.simulate --corpus $F --out $F/sim --num-utts 64 --shard-size 64 --seed 0 && echo FULL-DONE" > /tmp/full.log 2>&1 < /dev/null & )
fi
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $OUT/gpu.txt | tee -a $S
( time python3 -m cuwfst.cli build --cuda-arch 9.0 ) 2>&1 | grep -E "cuwfst_|real" | tee -a $OUT/gpu.txt | tee -a $S
timeout 100 python3 scripts/speed_smoke.py > $OUT/smoke.log 2>&1; RC=$?; echo "smoke exit $RC" >> $OUT/smoke.log
grep -E "WRONG|smoke: |Error" $OUT/smoke.log | tail -6 | tee -a $S; tail -1 $OUT/smoke.log | tee -a $S
VARIANTS="old new fused split lists wide"; TESTS_K=""
if [ $RC -eq 124 ]; then  # a kernel hung: the old kernels only, so the call still measures something
  echo "smoke timed out after: $(grep '^smoke ' $OUT/smoke.log | tail -1); old kernels only from here" | tee -a $S
  VARIANTS="old"; TESTS_K="-k old"
fi
timeout $(left 165) python3 -m pytest -q -p no:cacheprovider --maxfail=5 tests/test_gpu_variants.py $TESTS_K -s 2>&1 \
  | grep -E "passed|failed|skipped|FAIL|Error|rows compared|assert|no tests" | tail -14 > $OUT/tests.log
tee -a $S < $OUT/tests.log
while [ ! -f $C/sim/shard-00000.npz ] && [ $(left 170) -gt 0 ]; do sleep 2; done
tail -3 /tmp/small.log > $OUT/corpus.log 2>/dev/null
if [ -f $C/sim/shard-00000.npz ]; then
  for G in TLG HLG; do
    [ $(left 250) -gt 15 ] || break
    timeout $(left 250) python3 -m benchmarks.gpu_speed --graph $C/$G.img --log-probs $C/sim/shard-00000.npz --utts 64 \
      --batch 1 8 32 --variants $VARIANTS --reps 5 --check 8 --profile --json $OUT/speed.jsonl \
      >> $OUT/speed_small.log 2>&1
  done
  grep -E "^  |^\[|^[A-Z]LG" $OUT/speed_small.log | grep -v "^{" | tee -a $S
else
  echo "no corpus: $(tail -2 /tmp/small.log)" | tee -a $S
fi
if [ "${FULL:-0}" = 1 ] && [ $C != $F ]; then
  while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ $(left 230) -gt 0 ]; do sleep 2; done
  tail -3 /tmp/full.log >> $OUT/corpus.log
  if grep -q FULL-DONE /tmp/full.log; then
    # TLG in stored order (issue 7's table), HLG as uniform rows of 250 frames (issue 11's 32 x 250)
    for G in TLG HLG; do
      [ $(left 292) -gt 15 ] || break
      EXTRA=""; [ $G = HLG ] && EXTRA="--uniform 250"
      timeout $(left 292) python3 -m benchmarks.gpu_speed --graph $F/$G.img --log-probs $F/sim/shard-00000.npz --utts 64 \
        $EXTRA --batch 32 --variants ${VARIANTS/split lists wide/new:8} --reps 3 --check 0 --json $OUT/speed.jsonl \
        >> $OUT/speed_full.log 2>&1
    done
    grep -E "^  |^[A-Z]LG" $OUT/speed_full.log | tee -a $S
  fi
fi
echo "done in $(( $(date +%s) - T0 )) s" | tee -a $S
