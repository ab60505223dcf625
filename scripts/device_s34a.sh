#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine): CUWFST_PAYLOAD=token, the emitting hash
# payloads naming their token so FinalizeKernel does no slot-to-token search (types.cuh
# Workspace::payload_tok; built and compiled in the session of 2026-12-02 16:25, never run on a
# GPU). Prediction: docs/speed-notes.md "Payloads that name their token", written before.
#   while the full tier builds: test_gpu.py -k payloads (slot against token, five kernel /
#   walker / layout settings, the encoding's use asserted); test_gpu.py and test_gpu_epsilon.py
#   with every decoder on token payloads; the same pooled by claims-finalize-ahead (test_gpu.py);
#   memcheck over sanitize_case.py 3 and 2 --eps on token payloads
#   then gpu_speed --profile, one process, then reversed: lazy / lazy-token / pooled-late-ahead /
#   pooled-late-ahead-token over the full tier's 256 rows in padded batches of 32 and the uniform
#   32 x 250; the TLG's 256 rows lazy / lazy-token
# Carry .device. $OUT: s34a.log, tests*.log, memcheck*.log, speed.jsonl.
# (Ran at 4101d1b. Since e7d16aa token payloads are the default and the benchmark modes are
# renamed: lazy-token is now lazy, lazy is lazy-slot, and likewise pooled-late-ahead(-slot).)
export FULL_GRAPHS=hlg,tlg
. scripts/device_common.sh
device_setup s34a.log
gpu_tests tests1.log 120 "test_gpu -k payloads" tests/test_gpu.py -k payloads
CUWFST_PAYLOAD=token gpu_tests tests2.log 120 "test_gpu + test_gpu_epsilon (every decoder on token payloads)" \
  tests/test_gpu.py tests/test_gpu_epsilon.py
CUWFST_PAYLOAD=token CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead \
  gpu_tests tests3.log 80 "test_gpu (token payloads, pooled by claims-finalize-ahead)" tests/test_gpu.py
CUWFST_PAYLOAD=token memcheck_case memcheck1.log 80 "memcheck 3 (token payloads)" 3
CUWFST_PAYLOAD=token memcheck_case memcheck2.log 80 "memcheck 2 --eps (token payloads)" 2 --eps
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
speed() {  # speed GRAPH MODES SHAPE...
  local graph=$1 modes=$2; shift 2
  timeout -s INT $(left ${END:-570}) python3 -m benchmarks.gpu_speed --graph $C/$graph --log-probs $C/sim/shard-00000.npz \
    "$@" --batch 32 --reps 5 --check 1 --profile --memory $modes > /tmp/sp.txt 2>&1
  grep -vE "^\{" /tmp/sp.txt | grep -E "kernel ms|B=32|CPU check|Error" \
    | sed -E 's/kernel ms per batch of 32 \(launch by launch, CUDA events\): //; s/ \([0-9]+%\)//g' \
    | sed "s/^/[$graph $*] /" | cut -c1-240 | tee -a $L
  grep -E "^\{" /tmp/sp.txt | sed "s/^/{\"graph\": \"$graph\", \"shape\": \"$*\", \"order\": \"$modes\", \"row\": /; s/$/}/" >> $OUT/speed.jsonl
}
M="lazy lazy-token pooled-late-ahead pooled-late-ahead-token"; R="pooled-late-ahead-token pooled-late-ahead lazy-token lazy"
for shape in "--utts 256" "--uniform 250 --utts 32"; do
  speed HLG.img "$M" $shape; speed HLG.img "$R" $shape
done
speed TLG.img "lazy lazy-token" --utts 256; speed TLG.img "lazy-token lazy" --utts 256
echo "[$(since) s] done" | tee -a $L
