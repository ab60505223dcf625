#!/usr/bin/env bash
# GPU machine, one call on a fresh machine (~5 minutes): where racecheck stops
# sanitize_refill.py (the app exits without output under racecheck, memcheck is clean), and the
# scan's CTAs a lane (gpu_speed variants new:N), same run.
#   1. racecheck on sanitize_refill.py with refill "host" (segment) and "device"; the sanitizer's
#      report in its own file (--log-file), the app's output in another
#   2. gpu_speed, full HLG, uniform 32 x 250, and the full TLG, 64 utts, batch 32: VARIANTS
# Carry .device and .cache. $OUT: diag.log, racecheck-*.txt, app-*.txt, speed.jsonl
. scripts/device_common.sh
device_setup diag.log
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for r in host device; do
  t0=$(since)
  timeout ${SAN_CAP:-80} "$CS" --tool racecheck --error-exitcode 9 --log-file $OUT/racecheck-$r.txt \
    python3 -X faulthandler scripts/sanitize_refill.py $r > $OUT/app-$r.txt 2>&1
  echo "racecheck refill=$r rc=$? $(( $(since) - t0 )) s; app: $(tail -c 600 $OUT/app-$r.txt | tr '\n' ' ')" | tee -a $L
  grep -vE '^=========   ' $OUT/racecheck-$r.txt | tail -6 | tee -a $L
done
echo "[$(since) s] sanitizers" | tee -a $L
wait_full ${FULL_WAIT:-300}
S=$C/sim/shard-00000.npz
timeout -s INT $(left ${HLG_END:-400}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $S --uniform 250 \
  --utts 32 --batch 32 --reps 5 --check 2 --profile --variants ${VARIANTS:-new new:8 new:4} --json $OUT/speed.jsonl 2>&1 \
  | grep -v "^{" | tail -22 | tee -a $L
[ "${TLG:-1}" = 0 ] || timeout -s INT $(left ${TLG_END:-470}) python3 -m benchmarks.gpu_speed --graph $C/TLG.img --log-probs $S \
  --utts 64 --batch 32 --reps 3 --check 2 --profile --variants ${VARIANTS:-new new:8 new:4} --json $OUT/speed.jsonl 2>&1 \
  | grep -v "^{" | tail -26 | tee -a $L
echo "[$(since) s] done" | tee -a $L
