#!/usr/bin/env bash
# GPU machine: issue 10, for the session after 2026-12-04 22:57 (docs/speed-notes.md "Session of
# 2026-12-04 22:57", Next 1). The sessions of 21:29 and 22:57 had no device time (the machine taken
# back twice, then none lent; then none lent at all), so this replaces device_s130.sh and
# device_s129.sh (never run; renamed / removed), with both sessions' changes. NOT yet run on a GPU: edab0d0 (the records pass's walk reads an arc's destination and label in one load), 7a5c061
# (EnvChoice), CUWFST_LATTICE_RESERVE=chunk (a pass warp takes its records' slots 32 at a time) and
# CUWFST_LATTICE_TABLES=packed (the global tables' state, index and score in one 16-byte slot), CUWFST_LATTICE_LOG=finalize
# (the records log written by FinalizeKernel, no LatLogKernel launches), all off by default; the chunked
# slots' growth bound (AfterHoleBound) and the bucketing reading N slots where no chunks were taken.
# Side "other" is lattice_after.cuh before edab0d0 (.device/ab_old, staged from f0923f8; it compiles
# against today's types.cuh and state_table.cuh and has neither switch: run it with the defaults only).
#   1. wheels; the full tier (HLG and TLG: riva reads TLG.fst) in the background; the module built
#   2. while it builds: test_gpu_lattice.py's records-after tests, k2 goldens, the filter's cases and
#      the trim guard (default); then the goldens, the records-after tests and the filter's cases under
#      CUWFST_LATTICE_RESERVE=chunk, CUWFST_LATTICE_TABLES=packed and CUWFST_LATTICE_LOG=finalize (each
#      switch's own test ran in the first set, alone); both modules built
#   3. lattice_speed --utts 256: new (sides: the in-step stage, chunked slots, packed tables, the log
#      in FinalizeKernel, all three;
#      and --finish-ab: the pruning's finish on a thread of its own, CUWFST_LATTICE_FINISH=thread,
#      Python, also untried), then old, one process each (no second new run: the peers get its
#      time); the traces give the pipelined call's tail and the worker's jobs
#   4. the peers (feed all, 256 utterances): cuwfst-gpu, cuwfst-gpu-lattice, riva on the TLG, where
#      riva-asrlib-decoder imports (its wheel is in ../shared/device/wheels since 2026-12-04 21:29)
# Restage the other side if .device/ab_old is gone: mkdir -p .device/ab_old/cuwfst/csrc/include/cuwfst &&
#   git show f0923f8:cuwfst/csrc/include/cuwfst/lattice_after.cuh > .device/ab_old/cuwfst/csrc/include/cuwfst/lattice_after.cuh
# Until END (default 590) s. Carry .device. $OUT: s131.log, tests_*.log, lat_new.jsonl, lat_old.jsonl, peers.*
. scripts/device_common.sh
END=${END:-590}
device_setup s131.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests_after.log 90 "records-after tests, goldens, filter cases, guard" tests/test_gpu_lattice.py \
  -k "after or golden or keeps_every or guard"
CUWFST_LATTICE_RESERVE=chunk CUWFST_LATTICE_TABLES=packed CUWFST_LATTICE_LOG=finalize gpu_tests tests_chunk.log 80 \
  "the same under CUWFST_LATTICE_RESERVE=chunk CUWFST_LATTICE_TABLES=packed CUWFST_LATTICE_LOG=finalize" \
  tests/test_gpu_lattice.py -k "after or golden or keeps_every"
ab_init .device/ab_old; ab_use other; ab_use own
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat_new.jsonl 400 --utts 256 --finish-ab --env-ab step:CUWFST_LATTICE_RECORDS=step chunk:CUWFST_LATTICE_RESERVE=chunk \
  packed:CUWFST_LATTICE_TABLES=packed log:CUWFST_LATTICE_LOG=finalize \
  all:CUWFST_LATTICE_RESERVE=chunk,CUWFST_LATTICE_TABLES=packed,CUWFST_LATTICE_LOG=finalize
ab_use other; lat_speed lat_old.jsonl 428 --utts 256
ab_use own  # (the peers run the checkout's own module)
echo "[$(since) s] lattice_speed x2" | tee -a $L
if python3 -c "import riva.asrlib.decoder" 2>/dev/null; then peers $((END - 5)) cuwfst-gpu cuwfst-gpu-lattice riva
else echo "no riva-asrlib-decoder: peers not run" | tee -a $L; fi
echo "[$(since) s] peers" | tee -a $L
