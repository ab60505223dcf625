#!/usr/bin/env bash
# GPU machine, one call (issue 8's benchmarks): streaming capacity for N = 64..4096 streams
# on the full HLG, one hour-long stream with device memory sampled every chunk, continuous
# batching against stored-order padded batches at 32 lanes, and riva's online decoder at
# the same N on the TLG (when the riva wheel is installed).
#
# Needs the full tier at $FULL (default /tmp/corpus-full: HLG.img, TLG.fst, words.txt,
# sim/shard-00000.npz), as scripts/device_full_a.sh leaves it on a warm machine; where it is
# absent it is built first (about 4 minutes) and every part's time cap shrinks to fit.
# Nominal caps: streaming 150 s, long stream 120 s, continuous 60 s, riva 90 s; 40 s for
# N = 1024 and 4096 with the chunks in host memory (StreamingDecoder.advance copies GPU
# chunks to the host one by one: this row shows what that costs); 25 s for N = 1024 with
# every stream's partial result read after each chunk (riva's decode_batch returns them):
# about 9 minutes with the setup. Each part runs under its own timeout; one failing does not
# stop the others. Files under $OUT (5): stream_bench.log (every line timestamped),
# report.md (the parts' tables), results.jsonl (one JSON line per row), long_stream.csv,
# long_stream_result.json (the hour's result, for --check-result on another machine).
# Knobs: STREAMS (the N list), STREAMS_HOST (the host-chunk rows' N, default 1024 4096),
# STREAMS_PARTIAL (default 1024), FRAMES (the long stream's frames, default 90000), DEVICE
# (default cuda; DEVICE=cpu with FULL at a tiny corpus is a dry run of this script's
# plumbing on a machine without a GPU: no wheels, no module build, riva skipped).
set -uo pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
FULL=${FULL:-/tmp/corpus-full}
STREAMS=${STREAMS:-64 128 256 512 1024 2048 4096}
FRAMES=${FRAMES:-90000}
DEVICE=${DEVICE:-cuda}
L=$OUT/stream_bench.log; R=$OUT/report.md; J=$OUT/results.jsonl
W=/tmp/stream_bench; mkdir -p $W
stamp() { while IFS= read -r line; do printf '[%s +%ss] %s\n' "$(date -u +%H:%M:%S)" "$(( $(date +%s) - T0 ))" "$line"; done; }
log() { echo "$*" | stamp | tee -a "$L"; }

