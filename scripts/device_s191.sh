#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 11:23. What bounds the pruning's bucketing (1.17 ms a begin on the
# full HLG, s188; the early loads did not move it) and the tail job's device passes (~6.7 ms alone): Nsight
# Compute over the first 12 pruning kernels ("Pr" in the name) of scripts/ncu_lattice_case.py (the full HLG,
# 32 rows of 250 frames, launch by launch, the warm-up decode's pruning).
# Prediction (written before the run): PrBucketKernel near the DRAM roofline's half (its 15.6 M records, ~0.8
# GB moved) with L2 hit under 50% and long-scoreboard stalls on top; the per-lane passes (one CTA a lane)
# under 25% of any throughput, stalled on barriers and long scoreboard.
# $OUT: s191.log, ncu.txt
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s191.log
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" | tee -a $L
timeout -s INT $(left 400) "$NCU" --target-processes all --kernel-name "regex:^Pr" --launch-count 12 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --section WarpStateStats python3 scripts/ncu_lattice_case.py $C/HLG.img $C/sim/shard-00000.npz > $OUT/ncu.txt 2>&1
echo "ncu exit $?" | tee -a $L
grep -E "^  [A-Za-z].*\(|^    Duration|DRAM Throughput|Memory Throughput|L2 Hit Rate|L1/TEX Hit Rate|Compute \(SM\) Throughput|Achieved Occupancy|Grid Size|Block Size|Registers Per" \
  $OUT/ncu.txt | cut -c1-160 | head -150 | tee -a $L
grep -iE "stall|warp cycles per issued" $OUT/ncu.txt | cut -c1-200 | head -40 | tee -a $L
echo "[$(since) s] end" | tee -a $L
