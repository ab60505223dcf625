#!/usr/bin/env bash
# GPU machine, warm after s210 (the full tier and the build there): more sides of the octets' walk against the
# packed walk (5 reps a side), and the bar's paired verdict (--paired 9) for each as the default decoder, in one call.
. scripts/device_common.sh
NO_FULL=1 device_setup s210b.log
C=/tmp/corpus-full
O=CUWFST_LATTICE_AFTER_OCTETS
CUWFST_LATTICE_AFTER_OCTETS=on env_ab on $C/HLG.img $C/sim/shard-00000.npz 150 --reps 5 --trace-sides --paired 9 \
  --env-ab off:$O=off on:$O=on off2:$O=off on2:$O=on off3:$O=off on3:$O=on off4:$O=off on4:$O=on
grep -E "paired passes" $OUT/ab_on.txt | cut -c1-300 | tee -a $L
grep -E "decode call [0-9]" $OUT/ab_on.txt | sed -E 's/.*\((side [a-z0-9_]*|rows in place)\).*decode call ([0-9.]+) ms.*/\1 \2/' | tr '\n' ';' | tee -a $L; echo | tee -a $L
env_ab off $C/HLG.img $C/sim/shard-00000.npz $(left 330) --reps 5 --paired 9 --env-ab on:$O=on off:$O=off
grep -E "paired passes" $OUT/ab_off.txt | cut -c1-300 | tee -a $L
echo "[$(since) s] end" | tee -a $L
