#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 20:37, last call: the chain closure in GPU-pruned lattice
# decodes on epsilon graphs (gpu_decoder.cu GpuDecoder::lat_chain_; CUWFST_LATTICE_CHAIN=on at
# construction; off by default: written in the session's last minutes, when no device time was left).
#   1. beside the small tier's build, under CUWFST_LATTICE_CHAIN=on: test_gpu_eps_prune.py,
#      test_gpu_lattice.py -k eps, test_gpu_chain.py;
#   2. the small TLG (256 sim rows, batch 32): lattice_speed --env-ab with the chain beside the default
#      (lists), lattices and 1-best identical required, 2 rows checked against the CPU.
# If exact and faster: lat_chain_ = true, and the whole GPU suite.
# Prediction (written before the run): exact everywhere; the lattice batch ~58 -> 48-53 ms (the closure's
# ~21 ms in lattice decodes against ~11 in the 1-best's chain, s163's split).
# Stage: .device/wheels. Carry .device. $OUT: s168.log, tests_*.log, tlg_chain.txt
. scripts/device_common.sh
END=${END:-300}
NO_FULL=1 device_setup s168.log
small_tier &
CUWFST_LATTICE_CHAIN=on gpu_tests tests_eps.log 150 "test_gpu_eps_prune.py (chain)" tests/test_gpu_eps_prune.py &
CUWFST_LATTICE_CHAIN=on gpu_tests tests_epslat.log 150 "test_gpu_lattice.py -k eps (chain)" tests/test_gpu_lattice.py -k eps &
CUWFST_LATTICE_CHAIN=on gpu_tests tests_chain.log 150 "test_gpu_chain.py (chain)" tests/test_gpu_chain.py &
wait
echo "[$(since) s] tests" | tee -a $L
S=/tmp/corpus-small
timeout -s INT $(left $END) python3 -m benchmarks.lattice_speed --graph $S/TLG.img --log-probs $S/sim/shard-00000.npz \
  --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call \
  --env-ab "chain:CUWFST_LATTICE_CHAIN=on" --json $OUT/tlg_chain.jsonl > $OUT/tlg_chain.txt 2>&1
echo "[TLG chain A/B exit $?]" | tee -a $L
grep -vE "^\{" $OUT/tlg_chain.txt | grep -iE "vs 1-best|env A/B|exactness|Error" | cut -c1-400 | head -8 | tee -a $L
echo "[$(since) s] end" | tee -a $L
