#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 10:05. What output_beam costs: the lattice batch against the
# 1-best (same process each) at output_beam 8, 6, 4 on the full HLG, sim and the model set, batch 32, 256 rows
# in one call; sim's 8 again at the end for the drift. No side here is new code; a table for users (the
# knob a lattice's cost turns on) and for the 1.5x bar (which reads output_beam 8, icefall's).
# Prediction, written before the run: the records' filter and the pruning scale with what output_beam keeps,
# so sim 38 / ~35 / ~32 ms (x1.6 / ~1.45 / ~1.35) and model ~100 / ~80 / ~60 ms; arcs a frame sim 104 /
# ~45 / ~15, model ~970 / ~400 / ~120.
# Carry .device and .device_b (without the riva wheel: 64 MiB). $OUT: s185.log, ob_*.txt, make_set.log
. scripts/device_common.sh
END=${END:-560}
FULL_GRAPHS=hlg device_setup s185.log
model_wheels
start_model_set 256
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
ob() {  # ob SET BEAM TAG
  timeout -s INT $(left $END) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/$1/shard-00000.npz \
    --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 1 --no-replay --one-call --output-beam $2 \
    --json $OUT/ob.jsonl > $OUT/ob_$3.txt 2> $OUT/ob_$3.err
  echo "[$(since) s] [$1 output_beam $2 exit $?] $(grep -E 'vs 1-best' $OUT/ob_$3.txt | head -1)" | tee -a $L
  grep -E "^exactness" $OUT/ob_$3.txt | sed "s/^/[$3] /" | tee -a $L
}
ob sim 8 sim8; ob sim 6 sim6; ob sim 4 sim4
wait_model 470
if grep -q MODEL-DONE $OUT/make_set.log; then ob model 8 model8; ob model 6 model6; ob model 4 model4; fi
ob sim 8 sim8b
echo "[$(since) s] end" | tee -a $L
