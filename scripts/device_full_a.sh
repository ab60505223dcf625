#!/usr/bin/env bash
# GPU machine, call A of two: the full corpus builds in the background while every GPU test
# and memcheck run; then the decoder's speed on the full TLG and HLG with the kernel split.
# Call B (device_full_b.sh) must follow at once, on the same warm machine (/tmp/corpus-full).
set -uo pipefail
T0=$(date +%s); left() { echo $(( ${1} - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; L=$OUT/a.log
ARPA=.device/data/en-us-3gram.arpa.xz
if [ ! -f $C/sim/shard-00000.npz ]; then
( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier full --out $C --arpa $ARPA --bpe-model cuwfst/data/tiny/bpe.model && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 --shard-size 256 --seed 0 && echo FULL-DONE" > /tmp/full.log 2>&1 < /dev/null & )
fi
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests -s 2>&1 | grep -E "passed|failed|FAILED|Error|GPU vs CPU|lanes:|rows compared" | tail -14 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 100 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 2 --eps --lanes 2>&1 | tail -2 | tee -a $L
while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ ! -f $C/sim/shard-00000.npz -o ! -f $C/TLG.img ] && [ $(left 420) -gt 0 ]; do sleep 3; done
grep -E "^  (HLG|TLG)|stages|Error" /tmp/full.log | tail -4 | tee -a $L; cp $C/stats.json $OUT/full_stats.json 2>/dev/null
for G in TLG HLG; do
  timeout $(left 560) python3 -m benchmarks.gpu_speed --graph $C/$G.img --log-probs $C/sim/shard-00000.npz --utts 128 --batch 1 8 32 \
    --reps 3 --check 6 --profile --json $OUT/speed.jsonl 2>&1 | grep -v "^{" | tail -6 | tee -a $L
done
grep -h '"batch"' $OUT/speed.jsonl | python3 -c "import sys,json; [print(r['graph'].split('/')[-1], r['batch'], round(r['ms_per_batch'],1), round(r['rtfx']), r['max_frontier'], round(r.get('closure_growth',1),3), r['overflow_rows']) for r in map(json.loads, sys.stdin)]" | tee -a $L
