#!/usr/bin/env bash
# GPU machine: issue 10, written in the session of 2026-12-06 17:50 for the next one (speed-notes, that
# session's Next 1-2). Nothing here changes code; two measurements to choose the next change by:
# 1. The pruning's lane clocks (CUWFST_PRUNE_SPLIT, scripts/prune_split.py, the default "lanes" path) over the
#    full tier's first 64 sim rows, then its last 64 (the call's tail job holds the shortest rows): which of
#    PrLaneForwardKernel's phases (forward, count + scan, scatter, in-group, others) and the windows' take a
#    lane's time today. s52 (2026-12-03): forward 1.98, count + scan 0.95, scatter 0.53, in-group 1.37, others
#    0.05 ms a lane; windows init 0.14, backward 2.13, end 0.19.
# 2. Nsight Compute over one launch of the records pass's packed walk (LatRecordsKernel, its default), as
#    s198 did for the compacted walk: warp states, instruction mix, source counters.
# Prediction (written before the run, from s52 and s198-s200): the forward still the largest phase (~35-45 %
# of PrLaneForwardKernel's clocks); the records kernel's top stall long scoreboard, issue active under 60 %.
# $OUT: s206.log, split_*.txt, records.ncu-rep, ncu.txt, ncu_src.csv
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s206.log
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT 90 python3 scripts/prune_split.py $C/HLG.img $C/sim/shard-00000.npz 64 on,lanes,warp > $OUT/split_first.txt 2>&1
echo "[split first 64 exit $?]" | tee -a $L; grep -iE "split|lane" $OUT/split_first.txt | head -12 | cut -c1-400 | tee -a $L
python3 - <<'PY'
import numpy as np
d = np.load("/tmp/corpus-full/sim/shard-00000.npz")
np.savez("/tmp/last64.npz", log_probs=d["log_probs"][-64:], lengths=d["lengths"][-64:])
PY
timeout -s INT 90 python3 scripts/prune_split.py $C/HLG.img /tmp/last64.npz 64 on,lanes,warp > $OUT/split_last.txt 2>&1
echo "[split last 64 exit $?]" | tee -a $L; grep -iE "split|lane" $OUT/split_last.txt | head -12 | cut -c1-400 | tee -a $L
ncu_records 560
echo "[$(since) s] end" | tee -a $L
