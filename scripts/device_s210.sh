#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 22:19. The octets' walk (CUWFST_LATTICE_AFTER_OCTETS=on, off by
# default): the packed records walk's tokens four at a time, the first round an octet of lanes a token.
# benchmarks/records_skip.py (full tier, 3 sim rows): 1,806,378 rounds in the packed walk, 1,444,520 (80.0 %)
# in the octets' walk.
# Prediction (written before the run): its tests pass (the new test; test_gpu_lattice.py under it: 0 mismatches);
# the records pass's span (CUWFST_LATTICE_AFTER_PROF) 6.5 -> 5.4-6.0 ms a pass; the lattice batch 0.4-1.0 ms
# shorter, the octets' sides x1.42-1.47 of their 1-best.
# Then the bar's verdict with octets on for the whole run (--paired 9), and s209's split of the call's end.
# $OUT: s210.log, tests_*.log, ab_prof.*, ab_full.*, ab_si.*
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s210.log
O=CUWFST_LATTICE_AFTER_OCTETS
gpu_tests tests_oct.log 120 "octet walk test" tests/test_gpu_lattice.py -k "octet_walk or packed_walk"
# the lattice group (test_gpu_lattice.py, the k2 goldens among them) with octets on, beside the full tier's build
CUWFST_LATTICE_AFTER_OCTETS=on SUITE_GROUPS=lat gpu_suite 300
SUITE_GROUPS=lat gpu_suite_wait
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
P=CUWFST_LATTICE_AFTER_PROF
env_ab prof $C/HLG.img $C/sim/shard-00000.npz 90 --env-ab pprof:$P=on oprof:$P=on,$O=on pprof2:$P=on oprof2:$P=on,$O=on
echo "[$(since) s] prof done" | tee -a $L
export CUWFST_LATTICE_AFTER_OCTETS=on
env_ab full $C/HLG.img $C/sim/shard-00000.npz 150 --trace-sides --paired 9 --env-ab off:$O=off on:$O=on off2:$O=off \
  on2:$O=on off3:$O=off on3:$O=on
grep -E "paired passes|lattice rows identical" $OUT/ab_full.txt | cut -c1-400 | tee -a $L
grep -E "from the exit|from the rescue's end" $OUT/ab_full.txt | sed -E 's/the rescue.s counts.*//' | cut -c1-230 | tee -a $L
echo "[$(since) s] full A/B done" | tee -a $L
[ $(since) -lt 500 ] && timeout -s INT $(left 570) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 0 --no-replay --one-call --switch-interval 0.0005 --trace-sides \
  --env-ab a:$O=on b:$O=on c:$O=on --json $OUT/ab_si.jsonl > $OUT/ab_si.txt 2> $OUT/ab_si.err
echo "[switch interval 0.5 ms exit $?]" | tee -a $L
grep -E "env A/B, ms a batch|from the exit|from the rescue's end" $OUT/ab_si.txt | sed -E 's/the rescue.s counts.*//' | cut -c1-300 | tee -a $L
echo "[$(since) s] end" | tee -a $L
