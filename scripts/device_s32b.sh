#!/usr/bin/env bash
# GPU machine, one call (~8 minutes on a fresh machine): the hash probed by sectors
# (CUWFST_HASH_PROBE=sector, expand.cuh FindOrClaimSector; prediction in docs/speed-notes.md,
# "The hash probed by sectors").
#   while the full tier builds: test_gpu.py with every decoder probing by sectors (lazy), then
#   pooled by claims-finalize-ahead and probing by sectors; memcheck over random epsilon-free
#   and epsilon graphs, probing by sectors
#   (and the hints at every 32nd slot, CUWFST_POOL_HINTS=fixed, under claims-finalize-ahead)
#   then fresh-process memory at batch 32: pooled-late-ahead-fixed-sector
#   then the full tier's 256 rows (gpu_speed --utts 256 --profile), lazy / lazy-sector /
#   pooled-late-ahead (-sector, -fixed, -fixed-sector), one process, then reversed; the uniform
#   32 x 250 the same way; the TLG's 256 rows lazy / lazy-sector
# Ran once at e661412 (session of 2026-12-02 14:43; docs/benchmarks.md): the sector probe lost
# (ExpandKernel +0.9-1.0 ms a batch in both layouts) and was taken out after it, with its
# modes, so this script no longer runs at later commits.
# Carry .device. $OUT: s32b.log, tests*.log, memcheck*.log, memory.jsonl, speed.jsonl.
. scripts/device_common.sh
device_setup s32b.log
CUWFST_HASH_PROBE=sector timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s -rf \
  > $OUT/tests1.log 2>&1
echo "test_gpu (every decoder probing by sectors) exit $?: $(grep -E "passed|failed" $OUT/tests1.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests1.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests1.log | head -6; } | cut -c1-220 | tee -a $L
CUWFST_HASH_PROBE=sector CUWFST_POOL_HINTS=fixed CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead \
  timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -s -rf > $OUT/tests2.log 2>&1
echo "test_gpu (pooled, claims-finalize-ahead, fixed hints, sectors) exit $?: $(grep -E "passed|failed" $OUT/tests2.log | tail -1)" | tee -a $L
{ grep -E "mismatch" $OUT/tests2.log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/tests2.log | head -6; } | cut -c1-220 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
CUWFST_HASH_PROBE=sector CUWFST_LANE_POOL=on CUWFST_POOL_BOUND=claims-finalize-ahead timeout -s INT 80 "$CS" --tool memcheck \
  --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 3 > $OUT/memcheck1.log 2>&1
echo "memcheck 3 (pooled, sectors) exit $?: $(tail -2 $OUT/memcheck1.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
CUWFST_HASH_PROBE=sector timeout -s INT 80 "$CS" --tool memcheck \
  --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py 3 --eps > $OUT/memcheck2.log 2>&1
echo "memcheck 3 --eps (lazy, sectors) exit $?: $(tail -2 $OUT/memcheck2.log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
mem_fresh pooled-late-ahead-fixed-sector --modes pooled-late-ahead-fixed-sector --skip riva speed long
sp() {  # sp TAG GRAPH ARGS...: one gpu_speed run, its headlines into L and rows into speed.jsonl
  local tag=$1 graph=$2; shift 2
  timeout -s INT $(left ${END:-575}) python3 -m benchmarks.gpu_speed --graph $C/$graph --log-probs $C/sim/shard-00000.npz \
    --batch 32 --reps 5 --check 1 --profile "$@" > /tmp/sp.txt 2>&1
  grep -vE "^\{" /tmp/sp.txt | grep -E "kernel ms|B=32|CPU check|Error" | sed "s/^/[$tag] /" | cut -c1-300 | tee -a $L
  grep -E "^\{" /tmp/sp.txt | sed "s/^/{\"tag\": \"$tag\", \"row\": /; s/$/}/" >> $OUT/speed.jsonl
}
M="lazy lazy-sector pooled-late-ahead pooled-late-ahead-sector pooled-late-ahead-fixed pooled-late-ahead-fixed-sector"
R=$(echo $M | tr ' ' '\n' | tac | tr '\n' ' ')
sp "256 a" HLG.img --utts 256 --memory $M
sp "256 b" HLG.img --utts 256 --memory $R
sp "uni a" HLG.img --uniform 250 --utts 32 --memory $M
sp "uni b" HLG.img --uniform 250 --utts 32 --memory $R
sp "TLG" TLG.img --utts 256 --memory lazy lazy-sector
echo "[$(since) s] done" | tee -a $L
