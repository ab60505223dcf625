#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 18:40, the second call. s157 (4d0be3d, H100): the GPU
# pruning on epsilon graphs exact on its first run (test_gpu_eps_prune 69 passed, the 8 failures a test's
# own fault: the replay it compared with had its records' filter on, so recorded_arcs None; 859 passed in
# test_gpu_lattice/test_gpu_epsilon, 1,055 epsilon rows 0 mismatches); peers on the small TLG:
# cuwfst-gpu-tlg-lattice 3,315.2 RTFx against riva 3,754.9 (s156: 1,224.9, the replay).
# New: the records' filter on epsilon graphs in the GPU-pruned decodes (LatEpsFilterFor for lattice 2),
# its guard checked by the pruning itself (PrEpsGuardTime: forward against the search's scores;
# PrEpsLaneWindowsKernel: the windows' magnitudes and layers against each filtered step's A); rows that
# break it come back as EPS_REDO and are decoded again without it. lattice_speed now times the GPU path
# on epsilon graphs (its split too).
# Prediction (written before the run): exact everywhere; the guard fires on the scaled log-probs test;
# the filter keeps ~11-19 % of the records (s148: 20.5 M of 187 M), so the TLG lattice batch drops from
# ~250-300 ms (the unfiltered GPU pruning; lattice_speed did not time it in s157: it forced the replay) to
# ~80-150 ms; peers: cuwfst-gpu-tlg-lattice 5,000-8,000 RTFx, 1.3-2x riva's ~3,700.
# Stage: .device/wheels with riva's wheel. Carry .device. $OUT: s158.log, eps_tests.log, lat_tests.log,
# tlg_*.txt, lat_small.jsonl, peers_sim*
. scripts/device_common.sh
END=${END:-560}
NO_FULL=1 device_setup s158.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
small_tier &
SMALL=$!
gpu_tests eps_tests.log 200 "eps GPU pruning" tests/test_gpu_eps_prune.py
gpu_tests lat_tests.log 200 "random lattices, eps filter, epsilon" tests/test_gpu_lattice.py tests/test_gpu_epsilon.py \
  -k "random_lattices or eps or epsilon"
wait $SMALL
S=/tmp/corpus-small
echo "[$(since) s] small tier: $(ls $S/TLG.img $S/sim/shard-00000.npz 2>&1 | tr '\n' ' ')" | tee -a $L
for side in gpu gpu-nofilter replay gpu; do  # (the replay with its own filter, as before)
  f=on; [ $side = gpu-nofilter ] && f=off
  CUWFST_LATTICE_PRUNE_EPS=${side%-nofilter} CUWFST_LATTICE_EPS_FILTER=$f timeout -s INT $(left $((END - 90))) \
    python3 -m benchmarks.lattice_speed --graph $S/TLG.img \
    --log-probs $S/sim/shard-00000.npz --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call \
    --json $OUT/lat_small.jsonl > $OUT/tlg_$side.txt 2>&1
  echo "[TLG $side exit $?]" | tee -a $L
  grep -E "vs 1-best|exactness|pruning path|Error" $OUT/tlg_$side.txt | grep -v "^{" | cut -c1-400 | sed "s/^/[TLG, $side] /" | tee -a $L
done
C=$S
sweep sim 20 cuwfst-gpu-tlg-lattice riva
echo "[$(since) s] end" | tee -a $L
