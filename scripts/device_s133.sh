#!/usr/bin/env bash
# GPU machine: the search in k2's order of addition (docs/speed-notes.md "Exactness at full scale
# against real k2"; session of 2026-12-05 02:53). ArcEnd = score + (acoustic + weight) and every
# bound in that shape (tok_ub = score + (max_lp + max emitting weight), written after the row's max
# is known; the trim's keeps, the bins bound, max_known, the records pass's read bound). Shows:
#   1. the whole GPU suite (-m gpu, every file), in four pytest processes side by side (the suite
#      one after another is ~10 min), while the full tier and the model set (64 rows, made here from
#      examples/model.int8.npz; needs the espeakng_loader and kaldi_native_fbank wheels) build;
#   2. on the full HLG: GPU lattices against the CPU decoder's (lattice_speed --check 64) and the
#      1-best (gpu_speed --check 32) on the sim set and on the model set (the posteriors where the
#      order decided 3 of 64 rows against k2).
# Until END (default 570) s. Carry .device (without riva's wheel: the carry limit).
# $OUT: s133.log, tests.tgz (the four groups' logs), lat_sim.jsonl, lat_model.jsonl, make_set.log
. scripts/device_common.sh
END=${END:-570}
device_setup s133.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
start_model_set 64
group() {  # group NAME FILES...: one pytest process over FILES (-m gpu) in the background
  local name=$1; shift
  ( timeout -s INT 420 python3 -m pytest -q -p no:cacheprovider -m gpu "$@" -s -rf > $OUT/tests_$name.log 2>&1
    echo "exit $?" >> $OUT/tests_$name.log ) &
}
group lat tests/test_gpu_lattice.py
group var tests/test_gpu_variants.py tests/test_k2_order.py tests/test_cli.py tests/test_blank_skip.py \
  tests/test_streaming_bench.py tests/test_gpu_scan_trace.py
group base tests/test_gpu.py tests/test_gpu_epsilon.py tests/test_gpu_chain.py
group trim tests/test_gpu_trim.py tests/test_gpu_memory.py tests/test_gpu_lanes.py tests/test_gpu_walk_entry.py \
  tests/test_gpu_faults.py
wait_full 360; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left 430) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 64 --batch 32 --reps 1 --cpu-utts 0 --check 64 --no-replay --one-call --json $OUT/lat_sim.jsonl 2>&1 \
  | grep -E "exactness|vs 1-best|Error" | sed 's/^/[sim] /' | tee -a $L
timeout -s INT $(left 450) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
  --utts 64 --batch 32 --reps 1 --check 32 2>&1 | grep -E "CPU check|B=32|Error" | sed 's/^/[sim] /' | cut -c1-200 | tee -a $L
echo "[$(since) s] sim checks" | tee -a $L
while ! grep -q MODEL-DONE $OUT/make_set.log 2>/dev/null && [ $(since) -lt 470 ]; do sleep 2; done
tail -2 $OUT/make_set.log 2>/dev/null | cut -c1-200 | tee -a $L; echo "[$(since) s] model set" | tee -a $L
if [ -f $C/model/shard-00000.npz ]; then
  timeout -s INT $(left $((END - 40))) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/model/shard-00000.npz \
    --utts 64 --batch 32 --reps 1 --cpu-utts 0 --check 64 --no-replay --one-call --json $OUT/lat_model.jsonl 2>&1 \
    | grep -E "exactness|vs 1-best|Error" | sed 's/^/[model] /' | tee -a $L
  timeout -s INT $(left $((END - 10))) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/model/shard-00000.npz \
    --utts 64 --batch 32 --reps 1 --check 32 2>&1 | grep -E "CPU check|B=32|Error" | sed 's/^/[model] /' | cut -c1-200 | tee -a $L
else echo "no model set" | tee -a $L; fi
echo "[$(since) s] model checks; waiting for the test groups" | tee -a $L
wait
for n in lat var base trim; do
  echo "[$n] $(tail -1 $OUT/tests_$n.log) $(grep -E "passed|failed" $OUT/tests_$n.log | tail -1)" | tee -a $L
  grep -E "^FAILED|mismatch" $OUT/tests_$n.log | grep -v "^E " | head -6 | cut -c1-220 | tee -a $L
done
pack_logs 'tests_*.log'
echo "[$(since) s] end" | tee -a $L
