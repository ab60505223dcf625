#!/usr/bin/env bash
# GPU machine: streaming capacity of an older commit against this tree, same machine, same
# process order interleaved (old, new, old, new), to place a regression (issue 8: p50 at 2,048
# streams rose from 102.0 ms at d757c28 to 113 ms at 048dd0f).
#   OLD_TGZ (default .device/old/d757c28.tgz): the old commit's cuwfst/ and benchmarks/ and its
#   prebuilt .cache/ (make it on the dev VM: git archive OLD cuwfst benchmarks | tar x -C DIR;
#   CUWFST_CACHE_DIR=DIR/.cache/cuwfst PYTHONPATH=DIR python -m cuwfst.cli build --cuda-arch 9.0;
#   rm DIR/.cache/cuwfst/*/*.o; tar czf OLD.tgz -C DIR cuwfst benchmarks .cache).
#   STREAMS (default 2048), NEW_CONFIGS (default "default arena_ahead=off kernels=old"), REPS (2).
# Needs the full tier at /tmp/corpus-full (device_session5.sh or device_final_a.sh builds it).
# $OUT: ab_old.log, old.jsonl, new.jsonl (per_tick lists in both where the commit has them).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/ab_old.log; C=/tmp/corpus-full
G=$C/HLG.img; S=$C/sim/shard-00000.npz; NEW=$PWD; OLD=/tmp/old-tree
[ -f $S ] || { echo "no full tier at $C" | tee $L; exit 1; }
rm -rf $OLD && mkdir -p $OLD && tar xzf ${OLD_TGZ:-.device/old/d757c28.tgz} -C $OLD || exit 1
echo "new tree commit $(cat .device/COMMIT 2>/dev/null), old tree ${OLD_TGZ:-.device/old/d757c28.tgz}" | tee $L
for r in $(seq ${REPS:-2}); do
  ( cd $OLD && PYTHONPATH=/tmp/site:$OLD CUWFST_CACHE_DIR=$OLD/.cache/cuwfst PYTHONUNBUFFERED=1 timeout -s INT 60 \
    python3 -m benchmarks.streaming --graph $G --log-probs $S --streams ${STREAMS:-2048} --ticks 30 --warmup-ticks 3 \
    --seconds 50 --check 4 --chunks cuda --json $OUT/old.jsonl 2>&1 | grep -E "^\| cuwfst|Error" | sed "s/^/old $r /" | tee -a $L )
  ( cd $NEW && PYTHONPATH=/tmp/site:$NEW CUWFST_CACHE_DIR=$NEW/.cache/cuwfst PYTHONUNBUFFERED=1 timeout -s INT 120 \
    python3 -m benchmarks.streaming --graph $G --log-probs $S --streams ${STREAMS:-2048} --ticks 30 --warmup-ticks 3 \
    --check 4 --chunks cuda --total-seconds 110 --configs ${NEW_CONFIGS:-default arena_ahead=off kernels=old} \
    --json $OUT/new.jsonl 2>&1 | grep -E "^\| cuwfst|Error" | sed "s/^/new $r /" | tee -a $L )
done
