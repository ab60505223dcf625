#!/usr/bin/env bash
# GPU machine: issue 10, the second call after device_s131.sh (docs/speed-notes.md "Session of
# 2026-12-05 00:08"). NOT yet run on a GPU. Two things s131 does not measure:
#   A. the bars on the acoustic model's posteriors (the model set, 256 held-out rows, remade here from
#      examples/model.int8.npz as device_session_check.sh did; needs the espeakng_loader and
#      kaldi_native_fbank wheels, staged in .device/wheels since this session): lattice_speed (lattice
#      against the 1-best, --profile's kernel split) and the peers with riva (cuwfst-gpu,
#      cuwfst-gpu-lattice, riva on the TLG; feed all, batch 32). riva slowed 4x on these posteriors
#      where cuwfst slowed by a third (docs/benchmarks.md, issue 13), so the riva bar is nearer there.
#   B. the queued switches' kernel sums (lattice_speed --profile --env-ab on the sim set's first 64 rows):
#      s131's wall-time A/B spreads ~1 ms, the predictions are 0.3-1.5 ms a switch; the kernel split
#      of each side resolves them.
#   1. wheels; the full tier (HLG, TLG) and the small tier in the background, then the model set
#      (its forward on the GPU, before any timing)
#   2. B on the sim set
#   3. A on the model set, until END
# Until END (default 590) s. Carry .device. $OUT: s132.log, lat_prof_ab.jsonl, lat_model.jsonl, peers.*, make_set.log
. scripts/device_common.sh
END=${END:-590}
device_setup s132.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
start_model_set 256
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
# (the model set's forward runs on the GPU: made before B's timings, not beside them)
while ! grep -q MODEL-DONE $OUT/make_set.log 2>/dev/null && [ $(since) -lt 300 ]; do sleep 2; done
tail -3 $OUT/make_set.log 2>/dev/null | tee -a $L; echo "[$(since) s] model set" | tee -a $L
lat_speed lat_prof_ab.jsonl $((END - 250)) --utts 64 --profile --env-ab chunk:CUWFST_LATTICE_RESERVE=chunk \
  packed:CUWFST_LATTICE_TABLES=packed log:CUWFST_LATTICE_LOG=finalize \
  all:CUWFST_LATTICE_RESERVE=chunk,CUWFST_LATTICE_TABLES=packed,CUWFST_LATTICE_LOG=finalize
echo "[$(since) s] profiled A/B (sim)" | tee -a $L
if [ -f $C/model/shard-00000.npz ]; then
  timeout -s INT $(left $((END - 110))) python3 -m benchmarks.lattice_speed --graph $C/HLG.img \
    --log-probs $C/model/shard-00000.npz --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call \
    --profile --json $OUT/lat_model.jsonl 2>&1 | grep -v "^{" | tail -24 | tee -a $L
  echo "[$(since) s] lattice_speed (model)" | tee -a $L
  timeout -s INT $(left $((END - 5))) python3 -m benchmarks.peers.run --corpus $C --set model --batch 32 --utts 256 \
    --reps 3 --feed all --decoders cuwfst-gpu cuwfst-gpu-lattice riva --json $OUT/peers.jsonl --md $OUT/peers.md \
    > $OUT/peers.txt 2>&1
  echo "peers (model) exit $?" | tee -a $L
  grep -E "^\[peers\]" $OUT/peers.txt | tail -4 | cut -c1-200 | tee -a $L
else echo "no model set: A not run" | tee -a $L; fi
echo "[$(since) s] end" | tee -a $L
