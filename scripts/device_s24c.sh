#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine, the full tier's build included), on main:
#   while the full tier builds:
#   - tests: bbdb389's sampled-check test (its column-sliced case failed in s24b: fixed in
#     a55c035), the only-our-kernels test at 4 and 2 lanes (sub-batches: _take_rows without
#     index_select, 5d22bc4), the two rescue tests (trim, and CUWFST_RESCUE_TRIM=off), and the
#     4 test_gpu_memory tests s24b's cap did not reach
#   - racecheck over sanitize_case.py 2 --eps --lanes on main (on chain-clear it ended with
#     "Target application returned an error" and no output: is that main's too?)
#   then issue 9's batch-32 memory, each decoder in a fresh process (riva, pooled, pooled-keep),
#   the time of pooled, pooled-keep and lazy in one process, the uniform 32 x 250 rows (no rescue)
#   pooled vs lazy, and memory_stages on the full HLG (pooled, batch 32).
# Predictions (written before the run):
#   - pooled device-used 618 -> ~528 MiB (index_select's ~90 MiB of PyTorch code gone), its sampled
#     peak 758 -> ~668 (the rescue instance's growth for row 211 stays a transient of ~140 MiB)
#   - pooled-keep: used ~= its peak ~668; time vs lazy 1.21x -> ~1.10-1.15x (no regrowth of the
#     rescue's pools every pass); pooled (trim) stays ~1.2x
#   - uniform 32 x 250 (no rescued row): pooled ~1.10x lazy (cbe23be's split)
#   - memory_stages: the first decode adds < 15 MiB outside the module's counters
# Carry .device and .cache. $OUT: s24c.log, tests.log, racecheck.log, memory.jsonl, speed.txt, uniform.txt, stages.txt.
. scripts/device_common.sh
device_setup s24c.log
timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider -m gpu -rs \
  "tests/test_gpu.py::test_the_sampled_log_prob_check_reads_device_rows_without_kernels" \
  "tests/test_gpu.py::test_a_default_decode_of_a_torch_tensor_runs_only_our_kernels" \
  tests/test_gpu_memory.py -k "sampled or only_our or rescue or keeps_winners_flat or tiny_tlg_long_form or auto_keeps or rejects_nonsense" \
  --durations 8 > $OUT/tests.log 2>&1
echo "tests exit $?: $(grep -E "passed|failed" $OUT/tests.log | tail -1) [$(since) s]" | tee -a $L
grep -E "^FAILED|^SKIPPED|^ERROR" $OUT/tests.log | cut -c1-220 | head -8 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 150 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 2 --eps --lanes \
  > $OUT/racecheck.log 2>&1
echo "racecheck 2 --eps --lanes: exit $? [$(since) s]" | tee -a $L
grep -v "^=========     " $OUT/racecheck.log | tail -12 | cut -c1-200 | tee -a $L
wait_full ${FULL_END:-320}; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
mem_fresh keep --modes pooled-keep --skip riva speed long
echo "[$(since) s] memory" | tee -a $L
timeout -s INT 150 python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
  --reps 5 --check 4 --modes pooled pooled-keep lazy --skip riva long > $OUT/speed.txt 2>&1
grep -E "\"part\": \"speed\"|Error" $OUT/speed.txt | cut -c1-230 | tee -a $L
echo "[$(since) s] speed" | tee -a $L
timeout -s INT 90 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --uniform 250 \
  --utts 32 --batch 32 --reps 5 --check 2 --memory pooled lazy > $OUT/uniform.txt 2>&1
grep -E "B=32|CPU check|Error" $OUT/uniform.txt | cut -c1-200 | tee -a $L
echo "[$(since) s] uniform" | tee -a $L
timeout -s INT $(left 585) python3 -m benchmarks.memory_stages --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --batch 32 --memory pooled > $OUT/stages.txt 2>&1
grep -E "^\||Error" $OUT/stages.txt | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
