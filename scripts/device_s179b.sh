#!/usr/bin/env bash
# GPU machine: issue 10, the session of 2026-12-06 07:39, third call, on the machine device_s179.sh left
# warm (its module build, the small tier and the full tier in /tmp). The small and the full HLG (256 sim
# rows, batch 32, one process each, --profile): the default (the log in the scans) against
# CUWFST_LATTICE_LOG=kernel twice, and (full HLG only) CUWFST_LATTICE_PIPELINE=off, a diagnostic: the
# search's kernels with no pruning beside them (the profile's scan, max, expand and finalize in a lattice
# decode ran 1.5-2 ms over the 1-best's in s177 and s178).
# Predictions: the default 0.8-1.5 ms under kernel on the full HLG (s178b: -1.2), within +-0.5 on the small;
# under PIPELINE=off the search's profiled kernels within 0.3 ms of the 1-best's if the pruning beside is
# what slows them (the batch itself slower: the pruning then runs alone).
# Carry .device. $OUT: s179b.log, ab_small.*, ab_full.*
. scripts/device_common.sh
END=${END:-400}
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; L=$OUT/s179b.log
[ -d /tmp/site ] || { echo "not warm: no /tmp/site" | tee -a $L; exit 1; }
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee -a $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | tee -a $L
wait_full 200
SIDES=("kernel:CUWFST_LATTICE_LOG=kernel" "kernel2:CUWFST_LATTICE_LOG=kernel")
grep -q FULL-DONE /tmp/full.log && env_ab full $C/HLG.img $C/sim/shard-00000.npz 200 --profile --env-ab "${SIDES[@]}" \
  "nopipe:CUWFST_LATTICE_PIPELINE=off"
echo "[$(since) s] full HLG" | tee -a $L
env_ab small /tmp/corpus-small/HLG.img /tmp/corpus-small/sim/shard-00000.npz $(left $END) --profile --env-ab "${SIDES[@]}"
echo "[$(since) s] end" | tee -a $L
