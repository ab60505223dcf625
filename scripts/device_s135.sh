#!/usr/bin/env bash
# GPU machine: issue 10, the first call of the session after 2026-12-05 02:53 (docs/speed-notes.md,
# "Next (for the session after 2026-12-05 02:53)"). NOT yet run. On main:
#   1. the whole GPU suite (gpu_suite: five processes beside the full tier's build);
#   2. the lattice call's tail split (03a13c8's stamps: until the host work is done, from there to the
#      return, the time to drop the results) on the sim set, 256 utterances, with the chunked slots
#      (the default) against round in the same process;
#   3. the peers with riva on the sim set (the ratio after the chunked slots; 2.04x at c15656d).
# Stage: .device/wheels with riva's wheel and without espeakng_loader / kaldi_native_fbank (the carry
# limit; the model set needs those two: a second call). Until END (default 570) s. Carry .device.
# For branch k2-numbering (the GPU half of the arc-for-arc numbering, never run): check the branch out
# and run this same script: its step 1 is that branch's proof (every GPU-vs-CPU lattice test compares
# state ids), step 2's --check 8 the full HLG's.
# $OUT: s135.log, tests.tgz, lat_sim.jsonl, peers.*
. scripts/device_common.sh
END=${END:-570}
device_setup s135.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_suite 330
gpu_suite_wait
echo "[$(since) s] tests" | tee -a $L
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left 470) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 8 --no-replay --one-call \
  --env-ab round:CUWFST_LATTICE_RESERVE=round --json $OUT/lat_sim.jsonl 2>&1 \
  | grep -E "vs 1-best|the tail|its tail|collections|env A/B|exactness|Error" | cut -c1-300 | tee -a $L
echo "[$(since) s] lattice_speed" | tee -a $L
if python3 -c "import riva.asrlib.decoder" 2>/dev/null; then peers $((END - 5)) cuwfst-gpu cuwfst-gpu-lattice riva
else echo "no riva-asrlib-decoder: peers not run" | tee -a $L; fi
echo "[$(since) s] end" | tee -a $L
