#!/usr/bin/env bash
# GPU machine: issue 10, for the session after 2026-12-06 09:00 (written then, not yet run). The host split
# (CUWFST_LATTICE_HOST_SPLIT=on: each sub-batch's host work in one share of its rows a host worker) was
# -0.6 ms on the full HLG's sim rows at ae2c2e9 (s183d, every split side lower), after the pinned
# readbacks removed the setup stall. It stays off until it is measured where the host work dominates: the
# model set's large lattices, whose shares contend for the interpreter lock. One call: the model set (256
# rows) made beside the full tier, then lattice_speed --env-ab on it with the split and off sides
# interleaved, then the same on sim.
# Prediction: the model set's lattice batch within +-2 % of off with the split (its jobs' host work runs
# side by side already with 2 workers; the split only evens out the last job's), and sim -0.3 to -0.6 ms.
# If the model set does not lose, make the split the default.
# Stage: .device/wheels and .device_b/wheels (espeakng_loader, kaldi_native_fbank for the model set).
# Carry .device and .device_b. $OUT: s184.log, ab_model.*, ab_sim.*, make_set.log
. scripts/device_common.sh
END=${END:-580}
FULL_GRAPHS=hlg device_setup s184.log
model_wheels
start_model_set 256
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
wait_model 470
SIDES=("split:CUWFST_LATTICE_HOST_SPLIT=on" "off:CUWFST_LATTICE_HOST_SPLIT=off" "split2:CUWFST_LATTICE_HOST_SPLIT=on"
  "off2:CUWFST_LATTICE_HOST_SPLIT=off" "split3:CUWFST_LATTICE_HOST_SPLIT=on")
grep -q MODEL-DONE $OUT/make_set.log && env_ab model $C/HLG.img $C/model/shard-00000.npz $(left $((END - 40))) \
  --env-ab "${SIDES[@]}"
env_ab sim $C/HLG.img $C/sim/shard-00000.npz $(left $END) --env-ab "${SIDES[@]}"
echo "[$(since) s] end" | tee -a $L
