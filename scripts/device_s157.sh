#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 18:40. The GPU's own output-beam pruning on graphs with
# epsilon arcs (gpu_lattice_prune.cu "Epsilon graphs"; its CPU twin tests/eps_prune_twin.py), first run.
#   1. exactness: tests/test_gpu_eps_prune.py (60 random epsilon cases against the CPU, the replay, below
#      the chain, many sub-batches), test_gpu_lattice.py's random lattices (300 seeds, a third epsilon
#      graphs) and its eps filter tests (now on the replay), test_gpu_epsilon.py;
#   2. speed, the small tier's TLG (256 sim rows, batch 32, one call, 2 rows checked against the CPU):
#      GPU pruning / the replay (CUWFST_LATTICE_PRUNE_EPS=replay) / GPU pruning again, one process each;
#   3. riva on the same TLG beside cuwfst-gpu-tlg-lattice (the peers, beam 20).
# Prediction (written before the run): exact on every test. The GPU pruning records every surviving arc
# (no records' filter on epsilon graphs yet: ~14,400 records a frame, ~190 M a sub-batch), so its decode
# and device passes cost ~100-200 ms a batch of 32 against the replay's ~300 (s153: 330 ms on the H100):
# 1.5-3x faster than the replay, still 1-2x slower than riva (~110 ms a batch there, s156).
# Stage: .device/wheels with riva's wheel. Carry .device. $OUT: s157.log, eps_tests.log, lat_tests.log,
# tlg_*.txt, lat_small.jsonl, peers_sim*
. scripts/device_common.sh
END=${END:-560}
NO_FULL=1 device_setup s157.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
small_tier &
SMALL=$!
gpu_tests eps_tests.log 200 "eps GPU pruning" tests/test_gpu_eps_prune.py
gpu_tests lat_tests.log 200 "random lattices, eps filter, epsilon" tests/test_gpu_lattice.py tests/test_gpu_epsilon.py \
  -k "random_lattices or eps or epsilon"
wait $SMALL
S=/tmp/corpus-small
echo "[$(since) s] small tier: $(ls $S/TLG.img $S/sim/shard-00000.npz 2>&1 | tr '\n' ' ')" | tee -a $L
for side in gpu replay gpu; do
  CUWFST_LATTICE_PRUNE_EPS=$side timeout -s INT $(left $((END - 90))) python3 -m benchmarks.lattice_speed --graph $S/TLG.img \
    --log-probs $S/sim/shard-00000.npz --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call \
    --json $OUT/lat_small.jsonl > $OUT/tlg_$side.txt 2>&1
  echo "[TLG $side exit $?]" | tee -a $L
  grep -E "vs 1-best|exactness|prune|Error" $OUT/tlg_$side.txt | cut -c1-400 | sed "s/^/[TLG, $side] /" | tee -a $L
done
C=$S
sweep sim 20 cuwfst-gpu-tlg-lattice riva
echo "[$(since) s] end" | tee -a $L
