#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 11:23. The pruning's begin off the decode call's path, two
# ways, each behind a switch read at construction: CUWFST_PRUNE_BEGIN=async (new default: PruneBeginLocked
# returns without waiting for its bucketing; sync: as before) and CUWFST_PRUNE_LOADS=early (new default:
# the bucketing's graph reads issued together before the warp's atomic, LoadArcFacts; late: as before).
# 1. test_gpu_lattice.py whole (k2 goldens, the bucket tests with loads early/late, the new pipelined
#    begin test sync/async) and test_gpu_eps_prune.py beside it, while the full tier builds.
# 2. lattice_speed --env-ab on the full HLG, 256 sim rows, batch 32, one call: default (async+early), old
#    (sync+late), sync, late, old again, default again.
# 3. decode_split.py default and --side late: the begin's device time (init kernels, bucketing) from events.
# Predictions (written before the run): loads early: the bucketing's device time 0.3-0.6 ms lower a
# sub-batch (of ~1.2); async: the lattice batch 0.5-1.2 ms lower (the host's ~1 ms between a begin and the
# next decode's first launch overlaps the bucketing), the 1-best unchanged; both: ~1-1.5 ms (38.7 -> ~37.4).
# $OUT: s188.log, lat.log, eps.log, ab_full.{txt,err,jsonl}, split.txt
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s188.log
gpu_tests eps.log 300 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
gpu_tests lat.log 300 "test_gpu_lattice.py" tests/test_gpu_lattice.py
wait
echo "[$(since) s] tests" | tee -a $L
wait_full 360; echo "[$(since) s] full tier" | tee -a $L
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 500) --env-ab old:CUWFST_PRUNE_BEGIN=sync,CUWFST_PRUNE_LOADS=late \
  sync:CUWFST_PRUNE_BEGIN=sync late:CUWFST_PRUNE_LOADS=late old2:CUWFST_PRUNE_BEGIN=sync,CUWFST_PRUNE_LOADS=late
echo "[$(since) s] env A/B" | tee -a $L
timeout -s INT $(left 585) python3 scripts/decode_split.py $C/HLG.img $C/sim/shard-00000.npz 256 \
  --side late:CUWFST_PRUNE_LOADS=late > $OUT/split.txt 2>&1
echo "[$(since) s] decode_split exit $?" | tee -a $L
grep -vE "^  trace" $OUT/split.txt | cut -c1-300 | tee -a $L
echo "[$(since) s] end" | tee -a $L
