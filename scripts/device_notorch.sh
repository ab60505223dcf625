#!/usr/bin/env bash
# GPU machine (issue 12): the README's journey in a fresh venv that has no torch, on the GPU.
#   1. a venv without system site-packages: numpy and tqdm linked in from the system Python,
#      the wheels cuwfst needs from .device/wheels, cuwfst itself on PYTHONPATH; `import torch`
#      must fail there
#   2. `cuwfst demo` (must decode on cuda), `cuwfst demo --write-example`, then
#      `cuwfst decode ... --format ctm --refs` on a directory of .npy files with --device cuda
#      and with --device cpu: the two CTM files must be identical
# Output: $OUT/notorch.log
set -uo pipefail
OUT=${OUT:-/tmp/out-notorch}; mkdir -p "$OUT"; L=$OUT/notorch.log
export CUWFST_CACHE_DIR=${CUWFST_CACHE_DIR:-$PWD/.cache/cuwfst}
REPO=$PWD
V=/tmp/venv-notorch
python3 -m venv --without-pip "$V" || exit 1
SP=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
SYS=$(python3 -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')
for m in numpy tqdm typing_extensions; do  # where the system Python has them
  src=$(python3 -c "import $m, os; f = $m.__file__; print(os.path.dirname(f) if f.endswith('__init__.py') else f)") \
    && ln -s "$src" "$SP/"
done
[ -e "$SYS/numpy.libs" ] && ln -s "$SYS/numpy.libs" "$SP/"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$SP" \
  .device/wheels/apache_tvm_ffi-*.whl .device/wheels/ninja-*.whl .device/wheels/kaldialign-*.whl .device/wheels/kaldifst-*.whl \
  2>&1 | tail -2
export PYTHONPATH=$REPO PATH=$V/bin:$SP/bin:$PATH
run() { echo "\$ $*" | tee -a "$L"; "$@" 2>&1 | tee -a "$L"; echo "(exit ${PIPESTATUS[0]})" | tee -a "$L"; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $(cat .device/COMMIT 2>/dev/null)"; } | tee "$L"
run python -c "import sys; print(sys.executable, sys.version.split()[0]); import numpy, tvm_ffi; print('numpy', numpy.__version__)"
run python -c "import torch"
run python -m cuwfst --version
run python -m cuwfst demo
D=/tmp/notorch-demo; rm -rf $D
run python -m cuwfst demo --write-example $D
cd $D || exit 1
run python -m cuwfst decode data/lang_bpe_500/HLG.fst exp/log_probs/ --refs data/test/text --format ctm \
  --device cuda --out exp/hyp-cuda.ctm
run python -m cuwfst decode data/lang_bpe_500/HLG.fst exp/log_probs/ --refs data/test/text --format ctm \
  --device cpu --out exp/hyp-cpu.ctm
run head -n 3 exp/hyp-cuda.ctm exp/errs-hyp-cuda.txt
if cmp -s exp/hyp-cuda.ctm exp/hyp-cpu.ctm && [ -s exp/hyp-cuda.ctm ]; then
  echo "CTM cuda == cpu: identical ($(wc -l < exp/hyp-cuda.ctm) lines)" | tee -a "$L"
else
  echo "CTM cuda != cpu" | tee -a "$L"; diff exp/hyp-cuda.ctm exp/hyp-cpu.ctm | head -20 | tee -a "$L"
fi
run python -m cuwfst decode data/lang_bpe_500/HLG.fst exp/log_probs.npz --format jsonl --device cuda --batch-size 4 \
  --out exp/hyp.jsonl
run head -c 400 exp/hyp.jsonl
cd "$REPO"
