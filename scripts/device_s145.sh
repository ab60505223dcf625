#!/usr/bin/env bash
# GPU machine: the GPU tests at the new defaults (ba2624b: EarlyRescue on, two lattice host workers on
# a host of 8+ CPUs), for a session with ~300 device seconds left. No full tier: test_gpu_lattice.py,
# test_gpu.py and test_gpu_epsilon.py side by side, each at most CAP s (default 150). Any wheels
# staging works. Carry .device. $OUT: s145.log, lat.log, base.log, eps.log
. scripts/device_common.sh
NO_FULL=1 device_setup s145.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
gpu_tests lat.log ${CAP:-150} "test_gpu_lattice.py" tests/test_gpu_lattice.py &
gpu_tests base.log ${CAP:-150} "test_gpu.py" tests/test_gpu.py &
gpu_tests eps.log ${CAP:-150} "test_gpu_epsilon.py" tests/test_gpu_epsilon.py &
wait
echo "[$(since) s] end" | tee -a $L
