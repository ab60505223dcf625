#!/usr/bin/env bash
# GPU machine, one call (~5 minutes on a fresh machine, the full tier's build included): issue 9's
# batch-32 memory with each peer in a fresh process of its own. benchmarks.memory measures riva
# in the same process after the cuwfst decoders, so riva's figure has none of the process's
# one-time costs that the first decoder pays (~100 MiB, docs/benchmarks.md, session of
# 2026-12-01 22:51). Order: riva alone, cuwfst pooled alone, riva alone again.
# Carry .device and .cache. $OUT: s23b.log, memory.jsonl.
. scripts/device_common.sh
device_setup s23b.log
wait_full ${FULL_END:-300}; echo "[$(since) s] full tier" | tee -a $L
mem() {  # mem NAME ARGS...: benchmarks.memory in a fresh process
  local name=$1; shift
  timeout -s INT 120 python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
    --reps 1 --check 0 "$@" > /tmp/mem_$name.txt 2>&1
  grep -E "^\{" /tmp/mem_$name.txt | sed "s/^/{\"run\": \"$name\", \"row\": /; s/$/}/" >> $OUT/memory.jsonl
  grep -E "device_peak|\"total_mib|device_used|Error" /tmp/mem_$name.txt | cut -c1-200 | sed "s/^/[$name] /" | tee -a $L
}
mem riva --riva-dir $C --skip memory speed long
mem pooled --modes pooled --skip riva speed long
mem riva2 --riva-dir $C --skip memory speed long
echo "[$(since) s] done" | tee -a $L
