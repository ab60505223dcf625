#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 09:00, last call: the GPU suite's lat, var, base and
# trim groups at the final GPU code (ab2a6d4 and later: CUWFST_READBACK read when the decoder is made;
# s183 ran the whole suite at 0b4f528, which read it at each copy). The mem group (~300 s) does not fit
# the device time left. Prediction: every group passes, k2 goldens 0 mismatches.
# Stage: .device/wheels. Carry .device. $OUT: s183e.log, tests.tgz
. scripts/device_common.sh
NO_FULL=1 device_setup s183e.log
_grp() { local name=$1; shift
  ( timeout -s INT 330 python3 -m pytest -q -p no:cacheprovider -m gpu "$@" -s -rf > $OUT/tests_$name.log 2>&1
    echo "exit $?" >> $OUT/tests_$name.log ) & }
_grp lat tests/test_gpu_lattice.py
_grp var tests/test_gpu_variants.py tests/test_k2_order.py tests/test_k2_structure.py tests/test_cli.py tests/test_blank_skip.py \
  tests/test_streaming_bench.py tests/test_gpu_scan_trace.py
_grp base tests/test_gpu.py tests/test_gpu_epsilon.py tests/test_gpu_chain.py
_grp trim tests/test_gpu_trim.py
wait
for n in lat var base trim; do
  echo "[$n] $(tail -1 $OUT/tests_$n.log) $(grep -E "passed|failed" $OUT/tests_$n.log | tail -1)" | cut -c1-200 | tee -a $L
  grep -E "^FAILED|mismatch" $OUT/tests_$n.log | grep -v "^E " | head -6 | cut -c1-220 | tee -a $L
done
pack_logs 'tests_*.log'
echo "[$(since) s] end" | tee -a $L
