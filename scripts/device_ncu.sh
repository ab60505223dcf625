#!/usr/bin/env bash
# GPU machine, one call: can Nsight Compute profile here, and where do the step kernels spend
# their time? (issue 11: "measure before you change"; METHOD.md). Carry .device and .cache.
#   background: the full tier (~200 s) unless /tmp/corpus-full is there already
#   1. ncu --version and a 1-kernel trial (ERR_NVGPUCTRPERM means no counters for us)
#   2. scripts/ncu_case.py on the full HLG (32 x 250, launch by launch): KERNELS' launches from
#      the middle of the decode (skip SKIP, count COUNT each), sections SpeedOfLight,
#      WarpStateStats, Occupancy, LaunchStats, MemoryWorkloadAnalysis; CSV (--page raw) and details
#   3. GRAPH2 (default TLG.img) the same, closure kernels included
# $OUT: ncu.log, hlg.csv, hlg.txt, tlg.csv, tlg.txt
. scripts/device_common.sh
device_setup ncu.log
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}" | tee -a $L
[ -n "$NCU" ] || { echo "no ncu on this machine" | tee -a $L; exit 0; }
"$NCU" --version 2>&1 | tail -1 | tee -a $L
wait_full ${FULL_WAIT:-300}
S=$C/sim/shard-00000.npz
KERNELS=${KERNELS:-"regex:ScanSplitKernel|MaxKernel|ExpandKernel|FinalizeKernel|EpsList|ClearClaims"}
SECTIONS="--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
run_ncu() {  # $1 graph, $2 name
  timeout -s INT ${NCU_CAP:-200} "$NCU" --target-processes all --kernel-name "$KERNELS" --launch-skip ${SKIP:-400} \
    --launch-count ${COUNT:-24} $SECTIONS --csv --page raw python3 scripts/ncu_case.py $C/$1 $S ${WALK_BLOCKS:-0} \
    > $OUT/$2.csv 2> $OUT/$2.err
  echo "[$(since) s] $1: rc $? $(grep -c '' $OUT/$2.csv) csv lines; $(grep -m1 -E 'ERR_|error' $OUT/$2.err $OUT/$2.csv)" | tee -a $L
  timeout -s INT ${NCU_CAP2:-120} "$NCU" --target-processes all --kernel-name "$KERNELS" --launch-skip ${SKIP:-400} \
    --launch-count ${COUNT2:-8} $SECTIONS python3 scripts/ncu_case.py $C/$1 $S ${WALK_BLOCKS:-0} > $OUT/$2.txt 2>&1
  grep -E "^  [A-Za-z].*Kernel|Duration|Stall|Long Scoreboard|Achieved Occupancy|Registers Per|Waves Per SM|Memory Throughput" \
    $OUT/$2.txt | head -60 | tee -a $L
}
run_ncu HLG.img hlg
[ "${GRAPH2:-TLG.img}" = none ] || run_ncu ${GRAPH2:-TLG.img} tlg
echo "[$(since) s] done" | tee -a $L
