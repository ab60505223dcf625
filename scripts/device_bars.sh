#!/usr/bin/env bash
# GPU machine, one call (~8-9 minutes on a fresh machine): where every open issue's bar stands,
# measured side by side in one run on the full tier (256 simulated utterances, 2,536 s of audio).
#   background: the full tier (~220 s); meanwhile test_gpu.py (a quick exactness check)
#   1. issues 7, 10, 11: peers --feed all, batch 32: cuwfst-gpu (HLG), cuwfst-gpu-tlg,
#      cuwfst-gpu-lattice and riva (TLG), WER and RTFx (bars: TLG 3x riva; lattice 3x riva;
#      HLG 5x riva)
#   2. issue 11: HLG uniform 32 x 250 (benchmarks.old_inputs' uniform rows), gpu_speed --reps 7
#      (bar 16 ms); the dataset path: benchmarks.continuous --lanes 32 128 --modes refill (bars
#      15,000x and 30,000x)
#   3. issue 10: lattice_speed --one-call, 64 utterances, batch 32 (bar: lattice <= 1.5x the 1-best)
#   4. issue 9: benchmarks.memory --batch 32 256 --modes pooled lazy with riva (bars: batch 32 <=
#      riva's device memory, batch 256 < 2 GiB, pooled within 3% of lazy's speed)
# Carry .device and .cache. $OUT: bars.log, peers.md, peers.jsonl, memory.md, raw.tgz.
. scripts/device_common.sh
device_setup bars.log
R=/tmp/raw; mkdir -p $R; I=/tmp/old_in
timeout -s INT 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s > $R/test_gpu.log 2>&1
{ grep -E "mismatch" $R/test_gpu.log | head -2; grep -E "passed|failed" $R/test_gpu.log | tail -1; } | cut -c1-200 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left 330) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu cuwfst-gpu-tlg cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md > $R/peers.txt 2>&1
grep -E "^\[peers\]|Error" $R/peers.txt | tail -6 | cut -c1-200 | tee -a $L; echo "[$(since) s] peers" | tee -a $L
python3 -m benchmarks.old_inputs --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --out $I > $R/old_inputs.txt 2>&1
timeout -s INT 60 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $I/uniform.npz --utts 32 --batch 32 \
  --reps 7 --check 2 --variants new > $R/uniform.txt 2>&1
grep -E "B=32|CPU check" $R/uniform.txt | cut -c1-160 | tee -a $L
timeout -s INT 60 python3 -m benchmarks.continuous --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --lanes 32 128 \
  --modes refill --reps 3 --check 4 > $R/dataset.txt 2>&1
grep -E "^\{" $R/dataset.txt | python3 -c "import json,sys
for l in sys.stdin:
    r=json.loads(l); print(f'dataset path, {r[\"lanes\"]} lanes, {r[\"batching\"]}: {r[\"rtfx\"]:,.0f}x real time')" | tee -a $L
grep -E "exactness" $R/dataset.txt | cut -c1-200 | tee -a $L; echo "[$(since) s] issue 11" | tee -a $L
timeout -s INT 90 python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --utts 64 \
  --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call > $R/lattice.txt 2>&1
grep -E "^batch 32|exactness" $R/lattice.txt | cut -c1-240 | tee -a $L; echo "[$(since) s] issue 10" | tee -a $L
timeout -s INT $(left ${END:-585}) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --riva-dir $C --batch 32 256 --reps 3 --check 8 --skip long --modes pooled lazy --md $OUT/memory.md > $R/memory.txt 2>&1
grep -E "^\|" $OUT/memory.md 2>/dev/null | tail -8 | tee -a $L; grep -E "riva|Error" $R/memory.txt | tail -3 | tee -a $L
tar -czf $OUT/raw.tgz -C $R . 2>/dev/null
echo "[$(since) s] done" | tee -a $L
