# Sourced by the device scripts (scripts/device_*.sh) after their header: the shell options,
# the clock, the carried wheels and environment, $OUT and the full tier.
#   since: seconds since the script started; left END: seconds until END (at least 10)
#   device_setup LOG: wheels from .device/wheels (or $WHEELS) into /tmp/site (exit 1 when they do not install),
#     PYTHONPATH/PATH/CUWFST_CACHE_DIR/CUWFST_COMMIT, $OUT, C=/tmp/corpus-full, L=$OUT/LOG;
#     starts the full tier's build in the background unless C holds it already (the machine
#     sometimes keeps /tmp between calls) or a build runs (NO_FULL=1: not at all); writes the GPU and the commit to L; builds the module
#   start_full: the full tier's build in the background (what device_setup starts); needs the
#     environment (PYTHONPATH) set first
#   ab_init DIR / ab_use other|own|NAME: swap the package files DIR holds in and out (and build), for
#     old / new / old timings in one call, one process each; ab_prepare TEST_FILE...: tests, both
#     modules and the full tier's uniform rows before an A/B; ab_speed SIDE GRAPH ARGS: one
#     gpu_speed run of a side
#   wait_full [SECONDS]: waits for the full tier (at most until SECONDS, default 300), logs its sizes
#   speed_modes JSONL MODES SHAPE...: gpu_speed --profile over the full HLG at batch 32 (reps 5, one
#     CPU check) with --memory MODES in one process, its kernel split and rows into L, its JSON
#     rows into $OUT/JSONL (until END, default 570 s); speed_both JSONL MODES SHAPE...: the same,
#     then again with MODES reversed (a same-call A/B in both orders)
#   lat_speed JSONL UNTIL ARGS...: benchmarks.lattice_speed --one-call (full HLG, 64 utterances,
#     batch 32, 3 reps, 4 CPU checks, no replay; ARGS: --profile and such) until UNTIL s, its text
#     lines' tail into L, its JSON rows into $OUT/JSONL (environment assignments before the call apply)
#   mem_fresh NAME ARGS: benchmarks.memory (full HLG, batch 32) in a fresh process, rows into $OUT/memory.jsonl
#   gpu_tests LOG CAP DESC FILES...: pytest -m gpu over FILES (at most CAP s) into $OUT/LOG, its tally,
#     GPU-vs-CPU lines and failures into L (environment assignments before the call apply to it)
#   memcheck_case LOG CAP DESC ARGS...: compute-sanitizer memcheck over scripts/sanitize_case.py ARGS
#     (at most CAP s) into $OUT/LOG, its exit and last lines into L (the same environment rule)
#   lattice_memcheck CAP: compute-sanitizer memcheck over scripts/sanitize_case.py SANITIZE_SEEDS
#     (default 3) --lattice, at most CAP seconds; its tail into $OUT/memcheck.log and L
#   sweep SET BEAM DECODERS...: the peers over $C/SET (256 utterances, batch 32, feed all) at cuwfst's
#     search_beam BEAM and riva's beam BEAM (until END), into $OUT/peers_SET*, the summary into L
#   peers UNTIL DECODERS...: benchmarks.peers.run over the full tier's sim set (batch 32, 256
#     utterances, 3 reps, feed all) until UNTIL s, into $OUT/peers.{jsonl,md,txt}, its summary into L
#   start_model_set UTTS: the small tier and the model set (UTTS rows, $C/model) in the background;
#     model_wheels: its wheels (carry .device_b) and .device/pylib; wait_model CAP: until it is done
#   gpu_suite CAP / gpu_suite_wait: the whole GPU suite in five background pytest processes (each at most
#     CAP s), then their tallies into L and logs into $OUT/tests.tgz (device_s134.sh's groups)
#   lat_speed SET JSONL UNTIL TAG ARGS...: one lattice_speed run (256 utterances, batch 32, one call)
#   env_ab TAG GRAPH SHARD CAP ARGS...: one lattice_speed --env-ab run (256 rows of SHARD), its summary and
#     the records pass's phase sums (scripts/records_prof.py) into L
#   ab_suite_full CAP SIDES...: env_ab on the small HLG, then the whole GPU suite, then env_ab on the full HLG
#   pack_logs 'PATTERN'...: the files of $OUT matching PATTERN (quoted) into $OUT/tests.tgz (the device returns
#     a handful of files a call: s83 lost its test logs)
set -uo pipefail
T0=$(date +%s)
since() { echo $(( $(date +%s) - T0 )); }
left() { local l=$(( $1 - $(since) )); echo $(( l > 10 ? l : 10 )); }
device_setup() {
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.device/wheels}/*.whl >/dev/null 2>&1 || exit 1
  export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
  export CUWFST_COMMIT=$(cat .device/COMMIT 2>/dev/null || echo unknown)
  OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; C=/tmp/corpus-full; L=$OUT/$1
  [ -n "${NO_FULL:-}" ] || start_full
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit $CUWFST_COMMIT"; } | tee $L
  python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -2 | tee -a $L
}
start_full() {  # the full tier into C=/tmp/corpus-full in the background, unless it is there
  # (FULL_GRAPHS=hlg: the HLG alone, ~30 s sooner, for a script that reads no TLG: riva's rows
  # read TLG.fst)
  C=/tmp/corpus-full
  if pgrep -f "benchmarks.corpus" > /dev/null; then :  # (an earlier script of this call started it)
  elif [ ! -f $C/sim/shard-00000.npz ] || { [[ "${FULL_GRAPHS:-hlg,tlg}" == *tlg* ]] && [ ! -f $C/TLG.img ]; }; then
    ( setsid nohup nice -n 5 bash -c "python3 -m benchmarks.corpus.build --tier full --out $C --arpa .device/data/en-us-3gram.arpa.xz \
      --bpe-model cuwfst/data/tiny/bpe.model --graphs ${FULL_GRAPHS:-hlg,tlg} && python3 -m benchmarks.corpus.simulate --corpus $C --out $C/sim --num-utts 256 \
      --shard-size 256 --seed 0 && echo FULL-DONE" > /tmp/full.log 2>&1 < /dev/null & )
  else echo FULL-DONE > /tmp/full.log; fi
}
ab_init() {  # ab_init DIR: DIR holds other versions of some of the checkout's files (same paths);
  # keeps the checkout's own under /tmp/ab_own for ab_use (same-call A/B of two modules)
  AB_OTHER=$1; AB_FILES=$(cd $1 && find . -type f | sed 's|^\./||'); local f
  for f in $AB_FILES; do mkdir -p /tmp/ab_own/$(dirname $f); cp $f /tmp/ab_own/$f; done
}
ab_use() {  # ab_use other|own|NAME: that version's files in place and its module built; NAME: own's
  # files with .device/ab_NAME's over them (a third side: some of the files of each)
  # NEVER while tests or anything else that makes a Decoder runs: a process that builds or loads a
  # module while the other side's sources are in place gets that side's module (device_s134.sh: three
  # tests failed by an ulp, the old order's, while ab_use other built; they passed rerun)
  local src=$AB_OTHER f; [ $1 = other ] || src=/tmp/ab_own
  for f in $AB_FILES; do cp $src/$f $f; done
  if [ $1 != other ] && [ $1 != own ]; then (cd .device/ab_$1 && find . -type f | sed 's|^\./||') | while read -r f; do
    cp .device/ab_$1/$f $f; done; fi
  python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | cut -c1-120 | tee -a $L
}
ab_prepare() {  # ab_prepare TEST_FILE...: the exactness files (capped at TEST_CAP s, their tallies into
  # L and $OUT/tests.log) while the full tier builds, both modules of .device/ab_old's A/B built
  # (and AB_SIDES' third sides),
  # the full tier waited for (FULL_END, default 300) and its uniform 32 x 250 rows in I=/tmp/old_in
  R=/tmp/raw; mkdir -p $R; I=/tmp/old_in
  timeout -s INT ${TEST_CAP:-150} python3 -m pytest -q -p no:cacheprovider -m gpu "$@" -s > $OUT/tests.log 2>&1
  echo "tests exit $?" | tee -a $L
  { grep -E "mismatch|identical" $OUT/tests.log | grep -v "^E " | head -6; grep -E "^FAILED" $OUT/tests.log | head -4
    grep -E "passed|failed" $OUT/tests.log | tail -1; } | cut -c1-220 | tee -a $L
  ab_init .device/ab_old; ab_use other; for f in ${AB_SIDES:-}; do ab_use $f; done; ab_use own
  wait_full ${FULL_END:-300}; echo "[$(since) s] full tier" | tee -a $L
  python3 -m benchmarks.old_inputs --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --out $I > $R/old_inputs.txt 2>&1
}
ab_speed() {  # ab_speed SIDE GRAPH ARGS...: one gpu_speed run (batch 32, variant "new", 1 row checked
  # against the CPU) of that side's module (ab_use) on $C/GRAPH; its lines into L, its rows into $OUT/ab.jsonl
  local side=$1 graph=$2; shift 2
  ab_use $side >/dev/null
  timeout -s INT 60 python3 -m benchmarks.gpu_speed --graph $C/$graph --batch 32 --check 1 --variants new "$@" > /tmp/ab.txt 2>&1
  grep -E "B=32|CPU check" /tmp/ab.txt | sed "s/^/[$side $graph] /" | cut -c1-170 | tee -a $L
  grep -E "^\{" /tmp/ab.txt | sed "s/^/{\"side\": \"$side\", \"row\": /; s/$/}/" >> $OUT/ab.jsonl
}
wait_full() {
  while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null && [ $(since) -lt ${1:-300} ]; do sleep 2; done
  grep -E "^  (HLG|TLG)|Error" /tmp/full.log | tail -3 | tee -a $L
}
speed_modes() {  # speed_modes JSONL MODES SHAPE...
  local jsonl=$1 modes=$2; shift 2
  timeout -s INT $(left ${END:-570}) python3 -m benchmarks.gpu_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    "$@" --batch 32 --reps 5 --check 1 --profile --memory $modes > /tmp/sp.txt 2>&1
  grep -vE "^\{" /tmp/sp.txt | grep -E "kernel ms|B=32|CPU check|Error" \
    | sed -E 's/kernel ms per batch of 32 \(launch by launch, CUDA events\): //; s/ \([0-9]+%\)//g' \
    | sed "s/^/[$*] /" | cut -c1-240 | tee -a $L
  grep -E "^\{" /tmp/sp.txt | sed "s/^/{\"shape\": \"$*\", \"order\": \"$modes\", \"row\": /; s/$/}/" >> $OUT/$jsonl
}
speed_both() {  # speed_both JSONL MODES SHAPE...
  local jsonl=$1 modes=$2; shift 2
  speed_modes $jsonl "$modes" "$@"
  speed_modes $jsonl "$(echo $modes | tr ' ' '\n' | tac | tr '\n' ' ' | sed 's/ $//')" "$@"
}
lat_speed() {  # lat_speed JSONL UNTIL ARGS...
  local jsonl=$1 until=$2; shift 2
  timeout -s INT $(left $until) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz \
    --utts 64 --batch 32 --reps 3 --cpu-utts 0 --check 4 --no-replay --one-call "$@" --json $OUT/$jsonl 2>&1 \
    | grep -v "^{" | tail -24 | tee -a $L
}
mem_fresh() {  # mem_fresh NAME ARGS...: benchmarks.memory on $C/HLG.img at batch 32 in a fresh process
  # (ARGS: its --modes / --riva-dir / --skip); rows into $OUT/memory.jsonl, each row's headline into L
  local name=$1; shift
  timeout -s INT 120 python3 -m benchmarks.memory --graph $C/HLG.img --log-probs $C/sim/shard-00000.npz --batch 32 \
    --reps 1 --check 0 "$@" > /tmp/mem_$name.txt 2>&1
  grep -E "^\{" /tmp/mem_$name.txt | sed "s/^/{\"run\": \"$name\", \"row\": /; s/$/}/" >> $OUT/memory.jsonl
  grep -E "^\{" /tmp/mem_$name.txt | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print({k: r[k] for k in ('decoder', 'memory', 'device_used_mib', 'device_peak_mib', 'counted_peak_mib',
                            'module_peak_mib', 'module_mib', 'graph_mib',
                            'lanes_mib', 'winners_mib', 'paths_mib', 'rescue_instance', 'overflow_rows') if k in r})
" | sed "s/^/[$name] /" | tee -a $L
  grep -E "Error" /tmp/mem_$name.txt | head -3 | sed "s/^/[$name] /" | tee -a $L
}
gpu_tests() {
  local log=$1 cap=$2 desc=$3; shift 3
  timeout -s INT $cap python3 -m pytest -q -p no:cacheprovider -m gpu "$@" -s -rf > $OUT/$log 2>&1
  echo "$desc exit $?: $(grep -E "passed|failed" $OUT/$log | tail -1)" | tee -a $L
  { grep -E "mismatch" $OUT/$log | grep -v "^E " | head -3; grep -E "^FAILED" $OUT/$log | head -6; } | cut -c1-220 | tee -a $L
}
memcheck_case() {
  local log=$1 cap=$2 desc=$3 cs; shift 3
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  timeout -s INT $cap "$cs" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py "$@" \
    > $OUT/$log 2>&1
  echo "$desc exit $?: $(tail -2 $OUT/$log | tr '\n' ' ')" | cut -c1-250 | tee -a $L
}
lattice_memcheck() {
  local CS
  CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  timeout -s INT $1 "$CS" --tool memcheck --leak-check no --error-exitcode 9 python3 scripts/sanitize_case.py \
    ${SANITIZE_SEEDS:-3} --lattice 2>&1 | tail -6 | tee $OUT/memcheck.log | tee -a $L
  echo "memcheck exit ${PIPESTATUS[0]}" | tee -a $L
  echo "[$(since) s] memcheck" | tee -a $L
}
lat_speed() {  # lat_speed SET JSONL UNTIL TAG ARGS...: lattice_speed --one-call on 256 utterances of $C/SET, its
  # summary lines (the ratio, the tail and its split, exactness) into L prefixed [TAG], its rows into $OUT/JSONL
  local set=$1 jsonl=$2 until=$3 tag=$4; shift 4
  timeout -s INT $(left $until) python3 -m benchmarks.lattice_speed --graph $C/HLG.img --log-probs $C/$set/shard-00000.npz \
    --utts 256 --batch 32 --reps 3 --cpu-utts 0 --no-replay --one-call "$@" --json $OUT/$jsonl 2>&1 \
    | grep -E "vs 1-best|the tail|its tail|parts a job|from the exit|env A/B|exactness|Error" | sed "s/^/[$tag] /" \
    | cut -c1-400 | tee -a $L
}
env_ab() {  # env_ab TAG GRAPH SHARD CAP ARGS...: one lattice_speed --env-ab run (256 rows of SHARD, batch 32,
  # one call, 2 rows checked against the CPU; ARGS: its --env-ab sides and other flags) at most CAP s into
  # $OUT/ab_TAG.{txt,err,jsonl}; its summary lines and scripts/records_prof.py's sums of the
  # CUWFST_LATTICE_AFTER_PROF sides into L prefixed [TAG]
  local tag=$1 graph=$2 shard=$3 cap=$4; shift 4
  timeout -s INT $cap python3 -m benchmarks.lattice_speed --graph $graph --log-probs $shard \
    --utts 256 --batch 32 --reps 3 --cpu-utts 0 --check 2 --no-replay --one-call "$@" --json $OUT/ab_$tag.jsonl \
    > $OUT/ab_$tag.txt 2> $OUT/ab_$tag.err
  echo "[$tag env A/B exit $?]" | tee -a $L
  grep -vE "^\{" $OUT/ab_$tag.txt | grep -iE "vs 1-best|env A/B|exactness|Error|lattice grids" | cut -c1-600 \
    | head -10 | sed "s/^/[$tag] /" | tee -a $L
  python3 scripts/records_prof.py $OUT/ab_$tag.err | sed "s/^/[$tag] /" | tee -a $L
  grep -E "Error|Traceback" $OUT/ab_$tag.err | head -3 | tee -a $L
}
ab_suite_full() {  # ab_suite_full CAP SIDES...: env_ab on the small HLG (CAP s; TL_SIDES, unquoted words, in place
  # of SIDES); the whole GPU suite and test_gpu_eps_prune.py beside it (SUITE=0: none; SUITE_CAP: each
  # group's cap, default 380), beside the full tier's build; then env_ab on the full HLG once built
  # (NO_FULL=1: none), until END
  local cap=$1; shift
  local sides=("$@")
  [ -z "${TL_SIDES:-}" ] || read -r -a sides <<< "$TL_SIDES"
  env_ab small /tmp/corpus-small/HLG.img /tmp/corpus-small/sim/shard-00000.npz $cap --profile --env-ab "${sides[@]}"
  echo "[$(since) s] small HLG" | tee -a $L
  if [ "${SUITE:-1}" != 0 ]; then
    gpu_suite ${SUITE_CAP:-380}
    gpu_tests tests_epsprune.log ${SUITE_CAP:-300} "test_gpu_eps_prune.py" tests/test_gpu_eps_prune.py &
    gpu_suite_wait
    echo "[$(since) s] suite" | tee -a $L
  fi
  if [ -z "${NO_FULL:-}" ]; then
    wait_full $((END - 90))
    grep -q FULL-DONE /tmp/full.log && env_ab full $C/HLG.img $C/sim/shard-00000.npz $(left $END) --profile \
      --env-ab "${sides[@]}"
  fi
}
small_tier() {  # small_tier: the small tier (graphs and its 256 sim rows) in S=/tmp/corpus-small, unless it is
  # there (a warm machine keeps /tmp); in the foreground
  S=/tmp/corpus-small
  if [ ! -f $S/sim/shard-00000.npz ] || [ ! -f $S/TLG.img ]; then
    python3 -m benchmarks.corpus.build --tier small --out $S --arpa .device/data/en-us-3gram.arpa.xz \
      --bpe-model cuwfst/data/tiny/bpe.model > /tmp/small.log 2>&1 \
    && python3 -m benchmarks.corpus.simulate --corpus $S --out $S/sim --num-utts 256 --shard-size 256 --seed 0 \
      >> /tmp/small.log 2>&1
  fi
}
peers() {
  local until=$1; shift
  timeout -s INT $(left $until) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 32 --utts 256 --reps 3 \
    --feed all --decoders "$@" --json $OUT/peers.jsonl --md $OUT/peers.md > $OUT/peers.txt 2>&1
  echo "peers exit $?" | tee -a $L
  grep -E "^\[peers\]" $OUT/peers.txt | tail -4 | cut -c1-200 | tee -a $L
}
sweep() {  # sweep SET BEAM DECODERS...: the peers at cuwfst's search_beam BEAM (riva's --beam too)
  local set=$1 beam=$2; shift 2
  timeout -s INT $(left $((END - 3))) python3 -m benchmarks.peers.run --corpus $C --set $set --batch 32 --utts 256 --reps 3 \
    --feed all --cuwfst-search-beam $beam --beam $beam --decoders "$@" --json $OUT/peers_$set.jsonl --md $OUT/peers_${set}_$beam.md \
    > $OUT/peers_${set}_$beam.txt 2>&1
  grep -E "^\[peers\]" $OUT/peers_${set}_$beam.txt | grep -v utterances | cut -c1-200 | sed "s/^/[$set beam $beam] /" | tee -a $L
}
start_model_set() {  # start_model_set UTTS: the small tier, then (once the full tier is done) the model set of
  # UTTS rows in $C/model from examples/model.int8.npz, in the background; $OUT/make_set.log ends with
  # MODEL-DONE (needs the espeakng_loader and kaldi_native_fbank wheels)
  S=/tmp/corpus-small
  ( setsid nohup bash -c "python3 -m benchmarks.corpus.build --tier small --out $S --arpa .device/data/en-us-3gram.arpa.xz \
    --bpe-model cuwfst/data/tiny/bpe.model > /tmp/small.log 2>&1; while ! grep -q FULL-DONE /tmp/full.log 2>/dev/null; do sleep 2; done; \
    python3 -m benchmarks.model.make_set \
    --weights examples/model.int8.npz --corpus $S --set-corpus $C --set-utts $1 > $OUT/make_set.log 2>&1 \
    && echo MODEL-DONE >> $OUT/make_set.log" > /dev/null 2>&1 < /dev/null & )
}
model_wheels() {  # the model set's wheels (.device_b/wheels: espeakng_loader, kaldi_native_fbank) into /tmp/site,
  # and .device/pylib on the path (after device_setup)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device_b/wheels/*.whl >/dev/null 2>&1 \
    || echo "model wheels did not install" | tee -a $L
  export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
}
wait_model() {  # wait_model CAP: until start_model_set's MODEL-DONE or CAP s into the call; its last line into L
  while ! grep -q MODEL-DONE $OUT/make_set.log 2>/dev/null && [ $(since) -lt ${1:-470} ]; do sleep 2; done
  echo "[$(since) s] model set: $(tail -1 $OUT/make_set.log)" | tee -a $L
}
gpu_suite() {  # gpu_suite CAP: the whole GPU suite (-m gpu, every file) as five pytest processes side by side
  # in the background (~4-6 min on the H200 beside the full tier's build; one after another ~10); then
  # gpu_suite_wait: waits for them, their tallies and failures into L, their logs into $OUT/tests.tgz.
  # SUITE_GROUPS (words of lat var base trim mem; default all five): only those groups.
  # Nothing may swap the checkout's sources while they run (ab_use).
  local cap=$1 n
  SUITE_RAN=${SUITE_GROUPS:-lat var base trim mem}  # (for gpu_suite_wait: SUITE_GROUPS may be set for this call only)
  _grp() { local name=$1; shift
    [[ " ${SUITE_GROUPS:-lat var base trim mem} " == *" $name "* ]] || return 0
    ( timeout -s INT $cap python3 -m pytest -q -p no:cacheprovider -m gpu "$@" -s -rf > $OUT/tests_$name.log 2>&1
      echo "exit $?" >> $OUT/tests_$name.log ) & }
  _grp lat tests/test_gpu_lattice.py
  _grp var tests/test_gpu_variants.py tests/test_k2_order.py tests/test_k2_structure.py tests/test_cli.py tests/test_blank_skip.py \
    tests/test_streaming_bench.py tests/test_gpu_scan_trace.py
  _grp base tests/test_gpu.py tests/test_gpu_epsilon.py tests/test_gpu_chain.py
  _grp trim tests/test_gpu_trim.py
  _grp mem tests/test_gpu_memory.py tests/test_gpu_lanes.py tests/test_gpu_walk_entry.py tests/test_gpu_faults.py
}
gpu_suite_wait() {
  wait
  for n in ${SUITE_RAN:-lat var base trim mem}; do
    echo "[$n] $(tail -1 $OUT/tests_$n.log) $(grep -E "passed|failed" $OUT/tests_$n.log | tail -1)" | cut -c1-200 | tee -a $L
    grep -E "^FAILED|mismatch" $OUT/tests_$n.log | grep -v "^E " | head -6 | cut -c1-220 | tee -a $L
  done
  pack_logs 'tests_*.log'
}
pack_logs() {  # (quote the patterns: they expand in $OUT)
  (cd $OUT && set -- $* && tar czf tests.tgz "$@" && rm -f "$@")
}
ncu_records() {  # ncu_records UNTIL: Nsight Compute over one LatRecordsKernel launch of scripts/ncu_lattice_case.py
  # (full HLG, the sim shard; the second launch) until UNTIL s into the call: $OUT/records.ncu-rep, ncu.txt and
  # ncu_src.csv (source counters by SASS line); its headline metrics into L
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  echo "ncu: $NCU" | tee -a $L
  timeout -s INT $(left $1) "$NCU" --target-processes all --kernel-name "regex:LatRecordsKernel" --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats \
    --section SchedulerStats --section SourceCounters --export $OUT/records --force-overwrite \
    python3 scripts/ncu_lattice_case.py $C/HLG.img $C/sim/shard-00000.npz > $OUT/ncu.txt 2>&1
  echo "ncu exit $?" | tee -a $L
  grep -E "^    Duration|Compute \(SM\) Throughput|Achieved Occupancy|Executed Ipc|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Avg. Active Threads" \
    $OUT/ncu.txt | cut -c1-160 | head -30 | tee -a $L
  [ -f $OUT/records.ncu-rep ] && timeout 60 "$NCU" --import $OUT/records.ncu-rep --page source --csv --print-source sass > $OUT/ncu_src.csv 2>&1
  echo "src csv lines $(wc -l < $OUT/ncu_src.csv 2>/dev/null)" | tee -a $L
}
