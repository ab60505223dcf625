#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 16:00, third call. On main (the records' filter on
# epsilon graphs, common.cuh LatEpsFilterFor, never run on a GPU; TakeLatticeRecords on threads):
#   1. exactness first: the new GPU tests (test_gpu_lattice.py -k eps_records: filter on / off / forced
#      below the chain, the guard's reruns, a negative pad seen) and every replay-path lattice test
#      (test_gpu_lattice.py / test_gpu_epsilon.py -k "epsilon or eps or replay or records");
#   2. the small tier's TLG lattice, 256 sim rows, batch 32, one call, the filter on (default) / off /
#      on again in one process (--eps-filter-ab), the replay split, 4 rows checked against the CPU.
# Prediction (written before the run): s147 (H100, no filter, one-thread records copy) 925.9 ms a
# lattice batch; the copy on threads takes the calling thread's ~780 ms a batch of copies to
# ~100-150, the filter keeps ~20-35 % of the records (the CPU filter kept 24 % on these rows), so
# the host replay (~1,000 ms a job on a worker, two workers) drops to ~400-600 and sets the pace:
# on ~200-350 ms a batch, off ~450-550 (the copy alone); identical lattices; 0 rows sent back.
# Any wheels staging works. Carry .device. $OUT: s148.log, t_*.log, tlg.txt, lat_small.jsonl
. scripts/device_common.sh
END=${END:-470}
NO_FULL=1 device_setup s148.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
S=/tmp/corpus-small
if [ ! -f $S/sim/shard-00000.npz ] || [ ! -f $S/TLG.img ]; then
( python3 -m benchmarks.corpus.build --tier small --out $S --arpa .device/data/en-us-3gram.arpa.xz \
    --bpe-model cuwfst/data/tiny/bpe.model > /tmp/small.log 2>&1 \
  && python3 -m benchmarks.corpus.simulate --corpus $S --out $S/sim --num-utts 256 --shard-size 256 --seed 0 \
    >> /tmp/small.log 2>&1 && echo SMALL-DONE >> /tmp/small.log ) &
else echo SMALL-DONE > /tmp/small.log; fi
( timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py -k "eps_records" -s -rf \
  > $OUT/t_eps.log 2>&1; echo "exit $?" >> $OUT/t_eps.log ) &
timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_lattice.py tests/test_gpu_epsilon.py \
  -k "(epsilon or eps or replay or records) and not eps_records" -rf > $OUT/t_replay.log 2>&1
echo "[replay-path lattice tests] exit $? $(tail -n 1 $OUT/t_replay.log)" | tee -a $L
grep -E "^FAILED" $OUT/t_replay.log | head -5 | cut -c1-200 | tee -a $L
wait
echo "[eps filter tests] $(grep -E "passed|failed" $OUT/t_eps.log | tail -n 1) $(tail -n 1 $OUT/t_eps.log)" | tee -a $L
grep -E "^FAILED|records' filter on epsilon graphs:" $OUT/t_eps.log | head -8 | cut -c1-240 | tee -a $L
echo "[$(since) s] tests; small tier: $(tail -n 1 /tmp/small.log)" | tee -a $L
timeout -s INT $(left $((END - 5))) python3 -m benchmarks.lattice_speed --graph $S/TLG.img \
  --log-probs $S/sim/shard-00000.npz --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call \
  --eps-filter-ab --json $OUT/lat_small.jsonl > $OUT/tlg.txt 2>&1
echo "[TLG exit $?]" | tee -a $L
grep -E "vs 1-best|exactness|replay path|host jobs|epsilon graphs A/B|Error" $OUT/tlg.txt | cut -c1-600 | sed "s/^/[TLG] /" | tee -a $L
echo "[$(since) s] end" | tee -a $L
