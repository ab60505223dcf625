#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 10:05. s184 (device_s184.sh at ac91dbf) timed the host split on
# sim only (split 37.69 / 37.58 / 37.67 against off 37.81 / 37.75 ms a lattice batch): its model set's
# A/B ran out of GPU memory at its fourth decoder (each commits ~19.8 GiB on the model set). lattice_speed's
# --env-ab now gives sides with the same variables one decoder, so this is s184's call again, both sets.
# Prediction (unchanged from s184): the model set within +-2 % of off with the split; sim -0.1 to -0.6 ms.
# Carry .device and .device_b (without the riva wheel: 64 MiB). $OUT: s184b.log, ab_model.*, ab_sim.*, make_set.log
. scripts/device_common.sh
END=${END:-560}
FULL_GRAPHS=hlg device_setup s184b.log
model_wheels
start_model_set 256
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
wait_model 470
SIDES=("split:CUWFST_LATTICE_HOST_SPLIT=on" "off:CUWFST_LATTICE_HOST_SPLIT=off" "split2:CUWFST_LATTICE_HOST_SPLIT=on"
  "off2:CUWFST_LATTICE_HOST_SPLIT=off" "split3:CUWFST_LATTICE_HOST_SPLIT=on" "off3:CUWFST_LATTICE_HOST_SPLIT=off")
grep -q MODEL-DONE $OUT/make_set.log && env_ab model $C/HLG.img $C/model/shard-00000.npz $(left $((END - 90))) \
  --env-ab "${SIDES[@]}"
env_ab sim $C/HLG.img $C/sim/shard-00000.npz $(left $END) --env-ab "${SIDES[@]}"
echo "[$(since) s] end" | tee -a $L
