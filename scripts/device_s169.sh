#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 22:48. One call:
#   1. device_s168.sh's tests of the chain closure in GPU-pruned lattice decodes (CUWFST_LATTICE_CHAIN=on)
#      and the records pass's arc prefetch (CUWFST_LATTICE_PREFETCH=on / on3; test_gpu_lattice.py
#      -k "prefetch or records_after"), beside the small tier's build (the full tier's in the background);
#   2. the small HLG: the prefetch (on, on3) and the pass's phase sums (CUWFST_LATTICE_AFTER_PROF=on,
#      scripts/records_prof.py) beside the default;
#   3. the small TLG (256 sim rows, batch 32): the chain beside the default (lists);
#   4. if the full tier is built in time: the same as 3 on the full HLG (256 sim rows, --profile).
# Predictions (written before any run): exact everywhere. Chain: the small TLG's lattice batch 58 -> 48-53
# ms. Prefetch: the full HLG's records pass (8.8 ms a batch on the H100, s164) -25 to -45 % if its rounds
# wait on the arcs' loads (most of a round's latency: a DRAM or L2 load of 8 bytes a lane, then shared
# memory and an L1 hit); on3 (24 warps a multiprocessor, no spills) within 10 % of on. The phase sums:
# walk >= 80 % of the warps' cycles, setup (row and table) <= 10 %, the CTAs >= 85 % busy over the span.
# Stage: .device/wheels. Carry .device. $OUT: s169.log, tests_*.log, tlg_chain.*, hlg_*_pf.*
. scripts/device_common.sh
END=${END:-585}
FULL_GRAPHS=hlg device_setup s169.log  # (the HLG alone: the A/B reads no TLG of the full tier)
small_tier &
CUWFST_LATTICE_CHAIN=on gpu_tests tests_eps.log 150 "test_gpu_eps_prune.py (chain)" tests/test_gpu_eps_prune.py &
CUWFST_LATTICE_CHAIN=on gpu_tests tests_epslat.log 150 "test_gpu_lattice.py -k eps (chain)" tests/test_gpu_lattice.py -k eps &
CUWFST_LATTICE_CHAIN=on gpu_tests tests_chain.log 150 "test_gpu_chain.py (chain)" tests/test_gpu_chain.py &
gpu_tests tests_pf.log 150 "test_gpu_lattice.py -k 'prefetch or records_after'" tests/test_gpu_lattice.py -k "prefetch or records_after" &
wait
echo "[$(since) s] tests" | tee -a $L
S=/tmp/corpus-small
pf_ab() {  # pf_ab TAG GRAPH SHARD CAP ARGS...: the prefetch and profile sides beside the default
  local tag=$1 graph=$2 shard=$3 cap=$4; shift 4
  timeout -s INT $cap python3 -m benchmarks.lattice_speed --graph $graph --log-probs $shard \
    --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call "$@" \
    --env-ab "pf:CUWFST_LATTICE_PREFETCH=on" "pf3:CUWFST_LATTICE_PREFETCH=on3" "prof:CUWFST_LATTICE_AFTER_PROF=on" \
    "pf3prof:CUWFST_LATTICE_PREFETCH=on3,CUWFST_LATTICE_AFTER_PROF=on" --json $OUT/hlg_${tag}_pf.jsonl \
    > $OUT/hlg_${tag}_pf.txt 2> $OUT/hlg_${tag}_pf.err
  echo "[$tag HLG prefetch A/B exit $?]" | tee -a $L
  grep -vE "^\{" $OUT/hlg_${tag}_pf.txt | grep -iE "vs 1-best|env A/B|exactness|Error|lattice grids" | cut -c1-600 \
    | head -14 | sed "s/^/[$tag] /" | tee -a $L
  python3 scripts/records_prof.py $OUT/hlg_${tag}_pf.err | sed "s/^/[$tag] /" | tee -a $L
  grep -E "Error|Traceback" $OUT/hlg_${tag}_pf.err | head -3 | tee -a $L
}
pf_ab small $S/HLG.img $S/sim/shard-00000.npz 150 --profile
echo "[$(since) s] small HLG" | tee -a $L
timeout -s INT 120 python3 -m benchmarks.lattice_speed --graph $S/TLG.img --log-probs $S/sim/shard-00000.npz \
  --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call \
  --env-ab "chain:CUWFST_LATTICE_CHAIN=on" --json $OUT/tlg_chain.jsonl > $OUT/tlg_chain.txt 2>&1
echo "[TLG chain A/B exit $?]" | tee -a $L
grep -vE "^\{" $OUT/tlg_chain.txt | grep -iE "vs 1-best|env A/B|exactness|Error" | cut -c1-400 | head -8 | tee -a $L
echo "[$(since) s] TLG chain" | tee -a $L
[ -n "${NO_FULL:-}" ] || wait_full $((END - 190))  # (NO_FULL=1: no full tier at all, for a short call)
if [ -z "${NO_FULL:-}" ] && grep -q FULL-DONE /tmp/full.log; then
  pf_ab full $C/HLG.img $C/sim/shard-00000.npz $(left $END) --profile
fi
echo "[$(since) s] end" | tee -a $L
