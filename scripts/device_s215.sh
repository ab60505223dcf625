#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-07. s214 put the traced lattice calls' end gap (12.7-32.5 ms in 4 of 8
# calls) in dropping the ended HostOverlap, whose pools' threads end with each call. CUWFST_LATTICE_KEEP_POOLS=on
# keeps the pools (their threads) between calls. Sides off / on alternating, each traced once, with the overlap's
# parts dropped one at a time where the pools are the call's own; the paired verdict on the default (off).
# Prediction (before the run): on sides show no end gap (the drop ~0 ms), their lattice batch 0-2 ms shorter than
# off sides' (the gap's share where a call draws one, plus the threads' start); the 1-best the same.
# $OUT: s215.log, ab_full.*
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s215.log
wait_full 450; echo "[$(since) s] full tier" | tee -a $L
K=CUWFST_LATTICE_KEEP_POOLS
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 300) --trace-sides --paired 5 --env-ab \
  off:$K=off on:$K=on off2:$K=off on2:$K=on
grep -E "paired passes" $OUT/ab_full.txt | cut -c1-300 | tee -a $L
grep -E "the call [0-9.]+ ms" $OUT/ab_full.txt | sed -E 's/.*\((side [a-z0-9_]*|rows in place)\).*the call ([0-9.]+) ms.*/\1 \2/' | tr '\n' ';' | tee -a $L; echo | tee -a $L
grep -E "from the rescue's end|frame's locals dropped|overlap.s parts dropped" $OUT/ab_full.txt | cut -c1-330 | tee -a $L
echo "[$(since) s] end" | tee -a $L
