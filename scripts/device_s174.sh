#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 04:15, the second call (small tier only: the session's
# device time left after s173 is ~545 s). One call:
#   1. test_gpu_lattice.py whole (the k2 goldens; the one grid's c14 now 2^14 uint16 indices alone in
#      shared memory, StateIndexFind) and test_gpu_host.py -k "prune_beside or host" (the host split),
#      beside the small tier;
#   2. the small HLG (256 sim rows, batch 32, --profile): the default against the host split
#      (CUWFST_LATTICE_HOST_SPLIT=on) and the profile's timeline of the one grid.
# Predictions (written before any run): exact, every test passes. c14 in shared memory: the one launch's
# warp cycles on the small HLG 46.6 G -> 44.5-45.5 G a pass (c14 was 1.7 G in shared memory under the
# classes), the global tables' build 0.12 -> 0.08-0.11 ms (c14's steps no longer built), the pass's
# bucket 6.33 -> 6.1-6.25 ms. The split: the tail after the last decode 17.8 -> 14-16 ms (the last
# sub-batch's host work, 8.9 ms, over two workers, the Python parts still under one GIL), the lattice
# batch -0.2 to -0.5 ms, inside the run's spread (~0.9 ms between s173's two default runs).
# Stage: .device/wheels. Carry .device. $OUT: s174.log, tests.tgz, ab_small.*
. scripts/device_common.sh
END=${END:-300}
NO_FULL=1 device_setup s174.log
small_tier &
gpu_tests tests_lat.log ${TEST_CAP:-170} "test_gpu_lattice.py" tests/test_gpu_lattice.py
wait
gpu_tests tests_host.log 60 "test_gpu_host.py -k 'prune_beside or host'" tests/test_gpu_host.py -k "prune_beside or host"
echo "[$(since) s] small tier, tests" | tee -a $L
S=/tmp/corpus-small
SIDES=("split:CUWFST_LATTICE_HOST_SPLIT=on" "prof:CUWFST_LATTICE_AFTER_PROF=on")
[ -z "${TL_SIDES:-}" ] || read -r -a SIDES <<< "$TL_SIDES"
env_ab small $S/HLG.img $S/sim/shard-00000.npz $(left $END) --profile --env-ab "${SIDES[@]}"
grep -E "the tail|its tail|parts a job" $OUT/ab_small.txt | cut -c1-400 | sed "s/^/[default] /" | tee -a $L
# the split as the traced decoder's (the A/B's sides print no tail)
CUWFST_LATTICE_HOST_SPLIT=on timeout -s INT $(left $END) python3 -m benchmarks.lattice_speed --graph $S/HLG.img \
  --log-probs $S/sim/shard-00000.npz --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call \
  > $OUT/split.txt 2>&1
grep -E "the tail|its tail|parts a job|vs 1-best|exactness|Error" $OUT/split.txt | cut -c1-400 | sed "s/^/[split] /" | tee -a $L
pack_logs 'tests_*.log'
echo "[$(since) s] end" | tee -a $L
