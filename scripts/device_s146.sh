#!/usr/bin/env bash
# GPU machine: issue 10, the first call of the session after 2026-12-05 14:12. NOT yet run. On main:
#   1. the whole GPU suite (gpu_suite: five processes beside the full tier's build) at the defaults of
#      1914245 (two lattice host workers on a host of 8+ CPUs; EarlyRescue off) with the records
#      pass's side streams non-blocking (never run on a GPU);
#   2. the rescue tests of test_gpu.py and test_gpu_lattice.py with CUWFST_EARLY_RESCUE=on for the whole
#      files, five times: at 4d710f1 one of them failed with cudaErrorStreamCaptureImplicit (the main
#      thread's cudaEventRecord on the legacy stream while the rescue thread captured a blocking side
#      stream); with the side streams non-blocking all five must pass, and then EarlyRescue can be the
#      default again (it was measured: sim tail 50-56 -> 17 ms, docs/benchmarks.md, 2026-12-05 14:12);
#   3. EarlyRescue off / on / off on sim 256 (lattice_speed --one-call; two host workers each);
#   4. the peers with riva on the sim set at the new defaults (EarlyRescue on if item 2 passed).
# Stage: .device/wheels with riva's wheel (espeakng_loader / kaldi_native_fbank not needed). Until
# END (default 570) s. Carry .device. $OUT: s146.log, tests.tgz, lat_sim.jsonl, peers.*
. scripts/device_common.sh
END=${END:-570}
device_setup s146.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_suite 330
gpu_suite_wait
ok=0
for i in 1 2 3 4 5; do
  CUWFST_EARLY_RESCUE=on timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py \
    tests/test_gpu.py -k "rescue" -rf > /tmp/t_on_$i.log 2>&1 && ok=$((ok + 1))
  echo "[early on, $i] $(grep -E "passed|failed" /tmp/t_on_$i.log | tail -n 1)" | tee -a $L
  grep -E "cudaError|^FAILED" /tmp/t_on_$i.log | head -3 | cut -c1-200 | tee -a $L
done
echo "[$(since) s] tests; early-on rounds passed: $ok / 5" | tee -a $L
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
lat_speed sim lat_sim.jsonl 450 "sim early off" --check 4
CUWFST_EARLY_RESCUE=on lat_speed sim lat_sim.jsonl 480 "sim early on" --check 4
lat_speed sim lat_sim.jsonl 510 "sim early off"
echo "[$(since) s] lattice_speed" | tee -a $L
[ $ok = 5 ] && export CUWFST_EARLY_RESCUE=on
if python3 -c "import riva.asrlib.decoder" 2>/dev/null; then peers $((END - 5)) cuwfst-gpu cuwfst-gpu-lattice riva
else echo "no riva-asrlib-decoder: peers not run" | tee -a $L; fi
echo "[$(since) s] end (peers with CUWFST_EARLY_RESCUE=${CUWFST_EARLY_RESCUE:-default})" | tee -a $L
