#!/usr/bin/env bash
# GPU machine: issue 10, queued after the session of 2026-12-05 18:40. NOT yet run; superseded by
# device_s163.sh (the small TLG's kernel split, with the epsilon lattice trim beside it) and device_s164.sh. On main (a751b79 or
# later): where the TLG lattice's 73 ms a batch go, and the full tier's TLG against riva.
#   1. the small TLG (256 sim rows, batch 32): lattice_speed --profile (the kernel split of a lattice
#      decode: the search's kernels untrimmed, LatPersistKernel, LatStepEndKernel, LatFrontierLogKernel),
#      and the 1-best's split beside it (gpu_speed is HLG-only: lattice_speed's 1-best time);
#   2. the full tier (HLG and TLG; ~4-7 min to build) in the background meanwhile, then the peers on its
#      TLG: cuwfst-gpu-tlg-lattice, riva, cuwfst-gpu-tlg (sim, beam 20, 256 rows, batch 32).
# Prediction (written before any run): of the small TLG's 74 ms decode with records, the untrimmed
# search ~35-45 ms (the 1-best's trimmed 26 plus the slots the trim leaves out), LatPersistKernel ~20-30,
# the frontier log ~2-4. So a lattice trim for epsilon graphs (speed-notes, "Where the TLG lattice stands
# now", lever 1) would save ~10-20 ms a batch and LatPersistKernel's walk about as much again. On the full
# TLG: cuwfst-gpu-tlg-lattice 1.0-1.5x riva (the small tier's 1.09-1.10x; the full graph's larger
# frontiers favour the GPU's pruning over riva's host lattice work, or not: unmeasured).
# Stage: .device/wheels with riva's wheel. Carry .device. $OUT: s162.log, tlg_profile.txt, peers_sim*
. scripts/device_common.sh
END=${END:-580}
device_setup s162.log  # (starts the full tier's build in the background)
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
small_tier
S=/tmp/corpus-small
timeout -s INT $(left 260) python3 -m benchmarks.lattice_speed --graph $S/TLG.img --log-probs $S/sim/shard-00000.npz \
  --utts 64 --batch 32 --reps 3 --cpu-utts 0 --check 1 --no-replay --one-call --profile --json $OUT/lat_small.jsonl \
  > $OUT/tlg_profile.txt 2>&1
echo "[TLG profile exit $?]" | tee -a $L
grep -vE "^\{" $OUT/tlg_profile.txt | grep -iE "kernel|profile|vs 1-best|split|Error" | cut -c1-300 | head -30 | tee -a $L
wait_full 500
sweep sim 20 cuwfst-gpu-tlg-lattice riva cuwfst-gpu-tlg
echo "[$(since) s] end" | tee -a $L
