#!/usr/bin/env bash
# GPU machine, one call (~7-8 minutes on a fresh machine): the scan's phase trace (issues 7, 11).
#   background: the full tier (~220 s); meanwhile the GPU files that run the scan's code paths
#     (test_gpu_scan_trace first), capped at TEST_CAP s
#   1. benchmarks.scan_trace on the full HLG (uniform 32 x 250) and the full TLG (64 utterances,
#      batch 32): the phases' medians, traced vs plain rows and time
#   2. same-run A/B of the module before the trace (.device/ab_old: c91cb82's five files) against
#      this one, plain decoders: gpu_speed on the HLG uniform 32 x 250, old / new / old / new
# Carry .device and .cache. $OUT: s21b.log, tests.log, trace.md, trace.jsonl, ab.jsonl.
. scripts/device_common.sh
device_setup s21b.log
R=/tmp/raw; mkdir -p $R; I=/tmp/old_in
timeout -s INT ${TEST_CAP:-260} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_scan_trace.py tests/test_gpu.py \
  tests/test_gpu_epsilon.py tests/test_gpu_chain.py tests/test_gpu_trim.py tests/test_gpu_lanes.py tests/test_gpu_lattice.py -s > $OUT/tests.log 2>&1
echo "tests exit $?" | tee -a $L
{ grep -E "mismatch|identical" $OUT/tests.log | head -8; grep -E "passed|failed" $OUT/tests.log | tail -2; } | cut -c1-220 | tee -a $L
wait_full ${FULL_END:-300}; echo "[$(since) s] full tier" | tee -a $L
python3 -m benchmarks.old_inputs --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --out $I > $R/old_inputs.txt 2>&1
timeout -s INT 90 python3 -m benchmarks.scan_trace --graph $C/HLG.img --log-probs $I/uniform.npz --utts 32 --batch 32 \
  --reps 3 --md $OUT/trace.md --json $OUT/trace.jsonl 2>&1 | tail -16 | tee -a $L
timeout -s INT 120 python3 -m benchmarks.scan_trace --graph $C/TLG.img --log-probs $C/sim/shard-00000.npz --utts 64 --batch 32 \
  --reps 3 --md $OUT/trace.md --json $OUT/trace.jsonl 2>&1 | tail -16 | tee -a $L
echo "[$(since) s] traces" | tee -a $L
ab_init .device/ab_old
for side in other own other own; do
  ab_use $side
  timeout -s INT 60 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $I/uniform.npz --utts 32 --batch 32 \
    --reps 7 --check 1 --variants new > $R/ab_$side.txt 2>&1
  grep -E "B=32" $R/ab_$side.txt | sed "s/^/[$side] /" | cut -c1-170 | tee -a $L
  grep -E "^\{" $R/ab_$side.txt | sed "s/^/{\"side\": \"$side\", \"row\": /; s/$/}/" >> $OUT/ab.jsonl
  [ $(since) -gt ${END:-560} ] && break
done
echo "[$(since) s] done" | tee -a $L
