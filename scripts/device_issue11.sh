#!/usr/bin/env bash
# GPU machine: issue 11's table, the new decoder next to the old in one call (the old = the
# package at f3e7b4b, main when issues 7-14 were filed: the state the 56.4 ms describes).
# Before the call, on the development machine (the old package's sources, 0.3 MB, no data):
#   rm -rf .device/old_tree && mkdir -p .device/old_tree && git archive f3e7b4b cuwfst benchmarks/__init__.py \
#     benchmarks/gpu_speed.py benchmarks/reference_speed.py benchmarks/peers/__init__.py \
#     benchmarks/peers/measure.py | tar -x -C .device/old_tree --exclude=cuwfst/data
# Then, in order, until END seconds (default 570):
#   1. wheels; the full tier in the background unless /tmp holds it; both modules built (the
#      old one here, into /tmp/oldcache, ~15 s)
#   2. tests/test_cli.py -m gpu (the CLI's lattices on the GPU); while the full tier builds:
#      tests/test_gpu_memory.py (capped at the tier's readiness)
#   3. benchmarks.old_inputs: the HLG image without the sections the old reader refuses, the
#      uniform 32 x 250 rows and the shard sorted longest first (both harnesses read these)
#   4. HLG uniform 32 x 250: old, new, old, new, old, new (one process each; each harness's
#      own timing: old = host clock around each pass, new = CUDA events and the host clock;
#      the table takes the host clock of both, `wall_ms_per_batch` for the new)
#   5. the dataset path, 256 utterances: old = length-sorted batches of 32 and 128 lanes
#      (old gpu_speed over sorted.npz); new = benchmarks.continuous --lanes 32 128 --modes
#      padded refill (refill: the device refill, continuous batching's default)
#   6. peers, 256 utterances, batch 32, --feed all: cuwfst-gpu (HLG) and riva (TLG), WER
# (The old harness prints the checkout's commit, not f3e7b4b: it asks git in the repo.)
# Carry .device and .cache. $OUT (8 files): i11.log, cli.log, memory.log, uniform_new.jsonl, dataset_new.md,
# peers.jsonl, peers.md, raw.tgz (uniform_*.txt, dataset_*.txt)
. scripts/device_common.sh  # the clock (since, left), start_full
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
NEW="env PYTHONPATH=/tmp/site:$PWD CUWFST_CACHE_DIR=$PWD/.cache/cuwfst"
OLD_DIR=$PWD/.device/old_tree
OLD="env PYTHONPATH=/tmp/site:$OLD_DIR CUWFST_CACHE_DIR=/tmp/oldcache"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/raw; R=/tmp/raw; L=$OUT/i11.log; END=${END:-570}; C=/tmp/corpus-full; I=/tmp/old_in
[ -d $OLD_DIR/cuwfst ] || { echo "no .device/old_tree: see the header" | tee $L; exit 1; }
export PYTHONPATH=/tmp/site:$PWD CUWFST_CACHE_DIR=$PWD/.cache/cuwfst; start_full  # ($NEW and $OLD set their own)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT; old f3e7b4b"; } | tee $L
$NEW python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | cut -c1-140 | tee -a $L
(cd $OLD_DIR && $OLD python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | cut -c1-140) | tee -a $L
echo "[$(since) s] built" | tee -a $L
$NEW timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_cli.py -s -rf > $OUT/cli.log 2>&1
grep -sE "passed|failed" $OUT/cli.log | tail -1 | cut -c1-160 | sed "s/^/cli (GPU lattices in the CLI): /" | tee -a $L
if ! grep -q FULL-DONE /tmp/full.log; then  # the wait, used: the memory file
  $NEW timeout -s INT $(left ${MEM_END:-230}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_memory.py -s -rf \
    --maxfail=5 > $OUT/memory.log 2>&1
  grep -sE "passed|failed" $OUT/memory.log | tail -1 | cut -c1-160 | sed "s/^/memory: /" | tee -a $L
  grep -sE "^FAILED" $OUT/memory.log | head -4 | cut -c1-200 | tee -a $L
fi
while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ $(since) -lt 330 ]; do sleep 2; done
grep -E "^  (HLG|TLG)|Error" /tmp/full.log | tail -3 | tee -a $L; echo "[$(since) s] full tier" | tee -a $L
$NEW python3 -m benchmarks.old_inputs --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --out $I 2>&1 | tail -1 | tee -a $L
for r in 1 2 3; do
  (cd $OLD_DIR && $OLD timeout -s INT 60 python3 -m benchmarks.gpu_speed --graph $I/HLG_old.img --log-probs $I/uniform.npz \
    --utts 32 --batch 32 --reps 7 --check 2) > $R/uniform_old$r.txt 2>&1
  grep -E "ms_per_batch|exactness" $R/uniform_old$r.txt | cut -c1-160 | sed "s/^/old $r: /" | tee -a $L
  $NEW timeout -s INT 60 python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $I/uniform.npz --utts 32 --batch 32 \
    --reps 7 --check 2 --variants new --json $OUT/uniform_new.jsonl > $R/uniform_new$r.txt 2>&1
  grep -E "B=32|CPU check" $R/uniform_new$r.txt | cut -c1-160 | sed "s/^/new $r: /" | tee -a $L
  grep wall_ms_per_batch $OUT/uniform_new.jsonl 2>/dev/null | tail -1 | python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print(f'new $r: host clock {r[\"wall_ms_per_batch\"]:.2f} ms a batch')" | tee -a $L
  echo "[$(since) s] uniform round $r" | tee -a $L
done
(cd $OLD_DIR && $OLD timeout -s INT 90 python3 -m benchmarks.gpu_speed --graph $I/HLG_old.img --log-probs $I/sorted.npz \
  --utts 256 --batch 32 128 --reps 3 --check 2) > $R/dataset_old.txt 2>&1
grep -E "ms_per_batch|exactness" $R/dataset_old.txt | cut -c1-200 | sed "s/^/old sorted: /" | tee -a $L
$NEW timeout -s INT 100 python3 -m benchmarks.continuous --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --lanes 32 128 \
  --modes padded refill --reps 3 --check 4 --md $OUT/dataset_new.md > $R/dataset_new.txt 2>&1
grep -E "^lanes|exactness" $R/dataset_new.txt | cut -c1-240 | sed "s/^/new: /" | tee -a $L; grep -E "^\|" $OUT/dataset_new.md | tee -a $L
echo "[$(since) s] dataset path" | tee -a $L
$NEW timeout -s INT $(left $END) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 --feed all \
  --decoders cuwfst-gpu riva --json $OUT/peers.jsonl --md $OUT/peers.md 2>&1 | grep -E "^\[peers\]|Error" | tail -6 | tee -a $L
tar -czf $OUT/raw.tgz -C $R . 2>/dev/null  # the harnesses' whole outputs (at most 8 files come back)
echo "[$(since) s] done" | tee -a $L
