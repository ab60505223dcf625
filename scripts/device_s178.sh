#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 07:39, first call. At the commit in .device/COMMIT:
# CUWFST_LATTICE_LOG=scan (new, off by default): no log launch a step. Each step's scan copies S_t into
# the records log as it reads the tokens (scan.cuh TokenLoad), and the next step's scan writes the
# step's scalars before it applies its own step (ApplyLaneStep; LatLogPendingKernel the sequence's
# last ones, before the records pass). One call:
#   1. tests/test_gpu_lattice.py whole under CUWFST_LATTICE_LOG=scan (the k2 goldens included), beside
#      the records tests at the default (the new test_records_after_the_search_log_in_the_scan: the
#      persistent, one-CTA, lane-major and fused scans, a pooled pause, long rows, growth) and the full
#      tier's build;
#   2. the small and the full HLG (256 sim rows, batch 32, --profile): the default against scan.
# Predictions (written before any run): exact everywhere. The full HLG's lattice batch -0.5 to -1.0 ms
# (s175: the log launch costs ~1.1 ms a batch on the step's chain; the scan's extra stores ~1.6 MB a
# step, fire and forget, and the pending scalars in the persistent scan's last CTA, one thread a lane,
# one more round of loads, cost back 0.1-0.4 ms); the profile's lat_step_end 2.0 -> 0, scan +0.1-0.4 ms;
# the 1-best unchanged within its spread. Small HLG: -0.4 to -0.9 ms.
# Stage: .device/wheels. Carry .device. $OUT: s178.log, tests.tgz, ab_small.*, ab_full.*
. scripts/device_common.sh
END=${END:-570}
FULL_GRAPHS=hlg device_setup s178.log
small_tier &
CUWFST_LATTICE_LOG=scan gpu_tests tests_lat_scan.log ${LAT_CAP:-330} "test_gpu_lattice.py under LOG=scan" tests/test_gpu_lattice.py &
gpu_tests tests_lat_k.log 250 "records tests at the default" tests/test_gpu_lattice.py \
  -k "log_in_the_scan or log_in_finalize or log_on_a_side_stream or records_after" &
wait
pack_logs 'tests_*.log'
echo "[$(since) s] tests, small tier" | tee -a $L
SIDES=("scan:CUWFST_LATTICE_LOG=scan")
env_ab small /tmp/corpus-small/HLG.img /tmp/corpus-small/sim/shard-00000.npz 100 --profile --env-ab "${SIDES[@]}"
echo "[$(since) s] small HLG" | tee -a $L
wait_full $((END - 80))
grep -q FULL-DONE /tmp/full.log && env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left $END) --profile --env-ab "${SIDES[@]}"
echo "[$(since) s] end" | tee -a $L
