#!/usr/bin/env bash
# GPU machine: issue 10, queued after the session of 2026-12-05 16:00. NOT yet run. On main:
#   the small tier's TLG lattice (256 sim rows, batch 32, one call) with 2 / 3 / 4 / 2 lattice host
#   workers (CUWFST_LATTICE_HOST_WORKERS, one process each). With the records' filter on epsilon
#   graphs the host replay sets the pace (s148, H200: jobs of 350-930 ms queued behind two workers,
#   the call's tail 1.76 s of 2.49). Prediction (written before any run): 3 workers 220-260 ms a
#   batch, 4 workers 190-240, against 2 workers' ~300 (s148: 297.0 / 309.3); not below ~200, the
#   replay's CPU work (32 rows x ~100 ms of one thread over 16 CPUs). If 3 or 4 wins by more than the
#   2-worker runs' spread, make it the default for graphs with epsilon arcs (decoder/gpu.py
#   lattice_worker_count).
# Any wheels staging works. Carry .device. $OUT: s151.log, tlg_w*.txt, lat_small.jsonl
. scripts/device_common.sh
END=${END:-560}
NO_FULL=1 device_setup s151.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
small_tier
echo "[$(since) s] small tier" | tee -a $L
for w in 2 3 4 2; do
  CUWFST_LATTICE_HOST_WORKERS=$w timeout -s INT $(left $((END - 5))) python3 -m benchmarks.lattice_speed --graph $S/TLG.img \
    --log-probs $S/sim/shard-00000.npz --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call \
    --json $OUT/lat_small.jsonl > $OUT/tlg_w$w.txt 2>&1
  grep -E "vs 1-best|exactness|host jobs|Error" $OUT/tlg_w$w.txt | cut -c1-400 | sed "s/^/[TLG, $w workers] /" | tee -a $L
done
# fc809da's shared off/on-again helper, first run: the filter on / off / on again (s148's A/B)
timeout -s INT $(left $((END - 5))) python3 -m benchmarks.lattice_speed --graph $S/TLG.img \
  --log-probs $S/sim/shard-00000.npz --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call \
  --eps-filter-ab --json $OUT/lat_small.jsonl > $OUT/tlg_ab.txt 2>&1
echo "[TLG A/B exit $?]" | tee -a $L
grep -E "vs 1-best|exactness|epsilon graphs A/B|Error" $OUT/tlg_ab.txt | cut -c1-600 | sed "s/^/[TLG A\/B] /" | tee -a $L
echo "[$(since) s] end" | tee -a $L
