#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 09:00, last call: the GPU suite's lat, var, base and
# trim groups at the final GPU code (ab2a6d4 and later: CUWFST_READBACK read when the decoder is made;
# s183 ran the whole suite at 0b4f528, which read it at each copy). The mem group (~300 s) does not fit
# the device time left. Prediction: every group passes, k2 goldens 0 mismatches.
# (Ran with its own copy of gpu_suite's groups; now gpu_suite with SUITE_GROUPS, the same commands.)
# Stage: .device/wheels. Carry .device. $OUT: s183e.log, tests.tgz
. scripts/device_common.sh
NO_FULL=1 device_setup s183e.log
SUITE_GROUPS="lat var base trim" gpu_suite 330
SUITE_GROUPS="lat var base trim" gpu_suite_wait
echo "[$(since) s] end" | tee -a $L
