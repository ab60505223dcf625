#!/usr/bin/env bash
# GPU machine, call A of the integration branch (main + lattice-gpu + memory + speed2 +
# blank_skip; ~9.5 minutes): does everything hold together on the GPU, and how fast is it.
#   background: the small and full tiers build (~240 s), then the full tier's model set is
#     remade from examples/model.int8.npz (needs the espeakng_loader and kaldi_native_fbank wheels)
#   1. every GPU test (-m gpu: offline, epsilon, lanes, faults, memory, lattices, variants with
#      fused, blank_skip; 270 s cap, the first 25 failures listed)
#   2. compute-sanitizer memcheck over the fault walks and the lanes+epsilon sanitize case (issue 14)
#   3. full tier: uniform 32 x 250 HLG on the model's and on simulated log-probs, kernels old,
#      new and fused side by side with the CPU check; TLG batch 32 likewise
# Carry .device (wheels incl. espeakng_loader, kaldi_native_fbank; data) and .cache.
# $OUT: integ.log, tests.log, speed.jsonl. Call B (scripts/device_integration_b.sh) reuses the tiers.
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
left() { local l=$(( $1 - $(since) )); echo $(( l > 10 ? l : 10 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; S=/tmp/corpus-small; L=$OUT/integ.log; TL=$OUT/tests.log
ARPA=.device/data/en-us-3gram.arpa.xz; BPE=cuwfst/data/tiny/bpe.model
if [ ! -f $C/model/shard-00000.npz ]; then
( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier small --out $S --arpa $ARPA --bpe-model $BPE > /tmp/small.log 2>&1" < /dev/null & )
( setsid nohup nice -n 5 bash -c "python3 -m benchmarks.corpus.build --tier full --out $C --arpa $ARPA --bpe-model $BPE \
  && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 --shard-size 256 --seed 0 \
  && while [ ! -f $S/HLG.img ]; do sleep 2; done \
  && python3 -m benchmarks.model.make_set --weights examples/model.int8.npz --corpus $S --set-corpus $C --set-utts 64 \
  && echo FULL-DONE" > /tmp/full.log 2>&1 < /dev/null & )
else echo FULL-DONE > /tmp/full.log; fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | tee -a $L
timeout -s INT 270 python3 -m pytest -q -p no:cacheprovider -m gpu tests -s -rf --maxfail=25 > $TL 2>&1
grep -E "passed|failed|GPU vs CPU|lanes:|rows compared|GPU lattices|goldens" $TL | tail -12 | tee -a $L
grep -E "^FAILED" $TL | head -25 | cut -c1-220 | tee -a $L
echo "[$(since) s] GPU tests" | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_FREE_SLACK_MIB=1024 timeout -s INT $(left 390) "$CS" --tool memcheck --leak-check no --report-api-errors no \
  python3 -m pytest -q tests/test_gpu_faults.py -p no:cacheprovider -rf \
  -k "construction_site or growth_site or upload_freed or graph_cache or short_batches or arena_overflow or cannot_be_rescued" \
  > $OUT/memcheck.log 2>&1
grep -E "^FAILED|passed|failed|ERROR SUMMARY" $OUT/memcheck.log | cut -c1-220 | head -10 | tee -a $L
timeout $(left 420) "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 2 --eps --lanes 2>&1 \
  | tail -2 | tee -a $L
echo "[$(since) s] memcheck" | tee -a $L
while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ $(since) -lt 440 ]; do sleep 2; done
grep -E "^  (HLG|TLG)|stages|Error" /tmp/full.log | tail -3 | tee -a $L
for SET in model sim; do
  [ -f $C/$SET/shard-00000.npz ] || { echo "no $SET set" | tee -a $L; continue; }
  timeout -s INT $(( (570 - $(since)) / 3 )) python3 -m benchmarks.gpu_speed --graph $C/HLG.img \
    --log-probs $C/$SET/shard-00000.npz --uniform 250 --utts 32 --batch 32 --reps 5 --check 2 --variants old new fused \
    --json $OUT/speed.jsonl 2>&1 | grep -vE "^\{" | grep -E "B=|CPU check|Error" | sed "s/^/[$SET] /" | tee -a $L
done
[ -f $C/sim/shard-00000.npz ] && timeout -s INT $(left 575) python3 -m benchmarks.gpu_speed --graph $C/TLG.img \
  --log-probs $C/sim/shard-00000.npz --utts 64 --batch 32 --reps 3 --check 2 --variants old new fused \
  --json $OUT/speed.jsonl 2>&1 | grep -vE "^\{" | grep -E "B=|CPU check|Error" | sed "s/^/[TLG sim] /" | tee -a $L
echo "[$(since) s] done" | tee -a $L
