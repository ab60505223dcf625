#!/usr/bin/env bash
# GPU machine, one call (~5 minutes on a fresh machine, the full tier's build included): where a
# process's device memory goes around the decoder, stage by stage (issue 9: the first decoder in
# a process showed ~134 MiB beyond the module's counters). benchmarks.memory_stages for pooled and
# lazy, each in a fresh process, and pooled again with CUDA_MODULE_LOADING=EAGER.
# Carry .device and .cache. $OUT: stages.log, stages.jsonl.
. scripts/device_common.sh
device_setup stages.log
wait_full ${FULL_END:-300}; echo "[$(since) s] full tier" | tee -a $L
for mode in pooled lazy; do
  timeout -s INT 90 python3 -m benchmarks.memory_stages --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    --memory $mode --json $OUT/stages.jsonl 2>&1 | tail -12 | tee -a $L
done
CUDA_MODULE_LOADING=EAGER timeout -s INT 90 python3 -m benchmarks.memory_stages --graph $C/HLG.img \
  --log-probs $C/sim/shard-00000.npz --memory pooled --json $OUT/stages.jsonl 2>&1 | tail -12 | tee -a $L
echo "[$(since) s] done" | tee -a $L
