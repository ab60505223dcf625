#!/usr/bin/env bash
# GPU machine, call B of the integration branch (~9 minutes), right after call A on the warm
# machine (the full tier and the model set are reused; otherwise they are built first):
#   1. issue 9: benchmarks.memory on the full HLG (total device memory at batch 32 and 256,
#      lazy against eager, riva beside it when its wheel is carried; speed lazy vs eager; the
#      long-form utterance with GC on and off; LONG_FRAMES, default 90000)          ~4 min
#   2. issue 10: benchmarks.lattice_speed on the full HLG (GPU lattices against the CPU's)  ~2 min
#   3. blank_skip 0 / 0.95 / 0.99: uniform 32 x 250 on the model set and WER (peers.run)    ~2 min
# $OUT: b.log, memory.md, memory.jsonl, lattice_speed.jsonl, blank.jsonl
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
left() { local l=$(( $1 - $(since) )); echo $(( l > 10 ? l : 10 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; S=/tmp/corpus-small; L=$OUT/b.log
ARPA=.device/data/en-us-3gram.arpa.xz; BPE=cuwfst/data/tiny/bpe.model
if [ ! -f $C/model/shard-00000.npz ]; then
  echo "the tiers are not on this machine (call A's machine was given back): building them" | tee $L
  ( python3 -m benchmarks.corpus.build --tier small --out $S --arpa $ARPA --bpe-model $BPE > /tmp/small.log 2>&1 & )
  python3 -m benchmarks.corpus.build --tier full --out $C --arpa $ARPA --bpe-model $BPE > /tmp/full.log 2>&1
  python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 --shard-size 256 --seed 0 >> /tmp/full.log 2>&1
  while [ ! -f $S/HLG.img ]; do sleep 2; done
  python3 -m benchmarks.model.make_set --weights examples/model.int8.npz --corpus $S --set-corpus $C --set-utts 64 >> /tmp/full.log 2>&1
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT [$(since) s]"; } | tee -a $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
timeout -s INT $(left 260) python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --riva-dir $C --batch 32 256 --reps 5 --check 8 --long-frames ${LONG_FRAMES:-90000} \
  --json $OUT/memory.jsonl --md $OUT/memory.md > /tmp/memory.log 2>&1
echo "benchmarks.memory exit $? [$(since) s]" | tee -a $L; tail -30 /tmp/memory.log | tee -a $L
timeout -s INT $(left 390) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 128 --batch 32 --reps 3 --cpu-utts 32 --check 8 --profile --json $OUT/lattice_speed.jsonl 2>&1 \
  | grep -v "^{" | tail -10 | tee -a $L
echo "[$(since) s] lattices" | tee -a $L
timeout -s INT $(left 480) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/model/shard-00000.npz \
  --uniform 250 --utts 32 --batch 32 --reps 5 --check 4 --blank-skip 0 0.95 0.99 --json $OUT/blank.jsonl 2>&1 \
  | grep -vE "^\{" | grep -E "B=|CPU check|Error" | tee -a $L
timeout -s INT $(left 570) python3 -m benchmarks.peers.run --corpus $C --set model --batch 32 --utts 64 --reps 2 \
  --decoders cuwfst-gpu --blank-skip 0 0.95 0.99 --json $OUT/blank.jsonl 2>&1 | grep -E "^\[peers\] cuwfst" | tee -a $L
echo "[$(since) s] done" | tee -a $L
