#!/usr/bin/env bash
# GPU machine, call 1 of the session of 2026-12-01 21:38 (~4 minutes): the lattice file on main with
# branch number-threads merged (NumberPrunedRows' gated thread start), while the full tier builds in
# the background for the next call (device_bars.sh) on the same machine.
# Carry .device and .cache. $OUT: s21a.log, lattice.log.
. scripts/device_common.sh
device_setup s21a.log
timeout -s INT ${LAT_CAP:-300} python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -s > $OUT/lattice.log 2>&1
echo "lattice file exit $?" | tee -a $L
{ grep -E "mismatch|identical" $OUT/lattice.log | head -6; grep -E "passed|failed" $OUT/lattice.log | tail -1; } | cut -c1-220 | tee -a $L
timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider tests/test_cuda_resources.py -k lattice_number 2>&1 | tail -1 | tee -a $L
grep -E "^  (HLG|TLG)|Error|FULL" /tmp/full.log | tail -3 | tee -a $L
echo "[$(since) s] done" | tee -a $L
