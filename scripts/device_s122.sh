#!/usr/bin/env bash
# GPU machine: issue 10, the records after the search, second and third runs (s121 found it exact but slower:
# LatLogKernel a CTA a lane, 7.7 ms a batch; the pass's classes in turn, 17.9): the log split over
# kAfterLogSplit CTAs a lane into per-lane regions, the table classes on side streams. In one call:
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. test_gpu_lattice.py -k after; under CUWFST_LATTICE_RECORDS=after the goldens, pruning, long
#      inputs and random lattices; compute-sanitizer memcheck under the switch
#   (third run, END=540: the pass's token loads pipelined and its step counts once an item a warp)
#   3. lattice_speed --utts 256 --env-ab after (same call); then, under the switch, --profile over 32
#      utterances (the kernel split: lat_persist = the pass, lat_step_end = LatLogKernel)
# Until END (default 590) s. Carry .device. $OUT: after.log, tests_*.log, memcheck.log, lat*.jsonl
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup after.log
gpu_tests tests_after.log 150 "records-after tests" tests/test_gpu_lattice.py -k "after"
CUWFST_LATTICE_RECORDS=after gpu_tests tests_env.log 150 "lattice tests under after" \
  tests/test_gpu_lattice.py -k "goldens or pruning or long_inputs or random_lattices_gpu_equals_cpu"
CUWFST_LATTICE_RECORDS=after lattice_memcheck 90
wait_full 420; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl $((END - 100)) --utts 256 --env-ab after:CUWFST_LATTICE_RECORDS=after
echo "[$(since) s] lattice_speed" | tee -a $L
CUWFST_LATTICE_RECORDS=after timeout -s INT $(left $((END - 5))) python3 -m benchmarks.lattice_speed \
  --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --utts 32 --batch 32 --reps 3 --one-call --profile \
  2>&1 | grep -E "kernel ms|lattice .* vs 1-best|exactness" | cut -c1-400 | tee -a $L
echo "[$(since) s] profile" | tee -a $L
