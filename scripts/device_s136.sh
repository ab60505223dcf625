#!/usr/bin/env bash
# GPU machine: issue 10, the second call of the session of 2026-12-05 04:55. Run on the merge of branch
# k2-numbering into main (the GPU half of to_k2 arc for arc, never run on a GPU before):
#   1. the whole GPU suite (gpu_suite) on the merge: every GPU-vs-CPU lattice test compares state ids,
#      and tests/test_k2_structure.py's GPU case compares k2's own FsaVec arc for arc;
#   2. lattice_speed on the sim set with --check 8 (GPU lattices == CPU on 8 full-HLG rows, states
#      numbered the same);
#   3. the model set at 256 rows (made here: make_set, background) through lattice_speed, the ratio with
#      the call's tail spread over eight sub-batches as on sim (s134 had 64 rows, two sub-batches).
# Stage: .device/wheels with espeakng_loader and kaldi_native_fbank, without riva's wheel (the carry
# limit). Until END (default 570) s. Carry .device.
# $OUT: s136.log, tests.tgz, lat_sim.jsonl, lat_model.jsonl, make_set.log
. scripts/device_common.sh
END=${END:-570}
device_setup s136.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
start_model_set 256
gpu_suite 330
gpu_suite_wait
echo "[$(since) s] tests" | tee -a $L
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
lat() {  # lat SET UTTS JSONL UNTIL ARGS...
  local set=$1 utts=$2 jsonl=$3 until=$4; shift 4
  timeout -s INT $(left $until) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/$set/shard-00000.npz \
    --utts $utts --batch 32 --reps 3 --cpu-utts 0 --no-replay --one-call "$@" --json $OUT/$jsonl 2>&1 \
    | grep -E "vs 1-best|the tail|its tail|collections|exactness|Error" | sed "s/^/[$set] /" | cut -c1-300 | tee -a $L
}
lat sim 256 lat_sim.jsonl $((END - 110)) --check 8
echo "[$(since) s] sim" | tee -a $L
while ! grep -q MODEL-DONE $OUT/make_set.log 2>/dev/null && [ $(since) -lt $((END - 80)) ]; do sleep 2; done
if [ -f $C/model/shard-00000.npz ]; then lat model 256 lat_model.jsonl $((END - 5)) --check 4
else echo "no model set: $(tail -2 $OUT/make_set.log 2>/dev/null)" | tee -a $L; fi
echo "[$(since) s] end" | tee -a $L
