#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 14:13. The records pass's compacted walk
# (CUWFST_LATTICE_AFTER_COMPACT=on, LatRecordsKernel<-1, true>): a round tests only the arcs' ends; its
# candidates join a warp's queue in registers and are probed, filtered and written 32 at a time.
# 1. Its tests (records counted equal to the default's, every table class, growth, 40 random batches,
#    wide states) and the one grid's and wide states' tests at the default, beside the full tier's build.
# 2. lattice_speed --env-ab on the full HLG, 256 sim rows, batch 32, one call: compact / off alternating.
# 3. The phase sums (CUWFST_LATTICE_AFTER_PROF=on) of both walks, one side each.
# Prediction (written before the run): exact; the pass 5-20 % shorter (the probe and write of a round with
# any candidate, ~2-6 of its 32 arcs on the full HLG, run once per 32 candidates instead; the queue costs
# ~25 instructions a round with candidates), so a lattice batch 0.4-1.7 ms below off, the 1-best the same
# (within 0.3); the walk's warp cycles 5-20 % fewer.
# $OUT: s197.log, tests_compact.log, ab_full.{txt,err,jsonl}, ab_prof.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s197.log
gpu_tests tests_compact.log 200 "compact tests" tests/test_gpu_lattice.py -k "compacted or one_grid or wide_states"
echo "[$(since) s] compact tests" | tee -a $L
wait_full 260; echo "[$(since) s] full tier" | tee -a $L
env_ab full $C/HLG.img $C/sim/shard-00000.npz 200 --env-ab compact:CUWFST_LATTICE_AFTER_COMPACT=on \
  off:CUWFST_LATTICE_AFTER_COMPACT=off compact2:CUWFST_LATTICE_AFTER_COMPACT=on off2:CUWFST_LATTICE_AFTER_COMPACT=off \
  compact3:CUWFST_LATTICE_AFTER_COMPACT=on off3:CUWFST_LATTICE_AFTER_COMPACT=off
echo "[$(since) s] A/B" | tee -a $L
env_ab prof $C/HLG.img $C/sim/shard-00000.npz $(left 560) --env-ab prof:CUWFST_LATTICE_AFTER_PROF=on \
  cprof:CUWFST_LATTICE_AFTER_PROF=on,CUWFST_LATTICE_AFTER_COMPACT=on
echo "[$(since) s] end" | tee -a $L
