#!/usr/bin/env bash
# GPU machine, one call (about 5 minutes on the full tier, 3 on the small one): the GPU
# lattice tests (tests/test_gpu_lattice.py) and time-capped regressions of the offline GPU
# suites (the lattice stage touches ScanKernel, FinalizeKernel and the walkers) while the
# benchmark tier builds in the background; then benchmarks.lattice_speed on its HLG (and its
# TLG with TLG=1): lattice=True against lattice=False on the GPU, the device/host split of a
# lattice decode, the CPU lattice speed, lattice sizes, exactness.
#   TIER=full (default) or TIER=small; the corpus is reused when /tmp/corpus-$TIER has it.
#   TEST_END, BENCH_END: the seconds from the start by which the tests / the benchmark stop.
# $OUT: lattice.log (the summary), lattice_tests.log (pytest, in full), lattice_speed.jsonl,
# corpus.log.
set -uo pipefail
TIER=${TIER:-full}
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
left() { local l=$(( $1 - $(since) )); echo $(( l > 10 ? l : 10 )); }  # seconds until $1, at least 10
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/lattice.log
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
C=/tmp/corpus-$TIER
if [ ! -f $C/sim/shard-00000.npz ]; then
  ( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier $TIER --out $C --arpa .device/data/en-us-3gram.arpa.xz \
      --bpe-model cuwfst/data/tiny/bpe.model && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim \
      --num-utts 256 --shard-size 256 --seed 0 && echo CORPUS-DONE" > $OUT/corpus.log 2>&1 < /dev/null & )
else
  echo CORPUS-DONE > $OUT/corpus.log
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT, tier $TIER"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | tee -a $L
echo "[$(since) s] built" | tee -a $L
# first the tests that say which half is at fault (device records vs host replay), then the rest
timeout -s INT $(left 60) python3 -m pytest -q -p no:cacheprovider -rf --maxfail=3 tests/test_gpu_lattice.py -s \
  -k "records_are or interleave" > $OUT/lattice_tests.log 2>&1
timeout -s INT $(left ${TEST_END:-190}) python3 -m pytest -q -p no:cacheprovider -rf tests/test_gpu_lattice.py -s \
  -k "not records_are and not interleave" >> $OUT/lattice_tests.log 2>&1
grep -E "passed|failed|FAILED|Error|GPU lattices vs CPU|goldens on the GPU" $OUT/lattice_tests.log | tail -16 | tee -a $L
echo "[$(since) s] lattice tests done" | tee -a $L
for f in tests/test_gpu.py tests/test_gpu_epsilon.py; do
  timeout -s INT 20 python3 -m pytest -q -x $f -p no:cacheprovider 2>&1 | tail -2 | tee -a $L
  echo "[$(since) s] $f (20 s cap)" | tee -a $L
done
while ! grep -q CORPUS-DONE $OUT/corpus.log 2>/dev/null && [ $(( 260 - $(since) )) -gt 0 ]; do sleep 3; done
grep -E "^  (HLG|TLG)|stages|Error|CORPUS-DONE" $OUT/corpus.log | tail -4 | tee -a $L
echo "[$(since) s] corpus ready" | tee -a $L
# HLG (the table); TLG too with TLG=1 (about a minute more on the full tier)
for G in HLG ${TLG:+TLG}; do
  timeout -s INT $(left ${BENCH_END:-330}) python3 -m benchmarks.lattice_speed --graph $C/$G.img \
    --log-probs $C/sim/shard-00000.npz --utts 128 --batch 32 --reps 3 --cpu-utts 32 --check 8 --profile \
    --json $OUT/lattice_speed.jsonl 2>&1 | grep -v "^{" | tail -8 | tee -a $L
  echo "[$(since) s] $G benchmark done" | tee -a $L
done
