#!/usr/bin/env bash
# GPU machine, one call (~9 minutes; no full tier): the arena guard by the step's own worst case
# (scan.cuh ArenaStepFits: each stepping lane's min(claims_cap, slots) + eps_iterations x main_q,
# decided in the emitting step's last scan CTA, the lanes put back when it does not fit) in
# place of every lane's claims_cap reserved at the scan's start; and s60's parts on that code:
#   test_gpu_memory.py -k "idle or stream": issue 9's idle-lane bar, the streams' memory tests;
#   test_gpu_lanes.py whole: streams, tight arenas (steps held back), the new
#     test_gpu_stream_log_is_sized_by_the_steps_taken, continuous batching;
#   scripts/stream_reserve_probe.py: what open / advance / finalize commit (tiny graphs);
#   memcheck and racecheck over sanitize_case.py --lanes (streams in a tiny arena);
#   test_gpu_variants.py to the end of the call.
# Carry .device/wheels, .device/pylib, .device/COMMIT and .cache (the modules built here).
# $OUT: s61.log, mem.log, lanes.log, probe.txt, memcheck.log, racecheck.log, variants.log.
export NO_FULL=1
END=${END:-560}
. scripts/device_common.sh
device_setup s61.log
gpu_tests mem.log 120 "test_gpu_memory.py -k 'idle or stream'" tests/test_gpu_memory.py -k "idle or stream"
grep -E "winners \(committed" $OUT/mem.log | cut -c1-300 | tee -a $L
gpu_tests lanes.log 200 "test_gpu_lanes.py (whole)" tests/test_gpu_lanes.py
grep -E "winners log after the advances|streams:|rows" $OUT/lanes.log | cut -c1-250 | head -6 | tee -a $L
timeout -s INT 60 python3 scripts/stream_reserve_probe.py > $OUT/probe.txt 2>&1; echo "probe exit $?" | tee -a $L
cut -c1-400 $OUT/probe.txt | tail -8 | tee -a $L
echo "[$(since) s] before the sanitizers" | tee -a $L
memcheck_case memcheck.log 90 "memcheck sanitize_case 2 --lanes" 2 --lanes
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 90 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lanes > $OUT/racecheck.log 2>&1
echo "racecheck sanitize_case 1 --lanes exit $?: $(tail -2 $OUT/racecheck.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
gpu_tests variants.log $(left $END) "test_gpu_variants.py (to the end of the call)" tests/test_gpu_variants.py
echo "[$(since) s] done" | tee -a $L
