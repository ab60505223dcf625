#!/usr/bin/env bash
# GPU machine, one call, under 8 minutes (issue 13): a CTC conformer trained on espeak-ng speech.
#   1. the small tier (unless $SMALL/HLG.img exists), cuwfst's GPU module built beside it
#   2. python -m benchmarks.model.train: synthesis, training until $TRAIN_END s after the start,
#      greedy/HLG WER on held-out speech, weights, the model set in $SMALL/model (+ $SET_CORPORA)
#   3. python -m benchmarks.model.calibrate: the simulator profile fitted to the model set and
#      the model / default-sim / fitted-sim table (stats, WER, frontier sizes) on the small tier;
#      the same table on $FULL if its HLG.img is ready and time is left
# $OUT gets (8 files): model.log summary.md summary.json model.npz model.int8.npz
#   profile_model.json (-> benchmarks/corpus/profiles/model.json) calibration.md calibration.json
#
# Needs in .device/: wheels/ (the shared ones + espeakng_loader + kaldi_native_fbank cp312),
# data/en-us-3gram.arpa.xz (stage.sh --data). Env: MODEL_SCALE base|cpu|tiny, TRAIN_END,
# SMALL, FULL, FULL_BUILD=full (build FULL in the background), SET_CORPORA (space-separated
# tiers that also get DIR/model, e.g. $FULL), SKIP_INSTALL=1.
# A later call remakes the set from the weights (no training; ~1 minute with the tier's LM):
#   python3 -m benchmarks.model.make_set --weights W/model.npz --corpus SMALL_DIR --set-corpus /tmp/corpus-full
#   (SMALL_DIR needs only lm.arpa.gz and words.txt of the small tier)
# CPU rehearsal (no GPU, a venv with the packages):
#   cp -r cuwfst/data/tiny /tmp/t && MODEL_SCALE=tiny SMALL=/tmp/t SKIP_INSTALL=1 OUT=/tmp/o bash scripts/device_model.sh
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
if [ -z "${SKIP_INSTALL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=${CUWFST_CACHE_DIR:-$PWD/.cache/cuwfst}
export CUWFST_COMMIT=${CUWFST_COMMIT:-$(cat .device/COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
OUT=${OUT:-/tmp/out-model}; mkdir -p "$OUT"; L=$OUT/model.log
SCALE=${MODEL_SCALE:-base}; SMALL=${SMALL:-/tmp/corpus-small}; FULL=${FULL:-}
ARPA=${ARPA:-.device/data/en-us-3gram.arpa.xz}
# synthesis stops SYNTH_END s after the start (what 15 cores made by then is the training set),
# training TRAIN_END s after it; evaluation, the sets and calibration take the ~2.5 minutes left
case $SCALE in tiny) SYNTH_END=${SYNTH_END:-200}; TRAIN_END=${TRAIN_END:-240};;
  *) SYNTH_END=${SYNTH_END:-120}; TRAIN_END=${TRAIN_END:-330};; esac
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"
  echo "commit $CUWFST_COMMIT, scale $SCALE, synthesis until ${SYNTH_END} s, training until ${TRAIN_END} s; $(nproc) cores"; } | tee "$L"

# 0. FULL_BUILD=full (or tiny, to rehearse): build $FULL in the background, beside everything else;
#    its words.txt comes early (the set is written there), its HLG.img after ~4 minutes (the check)
if [ -n "${FULL_BUILD:-}" ] && [ -n "$FULL" ] && [ ! -f "$FULL/HLG.img" ]; then
  ( setsid nohup nice -n 10 python3 -m benchmarks.corpus.build --tier "$FULL_BUILD" --out "$FULL" --arpa "$ARPA" \
      --bpe-model cuwfst/data/tiny/bpe.model > /tmp/full-build.log 2>&1 < /dev/null & )
  echo "[$(since) s] $FULL_BUILD tier building in the background into $FULL" | tee -a "$L"
fi

# 1. the GPU decoder's module (used after training) builds while the tier builds
( python3 -m cuwfst.cli build --cuda-arch 9.0 > /tmp/cuwfst-build.log 2>&1; echo "rc $?" >> /tmp/cuwfst-build.log ) &
BUILD=$!
if [ ! -f "$SMALL/HLG.img" ]; then
  python3 -m benchmarks.corpus.build --tier small --out "$SMALL" --arpa "$ARPA" --bpe-model cuwfst/data/tiny/bpe.model \
    > /tmp/small-build.log 2>&1 || { tail -20 /tmp/small-build.log | tee -a "$L"; exit 1; }
  grep -E "^tier|^  HLG" /tmp/small-build.log | tee -a "$L"
fi
wait $BUILD; tail -3 /tmp/cuwfst-build.log | tee -a "$L"
echo "[$(since) s] tier and module ready" | tee -a "$L"

# 2. the pipeline; training stops TRAIN_END s after this script started, whatever synthesis took
python3 -m benchmarks.model.train --corpus "$SMALL" --out "$OUT" --scale "$SCALE" \
  --synth-by $(( T0 + SYNTH_END )) --finish-by $(( T0 + TRAIN_END )) --set-corpus ${SET_CORPORA:-} 2>&1 \
  | grep --line-buffered -v Warning | tee -a "$L"
[ -f "$OUT/summary.json" ] || { echo "training pipeline failed" | tee -a "$L"; exit 1; }
echo "[$(since) s] model done" | tee -a "$L"
for d in ${SET_CORPORA:-}; do ls "$d"/model/*.npz > /dev/null 2>&1 || echo "warning: no model set in $d" | tee -a "$L"; done

# 3. calibration on the small tier, then on the full tier when it is there and time is left
CHECK=${CHECK_UTTS:-64}; [ "$SCALE" = tiny ] && CHECK=4
python3 -m benchmarks.model.calibrate --corpus "$SMALL" --profile-out "$OUT/profile_model.json" --check "$CHECK" \
  --md "$OUT/calibration.md" --json "$OUT/calibration.json" 2>&1 | tee -a "$L"
echo "[$(since) s] calibrated" | tee -a "$L"
if [ -n "$FULL" ] && [ -f "$FULL/HLG.img" ] && ls "$FULL"/model/*.npz > /dev/null 2>&1 && [ "$(since)" -lt 400 ]; then
  timeout $(( 460 - $(since) )) python3 -m benchmarks.model.calibrate --corpus "$FULL" --check "$CHECK" \
    --use-profile "$OUT/profile_model.json" --md /tmp/calibration_full.md 2>&1 | tee -a "$L"
  [ -f /tmp/calibration_full.md ] && { printf '\n### Full tier\n\n' >> "$OUT/calibration.md"; cat /tmp/calibration_full.md >> "$OUT/calibration.md"; }
  echo "[$(since) s] full-tier check done" | tee -a "$L"
fi
[ -f /tmp/full-build.log ] && { grep -E "^tier|^  HLG|stages" /tmp/full-build.log || tail -3 /tmp/full-build.log; } | tee -a "$L"
ls -la "$OUT" | tee -a "$L"
