#!/usr/bin/env bash
# GPU machine, call B of two (after device_full_a.sh on the same machine): the peers table on
# the full tier's HLG and TLG with riva on the very same TLG, continuous against padded
# batching, 1024 lanes, and a short soak. Rebuilds the corpus if the machine is a new one.
set -uo pipefail
T0=$(date +%s); left() { echo $(( ${1} - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; L=$OUT/b.log
if [ ! -f $C/sim/shard-00000.npz ]; then
  echo "no corpus on this machine: building it (about 4 minutes)" | tee $L
  python3 -m benchmarks.corpus.build --tier full --out $C --arpa .device/data/en-us-3gram.arpa.xz --bpe-model cuwfst/data/tiny/bpe.model >/tmp/full.log 2>&1
  python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 --shard-size 256 --seed 0 >>/tmp/full.log 2>&1
fi
python3 -m cuwfst.cli build --cuda-arch 9.0 >/dev/null 2>&1
timeout $(left 330) python3 -m benchmarks.peers.run --corpus $C --batch 1 8 32 --utts 128 --cpu-utts 16 --reps 2 \
  --decoders cuwfst-gpu-tlg riva cuwfst-gpu cuwfst-cpu-tlg greedy --md $OUT/bench_tlg.md --json $OUT/peers.jsonl 2>&1 | grep -E "^\[peers\]" | tee -a $L
timeout $(left 430) python3 -m benchmarks.continuous --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --lanes 32 128 --reps 3 \
  --check 6 --json $OUT/continuous.jsonl 2>&1 | tail -8 | tee -a $L
timeout $(left 520) python3 -m benchmarks.many_lanes --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --lanes 1024 --check 8 \
  --json $OUT/many_lanes.jsonl 2>&1 | tail -3 | tee -a $L
timeout $(left 575) python3 -m benchmarks.soak --decodes 10000 --max-len 20000 --max-seconds 45 --out $OUT/soak.json --csv $OUT/soak.csv 2>&1 | tail -6 | tee -a $L
