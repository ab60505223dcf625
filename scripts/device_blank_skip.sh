#!/usr/bin/env bash
# GPU machine, one call (~6 minutes): blank-frame skipping (DecoderOptions.blank_skip, issue 11's
# option) measured apart from the exact decoder, on the full tier's HLG, blank_skip 0, 0.95, 0.99:
#   background: the small and full tiers build (~230 s), the simulated set, then the model set
#     remade in the full tier from the shipped weights (examples/model.int8.npz; 64 held-out rows
#     synthesized here: needs the espeakng_loader and kaldi_native_fbank wheels). Skipped when
#     $C already holds HLG.img, model/ and sim/ shards.
#   foreground: the blank_skip tests (the GPU one: GPU == CPU on compacted rows, CUDA tensors
#     compacted on the device), then for the model set and the sim set:
#     - speed: benchmarks.gpu_speed, the uniform 32 x 250-frame batch (issue 11's figure), the
#       three values side by side in one process (timed alternately), 4 rows checked against
#       the CPU decoder under the same value; rows say the fraction of frames decoded;
#     - WER: benchmarks.peers.run --decoders cuwfst-gpu, the set's 64 utterances at batch 32,
#       one row per value (blank_skip changes results: its WER is reported apart).
# Carry .device (wheels, the ARPA) and .cache (the build made on the CPU machine):
#   run(command="bash scripts/device_blank_skip.sh", carry=[".device", ".cache"], timeout_s=600)
# $OUT: blank_skip.log (the summary), speed.jsonl, peers.jsonl, build.log
# CPU rehearsal of the Python parts (tiny tier, no GPU): see docs/benchmarks.md, "Blank skipping".
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=${C:-/tmp/corpus-full}; S=/tmp/corpus-small; L=$OUT/blank_skip.log
ARPA=.device/data/en-us-3gram.arpa.xz; BPE=cuwfst/data/tiny/bpe.model; END=${END:-540}; SKIPS="0 0.95 0.99"
if [ -f $C/HLG.img ] && [ -f $C/model/shard-00000.npz ] && [ -f $C/sim/shard-00000.npz ]; then
  echo FULL-DONE > /tmp/full.log
else
  ( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier small --out $S --arpa $ARPA --bpe-model $BPE > /tmp/small.log 2>&1" < /dev/null & )
  ( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier full --out $C --arpa $ARPA --bpe-model $BPE \
    && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 64 --shard-size 64 --seed 0 \
    && while [ ! -f $S/HLG.img ]; do sleep 2; done \
    && python3 -m benchmarks.model.make_set --weights examples/model.int8.npz --corpus $S --set-corpus $C --set-utts 64 \
    && echo FULL-DONE" > /tmp/full.log 2>&1 < /dev/null & )
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
timeout -s INT 120 python3 -m pytest -q -p no:cacheprovider tests/test_blank_skip.py -rs 2>&1 \
  | grep -E "passed|failed|FAILED|Error|SKIPPED" | tail -8 | tee -a $L
echo "[$(since) s] tests" | tee -a $L
while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ $(since) -lt $(( END - 150 )) ]; do sleep 2; done
cp /tmp/full.log $OUT/build.log 2>/dev/null
grep -E "^  (HLG|TLG)|stages|Error" /tmp/full.log | tail -4 | tee -a $L
for SET in model sim; do
  [ -f $C/$SET/shard-00000.npz ] || { echo "no $SET set: $(tail -2 /tmp/full.log)" | tee -a $L; continue; }
  timeout -s INT $(( (END - $(since)) / 3 )) python3 -m benchmarks.gpu_speed --graph $C/HLG.img \
    --log-probs $C/$SET/shard-00000.npz --uniform 250 --utts 32 --batch 32 --reps 5 --check 4 --blank-skip $SKIPS \
    --json $OUT/speed.jsonl 2>&1 | grep -vE "^\{" | sed "s/^/[$SET] /" | tail -8 | tee -a $L
  timeout -s INT $(( (END - $(since)) / 2 )) python3 -m benchmarks.peers.run --corpus $C --set $SET --batch 32 --utts 64 \
    --reps 2 --decoders cuwfst-gpu --blank-skip $SKIPS --json $OUT/peers.jsonl 2>&1 \
    | grep -E "^\[peers\] cuwfst" | sed "s/^/[$SET] /" | tail -6 | tee -a $L
done
echo "[$(since) s] done" | tee -a $L
