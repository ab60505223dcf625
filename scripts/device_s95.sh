#!/usr/bin/env bash
# GPU machine (~4 minutes, the session's last device time): issue 11's uniform batch (32 rows of
# 250 frames of the full tier's HLG, gpu_speed --profile, 1-best) on this module, then on main's
# scan.cuh before the search's empty pairs (.device/ab_old) if time is left. Carry .device.
# $OUT: s95.log, uniform_new.txt, uniform_old.txt
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s95.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
ab_init .device/ab_old; ab_use other; ab_use own
wait_full 205; echo "[$(since) s] full tier" | tee -a $L
uni() {
  timeout -s INT $(left $2) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --uniform 250 \
    --utts 32 --batch 32 --reps 5 --check 2 --profile > $OUT/uniform_$1.txt 2>&1
  grep -E "B=32|CPU check|Error|kernel ms" $OUT/uniform_$1.txt | cut -c1-220 | sed "s/^/[$1] /" | tee -a $L
}
uni new 228
ab_use other >/dev/null; uni old 250
echo "[$(since) s] done" | tee -a $L
