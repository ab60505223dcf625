#!/usr/bin/env bash
# GPU machine, one call (~5.5 minutes): main after the speed merge, and issue 13's last figure.
#   background: the small and full tiers build (~230 s), then the model set is remade in the
#     full tier from the shipped weights (examples/model.int8.npz; benchmarks.model.make_set,
#     64 held-out rows synthesized here: needs the espeakng_loader and kaldi_native_fbank wheels)
#   foreground: every GPU test (-m gpu, the 'new' kernels now the default; 150 s cap), memcheck
#     over the upload-accounting fault test
#   then on the full tier: the uniform 32 x 250-frame batch on the model's log-probs and on
#     simulated ones (HLG, kernels old and new side by side, CPU check), and TLG at batch 32.
# $OUT: check.log, speed.jsonl, make_set.log
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; S=/tmp/corpus-small; L=$OUT/check.log
ARPA=.device/data/en-us-3gram.arpa.xz; BPE=cuwfst/data/tiny/bpe.model; END=${END:-330}
( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier small --out $S --arpa $ARPA --bpe-model $BPE > /tmp/small.log 2>&1" < /dev/null & )
( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier full --out $C --arpa $ARPA --bpe-model $BPE \
  && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 64 --shard-size 64 --seed 0 \
  && while [ ! -f $S/HLG.img ]; do sleep 2; done \
  && python3 -m benchmarks.model.make_set --weights examples/model.int8.npz --corpus $S --set-corpus $C --set-utts 64 \
  > $OUT/make_set.log 2>&1 && echo FULL-DONE" > /tmp/full.log 2>&1 < /dev/null & )
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests -s -x --maxfail=5 2>&1 \
  | grep -E "passed|failed|FAILED|Error|GPU vs CPU|lanes:|rows compared" | tail -16 | tee -a $L
echo "[$(since) s] GPU tests" | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_FREE_SLACK_MIB=1024 timeout -s INT 50 "$CS" --tool memcheck --leak-check no --report-api-errors no \
  python3 -m pytest -q tests/test_gpu_faults.py -p no:cacheprovider -k "upload_freed" 2>&1 \
  | grep -E "held|alive|passed|failed|FAILED|ERROR SUMMARY" | head -6 | tee -a $L
echo "[$(since) s] memcheck" | tee -a $L
while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ $(since) -lt $(( END - 70 )) ]; do sleep 2; done
grep -E "^  (HLG|TLG)|stages" /tmp/full.log | tail -3 | tee -a $L; tail -4 $OUT/make_set.log 2>/dev/null | tee -a $L
for SET in model sim; do
  [ -f $C/$SET/shard-00000.npz ] || { echo "no $SET set" | tee -a $L; continue; }
  timeout -s INT $(( (END - $(since)) / 2 )) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/$SET/shard-00000.npz \
    --uniform 250 --utts 32 --batch 32 --reps 5 --check 4 --variants old new --json $OUT/speed.jsonl 2>&1 \
    | grep -vE "^\{" | sed "s/^/[$SET] /" | tail -8 | tee -a $L
done
[ -f $C/sim/shard-00000.npz ] && timeout -s INT $(( END - $(since) )) python3 -m benchmarks.gpu_speed --graph $C/TLG.img \
  --log-probs $C/sim/shard-00000.npz --utts 64 --batch 32 --reps 3 --check 2 --variants old new --json $OUT/speed.jsonl 2>&1 \
  | grep -vE "^\{" | sed "s/^/[TLG sim] /" | tail -6 | tee -a $L
echo "[$(since) s] done" | tee -a $L
