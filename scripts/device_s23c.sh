#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine): branch finalize-striped against main, same
# call, one process a run. The branch: FinalizeKernel (finalize.cuh) and EpsChainResolveKernel
# (epsilon.cuh) take a round's items striped, positions from the blocked scan through shared
# memory, and under the auto grid a CTA takes at least 256 items instead of a 1,024-item round.
# Sides: own = the branch; other = main's finalize.cuh and epsilon.cuh (.device/ab_old); mid =
# the branch's finalize.cuh with main's epsilon.cuh (.device/ab_mid; on the HLG it is own, the
# closure does not run).
#   background: the full tier (~220 s); meanwhile the exactness files every step runs through
#   (test_gpu, test_gpu_epsilon, test_gpu_chain, test_gpu_lanes), capped at TEST_CAP s
#   1. HLG uniform 32 x 250, gpu_speed --reps 7 --check 1, own / other / own / other
#   2. TLG 64 utterances at batch 32, --reps 3, own / other / mid, twice (while before END)
# Stage (main = the base the branch is compared with):
#   for f in finalize epsilon; do git show main:cuwfst/csrc/include/cuwfst/$f.cuh > .device/ab_old/cuwfst/csrc/include/cuwfst/$f.cuh; done
#   git show main:cuwfst/csrc/include/cuwfst/epsilon.cuh > .device/ab_mid/cuwfst/csrc/include/cuwfst/epsilon.cuh
# Carry .device and .cache. $OUT: s23c.log, tests.log, ab.jsonl.
. scripts/device_common.sh
device_setup s23c.log
AB_SIDES=mid TEST_CAP=${TEST_CAP:-200} ab_prepare tests/test_gpu.py tests/test_gpu_epsilon.py tests/test_gpu_chain.py tests/test_gpu_lanes.py
for side in own other own other; do ab_speed $side HLG.img --log-probs $I/uniform.npz --utts 32 --reps 7; done
echo "[$(since) s] HLG" | tee -a $L
for side in own other mid own other mid; do
  [ $(since) -gt ${END:-540} ] && break
  ab_speed $side TLG.img --log-probs $C/sim/shard-00000.npz --utts 64 --reps 3
done
ab_use own >/dev/null
echo "[$(since) s] done" | tee -a $L
