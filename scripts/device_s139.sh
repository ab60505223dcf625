#!/usr/bin/env bash
# GPU machine: issue 10, the first call of the session after 2026-12-05 04:55 (docs/speed-notes.md,
# "Next (for the session after 2026-12-05 04:55)"). NOT yet run. On main:
#   1. the whole GPU suite (gpu_suite: five processes beside the full tier's build), which now holds
#      test_gpu_lattice.py's and test_gpu.py's test_rows_rescued_beside_the_next_sub_batches
#      (EarlyRescue on and off, lattice and 1-best, never run on a GPU) and test_k2_structure.py;
#      then the rescue tests of both files again with CUWFST_EARLY_RESCUE=on for the whole file;
#   2. EarlyRescue's A/B on the sim set, 256 utterances (one rescued row a call, 1-best and lattice
#      alike; the switch covers both since 2026-12-05 06:30): off / on / off in
#      three processes (the switch is read at each call, so lattice_speed's --env-ab, which sets a
#      variable while a decoder is built, cannot flip it); each traced call splits the tail (from the
#      overlap's exit to the rescue's end: ~26 ms off, ~0 predicted on); predicted 1.3-3.2 ms a lattice
#      batch (docs/speed-notes.md, "EarlyRescue");
#   3. the peers with riva on the sim set (the ratio 2.03x at eadb8b9).
# Stage: .device/wheels with riva's wheel, without espeakng_loader / kaldi_native_fbank (the carry
# limit). Until END (default 570) s. Carry .device.
# $OUT: s139.log, tests.tgz, lat_sim.jsonl, lat_sim_on.jsonl, peers.*
. scripts/device_common.sh
END=${END:-570}
device_setup s139.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_suite 330
gpu_suite_wait
CUWFST_EARLY_RESCUE=on timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py \
  tests/test_gpu.py -k "rescue" -rf > /tmp/t_on.log 2>&1; echo "[early on] $(grep -E "passed|failed" /tmp/t_on.log | tail -n 1)" | tee -a $L
echo "[$(since) s] tests" | tee -a $L
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
lat_speed sim lat_sim.jsonl 440 "sim early off" --check 4
CUWFST_EARLY_RESCUE=on lat_speed sim lat_sim_on.jsonl 470 "sim early on" --check 4
lat_speed sim lat_sim.jsonl 500 "sim early off"
echo "[$(since) s] lattice_speed" | tee -a $L
if python3 -c "import riva.asrlib.decoder" 2>/dev/null; then peers $((END - 5)) cuwfst-gpu cuwfst-gpu-lattice riva
else echo "no riva-asrlib-decoder: peers not run" | tee -a $L; fi
echo "[$(since) s] end" | tee -a $L
