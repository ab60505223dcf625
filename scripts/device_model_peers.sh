#!/usr/bin/env bash
# GPU machine, one call (~9 minutes), issue 13: the model trained and exported
# (scripts/device_model.sh: mid preset, full tier built beside it, model set written into it),
# then on the full tier, same run: the peers table on the model's posteriors and on the
# simulated ones (cuwfst-gpu, riva, greedy; cuwfst-cpu on 16), and the uniform 32 x 250-frame
# batch on model posteriors next to simulated ones.
# Needs in .device/wheels: the shared wheels incl. riva, espeakng_loader, kaldi_native_fbank
# (drop .cache from carry to stay under 64 MiB). $OUT: model.npz, logs.tgz, peers.md
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=${CUWFST_CACHE_DIR:-/tmp/cuwfst-cache}
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
W=/tmp/work; mkdir -p $W/model; C=/tmp/corpus-full; L=$W/peers.log
MODEL_SCALE=base FULL_BUILD=full FULL=$C SET_CORPORA=$C OUT=$W/model SKIP_INSTALL=1 TRAIN_END=${TRAIN_END:-300} \
  timeout 400 bash scripts/device_model.sh > $W/model_run.log 2>&1
echo "[$(since) s] model: $(grep -E 'greedy CTC \||HLG, cuwfst' $W/model/summary.md | tr '\n' ' ')" | tee $L
cp $W/model/model.npz "$OUT/" 2>/dev/null
while [ ! -f $C/TLG.img ] && [ $(since) -lt 430 ]; do sleep 3; done
[ -f $C/sim/shard-00000.npz ] || python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 64 \
  --shard-size 64 --seed 0 > /dev/null 2>&1
for SET in model sim; do
  timeout -s INT $(( 520 - $(since) )) python3 -m benchmarks.peers.run --corpus $C --set $SET --batch 32 --utts 64 \
    --cpu-utts 16 --reps 2 --decoders cuwfst-gpu riva greedy cuwfst-cpu --md $W/peers_$SET.md 2>&1 | tail -12 | tee -a $L
  for F in $C/$SET/shard-00000.npz; do
    timeout -s INT 40 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $F --uniform 250 --utts 32 \
      --batch 32 --reps 5 --check 4 2>&1 | grep -v "^{" | tail -3 | tee -a $L
  done
done
{ cat $W/peers_model.md $W/peers_sim.md 2>/dev/null; } > "$OUT/peers.md"
tar czf "$OUT/logs.tgz" -C $W --exclude model.npz --exclude model.int8.npz . 2>/dev/null
echo "[$(since) s] done" | tee -a $L
