#!/usr/bin/env bash
# GPU machine, the closing verification call of a session (~9.5 minutes):
#   background: the full tier (HLG, TLG) and its simulated set are built (~200 s)
#   1. every GPU test (-m gpu; 270 s cap, the first 30 failures listed)
#   2. compute-sanitizer memcheck over the fault walks and the lanes+epsilon sanitize case
#   3. issue 9: benchmarks.memory on the full HLG with riva beside it (wheel carried), the long
#      utterance at LONG_FRAMES (default 180000) with GC on and off
# GPU_TEST_CAP (s, default 270) caps 1. SPEED_MEMORY="lazy pooled eager" adds 5 (gpu_speed --memory ... --profile, SPEED_END); SKIP_MEMORY=1 skips 3, MEM_ARGS and MEM_REPS extend it; MEMCHECK_K (pytest -k of 2), MEMCHECK_END (its end, s); LAT_UTTS, LAT_REPS size 4.
#   4. issue 10: benchmarks.lattice_speed on the full HLG (LAT_ARGS: extra arguments)
# Carry .device (wheels incl. riva; data) and .cache. $OUT: final.log, tests.log, memcheck.log,
# memory.md, memory.jsonl, lattice_speed.jsonl, speed.jsonl (with SPEED_MEMORY: give MEM_END and
# LAT_END room below SPEED_END, gpu_speed writes its table when it exits).  Call B (device_final_b.sh) reuses the tier.
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
left() { local l=$(( $1 - $(since) )); echo $(( l > 10 ? l : 10 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; L=$OUT/final.log; TL=$OUT/tests.log
ARPA=.device/data/en-us-3gram.arpa.xz; BPE=cuwfst/data/tiny/bpe.model
if [ ! -f $C/sim/shard-00000.npz ]; then
( setsid nohup nice -n 5 bash -c "python3 -m benchmarks.corpus.build --tier full --out $C --arpa $ARPA --bpe-model $BPE \
  && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 --shard-size 256 --seed 0 \
  && echo FULL-DONE" > /tmp/full.log 2>&1 < /dev/null & )
else echo FULL-DONE > /tmp/full.log; fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | tee -a $L
timeout -s INT ${GPU_TEST_CAP:-270} python3 -m pytest -q -p no:cacheprovider -m gpu tests -s -rf --maxfail=30 > $TL 2>&1
grep -E "passed|failed|GPU vs CPU|lanes:|rows compared|GPU lattices|goldens|device pruning" $TL | tail -14 | tee -a $L
grep -E "^FAILED" $TL | head -30 | cut -c1-220 | tee -a $L
echo "[$(since) s] GPU tests" | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_FREE_SLACK_MIB=1024 timeout -s INT $(left ${MEMCHECK_END:-360}) "$CS" --tool memcheck --leak-check no --report-api-errors no \
  python3 -m pytest -q tests/test_gpu_faults.py -p no:cacheprovider -rf \
  -k "${MEMCHECK_K:-construction_site or growth_site or upload_freed or graph_cache or short_batches or arena_overflow or cannot_be_rescued}" \
  > $OUT/memcheck.log 2>&1
grep -E "^FAILED|passed|failed|ERROR SUMMARY" $OUT/memcheck.log | cut -c1-220 | head -10 | tee -a $L
timeout $(left $(( ${MEMCHECK_END:-360} + 25 ))) "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 2 --eps --lanes 2>&1 \
  | tail -2 | tee -a $L
echo "[$(since) s] memcheck" | tee -a $L
while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ $(since) -lt ${FULL_WAIT:-420} ]; do sleep 2; done
grep -E "^  (HLG|TLG)|stages|Error" /tmp/full.log | tail -3 | tee -a $L
[ -z "${SKIP_MEMORY:-}" ] && timeout -s INT $(left ${MEM_END:-490}) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --riva-dir $C --batch 32 256 --reps ${MEM_REPS:-5} --check 8 --long-frames ${LONG_FRAMES:-180000} ${MEM_ARGS:-} \
  --json $OUT/memory.jsonl --md $OUT/memory.md > /tmp/memory.log 2>&1
[ -z "${SKIP_MEMORY:-}" ] && { echo "benchmarks.memory exit [$(since) s]" | tee -a $L; tail -32 /tmp/memory.log | grep -v "^{" | tee -a $L; }
timeout -s INT $(left ${LAT_END:-575}) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts ${LAT_UTTS:-128} --batch 32 --reps ${LAT_REPS:-3} --cpu-utts 16 --check 8 --profile ${LAT_ARGS:-} --json $OUT/lattice_speed.jsonl 2>&1 \
  | grep -v "^{" | tail -12 | tee -a $L
if [ -n "${SPEED_MEMORY:-}" ]; then  # 5. the memory modes' kernel split (issue 9's speed bar)
  timeout -s INT $(left ${SPEED_END:-590}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img \
    --log-probs $C/sim/shard-00000.npz --uniform 250 --utts 32 --batch 32 --reps 5 --check 2 --profile \
    --memory $SPEED_MEMORY --json $OUT/speed.jsonl 2>&1 | grep -vE "^\{" | grep -E "B=|CPU check|kernel ms|Error" | tee -a $L
fi
echo "[$(since) s] done" | tee -a $L
