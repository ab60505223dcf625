#!/usr/bin/env bash
# GPU machine: a short call for a session with little device time left (written 2026-12-05 11:34,
# when 1,141 of the 1,800 s went to calls that got no machine). No full tier, no benchmark: the GPU
# tests whose CPU reference this session changed (the records replay that the GPU lattice runs on
# epsilon graphs, the CPU records filter on epsilon graphs, the search's scratch), each file at most
# CAP s (default 200): test_gpu_lattice.py (epsilon and epsilon-free cases; GPU lattice == CPU),
# test_gpu_epsilon.py (GPU == CPU 1-best on epsilon graphs). Any wheels staging works.
# $OUT: s141.log, lat.log, eps.log
. scripts/device_common.sh
NO_FULL=1 device_setup s141.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests lat.log ${CAP:-200} "test_gpu_lattice.py" tests/test_gpu_lattice.py
gpu_tests eps.log ${CAP:-200} "test_gpu_epsilon.py" tests/test_gpu_epsilon.py
echo "[$(since) s] end" | tee -a $L
