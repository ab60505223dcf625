#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 20:10. Two things, no kernel change:
# 1. The bar's verdict on main (3b288b8, the code of 2cccada): lattice_speed --paired 9 beside five traced
#    sides of the default decoder (every --env-ab side sets CUWFST_LATTICE_TAIL_HYPS=on, its default).
# 2. The 8-17 ms that 8 of 42 traced calls (s203-s208b) spent between the rescue's end and the call's return:
#    new stamps split it at the decoder's lock; then the same sides under --switch-interval 0.0005.
# Prediction (written before the run): paired median x1.48-1.52; the gaps in ~1 of 5 traced calls, before
# the lock is left (the decode's frame and its locals freed); if they are GIL waits, the short switch
# interval takes them under 1 ms.
# $OUT: s209.log, ab_full.* (default interval), ab_si.* (0.5 ms)
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s209.log
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
H=CUWFST_LATTICE_TAIL_HYPS
SIDES="a:$H=on b:$H=on c:$H=on d:$H=on"
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 300) --trace-sides --paired 9 --env-ab $SIDES
grep -E "paired passes" $OUT/ab_full.txt | cut -c1-300 | tee -a $L
grep -E "from the exit|from the rescue's end" $OUT/ab_full.txt | sed -E 's/the rescue.s counts.*//' | cut -c1-230 | tee -a $L
echo "[$(since) s] default interval done" | tee -a $L
timeout -s INT $(left 330) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 0 --no-replay --one-call --switch-interval 0.0005 --trace-sides \
  --env-ab $SIDES --json $OUT/ab_si.jsonl > $OUT/ab_si.txt 2> $OUT/ab_si.err
echo "[switch interval 0.5 ms exit $?]" | tee -a $L
grep -E "env A/B, ms a batch|from the exit|from the rescue's end" $OUT/ab_si.txt | sed -E 's/the rescue.s counts.*//' | cut -c1-300 | tee -a $L
echo "[$(since) s] end" | tee -a $L
