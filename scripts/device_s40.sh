#!/usr/bin/env bash
# GPU machine, one call (~2 minutes; no full tier): test_gpu_variants.py -k pooled on the pooled
# default claims-finalize-ahead after the tests' pool model (helpers.pooled_step_asks) learned that
# the claims bounds size each next frontier by its claims (device_s39.sh: 19 failed on the model's
# token ask, 144,384 against the decoder's 142,464, after their rows had matched the CPU's).
# Carry .device/wheels, .device/COMMIT and the GPU module built here. $OUT: s40.log, tests1.log.
export NO_FULL=1
. scripts/device_common.sh
device_setup s40.log
unset CUWFST_POOL_BOUND
gpu_tests tests1.log 150 "test_gpu_variants -k pooled (default bound)" tests/test_gpu_variants.py -k pooled
echo "[$(since) s] done" | tee -a $L
