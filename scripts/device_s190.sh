#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 11:23. The call's tail (s189: 27.4 ms of a 312 ms call, 3.4 ms a
# batch) is the last job's finish (10.7 ms) and its host work (15.2 ms: Lattice objects ~6, word times and
# confidences ~6). On this VM (2 threads) the host work's native calls cost ~5 ns an arc for the lookups and
# ~8 for the word rests; the device's stamps at 8 threads read ~14 an arc. 1. The device's CPU (lscpu), and
# the host work alone on the device: benchmarks.lattice_host's 32-row cache (CPU decoder, full HLG), then
# scripts/attach_time.py --native at 1, 2, 4, 8 and 16 threads. 2. lattice_speed --one-call (full HLG, 256
# sim rows, batch 32) at --threads 8, 16, 8, 16 (separate processes, alternating).
# Predictions (written before the run): the host work scales to 4 threads and flattens past 8 (the stamps'
# 14 ns an arc); --threads 16 against 8: the tail 0-4 ms shorter a call (0-0.5 ms a batch), the rest the same.
# $OUT: s190.log, host.txt, lat_t*.jsonl
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s190.log
lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket|NUMA node\(s\)|L3" | tee -a $L
python3 -c "import os; print('affinity', len(os.sched_getaffinity(0)), 'cpu_count', os.cpu_count())" | tee -a $L
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT 120 python3 -m benchmarks.lattice_host --utts 32 --threads 8 > $OUT/host.txt 2>&1
echo "[$(since) s] lattice_host exit $?" | tee -a $L
grep -E "lattices,|batched|x32" $OUT/host.txt | cut -c1-250 | tee -a $L
for t in 1 2 4 8 16; do
  timeout -s INT 60 python3 scripts/attach_time.py --threads $t --native --reps 7 2>&1 | tail -2 | cut -c1-250 | tee -a $L
done
echo "[$(since) s] attach_time" | tee -a $L
for t in 8 16 8 16; do
  lat_speed sim lat_t$t.jsonl 585 t$t --threads $t
done
echo "[$(since) s] end" | tee -a $L
