#!/usr/bin/env bash
# GPU machine: the B half of device_s152.sh (its header has the prediction), on the same warm machine
# (/tmp/corpus-full with the model set): model 2 workers again (and 2 / 4 if A did not reach them),
# sim 2 / 4 / 2 workers. $OUT: s152b.log, lat_model.jsonl, lat_sim.jsonl
. scripts/device_common.sh
END=${END:-560}
NO_FULL=1 device_setup s152b.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
[ -f $C/model/shard-00000.npz ] || { echo "no model set: a fresh machine" | tee -a $L; exit 3; }
for w in ${MODEL_W:-2}; do CUWFST_LATTICE_HOST_WORKERS=$w lat_speed model lat_model.jsonl $(( $(since) + 70 )) "model w$w" --check 1; done
for w in 2 4 2; do CUWFST_LATTICE_HOST_WORKERS=$w lat_speed sim lat_sim.jsonl $(( $(since) + 60 )) "sim w$w" --check 1; done
echo "[$(since) s] end" | tee -a $L
