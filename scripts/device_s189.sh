#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 11:23, after s188. The early graph loads are gone again (s188:
# the bucketing's device time 1.167 ms early against 1.189 late, no gain); the begin without its wait stays
# (CUWFST_PRUNE_BEGIN=async, the default; sync for A/B). 1. The whole GPU suite (five groups side by side)
# and test_gpu_eps_prune.py, beside the full tier's build. 2. lattice_speed --env-ab on the full HLG, 256 sim
# rows, batch 32, one call, sides interleaved: default, sync, async, sync2, async2, default again.
# Prediction (from s188: default 37.64 / 37.80 against sync 38.18): async 0.3-0.6 ms a lattice batch below
# sync, the 1-best the same.
# $OUT: s189.log, tests.tgz, ab_full.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s189.log
gpu_suite 400
gpu_tests tests_epsprune.log 300 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
gpu_suite_wait
echo "[$(since) s] suite" | tee -a $L
wait_full 480; echo "[$(since) s] full tier" | tee -a $L
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 585) --env-ab sync:CUWFST_PRUNE_BEGIN=sync \
  async:CUWFST_PRUNE_BEGIN=async sync2:CUWFST_PRUNE_BEGIN=sync async2:CUWFST_PRUNE_BEGIN=async
echo "[$(since) s] end" | tee -a $L
