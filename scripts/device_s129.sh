#!/usr/bin/env bash
# GPU machine: issue 10, for the session after 2026-12-04 20:07 (docs/speed-notes.md "Next" 1).
# NOT yet run on a GPU: the records pass's walk reads an arc's destination and label in one load
# (types.cuh ArcDestAndLabel; before: the label, then the packed word again for a candidate's probe).
# Side "other" is lattice_after.cuh before that change (.device/ab_old, staged from f0923f8).
#   1. wheels; the full tier (HLG and TLG: riva reads TLG.fst) in the background; the module built
#   2. while it builds: test_gpu_lattice.py's records-after tests, k2 goldens and the filter's cases;
#      both modules built
#   3. lattice_speed --utts 256, new / old / new (one process each; the default's lattices against the
#      in-step stage's in the first: --env-ab step)
#   4. the peers (feed all, 256 utterances): cuwfst-gpu, cuwfst-gpu-lattice, riva on the TLG, where
#      riva-asrlib-decoder imports (its wheel was not in ../shared/device/wheels in the session of
#      2026-12-04 20:07: stage it into .device/wheels first)
# Restage the other side if .device/ab_old is gone: mkdir -p .device/ab_old/cuwfst/csrc/include/cuwfst &&
#   git show f0923f8:cuwfst/csrc/include/cuwfst/lattice_after.cuh > .device/ab_old/cuwfst/csrc/include/cuwfst/lattice_after.cuh
# Until END (default 590) s. Carry .device. $OUT: s129.log, tests_after.log, lat_*.jsonl, peers.*
. scripts/device_common.sh
END=${END:-590}
device_setup s129.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests_after.log 90 "records-after tests, goldens, filter cases" tests/test_gpu_lattice.py \
  -k "after or golden or keeps_every or guard"
ab_init .device/ab_old; ab_use other; ab_use own
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat_new.jsonl 380 --utts 256 --env-ab step:CUWFST_LATTICE_RECORDS=step
ab_use other; lat_speed lat_old.jsonl 410 --utts 256
ab_use own; lat_speed lat_new2.jsonl 440 --utts 256
echo "[$(since) s] lattice_speed x3" | tee -a $L
if python3 -c "import riva.asrlib.decoder" 2>/dev/null; then peers $((END - 5)) cuwfst-gpu cuwfst-gpu-lattice riva
else echo "no riva-asrlib-decoder: peers not run" | tee -a $L; fi
echo "[$(since) s] peers" | tee -a $L
