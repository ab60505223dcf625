#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 16:00, second call. On main (c2eb172 + the replay's trace):
#   1. EarlyRescue on by default now: every GPU test whose name says rescue, overflow or flag (31), and
#      the lattice tests of the records replay (epsilon graphs), whose host job now returns its stamps;
#   2. the small tier's TLG lattice (256 sim rows, batch 32, one call): where its ~1,029 ms a batch
#      (H100, s142) goes: the decode call, the records' copy to the host, the host job's hypotheses,
#      replay + Lattice objects, word times and confidences (lattice_speed's new replay split).
# Any wheels staging works. Carry .device. $OUT: s147.log, t_*.log, tlg.txt, lat_small.jsonl
. scripts/device_common.sh
END=${END:-400}
NO_FULL=1 device_setup s147.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
S=/tmp/corpus-small
if [ ! -f $S/sim/shard-00000.npz ] || [ ! -f $S/TLG.img ]; then
( python3 -m benchmarks.corpus.build --tier small --out $S --arpa .device/data/en-us-3gram.arpa.xz \
    --bpe-model cuwfst/data/tiny/bpe.model > /tmp/small.log 2>&1 \
  && python3 -m benchmarks.corpus.simulate --corpus $S --out $S/sim --num-utts 256 --shard-size 256 --seed 0 \
    >> /tmp/small.log 2>&1 && echo SMALL-DONE >> /tmp/small.log ) &
else echo SMALL-DONE > /tmp/small.log; fi
timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ -k "rescue or overflow or flag" -rf \
  > $OUT/t_rescue.log 2>&1; echo "[rescue/overflow/flag tests, EarlyRescue default on] exit $? $(tail -n 1 $OUT/t_rescue.log)" | tee -a $L
grep -E "^FAILED|cudaError" $OUT/t_rescue.log | head -5 | cut -c1-200 | tee -a $L
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py tests/test_gpu_epsilon.py \
  -k "epsilon or eps or replay or records" -rf > $OUT/t_replay.log 2>&1
echo "[replay-path lattice tests] exit $? $(tail -n 1 $OUT/t_replay.log)" | tee -a $L
grep -E "^FAILED" $OUT/t_replay.log | head -5 | cut -c1-200 | tee -a $L
wait
echo "[$(since) s] tests; small tier: $(tail -n 1 /tmp/small.log)" | tee -a $L
timeout -s INT $(left $((END - 5))) python3 -m benchmarks.lattice_speed --graph $S/TLG.img \
  --log-probs $S/sim/shard-00000.npz --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call \
  --json $OUT/lat_small.jsonl > $OUT/tlg.txt 2>&1
echo "[TLG exit $?]" | tee -a $L
grep -E "vs 1-best|exactness|replay path|host jobs|Error" $OUT/tlg.txt | cut -c1-600 | sed "s/^/[TLG] /" | tee -a $L
echo "[$(since) s] end" | tee -a $L
