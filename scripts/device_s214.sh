#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-07. The traced lattice calls' end: s211 saw 13-25 ms between the frame's
# locals dropped and the decoder's lock left in 5 of 8 traced calls (those calls ~305 ms against ~280 without),
# none of it in the drops of overlap / early / got_subs. Now: the overlap's last name (`host`) and rows/redo dropped
# too, the frame's return stamped inside the lock, and every Python thread's stack sampled each 2 ms by
# faulthandler's thread from the drops to the lock left (--gap-dump). Six traced sides at the default, and the
# paired verdict (--paired 9).
# Prediction (before the run): the gap, where a call draws one, falls in `host`'s drop (the overlap's futures and
# executors going) or in the frame's return; the samples show the calling thread in `_decode_locked`/`decode`
# and no other Python thread (the pools joined): a stall in native code under the GIL (a large free).
# s214b: the overlap's parts dropped one at a time (its futures, latest first; its pools) where s214 put the whole gap.
# $OUT: s214.log, ab_full.*, gap.*.txt
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s214.log
wait_full 450; echo "[$(since) s] full tier" | tee -a $L
O=CUWFST_LATTICE_AFTER_OCTETS
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 560) --trace-sides --paired 9 --env-ab \
  a:$O=on b:$O=on c:$O=on d:$O=on e:$O=on f:$O=on
grep -E "paired passes" $OUT/ab_full.txt | cut -c1-300 | tee -a $L
grep -E "decode call [0-9]" $OUT/ab_full.txt | sed -E 's/.*\((side [a-z0-9_]*|rows in place)\).*decode call ([0-9.]+) ms.*/\1 \2/' | tr '\n' ';' | tee -a $L; echo | tee -a $L
grep -E "the call [0-9.]+ ms" $OUT/ab_full.txt | sed -E 's/.*\((side [a-z0-9_]*|rows in place)\).*the call ([0-9.]+) ms.*/\1 \2/' | tr '\n' ';' | tee -a $L; echo | tee -a $L
grep -E "from the rescue's end|frame's locals dropped|of that, |overlap.s parts dropped|sampled [0-9]+ times|^  [0-9]+ x Thread" $OUT/ab_full.txt | cut -c1-330 | tee -a $L
echo "[$(since) s] end" | tee -a $L
