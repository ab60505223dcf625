#!/usr/bin/env bash
# GPU machine, one call (~8 minutes) on main after this session's merges (prune-bucket,
# lattice-overlap): the checks the merged GPU code still lacks, and the 256-utterance peers.
#   background: the full tier (~200 s on a fresh machine)
#   1. compute-sanitizer memcheck over scripts/sanitize_case.py 3 --lattice (the pruning's
#      per-warp bucketing under the sanitizer), MEMCHECK_CAP s; then racecheck, RACE_CAP s
#   2. GPU tests: the lattice file, then the walk-entry file, until TESTS_END s
#   3. peers, full TLG, batch 32, all 256 simulated utterances: cuwfst-gpu-tlg and riva,
#      --feed batch then --feed all, until PEERS_END s
# Carry .device and .cache. $OUT: final.log, memcheck.log, racecheck.log, tests.log, peers256_*.{jsonl,md}
. scripts/device_common.sh
device_setup final.log
lattice_memcheck ${MEMCHECK_CAP:-120}
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT ${RACE_CAP:-90} "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lattice 2>&1 \
  | tail -4 | tee $OUT/racecheck.log | tee -a $L
echo "racecheck exit ${PIPESTATUS[0]}; [$(since) s]" | tee -a $L
timeout -s INT $(left ${TESTS_END:-440}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py \
  tests/test_gpu_walk_entry.py -s -rf --maxfail=20 > $OUT/tests.log 2>&1
grep -sE "passed|failed|goldens|GPU lattices vs CPU|walk entry" $OUT/tests.log | tail -6 | tee -a $L
grep -sE "^FAILED" $OUT/tests.log | head -10 | cut -c1-240 | tee -a $L
echo "[$(since) s] GPU tests" | tee -a $L
wait_full ${FULL_WAIT:-450}
for feed in all batch; do
  timeout -s INT $(left ${PEERS_END:-560}) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 \
    --reps 3 --feed $feed --decoders cuwfst-gpu-tlg riva --json $OUT/peers256_$feed.jsonl --md $OUT/peers256_$feed.md 2>&1 \
    | grep -E "^\[peers\]|Error" | tail -6 | tee -a $L
  echo "[$(since) s] peers --feed $feed" | tee -a $L
done
