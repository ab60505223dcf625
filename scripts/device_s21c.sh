#!/usr/bin/env bash
# GPU machine, one call (~5-6 minutes on a fresh machine): branch trim-probes (the trim's search
# issues each token's probe loads together; scan.cuh TrimDegrees) against main's scan.cuh
# (.device/ab_old), same call.
#   background: the full tier (~220 s); meanwhile the exactness files that run the trim and the
#   scan (test_gpu_trim, test_gpu, test_gpu_scan_trace), capped at TEST_CAP s; main's module built
#   1. HLG uniform 32 x 250, gpu_speed --reps 7, own / other / own / other
#   2. TLG 64 utterances at batch 32, own / other (if time is left)
# Carry .device and .cache. $OUT: s21c.log, tests.log, ab.jsonl.
. scripts/device_common.sh
device_setup s21c.log
TEST_CAP=${TEST_CAP:-100} FULL_END=${FULL_END:-280} ab_prepare tests/test_gpu_scan_trace.py tests/test_gpu_trim.py tests/test_gpu.py
for side in own other own other; do ab_speed $side HLG.img --log-probs $I/uniform.npz --utts 32 --reps 7; done
echo "[$(since) s] HLG" | tee -a $L
for side in own other; do
  [ $(since) -gt ${END:-300} ] && break
  ab_speed $side TLG.img --log-probs $C/sim/shard-00000.npz --utts 64 --reps 3
done
echo "[$(since) s] done" | tee -a $L
