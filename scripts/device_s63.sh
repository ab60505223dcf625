#!/usr/bin/env bash
# GPU machine, one call (at most END s, default 420; no full tier): the GPU files s61 and s62 did
# not run on the streams' new arena guard (its branch in LaneScanTail, which every scan's last CTA
# passes; the closure scans' tails now say they are not an emitting step; ScanKernel's wait reads
# arena_pause), in order of what the change touches: test_gpu_epsilon.py (the closure scans),
# test_gpu_faults.py (failures around opens and advances), test_gpu_memory.py whole, test_gpu.py,
# test_gpu_chain.py, then test_gpu_lattice.py to the end of the call.
# Carry .device/wheels, .device/pylib, .device/COMMIT and .cache (the modules built here).
# $OUT: s63.log and one log a file.
export NO_FULL=1
END=${END:-420}
. scripts/device_common.sh
device_setup s63.log
for f in test_gpu_epsilon test_gpu_faults test_gpu_memory test_gpu test_gpu_chain test_gpu_lattice; do
  [ $(left $END) -gt 15 ] || { echo "[$(since) s] no time left for $f" | tee -a $L; continue; }
  gpu_tests $f.log $(left $END) "$f.py" tests/$f.py
done
echo "[$(since) s] done" | tee -a $L
