#!/usr/bin/env bash
# GPU machine, one short call on a fresh machine (~60 s after the start; no full tier, no tests,
# the GPU module carried in .cache): issue 9's ~100 MiB outside the module's counters at the
# first decode (docs/benchmarks.md, sessions of 2026-12-01 22:51 and 23:52). Each run a fresh
# process of benchmarks.memory_stages on the tiny HLG, 4 lanes, lazy: as is; check_log_probs off;
# check_log_probs' PyTorch ops (advanced indexing, a cast to float64, a copy to the host) run once
# before the baseline; CUDA_MODULE_LOADING=EAGER; as is again.
# Prediction (written before the run): the sampled check's PyTorch ops load PyTorch code lazily
# (test_gpu_faults saw 88 MiB for a first ones().sum()), so the first decode's part outside the
# counters is ~90-100 MiB as is, ~10 MiB with the check off, ~10 MiB with the ops warmed, ~10 MiB
# under EAGER.
# Carry .device and .cache. $OUT: s23d.log, stages.jsonl.
set -uo pipefail
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; L=$OUT/s23d.log
stages() {  # stages NAME ARGS...: one fresh process
  local name=$1; shift
  timeout -s INT 60 python3 -m benchmarks.memory_stages --graph cuwfst/data/tiny/HLG.img \
    --log-probs cuwfst/data/demo/tiny_utts.npz --batch 4 --memory lazy --json $OUT/stages.jsonl "$@" > /tmp/st.txt 2>&1
  grep -E "^\| (decoder|decode 1|freed) |Error" /tmp/st.txt | sed "s/^/[$name] /" | tee -a $L
  echo "[$name] $(( $(date +%s) - T0 )) s" | tee -a $L
}
stages plain
stages check-off --check-log-probs off
stages torch-warm --warm torch-sample
CUDA_MODULE_LOADING=EAGER stages eager
stages plain2
