#!/usr/bin/env bash
# GPU machine, one call (~9 minutes), every mode exact after the pooled lanes' native change
# (2df5700: DecoderConfig::pool_q, Allocate's stat_max_ / pool_max_, SeqWorkspace's pooled caps).
# s54-s58 ran the pooled files only; the whole suite at the defaults (memory="lazy") last ran at
# 40f9e31. This runs the GPU files at the defaults, the longest last so a cap cuts its tail:
#   test_gpu, _epsilon, _lanes, _lattice, _chain, _trim, _walk_entry, _faults, test_cli,
#   test_blank_skip, test_streaming_bench, _variants (test_gpu_memory.py ran whole in s58)
# Carry .device (wheels, pylib, COMMIT) and .cache (the modules built here, same hashes).
# $OUT: s59.log, logs.tgz (one log per file). END (default 560): the tests' cap.
export NO_FULL=1
. scripts/device_common.sh
device_setup s59.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
END=${END:-560}
for f in test_gpu test_gpu_epsilon test_gpu_lanes test_gpu_lattice test_gpu_chain test_gpu_trim \
    test_gpu_walk_entry test_gpu_faults test_cli test_blank_skip test_streaming_bench test_gpu_variants; do
  timeout -s INT $(left $END) python3 -m pytest -q -p no:cacheprovider -m gpu tests/$f.py -s -rf > $OUT/x_$f.log 2>&1
  { grep -E "mismatch" $OUT/x_$f.log | grep -v "^E " | sort | uniq -c | sort -rn | head -4 | cut -c1-200
    grep -E "^FAILED|^ERROR" $OUT/x_$f.log | head -4 | cut -c1-200
    echo "$f: $(grep -E "passed|failed|error" $OUT/x_$f.log | tail -1 | cut -c1-160) [$(since) s]"; } | tee -a $L
done
(cd $OUT && tar -czf logs.tgz x_*.log && rm -f x_*.log)
echo "[$(since) s] done" | tee -a $L
