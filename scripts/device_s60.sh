#!/usr/bin/env bash
# (Written 2026-12-03 10:47; never run: device_s61.sh ran its parts on the next session's code.) GPU machine, one call
# (~7 minutes; no full tier), issue 9's last bar and s59's cut tail:
#   test_gpu_memory.py -k idle: an idle streaming lane commits no winners memory (one stream
#     decoded with 2 lanes, 64 lanes and 64 lanes with an idle stream held open: the same result,
#     the same committed log and capacity, the high water at most 1 entry apart), lazy and eager;
#   test_gpu_variants.py whole (s59 stopped it at 697 passed, 12 skipped of 950 by its cap);
#   scripts/stream_reserve_probe.py: the winners log's capacity and commit after opening, advancing
#     and finalizing 1 / 64 / 1,024 streams at once on the tiny HLG and TLG (the room StreamOpen and
#     StreamFinalize reserve: n x (1 + E x main_q) and n x (claims_cap + E x main_q) entries).
# Carry .device/wheels, .device/pylib, .device/COMMIT and .cache (the modules built here).
# $OUT: s60.log, tests1.log, tests2.log, probe.txt.
export NO_FULL=1
. scripts/device_common.sh
device_setup s60.log
gpu_tests tests1.log 90 "test_gpu_memory.py -k idle" tests/test_gpu_memory.py -k idle
grep -E "winners \(committed" $OUT/tests1.log | tee -a $L
timeout -s INT 90 python3 scripts/stream_reserve_probe.py > $OUT/probe.txt 2>&1; echo "probe exit $?" | tee -a $L
cut -c1-400 $OUT/probe.txt | tail -8 | tee -a $L
gpu_tests tests2.log 330 "test_gpu_variants.py (whole)" tests/test_gpu_variants.py
echo "[$(since) s] done" | tee -a $L
