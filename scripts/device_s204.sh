#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 17:50. s203 (H100, d59e40f): more shares for the last
# sub-batch's host work lost (2 shares 36.27 / 36.10 ms a lattice batch, 4: 36.16 / 36.58, 8: 36.70 / 36.43,
# 16: 37.46; each share's native calls take 8 threads), and CUWFST_PRUNE_SORT=block's last finish was no
# shorter (10.9 ms against 8.1-10.8). New: CUWFST_LATTICE_TAIL_HYPS=on (the default), the last sub-batch's
# hypotheses and word times made on the calling thread while its pruning runs on the finish thread.
# 1. test_gpu_lattice.py and test_gpu_eps_prune.py's sub-batch, word, golden and host tests (89) on the GPU beside
#    the full tier's build (test_gpu_host.py's are CPU fakes: CI runs them).
# 2. lattice_speed --env-ab on the full HLG, tail hyps on / off alternating, every side traced.
# Prediction (written before the run): every test passes; the tail ~2 ms a call shorter (the last job's
# hypotheses ~1.0-1.2 ms and word times ~1 ms leave it), ~0.2-0.3 ms a lattice batch; identical rows 256/256
# (now words, word times and confidences too).
# $OUT: s204.log, tests_lat.log, ab_full.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s204.log
gpu_tests tests_lat.log 200 "test_gpu_lattice.py + test_gpu_eps_prune.py, sub-batch / word / golden subset" \
  tests/test_gpu_lattice.py tests/test_gpu_eps_prune.py \
  -k "sub_batch or pipelined or rescued or one_call or many or word or confidence or golden or k2 or host"
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
H=CUWFST_LATTICE_TAIL_HYPS
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 590) --trace-sides --env-ab on:$H=on off:$H=off on2:$H=on \
  off2:$H=off on3:$H=on off3:$H=off
grep -E "\(side |\(rows in place\)" $OUT/ab_full.txt | grep -E "the call |host work's parts" | cut -c1-420 | tee -a $L
echo "[$(since) s] end" | tee -a $L
