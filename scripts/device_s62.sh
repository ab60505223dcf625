#!/usr/bin/env bash
# GPU machine, one call (~9 minutes, the full tier's HLG built here): while the full tier builds,
# test_gpu_lanes.py whole, test_gpu_memory.py -k 'idle or stream' and the reserve probe on this
# tree (the advance's room estimate from the streams' mean frontiers since s61); then streaming
# capacity at 2,048
# streams on the full HLG, old (29ca972: the advance's guard reserved every moving lane's
# claims_cap + eps_iterations x main_q, twice) against new (ArenaStepFits: each step's own worst
# case), one process each, interleaved old, new, old, new: device memory (the bench's
# device_used_mib), the winners log, p50 / p99 of the chunk's advance, and 4 sampled streams
# checked against the CPU's online decode in each.
# Carry .device (wheels, pylib, data, COMMIT, old/29ca972-src.tgz: `git archive 29ca972 cuwfst
# benchmarks | gzip`); both modules build here. $OUT: s62.log, lanes.log, mem.log, probe.txt,
# stream_*.jsonl, stream_*.txt.
export FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s62.log
OLD=/tmp/old-tree; rm -rf $OLD && mkdir -p $OLD && tar xzf .device/old/29ca972-src.tgz -C $OLD || exit 1
( cd $OLD && PYTHONPATH=/tmp/site:$OLD CUWFST_CACHE_DIR=$OLD/.cache/cuwfst python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 ) | tee -a $L
gpu_tests lanes.log 150 "test_gpu_lanes.py (whole)" tests/test_gpu_lanes.py
grep -E "winners log after the advances" $OUT/lanes.log | cut -c1-250 | tee -a $L
gpu_tests mem.log 60 "test_gpu_memory.py -k 'idle or stream'" tests/test_gpu_memory.py -k "idle or stream"
timeout -s INT 60 python3 scripts/stream_reserve_probe.py > $OUT/probe.txt 2>&1; echo "probe exit $?" | tee -a $L
cut -c1-400 $OUT/probe.txt | tail -6 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
G=$C/HLG.img; S=$C/sim/shard-00000.npz
bench() {  # bench NAME TREE
  ( cd $2 && PYTHONPATH=/tmp/site:$2 CUWFST_CACHE_DIR=$2/.cache/cuwfst timeout -s INT $(left 585) \
    python3 -m benchmarks.streaming --graph $G --log-probs $S --streams ${STREAMS:-2048} --ticks 30 --warmup-ticks 3 \
    --seconds 100 --check 4 --chunks cuda --json $OUT/stream_$1.jsonl > $OUT/stream_$1.txt 2>&1 )
  echo "[$(since) s] $1 exit $?" | tee -a $L
  grep -E "^\| cuwfst|Error|identical|mismatch" $OUT/stream_$1.txt | cut -c1-260 | sed "s/^/[$1] /" | tee -a $L
}
bench old1 $OLD; bench new1 $PWD; bench old2 $OLD; bench new2 $PWD
echo "[$(since) s] done" | tee -a $L
