#!/usr/bin/env bash
# GPU machine, one call on a fresh machine (~8 minutes): the GPU tests a change touched, then
# the full tier's lattice, streaming and dataset-path figures.
#   background: the full tier (HLG, TLG) and its simulated set are built (~200 s)
#   1. GPU tests TESTS (default: the lattice, lanes and memory files; TEST_CAP s)
#   2. benchmarks.lattice_speed on the full HLG (64 utterances, batch 32), then --long LAT_LONG
#      (rows of T frames, bounded against whole)
#   3. benchmarks.streaming at N = STREAMS (default 2048), one row per STREAM_CONFIGS entry
#      (--configs: default, arena_ahead=off, memory=eager, kernels=old), 8 streams checked each
#   4. benchmarks.continuous, 32 lanes, stored order (stored, padded, continuous, decode_all)
#   5. with PEERS (e.g. "cuwfst-gpu-lattice riva cuwfst-gpu"): benchmarks.peers.run at batch 32
# Carry .device (wheels: tvm_ffi, kaldifst, ...; data: the ARPA) and .cache. $OUT: s5.log,
# tests.log, lattice_speed.jsonl, lattice_long.jsonl, streams.jsonl, streams.md, continuous.jsonl.
. scripts/device_common.sh
device_setup s5.log
TESTS=${TESTS:-tests/test_gpu_lattice.py tests/test_gpu_lanes.py tests/test_gpu_memory.py}
timeout -s INT ${TEST_CAP:-240} python3 -m pytest -q -p no:cacheprovider -m gpu $TESTS -s -rf --maxfail=20 > $OUT/tests.log 2>&1
grep -E "passed|failed|GPU vs CPU|lanes:|rows compared|GPU lattices|goldens" $OUT/tests.log | tail -8 | tee -a $L
grep -E "^FAILED" $OUT/tests.log | head -20 | cut -c1-240 | tee -a $L
echo "[$(since) s] GPU tests" | tee -a $L
wait_full ${FULL_WAIT:-300}
G=$C/HLG.img; S=$C/sim/shard-00000.npz
timeout -s INT $(left ${LAT_END:-330}) python3 -m benchmarks.lattice_speed --graph $G --log-probs $S --utts 64 --batch 32 \
  --reps 2 --cpu-utts 0 --check 8 --profile --no-replay --json $OUT/lattice_speed.jsonl 2>&1 | grep -v "^{" | tail -8 | tee -a $L
timeout -s INT $(left ${LONG_END:-400}) python3 -m benchmarks.lattice_speed --graph $G --log-probs $S --batch 16 \
  --long ${LAT_LONG:-1000 2000 4000} --json $OUT/lattice_long.jsonl 2>&1 | grep -v "^{" | tail -8 | tee -a $L
echo "[$(since) s] lattices" | tee -a $L
timeout -s INT $(left ${STREAM_END:-480}) python3 -m benchmarks.streaming --graph $G --log-probs $S --streams ${STREAMS:-2048} \
  --ticks 30 --warmup-ticks 3 --check 8 --total-seconds ${STREAM_SECONDS:-70} --configs ${STREAM_CONFIGS:-default arena_ahead=off memory=eager} \
  --json $OUT/streams.jsonl --md $OUT/streams.md 2>&1 | grep -E "^\| |Error" | tee -a $L
echo "[$(since) s] streams" | tee -a $L
timeout -s INT $(left ${CONT_END:-560}) python3 -m benchmarks.continuous --graph $G --log-probs $S --lanes 32 --reps 3 \
  --baseline stored --modes padded continuous decode_all --check 4 --json $OUT/continuous.jsonl --md $OUT/continuous.md 2>&1 \
  | grep -v "^{" | tail -10 | tee -a $L
if [ -n "${PEERS:-}" ]; then  # 5. peers at batch 32 on the simulated set (riva needs its wheel in .device/wheels)
  timeout -s INT $(left ${PEERS_END:-590}) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 64 --reps 3 \
    --decoders $PEERS --json $OUT/peers.jsonl --md $OUT/peers.md 2>&1 | grep -E "^\[peers\]" | tail -8 | tee -a $L
fi
echo "[$(since) s] done" | tee -a $L
