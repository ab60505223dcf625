#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 20:37, after device_s163.sh (H100, 4565cc3: every test
# passed; the small TLG's lattice batch 72.2 -> 58.1 ms with the epsilon lattice trim, now the default).
# One call on the full tier (its build ~4-7 min in the background):
#   1. meanwhile, the epsilon tests at the new default (test_gpu_eps_prune.py, test_gpu_lattice.py -k eps);
#   2. the full HLG's records pass with the packed rounds (CUWFST_LATTICE_AFTER_PACK=on, =labels) beside
#      the default: lattice_speed --env-ab --profile, 256 sim rows, batch 32;
#   3. if time is left, the full tier's TLG against riva (sim, beam 20): cuwfst-gpu-tlg-lattice (trim on,
#      the default), riva, cuwfst-gpu-tlg (device_s165.sh repeats it alone if cut).
# Prediction for the packed rounds (written before any run of the full tier): the CPU twin counts 2,878
# -> ~2,380 rounds a frame of the pass on sim (-17 %); the pass ~10-13 ms a batch of ~41, so -1 to -2.5
# ms a lattice batch if its time follows its rounds (a round of two tokens' arcs reads two segments, so
# less); with the label bound as well (=labels: the bound alone counted 2,878 -> 2,484; both together
# estimated, not counted, ~2,000 rounds, -30 %), but its kernels spill at 64 registers, so -1 to -3 ms;
# lattices and 1-best identical on every row. (On the small tier, s163: 32.10 / 32.01 / 32.02 ms, no
# gain: its HLG's tokens are few and small.) TLG against riva: 1.0-2x riva's throughput.
# Stage: .device/wheels with riva's wheel. Carry .device. $OUT: s164.log, tests_*.log, lat_pack.jsonl, peers_sim*
. scripts/device_common.sh
END=${END:-585}
device_setup s164.log  # (starts the full tier's build in the background)
gpu_tests tests_eps.log 200 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
gpu_tests tests_epslat.log 200 "test_gpu_lattice.py -k eps" tests/test_gpu_lattice.py -k eps &
wait
wait_full 470
lat_speed sim lat_pack.jsonl $((END - 200)) pack --profile --check 4 --env-ab "pack:CUWFST_LATTICE_AFTER_PACK=on" \
  "labels:CUWFST_LATTICE_AFTER_PACK=labels"
echo "[$(since) s] A/B" | tee -a $L
sweep sim 20 cuwfst-gpu-tlg-lattice riva cuwfst-gpu-tlg
echo "[$(since) s] end" | tee -a $L
