#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 06:26, second call. At the commit in .device/COMMIT:
# CUWFST_LATTICE_AFTER_C14=index is now the default (s175/s176: the records pass 0.15-0.25 ms less, the
# batch within the spread). One call:
#   1. the whole GPU suite (five groups) and test_gpu_eps_prune.py, beside the small and full tiers' builds
#      (the default's change, the records pass's refactor at fefb51a and the side log's code, off);
#   2. the small and the full HLG (256 sim rows, batch 32, --profile): the default against global
#      (CUWFST_LATTICE_AFTER_C14=global, the old default) and LatLogKernel's CTAs a lane
#      (CUWFST_LATTICE_LOG_SPLIT 2, 4 against the default 8; never timed before), and the records pass's
#      item size (CUWFST_LATTICE_AFTER_CHUNK 512, 2048, 4096 against 1024; new, its test in the suite),
#      the default and 2048 each profiled (the records pass's phase sums).
# Predictions (written before any run): the suite passes, k2 goldens 0 mismatches. global: the records
# pass +0.15-0.25 ms in the profile, the batch within the spread. Log split: within 0.3 ms of 8 on both
# graphs (s176: the log's cost is its place on the chain, not its copy's bandwidth, so fewer CTAs only
# matter if the launch of 256 CTAs costs more than 64). Item size: the one grid's warps wait 14 % of
# their cycles at an item's first barrier (s175; the claim and the slowest warp of the item before); a
# warp's share of an item's imbalance grows as the root of its tokens while the items fall as their
# count, so 2048: wait ~10 %, the pass -0.2 to -0.4 ms on the full HLG; 4096: wait ~7 % but a longer
# last item, -0.2 to -0.5 ms; 512: wait ~20 %, the pass +0.3 to +0.6 ms. The 1-best unchanged.
# Stage: .device/wheels. Carry .device. $OUT: s177.log, tests.tgz, ab_small.*, ab_full.*
. scripts/device_common.sh
END=${END:-585}
FULL_GRAPHS=hlg device_setup s177.log
small_tier &
gpu_suite ${SUITE_CAP:-300}
gpu_tests tests_epsprune.log 200 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
gpu_suite_wait
echo "[$(since) s] suite, small tier" | tee -a $L
SIDES=("global:CUWFST_LATTICE_AFTER_C14=global" "lsplit2:CUWFST_LATTICE_LOG_SPLIT=2"
       "lsplit4:CUWFST_LATTICE_LOG_SPLIT=4" "chunk512:CUWFST_LATTICE_AFTER_CHUNK=512"
       "chunk2048:CUWFST_LATTICE_AFTER_CHUNK=2048" "chunk4096:CUWFST_LATTICE_AFTER_CHUNK=4096"
       "prof:CUWFST_LATTICE_AFTER_PROF=on" "c2048prof:CUWFST_LATTICE_AFTER_CHUNK=2048,CUWFST_LATTICE_AFTER_PROF=on")
env_ab small /tmp/corpus-small/HLG.img /tmp/corpus-small/sim/shard-00000.npz 150 --profile --env-ab "${SIDES[@]}"
echo "[$(since) s] small HLG" | tee -a $L
wait_full $((END - 90))
grep -q FULL-DONE /tmp/full.log && env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left $END) --profile --env-ab "${SIDES[@]}"
echo "[$(since) s] end" | tee -a $L
