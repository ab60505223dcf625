#!/usr/bin/env bash
# GPU machine, one call on a fresh machine (~9 minutes): the warp walker's lane entry
# (expand.cuh WarpLaneOf, the hint-only first token) against the binary searches it replaced
# ("warp_search"), exactness and speed in the same process.
#   background: the full tier (~200 s)
#   1. GPU tests beside the build: TESTS (default: the walk-entry, gpu, trim, epsilon and variants files), TEST_CAP s
#   SANITIZE=1: memcheck and racecheck over scripts/sanitize_trim.py (SAN_CAP s each; walkers SAN_WALKERS)
#   2. gpu_speed, full HLG, uniform 32 x 250: VARIANTS (default "new new_noload", timed in turn) under walkers WALKERS (default "warp warp_search warp")
#      and walker grids WALK_BLOCKS (default 0: the auto grid),
#      profiled, REPS (default 7) passes, 2 rows vs the CPU; full TLG, 64 utterances at batch 32 (unless TLG=0)
#   HLG=0 / TLG=0 skip either speed run; PEERS="NAME ...": benchmarks.peers.run at batch 32 (until PEERS_END s)
#   LAT_SPEED=1: benchmarks.lattice_speed (full HLG, 64 x batch 32, profiled; more flags in LAT_SPEED_ARGS) until LAT_SPEED_END s
#   3. LAT_TESTS (default: the lattice file) until LAT_END s
# Carry .device and .cache. $OUT: walk.log, tests.log, lat_tests.log, speed.jsonl, san_{memcheck,racecheck}.txt
. scripts/device_common.sh
device_setup walk.log
TESTS=${TESTS:-tests/test_gpu_walk_entry.py tests/test_gpu.py tests/test_gpu_trim.py tests/test_gpu_epsilon.py tests/test_gpu_variants.py}
timeout -s INT ${TEST_CAP:-230} python3 -m pytest -q -p no:cacheprovider -m gpu $TESTS -s -rf --maxfail=20 > $OUT/tests.log 2>&1
grep -sE "passed|failed|walk entry|GPU vs CPU|rows compared" $OUT/tests.log | tail -6 | tee -a $L
grep -sE "^FAILED" $OUT/tests.log | head -20 | cut -c1-240 | tee -a $L
echo "[$(since) s] GPU tests" | tee -a $L
# SANITIZE=1: compute-sanitizer memcheck and racecheck over scripts/sanitize_trim.py (4 lanes,
# scan_split 1 and auto: the persistent scan, the warp walker's entry), SAN_CAP s each
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in $([ -n "${SANITIZE:-}" ] && echo memcheck racecheck); do
  timeout ${SAN_CAP:-75} "$CS" --tool $tool --error-exitcode 9 --log-file $OUT/san_$tool.txt python3 scripts/sanitize_trim.py \
    > /tmp/san_$tool-app.txt 2>&1
  echo "sanitize_trim $tool rc=$? $(grep -hE 'SUMMARY|ERROR' $OUT/san_$tool.txt | tr '\n' ' ') app: $(tail -c 160 /tmp/san_$tool-app.txt | tr '\n' ' ')" \
    | cut -c1-400 | tee -a $L
done
echo "[$(since) s] sanitizers" | tee -a $L
wait_full ${FULL_WAIT:-300}
S=$C/sim/shard-00000.npz
[ "${HLG:-1}" = 0 ] || timeout -s INT $(left ${HLG_END:-380}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $S --uniform 250 \
  --utts 32 --batch 32 --reps ${REPS:-7} --check 2 --profile --variants ${VARIANTS:-new new_noload} --walkers ${WALKERS:-warp warp_search warp} \
  --walk-blocks ${WALK_BLOCKS:-0} --json $OUT/speed.jsonl 2>&1 | grep -v "^{" | tail -16 | tee -a $L
[ "${TLG:-1}" = 0 ] || timeout -s INT $(left ${TLG_END:-450}) python3 -m benchmarks.gpu_speed --graph $C/TLG.img --log-probs $S \
  --utts 64 --batch 32 --reps 3 --check 2 --profile --variants ${VARIANTS:-new new_noload} --walkers ${TLG_WALKERS:-warp warp_search} \
  --json $OUT/speed.jsonl 2>&1 | grep -v "^{" | tail -12 | tee -a $L
echo "[$(since) s] speed" | tee -a $L
# PEERS="NAME ...": benchmarks.peers.run at batch 32 over 64 simulated utterances (riva needs its wheel in .device/wheels)
if [ -n "${PEERS:-}" ]; then
  timeout -s INT $(left ${PEERS_END:-450}) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 64 --reps 3 \
    --decoders $PEERS --json $OUT/peers.jsonl --md $OUT/peers.md 2>&1 | grep -E "^\[peers\]" | tail -8 | tee -a $L
  echo "[$(since) s] peers" | tee -a $L
fi
# LAT_SPEED=1: benchmarks.lattice_speed, full HLG, 64 utterances at batch 32, profiled (the host's word times and confidences)
[ -n "${LAT_SPEED:-}" ] && timeout -s INT $(left ${LAT_SPEED_END:-530}) python3 -m benchmarks.lattice_speed --graph $C/HLG.img \
  --log-probs $S --utts 64 --batch 32 --reps 3 --cpu-utts 0 --check 4 --profile --no-replay ${LAT_SPEED_ARGS:-} --json $OUT/lat_speed.jsonl 2>&1 \
  | grep -v "^{" | tail -24 | tee -a $L
echo "[$(since) s] lattice speed" | tee -a $L
timeout -s INT $(left ${LAT_END:-545}) python3 -m pytest -q -p no:cacheprovider -m gpu ${LAT_TESTS:-tests/test_gpu_lattice.py} \
  -s -rf --maxfail=20 > $OUT/lat_tests.log 2>&1
grep -sE "passed|failed|goldens|GPU vs CPU|identical" $OUT/lat_tests.log | tail -6 | tee -a $L
grep -sE "^FAILED" $OUT/lat_tests.log | head -10 | cut -c1-240 | tee -a $L
echo "[$(since) s] done" | tee -a $L
