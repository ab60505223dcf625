#!/usr/bin/env bash
# GPU machine (~8 minutes), prepared at the end of the session of 2026-12-03 23:32 for the next
# one (issues 10 and 11): the scan's granule again now that the trim's search loads weights only
# (docs/speed-notes.md "Next (for the session after 2026-12-03 23:32)", leads 1 and 2).
#   while the full tier (HLG) builds: test_gpu_trim.py whole (e661fd3's tie guard, not yet run)
#   then lattice_speed --utts 256 --profile with the default (512-token granules) against
#   CUWFST_KERNELS=new::1024 and new::2048 and CUWFST_TRIM_WEIGHTS=off in one process; then
#   Nsight Compute over four ScanSplitKernel launches of a 1-best decode (32 x 250 uniform rows),
#   weights-only and CUWFST_TRIM_WEIGHTS=off: memory workload, scheduler and warp-state sections
# Carry .device. $OUT: s90.log, lat.jsonl, ncu_tw.txt, ncu_off.txt, tests.tgz
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s90.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 60 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
grep -E "^E |label bound:" $OUT/tests1.log | head -12 | cut -c1-240 | tee -a $L
wait_full 340; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 440 --utts 256 --profile --env-ab g1024:CUWFST_KERNELS=new::1024 \
  g2048:CUWFST_KERNELS=new::2048 tw:CUWFST_TRIM_WEIGHTS=off
echo "[$(since) s] lattice_speed" | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  for side in tw off; do
    [ $side = off ] && export CUWFST_TRIM_WEIGHTS=off
    timeout -s INT 70 "$NCU" --target-processes all --kernel-name "regex:ScanSplitKernel" \
      --launch-skip 300 --launch-count 4 --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section SchedulerStats --section WarpStateStats --section LaunchStats \
      python3 scripts/ncu_lattice_case.py $C/HLG.img $C/sim/shard-00000.npz 1best > $OUT/ncu_$side.txt 2>&1
    echo "ncu $side exit $?" | tee -a $L
    grep -E "^    (Duration|DRAM Throughput|L1/TEX Hit Rate|L2 Hit Rate|Mem Busy|Max Bandwidth|Mem Pipes Busy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued)" \
      $OUT/ncu_$side.txt | head -40 | sed "s/^/[$side] /" | tee -a $L
  done
  unset CUWFST_TRIM_WEIGHTS
fi
pack_logs 'tests*.log'
echo "[$(since) s] done" | tee -a $L
