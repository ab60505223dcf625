#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 17:20, last call. A diagnostic for the next session:
# is a lattice decode's host work on the acoustic model's posteriors bound by CPU threads or serialized?
# On the H100 (s152b, full HLG, 256 model rows) a job's host work took 250-300 ms for 32 rows (Lattice
# objects ~100 ms, word times and confidences ~150), where s140's standalone attach_threads took 47 ms
# for word times and confidences at 8 threads; 4 workers did not cut the batch time.
# Here the small tier's HLG with a model set made on it (128 rows; the full tier does not fit the
# session's device time left): lattice_speed --one-call, 2 workers, the decoder's num_threads 8 / 16 / 4
# (each job's native calls), then attach_threads standalone on 32 of the same rows (1 / 8 / 16 threads).
# Prediction (written before the run): the jobs' host times change by <= 15 % between 4, 8 and 16
# threads (serialized: allocation / page faults, the GIL), and stay >= 3x the standalone time at 8.
# Stage: .device/wheels without riva's, with espeakng_loader and kaldi_native_fbank. Carry .device.
. scripts/device_common.sh
END=${END:-400}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD:$PWD/.device/pylib PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 \
  CUWFST_CACHE_DIR=$PWD/.cache/cuwfst CUWFST_COMMIT=$(cat .device/COMMIT)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/s155.log; S=/tmp/corpus-small
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
( python3 -m benchmarks.corpus.build --tier small --out $S --arpa .device/data/en-us-3gram.arpa.xz \
    --bpe-model cuwfst/data/tiny/bpe.model > /tmp/small.log 2>&1 \
  && python3 -m benchmarks.model.make_set --weights examples/model.int8.npz --corpus $S --set-corpus $S \
    --set-utts 128 > $OUT/make_set.log 2>&1 && echo MODEL-DONE >> $OUT/make_set.log ) &
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | tee -a $L
wait
echo "[$(since) s] model set on the small tier: $(tail -n 1 $OUT/make_set.log | cut -c1-80)" | tee -a $L
for t in 8 16 4; do
  [ $(since) -lt $((END - 40)) ] || break
  CUWFST_LATTICE_HOST_WORKERS=2 timeout -s INT $(left $((END - 5))) python3 -m benchmarks.lattice_speed --graph $S/HLG.img \
    --log-probs $S/model/shard-00000.npz --utts 128 --batch 32 --reps 3 --cpu-utts 0 --check 1 --no-replay --one-call \
    --threads $t --json $OUT/lat_small_model.jsonl > $OUT/t$t.txt 2>&1
  grep -E "vs 1-best|its tail|parts a job|exactness|Error" $OUT/t$t.txt | cut -c1-420 | sed "s/^/[threads $t] /" | tee -a $L
done
timeout -s INT $(left $((END - 3))) python3 scripts/attach_threads.py $S/HLG.img $S/model/shard-00000.npz 32 1 8 16 \
  > $OUT/attach_threads.txt 2>&1; tail -n 5 $OUT/attach_threads.txt | cut -c1-200 | tee -a $L
echo "[$(since) s] end" | tee -a $L
