#!/usr/bin/env bash
# GPU machine: issue 10, a short call (about 6 minutes; written 2026-12-05 14:12 for a session whose
# device calls kept getting no machine). No full tier:
#   1. the GPU tests whose CPU reference changed since the last GPU run (the records replay the GPU
#      lattice runs on epsilon graphs, now with a step's records put at their places; the CPU
#      records filter on epsilon graphs; the search's scratch): test_gpu_lattice.py and
#      test_gpu_epsilon.py side by side, each at most CAP s (default 170), beside the small tier's build;
#   2. the GPU lattice mode on a TLG, never timed before: lattice_speed --one-call on the small tier's
#      TLG and HLG (256 simulated utterances, batch 32, 3 reps, 4 rows checked against the CPU); on the
#      TLG the GPU's records are not pruned on the GPU but replayed on the host
#      (cuwfst/decoder/lattice_records.py). Prediction: written in docs/speed-notes.md before the run.
# Any wheels staging works. Carry .device. $OUT: s142.log, lat.log, eps.log, tlg.txt, hlg.txt, lat_small.jsonl
. scripts/device_common.sh
END=${END:-560}
NO_FULL=1 device_setup s142.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
S=/tmp/corpus-small
( python3 -m benchmarks.corpus.build --tier small --out $S --arpa .device/data/en-us-3gram.arpa.xz \
    --bpe-model cuwfst/data/tiny/bpe.model > /tmp/small.log 2>&1 \
  && python3 -m benchmarks.corpus.simulate --corpus $S --out $S/sim --num-utts 256 --shard-size 256 --seed 0 \
    >> /tmp/small.log 2>&1 && echo SMALL-DONE >> /tmp/small.log ) &
gpu_tests lat.log ${CAP:-170} "test_gpu_lattice.py" tests/test_gpu_lattice.py &
gpu_tests eps.log ${CAP:-170} "test_gpu_epsilon.py" tests/test_gpu_epsilon.py &
wait
echo "[$(since) s] tests; small tier: $(tail -n 1 /tmp/small.log)" | tee -a $L
for G in TLG HLG; do
  g=$(echo $G | tr A-Z a-z)
  timeout -s INT $(left $((END - 5))) python3 -m benchmarks.lattice_speed --graph $S/$G.img \
    --log-probs $S/sim/shard-00000.npz --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call \
    --json $OUT/lat_small.jsonl > $OUT/$g.txt 2>&1
  echo "[$G exit $?]" | tee -a $L
  grep -E "^graph|vs 1-best|exactness|identical|Error|ms per batch" $OUT/$g.txt | cut -c1-300 | sed "s/^/[$G] /" | tee -a $L
done
echo "[$(since) s] end" | tee -a $L
