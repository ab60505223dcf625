#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 20:10. The per-lane pruning kernel's tokens mode
# (CUWFST_PRUNE_LANE_TOKENS=smem, /work/notes/lane_tokens.patch applied in the working tree, off by default)
# gets its first run: its tests, its A/B on the full HLG, the lane clocks with and without it; then the bar's
# verdict by paired passes (lattice_speed --paired 9) and Nsight Compute over the records pass's packed walk.
# Prediction (written before the run): the tests pass (rank sorts incl. lanes+tok, k2 goldens under smem);
# the tokens mode's forward phase 20-40 % shorter in the lane clocks, the last job's prune device passes
# 6.9 -> 5.5-6.5 ms, the lattice batch 0-0.3 ms shorter (inside the sides' spread); paired ratio median
# x1.47-1.53; records kernel: long scoreboard the top stall, issue active under 60 %.
# $OUT: s207.log, tests_*.log, ab_full.*, split_*.txt, records.ncu-rep, ncu.txt, ncu_src.csv
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s207.log
gpu_tests tests_tok.log 110 "rank sorts (lanes+tok among them)" tests/test_gpu_lattice.py -k "prune_rank_sort"
CUWFST_PRUNE_LANE_TOKENS=smem gpu_tests tests_tok_k2.log 70 "k2 goldens + records under smem" tests/test_gpu_lattice.py \
  -k "k2_lattice_goldens_on_gpu or records_are_the_cpu"
wait_full 260; echo "[$(since) s] full tier" | tee -a $L
K=CUWFST_PRUNE_LANE_TOKENS
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 330) --trace-sides --paired 9 --env-ab tok:$K=smem def:$K=off \
  tok2:$K=smem def2:$K=off
grep -E "paired passes|lattice rows identical|last batch: prune" $OUT/ab_full.txt | cut -c1-400 | tee -a $L
grep -E "\(side " $OUT/ab_full.txt | grep -E "the call " | cut -c1-260 | tee -a $L
timeout -s INT 50 python3 scripts/prune_split.py $C/HLG.img $C/sim/shard-00000.npz 64 on,lanes,warp > $OUT/split_def.txt 2>&1
echo "[split default exit $?]" | tee -a $L; grep -iE "split|ranked" $OUT/split_def.txt | head -6 | cut -c1-400 | tee -a $L
CUWFST_PRUNE_LANE_TOKENS=smem timeout -s INT 50 python3 scripts/prune_split.py $C/HLG.img $C/sim/shard-00000.npz 64 on,lanes,warp \
  > $OUT/split_tok.txt 2>&1
echo "[split tok exit $?]" | tee -a $L; grep -iE "split|ranked" $OUT/split_tok.txt | head -6 | cut -c1-400 | tee -a $L
echo "[$(since) s] before ncu" | tee -a $L
ncu_records 540
echo "[$(since) s] end" | tee -a $L
