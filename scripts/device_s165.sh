#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 20:37: the full tier's TLG against riva alone (sim, beam 20,
# 256 rows, batch 32), for when device_s164.sh ran out of time before it. Prediction as there.
# Stage: .device/wheels with riva's wheel. Carry .device. $OUT: s165.log, peers_sim*
. scripts/device_common.sh
END=${END:-585}
device_setup s165.log
wait_full 470
sweep sim 20 cuwfst-gpu-tlg-lattice riva cuwfst-gpu-tlg
echo "[$(since) s] end" | tee -a $L
