#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine), issue 10: the session's GPU code once more
# (2ca82b0's kernels; the grids/appends test as mended after s75), the files s74 cut short, memcheck
# over the per-CTA appends, and where ExpandKernel's lattice time goes (candidates on / off, split).
#   while the full tier (HLG) builds: test_gpu_trim.py whole, compute-sanitizer memcheck over
#   sanitize_case.py --lattice, test_gpu_faults.py + test_gpu_host.py, test_gpu_memory.py
#   then lattice_speed --utts 256 --profile --cand-ab
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s76.log, tests*.log, memcheck.log, lat.jsonl.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s76.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 45 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
lattice_memcheck 90
gpu_tests tests2.log 120 "test_gpu_faults.py + test_gpu_host.py" tests/test_gpu_faults.py tests/test_gpu_host.py
gpu_tests tests3.log $(left 420) "test_gpu_memory.py" tests/test_gpu_memory.py
wait_full 430; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 575 --utts 256 --profile --cand-ab
echo "[$(since) s] done" | tee -a $L
