#!/usr/bin/env bash
# GPU machine, one call, branch host-log + the main trim (GpuBackend.main_trim: before the rescue
# instance runs, the main instance gives back its pools' growth, log=False):
#   tests: test_gpu_memory's host-log, rescue (main trim asserted; keep = both trims off), counters,
#   layouts and growth tests; test_gpu_lattice's rescue tests
#   then the batch-32 memory, each decoder in a fresh process (riva, pooled, pooled-maintrimoff),
#   and the time of pooled, pooled-maintrimoff, pooled-devlog and lazy in one process (256
#   utterances: one rescued row, row 211, a pass).
# Predictions (written before the run):
#   - pooled sampled peak 542 -> ~470 MiB (the main's lanes 96 -> its ~26 MiB of first pieces while
#     the rescue's 26 + 118 run: graph 259 + 26 + 144 + ~42 outside); used after ~424 -> ~360-400
#     (the main's pools stay trimmed after the last call's rescue; depends on which call rescued last)
#   - pooled-maintrimoff: as s25a's pooled (peak 542, used 424)
#   - time per pass: pooled / pooled-maintrimoff 1.01-1.03 (the batch after each rescue regrows
#     the main's pools by pauses); pooled-maintrimoff / pooled-devlog ~1.01 (s25a: 1.010)
# Carry .device and the module. $OUT: s25b.log, tests.log, memory.jsonl, speed.txt.
. scripts/device_common.sh
device_setup s25b.log
timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_gpu_memory.py tests/test_gpu_lattice.py \
  -k "host or rescue or stats_agree or lazy_and_eager or layouts_alternate or growth_reruns" --durations 6 > $OUT/tests.log 2>&1
echo "tests exit $?: $(grep -E "passed|failed" $OUT/tests.log | tail -1) [$(since) s]" | tee -a $L
grep -E "^FAILED|^SKIPPED|^ERROR|^E  " $OUT/tests.log | cut -c1-220 | head -12 | tee -a $L
wait_full ${FULL_END:-330}; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
mem_fresh maintrimoff --modes pooled-maintrimoff --skip riva speed long
echo "[$(since) s] memory" | tee -a $L
timeout -s INT $(left 590) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
  --reps 5 --check 4 --modes pooled pooled-maintrimoff pooled-devlog lazy --skip riva long > $OUT/speed.txt 2>&1
grep -E "\"part\": \"speed\"|Error" $OUT/speed.txt | cut -c1-230 | tee -a $L
echo "[$(since) s] done" | tee -a $L
