#!/usr/bin/env bash
# GPU machine: the B half of device_s152.sh (its header has the predictions), on the same warm machine
# (/tmp/corpus-full with the model set): lattice host workers on the model set 2 / 4 / 2 and sim 2 / 4 / 2
# (separate processes), then the model set's peers at cuwfst search_beam 20 / 14 / 10 (riva 20, 10).
# $OUT: s152b.log, lat_model.jsonl, lat_sim.jsonl, peers_model*.{jsonl,md,txt}
. scripts/device_common.sh
END=${END:-580}
# Stage: .device_b/wheels with espeakng_loader and kaldi_native_fbank alone (A's wheels stay in /tmp/site).
# Carry .device_b (and .device/pylib, .device/COMMIT: copied into .device_b).
[ -f /tmp/corpus-full/HLG.img ] && [ -f /tmp/corpus-small/HLG.img ] || { echo "no tiers: a fresh machine"; exit 3; }
mkdir -p .device && cp -r .device_b/pylib .device_b/COMMIT .device/ 2>/dev/null
WHEELS=.device_b/wheels NO_FULL=1 device_setup s152b.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
S=/tmp/corpus-small
[ -f $C/model/shard-00000.npz ] || timeout -s INT 200 python3 -m benchmarks.model.make_set --weights examples/model.int8.npz \
  --corpus $S --set-corpus $C --set-utts 256 > $OUT/make_set.log 2>&1
echo "[$(since) s] model set: $(tail -n 1 $OUT/make_set.log | cut -c1-120)" | tee -a $L
for w in 2 4 2; do CUWFST_LATTICE_HOST_WORKERS=$w lat_speed model lat_model.jsonl $(( $(since) + 70 )) "model w$w" --check 1; done
for w in 2 4 2; do CUWFST_LATTICE_HOST_WORKERS=$w lat_speed sim lat_sim.jsonl $(( $(since) + 60 )) "sim w$w" --check 1; done
echo "[$(since) s] workers" | tee -a $L
sweep model 20 cuwfst-gpu cuwfst-gpu-lattice riva
sweep model 14 cuwfst-gpu cuwfst-gpu-lattice
sweep model 10 cuwfst-gpu cuwfst-gpu-lattice riva
echo "[$(since) s] end" | tee -a $L
