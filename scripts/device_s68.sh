#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine), the session's last: the GPU files the rows
# read in place reach (the rescue and the pooled layout: test_gpu_memory.py; the error paths:
# test_gpu_faults.py; the TLG's padded sub-batches: test_gpu_epsilon.py), then the peers (feed all,
# 256 utterances: cuwfst-gpu, cuwfst-gpu-lattice on HLG.img, riva on TLG.fst) on the final code.
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s68.log, tests*.log, peers.md, peers.jsonl.
. scripts/device_common.sh
device_setup s68.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 150 "test_gpu_memory.py (whole)" tests/test_gpu_memory.py
gpu_tests tests2.log 60 "test_gpu_faults.py" tests/test_gpu_faults.py
gpu_tests tests3.log 30 "test_gpu_epsilon.py" tests/test_gpu_epsilon.py
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left 420) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $OUT/peers.txt 2>&1
echo "peers exit $?" | tee -a $L
grep -E "^\[peers\]" $OUT/peers.txt | tail -4 | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
