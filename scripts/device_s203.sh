#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 17:50. The call's tail: s201 put the last job's host work at
# ~10 ms of a ~21.8 ms tail (2 shares, one a host worker), while the GPU and most CPUs idle. New:
# CUWFST_LATTICE_TAIL_SHARES (the last sub-batch's host work in that many shares, on a pool of their own).
# 1. The fake-free GPU tests of the sub-batch paths with 4 tail shares, beside the full tier's build.
# 2. lattice_speed --env-ab on the full HLG (256 sim rows, batch 32, one call), every side traced
#    (--trace-sides) with the tail's host work by part (--host-prof): tail shares 2 (the default's), 4, 8, 16,
#    and CUWFST_PRUNE_SORT=block (s192's question: the last job's finish with the per-time kernels), repeated.
# Prediction (written before the run): the last job's host work 10 -> ~6-7 ms with 4 shares, ~5-6 with 8
# (the Python parts hold the GIL), 16 no better than 8; ~0.4-0.6 ms a lattice batch; block's last finish
# 0.7-1.3x the lanes' and its lattice batch longer.
# $OUT: s203.log, tests_tail.log, ab_full.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s203.log
CUWFST_LATTICE_TAIL_SHARES=4 CUWFST_LATTICE_HOST_WORKERS=2 gpu_tests tests_tail.log 150 "sub-batch tests, tail shares 4" \
  tests/test_gpu_lattice.py tests/test_gpu_eps_prune.py -k "sub_batch or pipelined or rescued or one_call or many"
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
T=CUWFST_LATTICE_TAIL_SHARES
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 590) --trace-sides --host-prof --env-ab t2:$T=2 t4:$T=4 \
  t8:$T=8 t16:$T=16 block:CUWFST_PRUNE_SORT=block t2b:$T=2 t4b:$T=4 t8b:$T=8
grep -E "\(side |\(rows in place\): (the call|the host work|the tail)|tail's host work" $OUT/ab_full.txt | cut -c1-900 | tee -a $L
echo "[$(since) s] end" | tee -a $L
