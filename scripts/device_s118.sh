#!/usr/bin/env bash
# GPU machine: issue 10, where the records pass's time goes (Nsight Compute), the warp walk (pipe)
# against four arcs a thread (flat4): the first batch of 32 of the full tier, one timed pass a
# variant after its warm-up, every class's kernel of both passes (16 launches), sections
# SpeedOfLight, WarpStateStats, Occupancy, MemoryWorkloadAnalysis; the frontiers in this process
# (--procs 1: forked workers hung under ncu at the first try), all of it until END (400) s (docs/speed-notes.md, "Session of 2026-12-04 17:08"). Carry .device. $OUT: ncu.log, post_ncu.txt
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup ncu.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}" | tee -a $L
[ -n "$NCU" ] || exit 0
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
SECTIONS="--section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis"
timeout -s KILL $(left ${END:-400}) "$NCU" --target-processes application-only --kernel-name "regex:PostKernel|FlatKernel" --launch-count 16 \
  $SECTIONS python3 -m benchmarks.lattice_post $C/HLG.img $C/sim/shard-00000.npz --utts 32 --batch 32 --reps 1 \
  --check-batches 1 --procs 1 --variants pipe flat4 > $OUT/post_ncu.txt 2>&1
echo "[$(since) s] ncu exit $?" | tee -a $L
grep -E "^  [A-Za-z].*Kernel|Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|post pass|checked" \
  $OUT/post_ncu.txt | cut -c1-150 | head -150 | tee -a $L
