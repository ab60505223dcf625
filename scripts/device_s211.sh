#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 22:19. The octets' walk as the default (CUWFST_LATTICE_AFTER_OCTETS=off:
# the packed walk): 1. the whole GPU suite at the new default, beside the full tier's build; 2. on the full HLG,
# three sides each of off / on alternating (when the suite leaves the time), each traced once (the call's end now split by the frame's locals,
# dropped one at a time: which of them holds the 8-17 ms gap seen in ~1 of 8 traced calls), and the bar's
# paired verdict (--paired 9) on the default decoder.
# Prediction (written before the run): the suite passes; on sides ~1-1.5 ms a batch under off sides (s210b:
# 34.55 against 36.17 at the medians), ratios ~x1.47; paired median x1.46-1.48; the gap (if any side draws
# one) in `overlap`'s drop (its executors and futures) or after the drops, at the frame's return.
# $OUT: s211.log, tests.tgz, ab_full.*
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s211.log
gpu_suite 320
gpu_suite_wait
echo "[$(since) s] suite" | tee -a $L
wait_full 450; echo "[$(since) s] full tier" | tee -a $L
O=CUWFST_LATTICE_AFTER_OCTETS
[ $(since) -lt 480 ] && env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 570) --trace-sides --paired 9 --env-ab \
  off:$O=off on:$O=on off2:$O=off on2:$O=on off3:$O=off on3:$O=on
grep -E "paired passes" $OUT/ab_full.txt | cut -c1-300 | tee -a $L
grep -E "decode call [0-9]" $OUT/ab_full.txt | sed -E 's/.*\((side [a-z0-9_]*|rows in place)\).*decode call ([0-9.]+) ms.*/\1 \2/' | tr '\n' ';' | tee -a $L; echo | tee -a $L
grep -E "from the rescue's end|frame's locals dropped" $OUT/ab_full.txt | cut -c1-230 | tee -a $L
echo "[$(since) s] end" | tee -a $L
