#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): why ExpandKernel costs 0.5-0.7 ms a batch
# more under the pooled layout (issue 9; the sector probe of device_s32b.sh showed the tables'
# collisions are not it). Nsight Compute over scripts/ncu_case.py (full HLG, 32 x 250, launch by
# launch, the second decode's launches): ExpandKernel alone, launches 100-119 of the decode, in
# lazy and pooled-late-ahead, sections SpeedOfLight, MemoryWorkloadAnalysis, InstructionStats,
# WarpStateStats, SourceCounters and the metrics ncu_compare.py reads; then each report's raw page
# (CSV, for scripts/ncu_compare.py) and source page (per line, for a line-by-line comparison).
# KERNEL: another kernel's regex (default ^ExpandKernel, as it ran at 25a00f4; e.g.
# KERNEL=^FinalizeKernel, the one step kernel pooled-late-ahead makes slower alone, +1.1 us).
# Carry .device. $OUT: s32c.log, ncu_MODE.csv, MODE.ncu-rep, MODE_source.csv.gz, MODE_top.txt
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s32c.log
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none} $("$NCU" --version 2>&1 | tail -1)" | tee -a $L
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section InstructionStats --section WarpStateStats --section SourceCounters"
METRICS="--metrics lts__t_sectors_op_atom.sum,lts__t_sectors_op_red.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum,smsp__sass_inst_executed_op_global_atom.sum,smsp__sass_inst_executed_op_global_ld.sum,smsp__thread_inst_executed.sum,smsp__sass_branch_targets_threads_divergent.sum,l1tex__t_sector_hit_rate.pct"
for m in lazy pooled-late-ahead; do
  timeout -s INT $(left 560) "$NCU" --target-processes all --kernel-name "regex:${KERNEL:-^ExpandKernel}" --nvtx --nvtx-include "decode2/" \
    --launch-skip ${SKIP:-100} --launch-count ${COUNT:-20} $SECTIONS $METRICS --import-source yes -f -o $OUT/$m \
    python3 scripts/ncu_case.py $C/HLG.img $C/sim/shard-00000.npz 0 $m > /tmp/ncu_$m.err 2>&1
  echo "[$(since) s] ncu $m: rc $? $(ls -la $OUT/$m.ncu-rep 2>&1 | awk '{print $5}') bytes; $(grep -m1 -E 'ncu_case|ERR_|rror' /tmp/ncu_$m.err | cut -c1-150)" | tee -a $L
  "$NCU" -i $OUT/$m.ncu-rep --csv --page raw > $OUT/ncu_$m.csv 2>/dev/null
  "$NCU" -i $OUT/$m.ncu-rep --page source --csv --print-source cuda,sass > /tmp/${m}_source.csv 2>/dev/null
  python3 scripts/ncu_top_lines.py /tmp/${m}_source.csv 60 > $OUT/${m}_top.txt 2>&1
  gzip -c /tmp/${m}_source.csv > $OUT/${m}_source.csv.gz
  head -25 $OUT/${m}_top.txt | cut -c1-200 | tee -a $L
done
python3 scripts/ncu_compare.py $OUT/ncu_lazy.csv $OUT/ncu_pooled-late-ahead.csv --top 40 2>&1 | cut -c1-220 | tee -a $L
echo "[$(since) s] done" | tee -a $L
