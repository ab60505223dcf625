#!/usr/bin/env bash
# GPU machine, one call after device_suite.sh FULL=1 (the full tier built in /tmp, if the machine
# kept it; else this builds it, ~190 s): main after s26 (graph-u8 + graph-chunks), issue 9's
# trade-off as it stands. Predictions (written before the call; docs/speed-notes.md "Issue 9 after
# s26"): fresh-process batch-32 peaks pooled 400-415 MiB (call 1 of this session: 408), pooled-slots
# 480-530 (its main pools ~230 MiB at the big steps), lazy 2,450-2,550; riva 460. Speed, a pass of
# the 256 utterances at 32 lanes (8 calls), vs lazy: pooled 1.15-1.21, pooled-slots 1.03-1.07;
# uniform 32 x 250: pooled 1.15-1.20, pooled-slots 1.01-1.03.
# (Its first run, 0333898, passed --skip memory to the speed A/B, which builds its decoders in the
# memory part: no speed rows came back. Fixed here.) $OUT: s26d.log, memory.jsonl.
. scripts/device_common.sh
device_setup s26d.log
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
for m in pooled pooled-slots lazy; do mem_fresh $m --modes $m --skip riva speed long; done
timeout -s INT $(left 480) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
  --reps 3 --check 2 --modes pooled pooled-slots lazy --skip riva long > /tmp/mem_speed.txt 2>&1
grep -E "^\{" /tmp/mem_speed.txt | sed "s/^/{\"run\": \"speed\", \"row\": /; s/$/}/" >> $OUT/memory.jsonl
grep -vE "^\{" /tmp/mem_speed.txt | tail -12 | cut -c1-200 | tee -a $L
timeout -s INT $(left 585) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --uniform 250 --utts 32 --batch 32 --reps 5 --check 2 --memory pooled pooled-slots lazy > /tmp/uni.txt 2>&1
grep -E "B=32|CPU check|Error" /tmp/uni.txt | cut -c1-170 | tee -a $L
echo "[$(since) s] done" | tee -a $L
