#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 17:50. s204 (H100, b9007bf): with CUWFST_LATTICE_TAIL_HYPS and
# lattice_speed's identical rows now counting words, word times and confidences too, the sides read
# "lattices 238/256" (the minimum over sides; lattice arrays alone were 256/256 in s203). Either the new path
# changes some rows' word times (a bug) or two GPU decodes pick different 1-best paths of one float32 score
# (exact-score ties, whose word times may differ). lattice_speed now counts the rows whose 1-best paths
# differ ("ties") a side and requires equal word times and confidences where the paths are equal.
# lattice_speed --env-ab on the full HLG, tail hyps on / off alternating, every side traced.
# Prediction (written before the run): identical rows 256/256 every side with up to ~18 ties a side, on the
# "on" sides and default_again too (then the ties are the GPU's, not the change's); the tail ~1-2 ms a call
# shorter with it on, ~0.1-0.3 ms a lattice batch.
# $OUT: s205.log, ab_full.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s205.log
wait_full 200; echo "[$(since) s] full tier" | tee -a $L
H=CUWFST_LATTICE_TAIL_HYPS
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 235) --trace-sides --env-ab on:$H=on off:$H=off on2:$H=on \
  off2:$H=off
grep -E "lattice rows identical" $OUT/ab_full.txt | cut -c1-600 | tee -a $L
grep -E "\(side |\(rows in place\)" $OUT/ab_full.txt | grep -E "the call " | cut -c1-300 | tee -a $L
echo "[$(since) s] end" | tee -a $L
