#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 09:00, first call. s182 found the lattice setup stall:
# Wait's event record on the caller's stream blocks while the finish thread is inside a pageable
# device-to-host copy (the counts after the pruning's device passes), and only where the caller is on
# the legacy default stream (with the calls on a PyTorch stream of their own, no sub-batch stalled). The
# small readbacks now go through pinned slabs (cuda_resources.cuh Readback; CUWFST_READBACK=pageable
# restores the copies straight into pageable memory). This call: the whole GPU suite at the new default
# and test_gpu_eps_prune.py beside the full tier's build (HLG only), then decode_split on the small HLG
# at the default and under CUWFST_READBACK=pageable.
# Predictions: every group passes, k2 goldens 0 mismatches; on the small HLG no sub-batch's setup above
# 1 ms at the default, and sub-batch 2 again ~12 ms under pageable.
# Stage: .device/wheels. Carry .device. $OUT: s183.log, tests.tgz
. scripts/device_common.sh
END=${END:-580}
FULL_GRAPHS=hlg device_setup s183.log
small_tier &
gpu_suite ${SUITE_CAP:-420}
gpu_tests tests_epsprune.log 200 "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
gpu_suite_wait
echo "[$(since) s] suite, small tier; full tier: $(tail -1 /tmp/full.log)" | tee -a $L
timeout $(left $END) python3 scripts/decode_split.py /tmp/corpus-small/HLG.img /tmp/corpus-small/sim/shard-00000.npz 256 \
  --side pageable:CUWFST_READBACK=pageable 2>&1 | sed "s/^/[small] /" | tee -a $L
echo "[$(since) s] end" | tee -a $L
