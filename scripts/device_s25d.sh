#!/usr/bin/env bash
# GPU machine, one call, branch host-log: the trims now give the lane pools back whole (the first
# pieces too; RestoreTrimmed commits at least them again before the next decode):
#   tests: as s25c (test_gpu_memory's host-log, rescue, counters, layouts and growth tests;
#   test_gpu_lattice's rescue tests; test_gpu_faults whole)
#   then the batch-32 memory in fresh processes (riva, pooled), the time of pooled,
#   pooled-maintrimoff, pooled-devlog and lazy in one process (256 utterances), and the uniform
#   32 x 250 rows (no rescue) for pooled, pooled-devlog and lazy.
# Predictions (written before the run):
#   - pooled peak 472 -> ~446 MiB (the main's ~26 MiB of first pieces go while the rescue runs);
#     used after 370-424 (lower where the last call rescued)
#   - time per pass: pooled / pooled-maintrimoff 1.00-1.02 as s25c (1.005)
#   - uniform: pooled / pooled-devlog ~1.02 as s25a (1.023)
# Carry .device and the module. $OUT: s25d.log, tests.log, memory.jsonl, speed.txt.
. scripts/device_common.sh
device_setup s25d.log
timeout -s INT 230 python3 -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_gpu_memory.py tests/test_gpu_lattice.py \
  tests/test_gpu_faults.py -k "host or rescue or stats_agree or lazy_and_eager or layouts_alternate or growth_reruns or faults" \
  --durations 6 > $OUT/tests.log 2>&1
echo "tests exit $?: $(grep -E "passed|failed" $OUT/tests.log | tail -1) [$(since) s]" | tee -a $L
grep -E "^FAILED|^SKIPPED|^ERROR|^E  " $OUT/tests.log | cut -c1-220 | head -12 | tee -a $L
wait_full ${FULL_END:-330}; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
echo "[$(since) s] memory" | tee -a $L
timeout -s INT $(left 540) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
  --reps 5 --check 4 --modes pooled pooled-maintrimoff pooled-devlog lazy --skip riva long > $OUT/speed.txt 2>&1
grep -E "\"part\": \"speed\"|Error" $OUT/speed.txt | cut -c1-230 | tee -a $L
echo "[$(since) s] speed" | tee -a $L
timeout -s INT $(left 590) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --uniform 250 \
  --utts 32 --batch 32 --reps 5 --check 2 --memory pooled pooled-devlog lazy > $OUT/uniform.txt 2>&1
grep -E "B=32|CPU check|Error" $OUT/uniform.txt | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
