#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine): branch s26 = main (8f25099) + graph-chunks
# + graph-u8, both unmeasured. Predictions: docs/speed-notes.md, "A state's final and epsilon counts
# in a byte" and "Captured step chunks".
#   while the full tier builds: the new tests (step chunks; states with hundreds of final and
#   epsilon arcs), then test_gpu, test_gpu_epsilon, test_gpu_lanes (256-step segments replay
#   chunks), test_gpu_chain, capped at TEST_CAP s
#   then fresh-process memory: riva and pooled at batch 32 (chunks on, chunks off), pooled at 256
#   then HLG uniform 32 x 250: own (u8 + chunks) / other (no u8: graph-chunks' two files) /
#   own with CUWFST_GRAPH_CHUNKS=off, alternating; TLG 64 utterances own / other
# Stage: for f in cuwfst/csrc/include/cuwfst/types.cuh cuwfst/csrc/gpu_binding.cu; do
#   mkdir -p .device/ab_old/$(dirname $f); git show graph-chunks:$f > .device/ab_old/$f; done
# Carry .device (and the module if it fits). $OUT: s26.log, tests.log, memory.jsonl, ab.jsonl.
. scripts/device_common.sh
device_setup s26.log
TEST_CAP=${TEST_CAP:-200} ab_prepare "tests/test_gpu_faults.py::test_long_sequences_replay_step_chunks" \
  "tests/test_gpu_faults.py::test_graph_cache_is_bounded_and_long_decodes_launch_plainly" \
  "tests/test_gpu_epsilon.py::test_states_with_hundreds_of_final_and_epsilon_arcs" \
  tests/test_gpu.py tests/test_gpu_epsilon.py tests/test_gpu_lanes.py tests/test_gpu_chain.py
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
export CUWFST_GRAPH_CHUNKS=off; mem_fresh chunks-off --modes pooled --skip riva speed long; unset CUWFST_GRAPH_CHUNKS
timeout -s INT 120 python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 256 \
  --reps 1 --check 0 --modes pooled --skip riva speed long > /tmp/mem256.txt 2>&1
grep -E "^\{|Error" /tmp/mem256.txt | cut -c1-400 | sed "s/^/[b256] /" | tee -a $L
for side in own other own other; do
  [ $(since) -gt ${END:-500} ] && break
  ab_speed $side HLG.img --log-probs $C/sim/shard-00000.npz --uniform 250 --utts 32 --reps 5
  if [ $side = own ]; then  # (ab_speed left own's module in place)
    CUWFST_GRAPH_CHUNKS=off timeout -s INT 60 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --batch 32 --check 1 \
      --variants new --log-probs $C/sim/shard-00000.npz --uniform 250 --utts 32 --reps 5 > /tmp/ab_off.txt 2>&1
    grep -E "B=32|CPU check" /tmp/ab_off.txt | sed "s/^/[own chunks-off HLG.img] /" | cut -c1-170 | tee -a $L
  fi
  ab_speed $side TLG.img --log-probs $C/sim/shard-00000.npz --utts 64 --reps 3
done
ab_use own >/dev/null
echo "[$(since) s] done" | tee -a $L
