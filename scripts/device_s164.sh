#!/usr/bin/env bash
# GPU machine: issue 10, written in the session of 2026-12-05 20:37. NOT yet run. After device_s163.sh
# (run this only if s163 was exact): the full tier's TLG lattices against riva, with the lattice trim on
# epsilon graphs off (the default) and on, one call (the full tier's build ~4-7 min, then ~3 min); then,
# if time is left, the full HLG's records pass with the packed rounds (CUWFST_LATTICE_AFTER_PACK=on)
# beside the default, lattice_speed --env-ab --profile (or run it first with END=580 and the peers
# commented out, if s163 showed the packed rounds exact).
# Prediction for the packed rounds (written before any run): the CPU twin counts 2,878 -> ~2,380 rounds
# a frame of the pass on sim (-17 %); the pass ~10-13 ms a batch of ~41, so -1 to -2.5 ms a lattice
# batch if its time follows its rounds (a round of two tokens' arcs reads two segments, so less);
# with the label bound as well (=labels: the bound alone counted 2,878 -> 2,484; both together estimated,
# not counted, ~2,000 rounds, -30 %), but its kernels spill at 64 registers, so -1 to -3 ms; lattices
# and 1-best identical on every row.
# Prediction (written before any run): off: 1.0-1.5x riva (the small tier's 1.09-1.10x; unmeasured on the
# full TLG); on: 1.3-2x riva, lattices identical to the CPU's on the checked rows.
# Stage: .device/wheels with riva's wheel. Carry .device. $OUT: s164.log, peers_sim*, peers_trim*, lat_pack.jsonl
. scripts/device_common.sh
END=${END:-585}
device_setup s164.log  # (starts the full tier's build in the background)
wait_full 470
sweep sim 20 cuwfst-gpu-tlg-lattice riva cuwfst-gpu-tlg
CUWFST_LATTICE_EPS_TRIM=on timeout -s INT $(left $((END - 3))) python3 -m benchmarks.peers.run --corpus $C --set sim \
  --batch 32 --utts 256 --reps 3 --feed all --cuwfst-search-beam 20 --beam 20 --decoders cuwfst-gpu-tlg-lattice \
  --json $OUT/peers_trim.jsonl --md $OUT/peers_trim.md > $OUT/peers_trim.txt 2>&1
grep -E "^\[peers\]" $OUT/peers_trim.txt | grep -v utterances | cut -c1-200 | sed "s/^/[trim on] /" | tee -a $L
lat_speed sim lat_pack.jsonl $END pack --profile --check 4 --env-ab "pack:CUWFST_LATTICE_AFTER_PACK=on" \
  "labels:CUWFST_LATTICE_AFTER_PACK=labels"
echo "[$(since) s] end" | tee -a $L
