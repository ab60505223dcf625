#!/usr/bin/env bash
# GPU machine: issue 10, the records after the search (CUWFST_LATTICE_RECORDS=after) after the
# session of 2026-12-04 18:36 (docs/speed-notes.md "Next"): the changes made after its device time
# (LatTailKernel's writes a warp at a time and its count once an item, one fork event, the last-made
# event in EnsureLatticeAfter's check, the error message, state_table.cuh) NOT yet run on a GPU:
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. test_gpu_lattice.py -k after; then the whole of test_gpu_lattice.py under the switch (the
#      allocation-failure test first); compute-sanitizer memcheck of the lattice cases under it
#   3. lattice_speed --utts 256 --env-ab after (same call)
#   4. Nsight Compute over the first 32 utterances under the switch: the third pass's kernels (plan, tables,
#      the four classes, the tail) after the warm-up decode, then lattice_post lean's on the same batch
# Until END (default 590) s. Carry .device. $OUT: after.log, tests_*.log, memcheck.log, lat.jsonl, ncu_*.txt
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup after.log
gpu_tests tests_after.log 120 "records-after tests" tests/test_gpu_lattice.py -k "after or every_lattice_allocation"
CUWFST_LATTICE_RECORDS=after gpu_tests tests_env.log 230 "test_gpu_lattice.py under after" tests/test_gpu_lattice.py
CUWFST_LATTICE_RECORDS=after lattice_memcheck 80
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl $((END - 150)) --utts 256 --env-ab after:CUWFST_LATTICE_RECORDS=after
echo "[$(since) s] lattice_speed" | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu" | tee -a $L; exit 0; }
CUWFST_LATTICE_RECORDS=after timeout -s KILL $(left $((END - 75))) "$NCU" --target-processes application-only \
  --kernel-name "regex:LatRecordsKernel|LatTailKernel|LatPlanKernel|LatTab" --launch-skip 16 --launch-count 8 \
  --section SpeedOfLight python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 32 --batch 32 --reps 1 --one-call --check 0 > $OUT/ncu_after.txt 2>&1
timeout -s KILL $(left $((END - 5))) "$NCU" --target-processes application-only --kernel-name "regex:PostKernel|BuildKernel" \
  --launch-skip 5 --launch-count 5 --section SpeedOfLight python3 -m benchmarks.lattice_post $C/HLG.img \
  $C/sim/shard-00000.npz --utts 32 --batch 32 --reps 1 --check-batches 0 --procs 1 --variants lean > $OUT/ncu_lean.txt 2>&1
for f in ncu_after ncu_lean; do grep -E "^  [a-z].*Kernel|Duration" $OUT/$f.txt | sed -E 's/\(.*//' | cut -c1-100 | tee -a $L; done
echo "[$(since) s] ncu" | tee -a $L
