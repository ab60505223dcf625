#!/usr/bin/env bash
# GPU machine, one call (~9 minutes on a fresh machine), issues 10 and 11: the walkers' grids one by
# one (CUWFST_MAX_BLOCKS, CUWFST_EXPAND_BLOCKS, CUWFST_LAT_BLOCKS) and the CTAs without slots leaving
# MaxKernel and LatPersistKernel at once; the known lanes (CUWFST_MAX_KNOWN=off) on the full tier.
# Prediction: docs/speed-notes.md "The walkers' grids one by one", written before.
#   while the full tier (HLG) builds: test_gpu_lattice.py whole (k2 goldens), test_gpu_trim.py,
#   test_gpu_variants.py, test_gpu_faults.py + test_gpu_host.py
#   then lattice_speed --utts 256 --profile --env-ab (the grids, known off), one process
# Carry .device (wheels, pylib, COMMIT, data). $OUT: s74.log, tests*.log, lat.jsonl.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s74.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests tests1.log 200 "test_gpu_lattice.py (whole)" tests/test_gpu_lattice.py
gpu_tests tests2.log 40 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests3.log 90 "test_gpu_variants.py (whole)" tests/test_gpu_variants.py
gpu_tests tests4.log 50 "test_gpu_faults.py + test_gpu_host.py" tests/test_gpu_faults.py tests/test_gpu_host.py
wait_full 360; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl 580 --utts 256 --profile --env-ab known_off:CUWFST_MAX_KNOWN=off \
  max1024:CUWFST_MAX_BLOCKS=1024 max528:CUWFST_MAX_BLOCKS=528 max264:CUWFST_MAX_BLOCKS=264 \
  lat528:CUWFST_LAT_BLOCKS=528 lat264:CUWFST_LAT_BLOCKS=264 exp1024:CUWFST_EXPAND_BLOCKS=1024
echo "[$(since) s] done" | tee -a $L
