#!/usr/bin/env bash
# GPU machine: issue 10, after the session of 2026-12-06 14:13. Claimed tokens (the compacted records walk's
# warps claiming their item's tokens) became the default after s199, where its own tests and
# test_gpu_lattice.py -k "after or k2" ran under the switch; the packed walk (CUWFST_LATTICE_AFTER_PACKED=on,
# built after the session's device time ran out) has never run, nor has its late arc range
# (CUWFST_LATTICE_AFTER_PACKED=late, built 2026-12-06 16:30). 1. The whole GPU suite at the new defaults
# (five groups side by side, beside the full tier's build; test_gpu_lattice.py holds the packed and late
# walks' tests; test_gpu_faults.py's free-memory bound can see the other groups' allocations, so it runs
# again alone if it fails). 2. lattice_speed on the full HLG: packed / late / default alternating, and a
# stride side. 3. The same three with the pass's phase sums (CUWFST_LATTICE_AFTER_PROF=on). 4. The last
# sub-batch's host work split across the host workers (CUWFST_LATTICE_HOST_SPLIT=last, built 2026-12-06
# 16:35) against the default, alternating.
# Prediction (written before any run): every test passes; the packed walk ~10-15 fewer instructions a round
# of ~80 (the predicated second layout and the uniform checks gone), the pass 2-6 % shorter, a lattice batch
# 0.1-0.4 ms below the default; late a further 1-3 % of the pass (s198: 4 % of stall samples on the token's
# count byte), 0.05-0.2 ms a batch; stride ~0.5 ms above the default (s199). Split last: the tail's host
# work (~9 ms of s199's 20.4 ms tail) on two workers, 2-4 ms off the call, 0.2-0.5 ms a batch.
# $OUT: s200.log, tests.tgz, tests_faults.log, ab_{full,prof,host}.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s200.log
gpu_suite 400
gpu_suite_wait
echo "[$(since) s] suite" | tee -a $L
grep -q "test_gpu_faults" $OUT/s200.log && gpu_tests tests_faults.log 100 "test_gpu_faults.py alone" tests/test_gpu_faults.py
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
P=CUWFST_LATTICE_AFTER_PACKED
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 560) --env-ab packed:$P=on claim:$P=off late:$P=late \
  packed2:$P=on claim2:$P=off late2:$P=late packed3:$P=on claim3:$P=off late3:$P=late stride:CUWFST_LATTICE_AFTER_TOKENS=stride
echo "[$(since) s] A/B" | tee -a $L
env_ab prof $C/HLG.img $C/sim/shard-00000.npz $(left 590) --env-ab cprof:CUWFST_LATTICE_AFTER_PROF=on \
  pprof:CUWFST_LATTICE_AFTER_PROF=on,$P=on lprof:CUWFST_LATTICE_AFTER_PROF=on,$P=late
echo "[$(since) s] prof" | tee -a $L
H=CUWFST_LATTICE_HOST_SPLIT
env_ab host $C/HLG.img $C/sim/shard-00000.npz $(left 595) --env-ab last:$H=last off:$H=off last2:$H=last off2:$H=off \
  last3:$H=last off3:$H=off
echo "[$(since) s] end" | tee -a $L
