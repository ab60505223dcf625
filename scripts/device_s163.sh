#!/usr/bin/env bash
# GPU machine: issue 10, written in the session of 2026-12-05 20:37 (no device: loans paused). NOT yet run.
# The lattice trim on epsilon graphs (common.cuh LatEpsTrimOn; built there, off by default until this
# runs) on the small tier, one call (~6-8 min on the H200):
#   1. exactness: tests/test_gpu_eps_prune.py whole (its 60 trim seeds against the CPU, the trim's guard
#      at log-probs x3,000, the untrimmed default's tests); test_gpu_epsilon.py (1-best on epsilon
#      graphs: LatTrimLow's new branch is lattice-only, so unchanged); test_gpu_lattice.py -k eps;
#   2. the small TLG (256 sim rows, batch 32): lattice_speed --env-ab with the trim on beside the default
#      (off), --profile (each side's kernel split), lattices and 1-best identical required, --check 2;
#   3. the records pass's packed rounds (CUWFST_LATTICE_AFTER_PACK=on, and =labels with the label bound;
#      lattice_after.cuh AfterPackedTokens; built the same session, off by default): test_gpu_lattice.py
#      -k "packed_rounds" (41 tests, both modes), and the small HLG's A/B beside it (its speed is
#      device_s164.sh's, on the full tier).
# Prediction (written before any run): exact everywhere; the trim's guard fires in its test (x3,000) and
# never on the sim rows (their |scores| stay far below 7,168). The default side as s158: ~73 ms a lattice
# batch. With the trim: the search's untrimmed slots (every arc of every token) fall to those whose
# bound (score + the row's best non-blank log-prob + weight) reaches (L - beam) - c_cap, and
# LatPersistKernel walks the same trimmed space and probes only arcs at or above cutoff - c. The CPU
# twin's counts (speed-notes, 2026-12-05 20:37): such bounds keep 52.5 % of the arcs on the small
# TLG's sim rows (ends alone: 22.8 %), so **55-68 ms a lattice batch**, slots a lattice pass ~0.5x the
# default's. (First written as 45-55 ms / 2-4x fewer slots from the ends' counts, before the bounds'
# counts; revised before any run.) Then (device_s164.sh) the full tier's TLG against riva with the trim on.
# If it is exact and faster: make "on" the default (GpuBackend.lattice_eps_trim_on) and say so in
# docs/design.md ("Built, off by default..." paragraph) and docs/usage.md.
# Stage: .device/wheels. Carry .device. $OUT: s163.log, tests_eps.log, tests_eps1.log, tests_epslat.log,
# tests_pack.log, tlg_ab.txt, hlg_pack.txt
. scripts/device_common.sh
END=${END:-580}
NO_FULL=1 device_setup s163.log
small_tier &
# (the four test groups side by side, beside the small tier's build)
gpu_tests tests_eps.log 230 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
gpu_tests tests_eps1.log 200 "test_gpu_epsilon.py" tests/test_gpu_epsilon.py &
gpu_tests tests_epslat.log 200 "test_gpu_lattice.py -k eps" tests/test_gpu_lattice.py -k eps &
gpu_tests tests_pack.log 230 "test_gpu_lattice.py -k packed_rounds" tests/test_gpu_lattice.py -k packed_rounds &
wait
grep -E "lattice trim on epsilon|guard" $OUT/tests_eps.log | grep -v "^E " | head -4 | tee -a $L
echo "[$(since) s] tests" | tee -a $L
S=/tmp/corpus-small
timeout -s INT $(left $END) python3 -m benchmarks.lattice_speed --graph $S/TLG.img --log-probs $S/sim/shard-00000.npz \
  --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call --profile \
  --env-ab "trim:CUWFST_LATTICE_EPS_TRIM=on" --json $OUT/tlg_ab.jsonl > $OUT/tlg_ab.txt 2>&1
echo "[TLG A/B exit $?]" | tee -a $L
grep -vE "^\{" $OUT/tlg_ab.txt | grep -iE "vs 1-best|env A/B|exactness|slots|Error" | cut -c1-400 | head -12 | tee -a $L
timeout -s INT $(left $END) python3 -m benchmarks.lattice_speed --graph $S/HLG.img --log-probs $S/sim/shard-00000.npz \
  --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call \
  --env-ab "pack:CUWFST_LATTICE_AFTER_PACK=on" "labels:CUWFST_LATTICE_AFTER_PACK=labels" \
  --json $OUT/hlg_pack.jsonl > $OUT/hlg_pack.txt 2>&1
echo "[small HLG pack A/B exit $?]" | tee -a $L
grep -vE "^\{" $OUT/hlg_pack.txt | grep -iE "vs 1-best|env A/B|Error" | cut -c1-400 | head -6 | tee -a $L
echo "[$(since) s] end" | tee -a $L
