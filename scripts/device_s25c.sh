#!/usr/bin/env bash
# GPU machine, one call, branch host-log + main trim + RestoreTrimmed (a trimmed instance commits its
# pools, and a device log, back before its next decode's first step, instead of growing back by
# pauses: s25b's main trim cost 1.20x a pass that way):
#   tests: test_gpu_memory's host-log, rescue (restores asserted), counters, layouts and growth
#   tests; test_gpu_lattice's rescue tests; test_gpu_faults whole (the restore swallows an out of
#   memory: the batch grows by pauses instead)
#   then the batch-32 memory in fresh processes (riva, pooled) and the time of pooled,
#   pooled-maintrimoff, pooled-devlog and lazy in one process (256 utterances).
# Predictions (written before the run):
#   - pooled peak ~472 MiB as s25b (the restore runs when the main decodes again, after the rescue
#     has trimmed itself); used after 380-424
#   - time per pass: pooled / pooled-maintrimoff 1.00-1.02 (one commit of ~70 MiB a pass, ~3-5 ms
#     of ~370, in place of s25b's ~75 ms of pauses); pooled-devlog ~ pooled - 1%; lazy as before
# Carry .device and the module. $OUT: s25c.log, tests.log, memory.jsonl, speed.txt.
. scripts/device_common.sh
device_setup s25c.log
timeout -s INT 230 python3 -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_gpu_memory.py tests/test_gpu_lattice.py \
  tests/test_gpu_faults.py -k "host or rescue or stats_agree or lazy_and_eager or layouts_alternate or growth_reruns or faults" \
  --durations 6 > $OUT/tests.log 2>&1
echo "tests exit $?: $(grep -E "passed|failed" $OUT/tests.log | tail -1) [$(since) s]" | tee -a $L
grep -E "^FAILED|^SKIPPED|^ERROR|^E  " $OUT/tests.log | cut -c1-220 | head -12 | tee -a $L
wait_full ${FULL_END:-330}; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
echo "[$(since) s] memory" | tee -a $L
timeout -s INT $(left 590) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
  --reps 5 --check 4 --modes pooled pooled-maintrimoff pooled-devlog lazy --skip riva long > $OUT/speed.txt 2>&1
grep -E "\"part\": \"speed\"|Error" $OUT/speed.txt | cut -c1-230 | tee -a $L
echo "[$(since) s] done" | tee -a $L
