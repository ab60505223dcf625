#!/usr/bin/env bash
# GPU machine, one call: where in the source do the step kernels' warps stall? (issue 11;
# scripts/device_ncu.sh gave the kernels' totals: every one is latency-bound). Nsight Compute's
# SourceCounters section (warp-state samples per source line; the module is built with
# -lineinfo) for KERNELS, one decode of scripts/ncu_case.py, then the source page as CSV and
# its top lines (scripts/ncu_top_lines.py). Carry .device and .cache. With reports in
# .device/rep (*.ncu-rep, an earlier call's), only their source pages and top lines.
#   background: the full tier (~200 s) unless /tmp/corpus-full is there already
#   1. the full HLG, 32 x 250: ScanSplitKernel, FinalizeKernel, ExpandKernel (COUNT launches each
#      from the middle of the decode; KERNELS: another regex, e.g. ScanSplitKernel alone)
#   2. the full TLG: EpsChainExpandKernel, EpsChainResolveKernel (unless TLG=0; TLG_KERNELS: another regex)
# $OUT: ncu_source.log, {hlg,tlg}.ncu-rep, {hlg,tlg}_top.txt, {hlg,tlg}_source.csv.gz (8 files: the limit; ncu's own output in /tmp/NAME.err, its tail in the log)
. scripts/device_common.sh
device_setup ncu_source.log
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu on this machine" | tee -a $L; exit 0; }
"$NCU" --help 2>&1 | grep -A2 -E "print-source|--page" | head -12 >> $L
# reports carried in .device/rep (an earlier call's): their source pages only, no profiling
if ls .device/rep/*.ncu-rep >/dev/null 2>&1; then
  for rep in .device/rep/*.ncu-rep; do
    n=$(basename $rep .ncu-rep)
    "$NCU" -i $rep --page source --csv --print-source cuda,sass > /tmp/${n}_source.csv 2>/tmp/${n}.err
    python3 scripts/ncu_top_lines.py /tmp/${n}_source.csv 80 > $OUT/${n}_top.txt 2>&1
    gzip -c /tmp/${n}_source.csv > $OUT/${n}_source.csv.gz
    echo "[$(since) s] $rep: $(wc -l < /tmp/${n}_source.csv) lines" | tee -a $L; head -${TOP:-45} $OUT/${n}_top.txt | cut -c1-220 | tee -a $L
  done
  exit 0
fi
wait_full ${FULL_WAIT:-300}
S=$C/sim/shard-00000.npz
probe() {  # $1 graph, $2 name, $3 kernel regex
  timeout -s INT ${NCU_CAP:-120} "$NCU" --target-processes all --kernel-name "regex:$3" --launch-skip ${SKIP:-300} \
    --launch-count ${COUNT:-6} --section SourceCounters --section WarpStateStats --import-source yes -f -o $OUT/$2 \
    python3 scripts/ncu_case.py $C/$1 $S 0 > /tmp/$2.err 2>&1
  echo "[$(since) s] $1: rc $? $(ls -la $OUT/$2.ncu-rep 2>&1 | awk '{print $5}') bytes" | tee -a $L
  tail -3 /tmp/$2.err | cut -c1-200 | tee -a $L
  for src in cuda,sass sass cuda; do  # the source page as CSV (per line samples)
    "$NCU" -i $OUT/$2.ncu-rep --page source --csv --print-source $src > /tmp/$2_source.csv 2>/tmp/$2_source.err \
      && [ -s /tmp/$2_source.csv ] && break
  done
  echo "source page ($src): $(wc -l < /tmp/$2_source.csv) lines; $(head -c 300 /tmp/$2_source.err)" | tee -a $L
  python3 scripts/ncu_top_lines.py /tmp/$2_source.csv > $OUT/$2_top.txt 2>&1
  gzip -c /tmp/$2_source.csv > $OUT/$2_source.csv.gz  # the whole page, for a second look off the machine
  head -${TOP:-45} $OUT/$2_top.txt | cut -c1-260 | tee -a $L
}
probe HLG.img hlg "${KERNELS:-ScanSplitKernel|FinalizeKernel|ExpandKernel}"
[ "${TLG:-1}" = 0 ] || probe TLG.img tlg "${TLG_KERNELS:-EpsChainExpandKernel|EpsChainResolveKernel}"
echo "[$(since) s] done" | tee -a $L
