#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 20:10. Side passes (CUWFST_LATTICE_AFTER_SIDE=on, off by
# default): the records pass partly beside the search. Their tests first, then the A/B on the full HLG.
# Prediction (written before the run): the tests pass; with side passes (every 64 steps on 132 CTAs) a
# sub-batch's decode call ~31.6 -> 28-29.5 ms, a lattice batch 34.5 -> 31.5-33 ms (H200), the 1-best
# unchanged, lattices identical to the default's; every 32 steps no better than 64; 264 CTAs a pass slows
# the search more than it gains. Against it: s115 (2026-12-04, the pass beside the NEXT batch's search) found
# the pass ~5,000 CTA-ms of work whatever its grid cap, and the search +45 % beside ~128 of its CTAs, +10 %
# beside 64; so the side passes may lose at 132 CTAs (the search slows) and at 32-64 (the passes outlast the
# search and the pass after it waits). Grids 32 and 64 map that.
# $OUT: s208.log, tests_side.log, ab_full.*
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s208.log
gpu_tests tests_side.log 200 "side passes" tests/test_gpu_lattice.py -k "side_passes or side_bucketing_late"
wait_full 300; echo "[$(since) s] full tier" | tee -a $L
S=CUWFST_LATTICE_AFTER_SIDE
env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left 480) --trace-sides --env-ab side:$S=on off:$S=off \
  grid64:$S=on,${S}_GRID=64 grid32:$S=on,${S}_GRID=32 every32:$S=on,${S}_EVERY=32 grid264:$S=on,${S}_GRID=264 side2:$S=on
grep -E "lattice rows identical|last batch: prune" $OUT/ab_full.txt | cut -c1-400 | tee -a $L
grep -E "\(side |\(rows in place\)" $OUT/ab_full.txt | grep -E "the call |decode call" | cut -c1-240 | tee -a $L
echo "[$(since) s] end" | tee -a $L
