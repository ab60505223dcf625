#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine, the full tier's build included), branch host-log:
#   while the full tier builds: test_gpu.py whole (WalkPath now reads each winners entry once: every
#   decode's backtrack changed) and the test_gpu_memory tests of the host log, its move to the
#   device, the rescue (device and host logs) and the module counters
#   then issue 9's batch-32 memory, each decoder in a fresh process (riva, pooled = host log,
#   pooled-devlog = the log on the device as before), the time of pooled, pooled-devlog and lazy in
#   one process (256 utterances, a rescued row a pass), and the uniform 32 x 250 rows with the
#   kernel split (--profile: finalize and backtrack are the kernels that touch the log).
# Predictions (written before the run):
#   - pooled sampled peak 646 -> 490-540 MiB: -96 (the main log), -8 (the rescue's first log
#     piece), and the rescue's log growth for row 211 (20-60 of its 118); used after 528 -> ~424
#   - pooled-devlog: as s24c's pooled (used 528, peak 646)
#   - time, uniform 32 x 250: pooled (host log) / pooled-devlog 1.01-1.04 (the backtrack's ~250
#     dependent reads over the bus at ~1-1.5 us: +0.25-0.4 ms a batch; Finalize's appends are
#     posted writes, +0-0.5 ms); backtrack kernel 0.0x ms -> 0.3-0.5 ms
#   - time, 256 utterances: pooled / pooled-devlog 1.02-1.05 (rows to 600 frames; the rescue's log
#     pinned and unpinned every pass)
# Carry .device and .cache. $OUT: s25a.log, tests.log, memory.jsonl, speed.txt, uniform.txt.
. scripts/device_common.sh
device_setup s25a.log
timeout -s INT 170 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s > $OUT/tests.log 2>&1
echo "test_gpu exit $?: $(grep -E "passed|failed" $OUT/tests.log | tail -1) [$(since) s]" | tee -a $L
{ grep -E "mismatch|identical" $OUT/tests.log | grep -v "^E " | head -4; grep -E "^FAILED" $OUT/tests.log | head -4; } | cut -c1-220 | tee -a $L
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_gpu_memory.py \
  -k "host or rescue or stats_agree or lazy_and_eager or layouts_alternate or growth_reruns" --durations 6 > $OUT/tests_mem.log 2>&1
echo "test_gpu_memory exit $?: $(grep -E "passed|failed" $OUT/tests_mem.log | tail -1) [$(since) s]" | tee -a $L
grep -E "^FAILED|^SKIPPED|^ERROR|^E  " $OUT/tests_mem.log | cut -c1-220 | head -12 | tee -a $L
wait_full ${FULL_END:-330}; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
mem_fresh pooled --modes pooled --skip riva speed long
mem_fresh devlog --modes pooled-devlog --skip riva speed long
python3 - <<'PY' | tee -a $L
import json
for l in open("/tmp/out/memory.jsonl" if False else __import__("os").environ["OUT"] + "/memory.jsonl"):
    r = json.loads(l)["row"]
    if "winners_host_mib" in r: print("  host log:", r["memory"], "winners_host_mib", r["winners_host_mib"], "pinned_mib", r["pinned_mib"])
PY
echo "[$(since) s] memory" | tee -a $L
timeout -s INT 150 python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
  --reps 5 --check 4 --modes pooled pooled-devlog lazy --skip riva long > $OUT/speed.txt 2>&1
grep -E "\"part\": \"speed\"|Error" $OUT/speed.txt | cut -c1-230 | tee -a $L
echo "[$(since) s] speed" | tee -a $L
timeout -s INT $(left 590) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --uniform 250 \
  --utts 32 --batch 32 --reps 5 --check 2 --memory pooled pooled-devlog lazy --profile > $OUT/uniform.txt 2>&1
grep -E "B=32|CPU check|Error|finalize|backtrack" $OUT/uniform.txt | cut -c1-200 | tee -a $L
echo "[$(since) s] done" | tee -a $L
