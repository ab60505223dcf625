#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine; END=470 caps it): issue 9.
#   1. Nsight Systems over scripts/nsys_case.py (uniform 32 x 250, captured graphs, the third
#      decode), lazy and pooled-late-ahead: each kernel's duration and the gap before it, back to
#      back as users run them (Nsight Compute measured the kernels alone, device_s32c.sh)
#   2. the batch-256 memory of pooled-late-ahead (more than 32 lanes: claims-finalize's hand-out)
#      and of the default pooled bound, fresh processes
#   3. the 256 rows as one batch of 256 lanes, lazy / pooled-late-ahead / pooled (gpu_speed)
# Carry .device. $OUT: s32e.log, nsys_MODE.csv.gz, MODE_gaps.txt, memory.jsonl, speed.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s32e.log
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none} $([ -n "$NSYS" ] && "$NSYS" --version 2>&1 | tail -1)" | tee -a $L
if [ -n "$NSYS" ]; then
  for m in lazy pooled-late-ahead; do
    timeout -s INT 90 "$NSYS" profile -t cuda,nvtx --cuda-graph-trace=node -s none --cpuctxsw=none -f true -o /tmp/ns_$m \
      python3 scripts/nsys_case.py $C/HLG.img $C/sim/shard-00000.npz $m > /tmp/ns_$m.err 2>&1
    echo "[$(since) s] nsys $m: rc $? $(grep -m1 -E 'nsys_case|rror' /tmp/ns_$m.err | cut -c1-150)" | tee -a $L
    timeout -s INT 60 "$NSYS" stats --report cuda_gpu_trace --format csv -o /tmp/ns_$m /tmp/ns_$m.nsys-rep > /dev/null 2>&1
    f=$(ls /tmp/ns_${m}_cuda_gpu_trace.csv 2>/dev/null | head -1)
    [ -n "$f" ] && { gzip -c $f > $OUT/nsys_$m.csv.gz; python3 scripts/nsys_gaps.py $f > $OUT/${m}_gaps.txt 2>&1; }
    head -14 $OUT/${m}_gaps.txt 2>/dev/null | tee -a $L
  done
fi
for m in pooled-late-ahead pooled; do
  timeout -s INT $(left 420) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 256 \
    --reps 1 --check 0 --modes $m --skip riva speed long > /tmp/mem_$m.txt 2>&1
  grep -E "^\{" /tmp/mem_$m.txt | sed "s/^/{\"run\": \"$m-256\", \"row\": /; s/$/}/" >> $OUT/memory.jsonl
  grep -E "^\{" /tmp/mem_$m.txt | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print({k: r[k] for k in ('memory', 'batch', 'device_peak_mib', 'counted_peak_mib', 'module_peak_mib', 'graph_mib',
                            'lanes_mib', 'winners_mib', 'lane_pool_grows', 'overflow_rows') if k in r})
" | sed "s/^/[$m 256] /" | tee -a $L
  grep -E "Error" /tmp/mem_$m.txt | head -3 | tee -a $L
done
timeout -s INT $(left ${END:-470}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 256 --batch 256 --reps 3 --check 1 --memory lazy pooled-late-ahead pooled > /tmp/sp.txt 2>&1
grep -vE "^\{" /tmp/sp.txt | grep -E "B=256|CPU check|Error" | cut -c1-240 | tee -a $L
grep -E "^\{" /tmp/sp.txt >> $OUT/speed.jsonl
echo "[$(since) s] done" | tee -a $L
