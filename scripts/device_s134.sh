#!/usr/bin/env bash
# GPU machine: the last call of the session of 2026-12-05 02:53 (issue 10). HEAD has the search in k2's
# order of addition (ab3bf49; device_s133.sh: every GPU file passed but test_gpu_trim's grid check, GPU
# lattices == CPU on 64 + 64 full-HLG rows) and the chunked record slots as the default (a2262af), with
# the grid test pinned to the in-step records. Shows:
#   1. the whole GPU suite again (five pytest processes side by side) on HEAD, while the full tier, the
#      model set (64 rows, made here) and the old side's modules build;
#   2. then, the machine otherwise idle, speed side by side: HEAD against c15656d (.device/ab_old: every
#      cuwfst/ file the two commits changed, as c15656d had it: the old order, the slots a round) in
#      separate processes, new / old / new, on the sim set (256 utterances) and the model set (64), and
#      inside HEAD's process the chunked slots against CUWFST_LATTICE_RESERVE=round (--env-ab): the
#      order's cost and the chunks' gain apart. Each run checks 4 rows' GPU lattices against its CPU.
# Until END (default 575) s. Carry .device (without riva's wheel: the carry limit).
# $OUT: s134.log, tests.tgz, lat_sim.jsonl, lat_model.jsonl, make_set.log
. scripts/device_common.sh
END=${END:-575}
device_setup s134.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
start_model_set 64
gpu_suite 360
# (run on 2026-12-05 with `ab_init .device/ab_old; ab_use other; ab_use own` here, beside the tests: the
# three tests that made their decoders while the old sources were in place failed by an ulp, and passed
# when rerun alone; the old side's modules are built after the tests now)
gpu_suite_wait
ab_init .device/ab_old; ab_use other; ab_use own
echo "[$(since) s] tests" | tee -a $L
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
speed() {  # speed SIDE SET UTTS JSONL UNTIL ARGS...: one lattice_speed run of a side's module
  local side=$1 set=$2 utts=$3 jsonl=$4 until=$5; shift 5
  ab_use $side > /dev/null
  timeout -s INT $(left $until) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/$set/shard-00000.npz \
    --utts $utts --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call "$@" --json /tmp/sp.jsonl > /tmp/sp.txt 2>&1
  grep -E "vs 1-best|exactness|env A/B|Error" /tmp/sp.txt | sed "s/^/[$set $side] /" | cut -c1-260 | tee -a $L
  sed "s/^/{\"side\": \"$side\", \"row\": /; s/$/}/" /tmp/sp.jsonl >> $OUT/$jsonl; rm -f /tmp/sp.jsonl
}
# (each run at most 40 s past its start, none past END)
at() { local u=$(( $(since) + $1 )); echo $(( u < END ? u : END )); }
speed own sim 256 lat_sim.jsonl $(at 45) --env-ab round:CUWFST_LATTICE_RESERVE=round
speed other sim 256 lat_sim.jsonl $(at 40)
speed own sim 256 lat_sim.jsonl $(at 40)
echo "[$(since) s] sim" | tee -a $L
while ! grep -q MODEL-DONE $OUT/make_set.log 2>/dev/null && [ $(since) -lt $((END - 90)) ]; do sleep 2; done
if [ -f $C/model/shard-00000.npz ]; then
  speed own model 64 lat_model.jsonl $(at 45) --env-ab round:CUWFST_LATTICE_RESERVE=round
  speed other model 64 lat_model.jsonl $(at 40)
  speed own model 64 lat_model.jsonl $(at 40)
else echo "no model set: $(tail -2 $OUT/make_set.log 2>/dev/null)" | tee -a $L; fi
ab_use own > /dev/null
echo "[$(since) s] end" | tee -a $L
