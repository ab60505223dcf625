#!/usr/bin/env bash
# GPU machine: torchaudio's CUDA CTC decoder on the full tier's simulated utterances. It needs
# no graph, so only the tier's units and lexicon are built (identical to the full build's,
# so the seed-0 utterances are the same), then the peers driver runs it at batch 1, 8, 32.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full
python3 - <<'PY'
import shutil
from pathlib import Path
from benchmarks.corpus.arpa import read_arpa
from benchmarks.corpus.units import make_lang
out = Path("/tmp/corpus-full"); out.mkdir(parents=True, exist_ok=True)
shutil.copyfile("cuwfst/data/tiny/bpe.model", out / "bpe.model")
make_lang(read_arpa(Path(".device/data/en-us-3gram.arpa.xz")), str(out / "bpe.model")).write(str(out))
print("lang written")
PY
python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 --shard-size 256 --seed 0 --arpa .device/data/en-us-3gram.arpa.xz >/dev/null 2>&1; ls $C/sim
for b in ${CTC_BEAMS:-4 10}; do timeout 120 python3 -m benchmarks.peers.run --corpus $C --set sim --batch 1 8 32 --utts 128 --reps 2 --ctc-beam $b --decoders torchaudio-ctc greedy --md $OUT/bench_ctc$b.md 2>&1 | grep -E "^\[peers\]|rror" | tail -6; done
