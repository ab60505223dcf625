#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine): branch graph-u8 against main, same call.
# The branch keeps a state's final and epsilon arc counts in a byte on the device (255 and more in
# a sorted big-count table; types.cuh StateCount). Prediction: docs/speed-notes.md, "A state's
# final and epsilon counts in a byte".
#   while the full tier builds: the exactness files that read the counts (test_gpu_epsilon with the
#   new big-count test, test_gpu_chain, test_gpu), capped at TEST_CAP s
#   then fresh-process batch-32 memory (riva, pooled) on the branch, and HLG uniform 32 x 250 and
#   TLG 64 utterances own / other, alternating
# Stage (main = the base): for f in cuwfst/csrc/include/cuwfst/types.cuh cuwfst/csrc/gpu_binding.cu; do
#   mkdir -p .device/ab_old/$(dirname $f); git show main:$f > .device/ab_old/$f; done
# Carry .device (and the module if it fits). $OUT: s26a.log, tests.log, memory.jsonl, ab.jsonl.
. scripts/device_common.sh
device_setup s26a.log
TEST_CAP=${TEST_CAP:-170} ab_prepare tests/test_gpu_epsilon.py tests/test_gpu_chain.py tests/test_gpu.py
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
for side in own other own other; do
  [ $(since) -gt ${END:-520} ] && break
  ab_speed $side HLG.img --log-probs $C/sim/shard-00000.npz --uniform 250 --utts 32 --reps 5
  ab_speed $side TLG.img --log-probs $C/sim/shard-00000.npz --utts 64 --reps 3
done
ab_use own >/dev/null
echo "[$(since) s] done" | tee -a $L
