#!/usr/bin/env bash
# GPU machine, session of 2026-12-01 18:37, call 3 (~6 minutes), branch s18:
#   1. the stream-0 test against GpuDecoder::Wait before the fix (.device/old_gpu_decoder.cu,
#      main e048135's file; its module is in the carried cache): it should FAIL there
#   2. the fixed code: tests/test_gpu.py whole (the stream-0 test, the rescue beside the rest)
#      and tests/test_gpu_lanes.py (continuous batching and streams: Wait at every entry)
#   3. benchmarks.continuous, full TLG and HLG, 256 utterances, 32 lanes, padded and refill
#      (the peers' --feed all path), --rescue-ahead on off (passes alternating), --phases
#   4. benchmarks.memory --batch 32 --utts 192 (no row outgrows main_q): pooled-slots vs lazy
# Carry .device and .cache. $OUT: s18c.log, old_stream.log, gpu.log, lanes.log, cont_*.txt, mem192.*
. scripts/device_common.sh
device_setup s18c.log
cp cuwfst/csrc/gpu_decoder.cu /tmp/new_gpu_decoder.cu
cp .device/old_gpu_decoder.cu cuwfst/csrc/gpu_decoder.cu
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k default_stream -rf \
  > $OUT/old_stream.log 2>&1
echo "BEFORE the fix (expected to fail):" | tee -a $L; grep -sE "passed|failed" $OUT/old_stream.log | tail -1 | tee -a $L
grep -sE "^FAILED" $OUT/old_stream.log | cut -c1-200 | head -3 | tee -a $L
cp /tmp/new_gpu_decoder.cu cuwfst/csrc/gpu_decoder.cu
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
echo "[$(since) s] old stream test" | tee -a $L
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s -rf --maxfail=10 > $OUT/gpu.log 2>&1
grep -sE "passed|failed|rows,|ties" $OUT/gpu.log | tail -3 | cut -c1-300 | tee -a $L; grep -sE "^FAILED" $OUT/gpu.log | head -8 | cut -c1-300 | tee -a $L
echo "[$(since) s] test_gpu" | tee -a $L
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lanes.py -s -rf --maxfail=10 > $OUT/lanes.log 2>&1
grep -sE "passed|failed" $OUT/lanes.log | tail -2 | cut -c1-300 | tee -a $L; grep -sE "^FAILED" $OUT/lanes.log | head -8 | cut -c1-300 | tee -a $L
echo "[$(since) s] test_gpu_lanes" | tee -a $L
wait_full 250
S=$C/sim/shard-00000.npz
for G in TLG HLG; do
  timeout -s INT 120 python3 -m benchmarks.continuous --graph $C/$G.img --log-probs $S --lanes 32 --reps 5 \
    --modes padded refill --rescue-ahead on off --phases --check 2 --json $OUT/cont_$G.jsonl > $OUT/cont_$G.txt 2>&1
  grep -A12 "^| lanes" $OUT/cont_$G.txt | tee -a $L; grep "exactness" $OUT/cont_$G.txt | tee -a $L
  echo "[$(since) s] continuous $G" | tee -a $L
done
timeout -s INT $(left 420) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $S --utts 192 --batch 32 --reps 3 \
  --check 2 --skip long riva --modes pooled-slots lazy --json $OUT/mem192.jsonl --md $OUT/mem192.md > $OUT/mem192.txt 2>&1
tail -12 $OUT/mem192.md | tee -a $L
echo "[$(since) s] done" | tee -a $L
