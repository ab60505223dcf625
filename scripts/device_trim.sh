#!/usr/bin/env bash
# GPU machine, one call on a fresh machine (~9 minutes): the trimmed slots (docs/design.md
# "Trimmed slots") against the CPU and the untrimmed kernels, and their speed, same run.
#   background: the full tier (HLG, TLG, sorted images) and its simulated set (~200 s)
#   1. GPU tests TESTS (default: trim, variants, gpu, epsilon; "none": no tests; TEST_CAP s), -k TESTS_K if set;
#      EPS_KERNELS: then EPS_TESTS (default tests/test_gpu_epsilon.py; -k EPS_K if set) with CUWFST_KERNELS=EPS_KERNELS (EPS_CAP s)
#   2. (unless HLG=0) gpu_speed, full HLG, uniform 32 x 250 (HLG_BATCH: one run per value, that many rows in one batch): VARIANTS (default "new untrimmed"; "new:1" is new with
#      ScanKernel, one CTA a lane), profiled, 2 rows vs the CPU
#      WALK_BLOCKS: grids of the walker kernels timed in turn (gpu_speed --walk-blocks), HLG and TLG
#   3. (unless TLG=0) gpu_speed, full TLG, 64 simulated utterances, batch 32: TLG_VARIANTS (default
#      VARIANTS), profiled; once per EPS_ITERS value (eps_iterations) if set
#   4. STREAMS: benchmarks.streaming at N = STREAMS (STREAM_CONFIGS, e.g. "default kernels=untrimmed");
#      CONT: benchmarks.continuous (32 lanes), once per SEGMENTS value (default 32) and CONT_KERNELS
#      variant (REFILL_SEGMENT: the refill modes' segments, default 256; several: a row each;
#      CONT_ARGS: more arguments, e.g. --phases)
#   5. peers at batch 32 (PEERS; riva needs its wheel in .device/wheels)
#   LONG: the hour-long stream and its CPU check (benchmarks.long_stream), after CONT
#   6. MEMORY: benchmarks.memory at batch 32 and 256 (MEM_MODES, riva beside it, no long run)
# Carry .device and .cache. $OUT: trim.log, tests.log, speed.jsonl, peers.jsonl, peers.md
. scripts/device_common.sh
device_setup trim.log
TESTS=${TESTS:-tests/test_gpu_chain.py tests/test_gpu_trim.py tests/test_gpu_variants.py tests/test_gpu.py tests/test_gpu_epsilon.py}
# TESTS=none: no tests (a 1-second TEST_CAP does not stop pytest reliably: SIGINT during its imports)
[ "$TESTS" = none ] || timeout -s INT ${TEST_CAP:-240} python3 -m pytest -q -p no:cacheprovider -m gpu $TESTS \
  ${TESTS_K:+-k "$TESTS_K"} -s -rf --maxfail=20 > $OUT/tests.log 2>&1
if [ -n "${EPS_KERNELS:-}" ]; then
  CUWFST_KERNELS=$EPS_KERNELS timeout -s INT ${EPS_CAP:-120} python3 -m pytest -q -p no:cacheprovider -m gpu \
    ${EPS_TESTS:-tests/test_gpu_epsilon.py} ${EPS_K:+-k "$EPS_K"} -s -rf --maxfail=20 >> $OUT/tests.log 2>&1