if [ "$DEVICE" != cpu ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 \
    || { log "pip install of .device/wheels failed"; exit 1; }
fi
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
{ nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader; echo "commit $CUWFST_COMMIT"; \
  echo "FULL=$FULL OUT=$OUT DEVICE=$DEVICE STREAMS=$STREAMS FRAMES=$FRAMES"; python3 -c "import riva.asrlib.decoder.python_decoder" 2>&1 | tail -1 | sed 's/^/riva import: /'; } \
  2>&1 | stamp | tee "$L"

if [ ! -f $FULL/sim/shard-00000.npz ] || [ ! -f $FULL/HLG.img ]; then
  log "no full tier at $FULL: building it (about 4 minutes)"
  python3 -m benchmarks.corpus.build --tier full --out $FULL --arpa .device/data/en-us-3gram.arpa.xz \
    --bpe-model cuwfst/data/tiny/bpe.model > $W/build.log 2>&1 \
    && python3 -m benchmarks.corpus.simulate --corpus $FULL --out $FULL/sim --num-utts 256 --shard-size 256 --seed 0 \
    >> $W/build.log 2>&1
  tail -3 $W/build.log | stamp | tee -a "$L"
  [ -f $FULL/sim/shard-00000.npz ] || { log "the full tier could not be built; nothing to measure"; exit 1; }
fi
[ "$DEVICE" != cpu ] && python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | stamp | tee -a "$L"
G=$FULL/HLG.img; S=$FULL/sim/shard-00000.npz

# the parts' caps scaled to what is left of 570 s (the device allows 600 s a call)
NOMINAL=485; LEFT=$(( 570 - ($(date +%s) - T0) )); SCALE=$(( LEFT * 100 / NOMINAL )); [ $SCALE -gt 100 ] && SCALE=100
cap() { local c=$(( $1 * SCALE / 100 )); [ $c -lt 10 ] && c=10; echo $c; }  # never 0: `timeout 0` waits forever
less() { local v=$(( $1 - $2 )); [ $v -lt 5 ] && v=5; echo $v; }
log "setup done; parts' caps at ${SCALE}% of nominal"

# part NAME CAP MDFILE CMD...: runs CMD under `timeout CAP`, its output timestamped into the
# log, then its markdown (written as it goes, so a part cut short leaves its rows) into the report
part() {
  local name=$1 cap=$2 md=$3; shift 3
  log "=== $name (cap ${cap} s): $*"
  rm -f "$md"
  timeout --kill-after=10 "$cap" "$@" 2>&1 | grep -v '^{' | stamp | tee -a "$L"
  local rc=${PIPESTATUS[0]}
  log "=== $name: exit $rc$([ $rc -eq 124 ] && echo ' (timed out)')"
  { echo "## $name"; echo; echo "\`$*\` (exit $rc)"; echo; [ -f "$md" ] && cat "$md" || echo "(no table)"; echo; } >> "$R"
}

C=$(cap 150)
part "Streaming capacity, cuwfst, full HLG" $C $W/streaming.md \
  python3 -m benchmarks.streaming --graph $G --log-probs $S --device $DEVICE --streams $STREAMS \
  --ticks 30 --warmup-ticks 3 --seconds 40 --total-seconds $(less $C 15) --check 16 --json $J --md $W/streaming.md

C=$(cap 120)
part "One hour-long stream, full HLG" $C $W/long.md \
  python3 -m benchmarks.long_stream --graph $G --log-probs $S --device $DEVICE --frames $FRAMES --chunk 16 \
  --max-seconds $(less $(( C - 10 )) 0) --no-check --result-out $OUT/long_stream_result.json \
  --csv $OUT/long_stream.csv --json $J --md $W/long.md
# the CPU check of the hour takes minutes: on any machine, with the same shard and graph,
#   python -m benchmarks.long_stream --check-result long_stream_result.json --graph HLG.img --log-probs shard.npz

C=$(cap 60)
part "Continuous batching against stored-order padded batches, 32 lanes, full HLG" $C $W/continuous.md \
  python3 -m benchmarks.continuous --graph $G --log-probs $S --device $DEVICE --lanes 32 --reps 3 --baseline stored \
  --modes padded continuous decode_all --check 6 --json $J --md $W/continuous.md

C=$(cap 90)
part "Streaming capacity, riva online decoder, full TLG.fst" $C $W/riva.md \
  python3 -m benchmarks.streaming --graph $G --log-probs $S --device $DEVICE --streams $STREAMS \
  --ticks 30 --warmup-ticks 3 --seconds 30 --riva-only --riva-graph $FULL/TLG.fst --riva-total-seconds $(less $C 25) \
  --json $J --md $W/riva.md

C=$(cap 40)
part "Streaming capacity, cuwfst, chunks in host memory" $C $W/host.md \
  python3 -m benchmarks.streaming --graph $G --log-probs $S --device $DEVICE --streams ${STREAMS_HOST:-1024 4096} \
  --chunks host --ticks 20 --warmup-ticks 3 --seconds 25 --total-seconds $(less $C 8) --check 4 --json $J --md $W/host.md

C=$(cap 25)
part "Streaming capacity, cuwfst, partial results read every chunk" $C $W/partial.md \
  python3 -m benchmarks.streaming --graph $G --log-probs $S --device $DEVICE --streams ${STREAMS_PARTIAL:-1024} \
  --partial --ticks 20 --warmup-ticks 3 --seconds 18 --json $J --md $W/partial.md

log "done in $(( $(date +%s) - T0 )) s; files: $(ls $OUT | tr '\n' ' ')"
