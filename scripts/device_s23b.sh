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
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
mem_fresh riva2 --riva-dir $C --skip memory speed long
echo "[$(since) s] done" | tee -a $L
