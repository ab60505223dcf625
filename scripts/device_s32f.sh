#!/usr/bin/env bash
# GPU machine, one short call (~4 minutes on a fresh machine; END caps it): is the pooled layout's
# extra time a property of one process holding both decoders? Nsight Compute timed
# pooled-late-ahead's kernels alone as fast as lazy's (device_s32c.sh, call 4), while every
# same-process A/B (gpu_speed, benchmarks.memory: both modes in each process) put them 2-5%
# behind. Here each process builds one decoder: the full tier's 256 rows in padded batches of 32,
# lazy, pooled-late-ahead, lazy, pooled-late-ahead (gpu_speed --profile --reps 5), then the
# uniform 32 x 250 the same way while time is left.
# Carry .device. $OUT: s32f.log, speed.jsonl.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s32f.log
wait_full 200; echo "[$(since) s] full tier" | tee -a $L
for shape in "--utts 256" "--uniform 250 --utts 32"; do
  for m in lazy pooled-late-ahead lazy pooled-late-ahead; do
    [ $(since) -lt ${END:-240} ] || break
    timeout -s INT $(left ${END:-240}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
      $shape --batch 32 --reps 5 --check 0 --profile --memory $m > /tmp/sp.txt 2>&1
    grep -vE "^\{" /tmp/sp.txt | grep -E "kernel ms|B=32|Error" | sed -E 's/kernel ms per batch of 32 \(launch by launch, CUDA events\): //; s/ \([0-9]+%\)//g' \
      | sed "s/^/[$shape, own process] /" | cut -c1-250 | tee -a $L
    grep -E "^\{" /tmp/sp.txt | sed "s/^/{\"shape\": \"$shape\", \"row\": /; s/$/}/" >> $OUT/speed.jsonl
  done
done
echo "[$(since) s] done" | tee -a $L
