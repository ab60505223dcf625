#!/usr/bin/env bash
# GPU machine, one short call (~3 minutes, no full tier): is the fence at the end of every
# ExpandKernel CTA what costs CUWFST_POOL_BOUND=claims its 1.8 ms a batch (call 3 of the session
# of 2026-12-02 10:08)? A diagnostic A/B on the built-in random graph (1M arcs, 32 x 250 peaky
# frames): pooled-slots-devlog and pooled-late, this tree (own) against .device/ab_nofence (the same
# expand.cuh without the __threadfence() in ExpandLastBlock: not exact by construction, so it is a
# measurement only and never merged).
# Carry .device. $OUT: s30d.log.
export NO_FULL=1
. scripts/device_common.sh
device_setup s30d.log
ab_init .device/ab_nofence
for side in own other; do
  ab_use $side > /dev/null
  timeout -s INT 75 python3 -m benchmarks.gpu_speed --batch 32 --frames 250 --utts 32 --reps 5 --check 1 --profile \
    --memory pooled-slots-devlog pooled-late > /tmp/r.txt 2>&1
  grep -vE "^\{" /tmp/r.txt | grep -E "^graph|kernel ms|B=32|CPU check|Error" | sed "s/^/[$side] /" | cut -c1-230 | tee -a $L
  echo "[$(since) s] $side" | tee -a $L
done
