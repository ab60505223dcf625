#!/usr/bin/env bash
# GPU machine (~6 minutes), session of 2026-12-04 02:28 (issues 10 and 11): where the step's
# kernels spend their instructions and stalls, SASS line by line. s90's Nsight Compute said the
# 1-best scan is latency-bound (SM active 44% of its cycles, an instruction every 13 cycles a
# warp, 4.2 of them at a barrier); this call takes the source page (SASS, with the warp-stall
# samples and instructions executed per instruction) of one launch each of ScanSplitKernel,
# MaxKernel, ExpandKernel and FinalizeKernel in a 1-best decode (32 x 250 uniform rows of the
# full tier), then of the lattice decode's LatPersistKernel, ExpandKernel and LatStepEndKernel.
# Carry .device. $OUT: s91.log, src_1best.csv, det_1best.txt, src_lat.csv, det_lat.txt
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s91.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
"$NCU" --version | tail -1 | tee -a $L
prof() {  # prof NAME MODE REGEX SKIP COUNT
  timeout -s INT 150 "$NCU" --target-processes all --kernel-name "regex:$3" --launch-skip $4 --launch-count $5 \
    --section SpeedOfLight --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section InstructionStats --section SourceCounters --section MemoryWorkloadAnalysis \
    -f -o /tmp/rep_$1 python3 scripts/ncu_lattice_case.py $C/HLG.img $C/sim/shard-00000.npz $2 > /tmp/run_$1.txt 2>&1
  echo "ncu $1 exit $?" | tee -a $L; tail -3 /tmp/run_$1.txt | tee -a $L
  "$NCU" -i /tmp/rep_$1.ncu-rep --page details > $OUT/det_$1.txt 2>&1
  local k; : > $OUT/src_$1.csv
  for k in $(echo "$3" | tr '|' ' '); do
    echo "### KERNEL $k" >> $OUT/src_$1.csv
    "$NCU" -i /tmp/rep_$1.ncu-rep --kernel-name "regex:$k" --launch-count 1 --page source --print-source sass --csv >> $OUT/src_$1.csv 2>&1
  done
  echo "src_$1.csv $(wc -l < $OUT/src_$1.csv) lines, $(head -c 300 $OUT/src_$1.csv | head -2 | tr '\n' ' ')" | cut -c1-400 | tee -a $L
  grep -E "^  [a-zA-Z].*Kernel|^    (Duration|Elapsed Cycles|SM Active Cycles|Executed Instructions |Warp Cycles Per Issued|No Eligible)" $OUT/det_$1.txt | cut -c1-110 | tee -a $L
}
prof 1best 1best "ScanSplitKernel|MaxKernel|ExpandKernel|FinalizeKernel" 600 4
prof lat lattice "LatPersistKernel|ExpandKernel|LatStepEndKernel" 450 3
gzip -k /tmp/rep_1best.ncu-rep -c > $OUT/rep_1best.ncu-rep.gz 2>/dev/null
echo "[$(since) s] done" | tee -a $L
