#!/usr/bin/env bash
# GPU machine: issue 10, the records pass's variants after s118's profile, in one call
# (docs/speed-notes.md, "Session of 2026-12-04 17:08", "Next"):
#   1. wheels; the full tier (HLG only) in the background; the module built; while the tier builds,
#      test_gpu_lattice's priority test and, under CUWFST_STREAM_PRIORITY=search (not yet run on a
#      GPU), its k2 goldens, records and GPU-pruning tests
#   2. the full tier's 256 utterances, batches of 32: lattice_post pipe / lean / queue, 10 timed passes
#      a batch, the first batch's counts and records (read back) checked against numpy
#   3. lattice_speed --utts 256 --env-ab: the default decoder against CUWFST_STREAM_PRIORITY=search (the
#      search's stream greatest, the pruning's, beside the next sub-batch's search, least) and =high
#   4. Nsight Compute over the first batch of 32 (the frontiers in process, --procs 1): each variant's
#      four class kernels after its warm-up pass (24 launches), sections SpeedOfLight,
#      InstructionStats (executed instructions: the ~166-219 a 32-arc round s118 implied), WarpStateStats
# Until END (default 590) s. Carry .device. $OUT: post.log, tests*.log, post.{txt,jsonl}, lat.jsonl,
# post_ncu.txt
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup post.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests.log 60 "priority test" tests/test_gpu_lattice.py -k "stream_priority"
CUWFST_STREAM_PRIORITY=search gpu_tests tests_search.log 150 "lattice tests at search priority" \
  tests/test_gpu_lattice.py -k "goldens or records_are_the_cpu or pruning"
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left $((END - 260))) python3 -m benchmarks.lattice_post $C/HLG.img $C/sim/shard-00000.npz \
  --utts 256 --batch 32 --reps 10 --check-batches 1 --procs 16 --variants pipe lean queue --json $OUT/post.jsonl \
  > $OUT/post.txt 2>&1
echo "lattice_post exit $?" | tee -a $L
grep -vE "^\{" $OUT/post.txt | tail -5 | cut -c1-300 | tee -a $L
grep -oE '"check": "[A-Z a-z]*"|"records": \{[^}]*\}' $OUT/post.txt | head -4 | tee -a $L
echo "[$(since) s] timed" | tee -a $L
lat_speed lat.jsonl $((END - 130)) --utts 256 --env-ab search:CUWFST_STREAM_PRIORITY=search \
  high:CUWFST_STREAM_PRIORITY=high
echo "[$(since) s] lattice_speed" | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu" | tee -a $L; exit 0; }
timeout -s KILL $(left $((END - 5))) "$NCU" --target-processes application-only --kernel-name "regex:PostKernel" \
  --launch-count 24 --section SpeedOfLight --section InstructionStats --section WarpStateStats \
  python3 -m benchmarks.lattice_post $C/HLG.img $C/sim/shard-00000.npz --utts 32 --batch 32 --reps 1 \
  --check-batches 1 --procs 1 --variants pipe lean queue > $OUT/post_ncu.txt 2>&1
echo "[$(since) s] ncu exit $?" | tee -a $L
grep -E "^  void|Duration|Executed Instructions  |Issued Instructions  |Compute \(SM\) Throughput|Warp Cycles Per Issued" \
  $OUT/post_ncu.txt | sed -E 's/\(const RowStep.*//' | cut -c1-110 | head -120 | tee -a $L
