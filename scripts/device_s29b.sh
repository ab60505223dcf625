#!/usr/bin/env bash
# GPU machine, one call (~8-9 minutes on a fresh machine), branch pool-late: where the pooled
# layout's ~1 ms a batch outside FinalizeKernel goes (call 1 of the session of 2026-12-02 07:42:
# scan +0.2, max +0.2, expand +0.4 ms a batch over lazy with the same kernels and code paths),
# by Nsight Compute on the same launches of the two layouts; and the checks a merge of the
# claims-defer path would need.
#   while the full tier (HLG only) builds: memcheck over scripts/sanitize_case.py (3 epsilon-free
#   seeds, then 2 --lanes) with every decoder pooled and claims-defer sized
#   (CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=slots CUWFST_POOL_TOKENS=claims-defer), and
#   tests/test_gpu_faults.py under the same environment
#   then scripts/ncu_case.py (full HLG, 32 x 250, launch by launch, the second decode's launches
#   from SKIP on: its NVTX range, since a pooled first decode pauses and runs idle launches) for MODES (default: lazy pooled-late-defer): the kernels
#   ScanSplitKernel|ScanKernel|MaxKernel|ExpandKernel|FinalizeKernel, sections SpeedOfLight,
#   MemoryWorkloadAnalysis, InstructionStats, WarpStateStats, SchedulerStats, plus the atomics'
#   L2 sectors; CSV (--page raw) per mode, compared by scripts/ncu_compare.py on the dev VM.
# Carry .device (the module is built on the device). $OUT: s29b.log, faults.log, memcheck*.log, ncu_*.csv
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s29b.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
export_pool() { export CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=slots CUWFST_POOL_TOKENS=claims-defer; }
[ -n "${NO_CHECKS:-}" ] || ( export_pool
  timeout -s INT 100 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 3 \
    > $OUT/memcheck1.log 2>&1; echo "memcheck 3 (claims-defer) exit $?: $(tail -2 $OUT/memcheck1.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
  timeout -s INT 100 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 2 --lanes \
    > $OUT/memcheck2.log 2>&1; echo "memcheck 2 --lanes (claims-defer) exit $?: $(tail -2 $OUT/memcheck2.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
  timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_faults.py -rf > $OUT/faults.log 2>&1
  echo "test_gpu_faults (claims-defer) exit $?: $(grep -E "passed|failed" $OUT/faults.log | tail -1)" | tee -a $L
  grep -E "^FAILED" $OUT/faults.log | head -4 | cut -c1-200 | tee -a $L )
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none} $("$NCU" --version 2>&1 | tail -1)" | tee -a $L
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section InstructionStats --section WarpStateStats --section SchedulerStats"
METRICS="--metrics lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
for m in ${MODES:-lazy pooled-late-defer}; do
  timeout -s INT $(left 590) "$NCU" --target-processes all --kernel-name "regex:ScanSplitKernel|ScanKernel|MaxKernel|ExpandKernel|FinalizeKernel" \
    --nvtx --nvtx-include "decode2/" --launch-skip ${SKIP:-400} --launch-count ${COUNT:-80} $SECTIONS $METRICS --csv --page raw \
    python3 scripts/ncu_case.py $C/HLG.img $C/sim/shard-00000.npz 0 $m > $OUT/ncu_$m.csv 2> $OUT/ncu_$m.err
  echo "[$(since) s] ncu $m: rc $? $(grep -c '' $OUT/ncu_$m.csv) lines; $(grep -m1 -E 'ncu_case|ERR_|rror' $OUT/ncu_$m.csv $OUT/ncu_$m.err | cut -c1-150)" | tee -a $L
done
echo "[$(since) s] done" | tee -a $L
