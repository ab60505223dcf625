#!/usr/bin/env bash
# GPU machine, session of 2026-12-01 18:37, call 1 (~8 minutes): branch block-rank-8k's device
# call (scripts/device_block_rank.sh: rank/bucket/walk-entry tests, sanitizers, prune_split
# A/B, lattice_speed --one-call, the rest of the lattice file), then where the TLG's time goes:
#   6. gpu_speed --profile on the full TLG, 64 utterances, batch 32 (kernel split a step)
#   7. benchmarks.continuous on the full TLG and HLG, all 256 utterances, 32 lanes, padded and
#      continuous (the peers' --feed all path), --phases (host calls' wall time a pass)
# Carry .device and .cache. $OUT: as device_block_rank.sh, plus tlg_speed.jsonl, tlg_profile.txt, cont_*.jsonl
LAT_END=${LAT_END:-390} bash scripts/device_block_rank.sh
. scripts/device_common.sh
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
OUT=${OUT:-/tmp/out}; C=/tmp/corpus-full; L=$OUT/block.log; S=$C/sim/shard-00000.npz
timeout -s INT 120 python3 -m benchmarks.gpu_speed --graph $C/TLG.img --log-probs $S --utts 64 --batch 32 --reps 3 \
  --check 2 --profile --json $OUT/tlg_speed.jsonl > $OUT/tlg_profile.txt 2>&1
tail -30 $OUT/tlg_profile.txt | tee -a $L
echo "[$(since) s] tlg profile" | tee -a $L
for G in TLG HLG; do
  timeout -s INT 100 python3 -m benchmarks.continuous --graph $C/$G.img --log-probs $S --lanes 32 --reps 3 \
    --modes padded continuous --phases --check 2 --json $OUT/cont_$G.jsonl > $OUT/cont_$G.txt 2>&1
  tail -12 $OUT/cont_$G.txt | tee -a $L
  echo "[$(since) s] continuous $G" | tee -a $L
done
