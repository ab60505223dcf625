#!/usr/bin/env bash
# GPU machine, one call (~7 minutes on a fresh machine, the full tier's build included), on main:
#   while the full tier builds: bbdb389's two GPU tests (the sampled log-prob check reads device
#   rows with plain copies; a default decode of a torch tensor runs only cuwfst's kernels), then
#   test_gpu_memory.py whole (capped at MEM_TEST_CAP s; call 3 of 2026-12-01 23:52 ran 21 of its 30)
#   then issue 9's batch-32 memory, each decoder in a fresh process: riva, cuwfst pooled, riva
#   again (benchmarks.memory now samples cuwfst's device peak the way it samples riva's), and
#   pooled against lazy's time (the 3% bar), same process, alternating passes.
# Prediction (written before the run): the pooled decoder's device-used figure drops by ~90 MiB
# from 618 to ~528 (bbdb389: no PyTorch kernels loaded by the input check); its sampled peak is
# at or above that (the rescue instance grows for row 211, then trims); riva ~460.
# Carry .device and .cache. $OUT: s24b.log, t_sampled.log, t_memory.log, memory.jsonl, speed.txt.
. scripts/device_common.sh
device_setup s24b.log
timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k "sampled or only_our_kernels" \
  -rs > $OUT/t_sampled.log 2>&1
echo "sampled tests exit $?: $(grep -E "passed|failed|skipped" $OUT/t_sampled.log | tail -1)" | tee -a $L
grep -E "^SKIPPED|^FAILED" $OUT/t_sampled.log | cut -c1-200 | tee -a $L
timeout -s INT ${MEM_TEST_CAP:-220} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_memory.py \
  > $OUT/t_memory.log 2>&1
echo "test_gpu_memory exit $?: $(grep -E "passed|failed" $OUT/t_memory.log | tail -1) [$(since) s]" | tee -a $L
grep -E "^FAILED" $OUT/t_memory.log | cut -c1-200 | head -5 | tee -a $L
wait_full ${FULL_END:-320}; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
mem_fresh riva2 --riva-dir $C --skip memory speed long
mem_fresh pooled2 --modes pooled --skip riva speed long
echo "[$(since) s] memory" | tee -a $L
[ $(since) -lt ${END:-470} ] && timeout -s INT $(left 560) python3 -m benchmarks.memory --graph $C/HLG.img \
  --log-probs $C/sim/shard-00000.npz --batch 32 --reps 5 --check 4 --modes pooled lazy --skip riva long \
  > $OUT/speed.txt 2>&1
grep -E "\"part\": \"speed\"" $OUT/speed.txt | cut -c1-250 | tee -a $L
echo "[$(since) s] done" | tee -a $L
