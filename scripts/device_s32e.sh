#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine; END=470 caps it): issue 9.
#   1. (at 7703396 it first looked for Nsight Systems to time lazy and pooled-late-ahead back to
#      back; the device has none, so that part and its two scripts were removed after the run)
#   2. the batch-256 memory of pooled-late-ahead (more than 32 lanes: claims-finalize's hand-out)
#      and of the default pooled bound, fresh processes
#   3. the 256 rows as one batch of 256 lanes, lazy / pooled-late-ahead / pooled (gpu_speed)
# Carry .device. $OUT: s32e.log, memory.jsonl, speed.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s32e.log
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
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
