#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 17:20, second call (A), then device_s152b.sh (B) on the
# same warm machine. Lattice host workers on the full HLG: s151 (H200, small TLG) measured 2 / 3 / 4 / 2
# workers at 298.0 / 287.1 / 236.3 / 297.7 ms a lattice batch; before making 4 the default on hosts of
# 16+ CPUs for every graph, the HLG sets: the model set (256 rows, host-bound: H100 s140 114.2 ms with 2,
# 104.8 with 3) and sim (256 rows, not host-bound: the jobs waited ~0.1 ms for a worker).
# Prediction (written before the run): model set 4 workers 92-105 ms a lattice batch against 2 workers'
# 105-120 (this card); sim 4 workers within +-1.5 ms of 2 workers (~40 ms), identical lattices.
# A: the full tier (HLG only) and the model set (256 rows) built, then model 2 / 4 workers.
# Stage: .device/wheels with espeakng_loader and kaldi_native_fbank. Carry .device.
# $OUT: s152.log, lat_model.jsonl, make_set.log
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup s152.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
start_model_set 256
wait_full 470; echo "[$(since) s] full tier" | tee -a $L
while ! grep -q MODEL-DONE $OUT/make_set.log 2>/dev/null && [ $(since) -lt 520 ]; do sleep 2; done
echo "[$(since) s] model set $(tail -n 1 $OUT/make_set.log | cut -c1-100)" | tee -a $L
for w in 2 4; do
  [ $(since) -lt $((END - 45)) ] || break
  CUWFST_LATTICE_HOST_WORKERS=$w lat_speed model lat_model.jsonl $((END - 3)) "model w$w" --check 1
done
echo "[$(since) s] end" | tee -a $L
