#!/usr/bin/env bash
# GPU machine (~6 minutes; the full tier from s92 on the same machine): s92's module A/B again
# (its first two sides ran out of time while the TLG built): lattice_speed --utts 256 --profile
# old / new / old, one process each; compute-sanitizer memcheck and racecheck over sanitize_trim.py;
# test_gpu_lanes.py + test_gpu_epsilon.py (capped). Carry .device. $OUT: s93.log, lat_*.jsonl, tests.tgz
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s93.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
wait_full 200; echo "[$(since) s] full tier" | tee -a $L
ab_init .device/ab_old
ab_use other; lat_speed lat_old.jsonl $(( $(since) + 45 )) --utts 256 --profile
ab_use own; lat_speed lat_new.jsonl $(( $(since) + 45 )) --utts 256 --profile
ab_use other; lat_speed lat_old2.jsonl $(( $(since) + 45 )) --utts 256 --profile
ab_use own
echo "[$(since) s] lattice_speed x3" | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout -s INT 60 "$CS" --tool $tool --error-exitcode 9 python3 scripts/sanitize_trim.py > $OUT/tests_$tool.log 2>&1
  echo "$tool sanitize_trim exit $?: $(tail -2 $OUT/tests_$tool.log | tr '\n' ' ')" | cut -c1-300 | tee -a $L
done
gpu_tests tests1.log $(left 390) "test_gpu_lanes.py test_gpu_epsilon.py" tests/test_gpu_lanes.py tests/test_gpu_epsilon.py
pack_logs 'tests*.log'
echo "[$(since) s] done" | tee -a $L
