#!/usr/bin/env bash
# GPU machine, one short call: the batch-32 peak by the module's own counter (gpu_memory_peak: every
# acquisition updates it), next to the 5 ms sampler. s25d's sampled pooled peak (398 MiB) equalled
# its after-figure: the rescue's growth lives a few ms (its big step is the row's last), so the
# sampler can miss it. While the full tier builds: the rescue test (it asserts the counter saw the
# rescue's growth). Then fresh processes: riva, pooled, pooled-maintrimoff, pooled-devlog.
# Predictions (written before the run): counted peak pooled ~445 MiB (graph 259 + the rescue's ~144
# while the main holds nothing + ~42 outside the counters); pooled-maintrimoff ~542 (s25a);
# pooled-devlog (the main trim on, the log on the device) ~550.
# Carry .device and the module. $OUT: s25e.log, tests.log, memory.jsonl.
. scripts/device_common.sh
device_setup s25e.log
timeout -s INT 100 python3 -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_gpu_memory.py -k "rescue" > $OUT/tests.log 2>&1
echo "tests exit $?: $(grep -E "passed|failed" $OUT/tests.log | tail -1) [$(since) s]" | tee -a $L
grep -E "^FAILED|^E  " $OUT/tests.log | cut -c1-220 | head -8 | tee -a $L
wait_full ${FULL_END:-330}; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
mem_fresh maintrimoff --modes pooled-maintrimoff --skip riva speed long
mem_fresh devlog --modes pooled-devlog --skip riva speed long
echo "[$(since) s] done" | tee -a $L
