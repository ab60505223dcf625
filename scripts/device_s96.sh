#!/usr/bin/env bash
# GPU machine (one call; ran at aaea797 on branch next-search-uniform, 335 s on a fresh machine): the search's
# one-token round (scan.cuh TrimSearchWeights: the first token of a pair alone when no thread of
# the warp holds its second, warp-uniform; TrimDecide) against main's scan.cuh, and the first half
# of the whole GPU suite on the branch. On main the checkout's scan.cuh is main's own (the variant was
# rejected): run it from `git checkout aaea797`, where the branch's scan is the checkout's.
# Stage first (.device/ab_main: main's scan.cuh):
#   mkdir -p .device/ab_main/cuwfst/csrc/include/cuwfst &&
#   git show main:cuwfst/csrc/include/cuwfst/scan.cuh > .device/ab_main/cuwfst/csrc/include/cuwfst/scan.cuh
# Prediction (docs/speed-notes.md "Session of 2026-12-04 05:25"): the scan -0.3 to -0.5 ms a batch
# in both modes, rows identical.
# In order: the full tier (HLG and TLG, for the calls after this one) in the background; both
# modules built; the GPU files below, one log each, until TEST_END s (default 430); the full tier;
# lattice_speed --utts 256 --profile main / branch / main, one process each.
# Carry .device and .cache. $OUT: s96.log, lat_*.jsonl, tests.tgz
. scripts/device_common.sh
device_setup s96.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
ab_init .device/ab_main; ab_use other; ab_use own
echo "[$(since) s] both modules" | tee -a $L
for f in test_gpu_trim test_gpu test_gpu_scan_trace test_gpu_epsilon test_gpu_chain test_gpu_walk_entry test_gpu_faults \
  test_cli test_blank_skip test_streaming_bench; do
  [ $(since) -lt $(( ${TEST_END:-430} - 10 )) ] || { echo "$f: not run (time)" | tee -a $L; continue; }
  gpu_tests tests_$f.log $(left ${TEST_END:-430}) "$f [$(since) s]" tests/$f.py
done
wait_full 480; echo "[$(since) s] full tier" | tee -a $L
ab_use other; lat_speed lat_main.jsonl $(( $(since) + 45 )) --utts 256 --profile
ab_use own; lat_speed lat_new.jsonl $(( $(since) + 45 )) --utts 256 --profile
ab_use other; lat_speed lat_main2.jsonl $(( $(since) + 45 )) --utts 256 --profile
ab_use own
pack_logs 'tests*.log'
echo "[$(since) s] done" | tee -a $L
