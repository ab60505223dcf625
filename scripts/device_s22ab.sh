#!/usr/bin/env bash
# GPU machine, one call (~5-6 minutes on a fresh machine): branch striped (the split scan reads
# and trims its tokens striped, scan.cuh) against main's scan.cuh (.device/ab_old), same call,
# one process a run.
#   background: the full tier (~220 s); meanwhile the exactness files that run the scan and the
#   trim (test_gpu_scan_trace, test_gpu_trim, test_gpu), capped at TEST_CAP s; main's module built
#   1. HLG uniform 32 x 250, gpu_speed --reps 7 --check 1, own / other / own / other
#   2. TLG 64 utterances at batch 32, --reps 3, own / other / own / other (while before END)
# Carry .device and .cache (own's module). $OUT: s22ab.log, tests.log, ab.jsonl.
. scripts/device_common.sh
device_setup s22ab.log
ab_prepare tests/test_gpu_scan_trace.py tests/test_gpu_trim.py tests/test_gpu.py
for side in own other own other; do ab_speed $side HLG.img --log-probs $I/uniform.npz --utts 32 --reps 7; done
echo "[$(since) s] HLG" | tee -a $L
for side in own other own other; do
  [ $(since) -gt ${END:-400} ] && break
  ab_speed $side TLG.img --log-probs $C/sim/shard-00000.npz --utts 64 --reps 3
done
ab_use own >/dev/null
echo "[$(since) s] done" | tee -a $L