fi
grep -sE "passed|failed|GPU vs CPU|trimmed slots|rows compared|variants" $OUT/tests.log | tail -8 | tee -a $L
grep -sE "^FAILED" $OUT/tests.log | head -20 | cut -c1-240 | tee -a $L
echo "[$(since) s] GPU tests" | tee -a $L
wait_full ${FULL_WAIT:-300}
# WAIT_FILE: the timed runs start once this file exists (another job of the call, e.g. the
# sanitizers run beside the corpus build, writes it when done), at most until WAIT_END s
while [ -n "${WAIT_FILE:-}" ] && [ ! -f "$WAIT_FILE" ] && [ $(since) -lt ${WAIT_END:-400} ]; do sleep 2; done
S=$C/sim/shard-00000.npz
for hb in ${HLG_BATCH:-32}; do  # HLG_BATCH: one run per value (e.g. "32 128")
  [ "${HLG:-1}" = 0 ] && break
  timeout -s INT $(left ${HLG_END:-370}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $S --uniform 250 \
    --utts $hb --batch $hb --reps 5 --check 2 --profile --variants ${VARIANTS:-new untrimmed} ${WALK_BLOCKS:+--walk-blocks $WALK_BLOCKS} --json $OUT/speed.jsonl 2>&1 \
    | grep -v "^{" | tail -22 | tee -a $L
done
for it in ${EPS_ITERS:-default}; do  # TLG=0 skips; EPS_ITERS: eps_iterations values, one run each
  [ "${TLG:-1}" = 0 ] && break
  timeout -s INT $(left ${TLG_END:-440}) python3 -m benchmarks.gpu_speed --graph $C/TLG.img --log-probs $S \
    --utts 64 --batch 32 --reps 3 --check 2 --profile --variants ${TLG_VARIANTS:-${VARIANTS:-new untrimmed}} ${WALK_BLOCKS:+--walk-blocks $WALK_BLOCKS} \
    $([ "$it" = default ] || echo --eps-iterations $it) --json $OUT/speed.jsonl 2>&1 | grep -v "^{" | tail -26 | tee -a $L
done
echo "[$(since) s] speed" | tee -a $L
if [ -n "${STREAMS:-}" ]; then  # streaming capacity at N = STREAMS, 16-frame chunks (default config)
  timeout -s INT $(left ${STREAM_END:-500}) python3 -m benchmarks.streaming --graph $C/HLG.img --log-probs $S --streams $STREAMS \
    --ticks 30 --warmup-ticks 3 --check 8 --total-seconds ${STREAM_SECONDS:-50} --configs ${STREAM_CONFIGS:-default} \
    --json $OUT/streams.jsonl --md $OUT/streams.md 2>&1 | grep -E "^\| |Error" | tee -a $L
fi
# CONT: the dataset path, 32 lanes, stored order, once per SEGMENTS value (the host refill's
# segment) and CONT_KERNELS variant (CUWFST_KERNELS; "default": none set); REFILL_SEGMENT: the
# refill modes' segment
for seg in ${SEGMENTS:-32}; do
  for k in ${CONT_KERNELS:-default}; do
    [ -n "${CONT:-}" ] || break 2
    ( [ "$k" = default ] || export CUWFST_KERNELS=$k
      timeout -s INT $(left ${CONT_END:-540}) python3 -m benchmarks.continuous --graph $C/HLG.img --log-probs $S --lanes 32 \
        --reps 3 --baseline stored --modes ${CONT_MODES:-padded continuous decode_all} --segment $seg \
        --refill-segment ${REFILL_SEGMENT:-256} --check 4 ${CONT_ARGS:-} --json $OUT/continuous.jsonl --md $OUT/continuous.md 2>&1 ) \
      | grep -v "^{" | tail -9 | sed "s/^/[$k] /" | tee -a $L
  done
done
# LONG: the hour-long stream (LONG_FRAMES frames, default 90,000, in 16-frame chunks; memory
# sampled every chunk), then the CPU's decode(frames, online=True) of the same frames on this host
if [ -n "${LONG:-}" ]; then
  timeout -s INT $(left ${LONG_END:-590}) python3 -m benchmarks.long_stream --graph $C/HLG.img --log-probs $S --device cuda \
    --frames ${LONG_FRAMES:-90000} --chunk 16 --csv $OUT/long_stream.csv --json $OUT/long.jsonl --md $OUT/long.md 2>&1 \
    | grep -v "^{" | tail -16 | tee -a $L
fi
if [ -n "${PEERS:-}" ]; then
  timeout -s INT $(left ${PEERS_END:-580}) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 64 --reps 3 \
    --decoders $PEERS --json $OUT/peers.jsonl --md $OUT/peers.md 2>&1 | grep -E "^\[peers\]" | tail -8 | tee -a $L
fi
if [ -n "${MEMORY:-}" ]; then
  timeout -s INT $(left ${MEM_END:-590}) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $S --riva-dir $C \
    --batch 32 256 --reps 5 --check 8 --skip long --modes ${MEM_MODES:-pooled lazy eager} --json $OUT/memory.jsonl \
    --md $OUT/memory.md 2>&1 | grep -v "^{" | tail -24 | tee -a $L
fi
echo "[$(since) s] done" | tee -a $L
