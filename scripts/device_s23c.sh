#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine): branch finalize-striped (FinalizeKernel
# takes a round's claims striped, positions from the blocked scan through shared memory, and
# under the auto grid a CTA takes at least 256 claims instead of a 1,024-claim round;
# finalize.cuh) against main's finalize.cuh (.device/ab_old), same call, one process a run.
#   background: the full tier (~220 s); meanwhile the exactness files every step runs through
#   (test_gpu, test_gpu_epsilon, test_gpu_chain, test_gpu_lanes), capped at TEST_CAP s
#   1. HLG uniform 32 x 250, gpu_speed --reps 7 --check 1, own / other / own / other
#   2. TLG 64 utterances at batch 32, --reps 3, own / other / own / other (while before END)
# Stage: mkdir -p .device/ab_old/cuwfst/csrc/include/cuwfst && git show main:cuwfst/csrc/include/cuwfst/finalize.cuh
#   > .device/ab_old/cuwfst/csrc/include/cuwfst/finalize.cuh (main = the base the branch is compared with)
# Carry .device and .cache (own's module). $OUT: s23c.log, tests.log, ab.jsonl.
. scripts/device_common.sh
device_setup s23c.log
TEST_CAP=${TEST_CAP:-200} ab_prepare tests/test_gpu.py tests/test_gpu_epsilon.py tests/test_gpu_chain.py tests/test_gpu_lanes.py
for side in own other own other; do ab_speed $side HLG.img --log-probs $I/uniform.npz --utts 32 --reps 7; done
echo "[$(since) s] HLG" | tee -a $L
for side in own other own other; do
  [ $(since) -gt ${END:-480} ] && break
  ab_speed $side TLG.img --log-probs $C/sim/shard-00000.npz --utts 64 --reps 3
done
ab_use own >/dev/null
echo "[$(since) s] done" | tee -a $L
