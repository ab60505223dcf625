#!/usr/bin/env bash
# GPU machine, one short call (~5 minutes, no corpus): compute-sanitizer memcheck and racecheck
# on a trimmed decode (scripts/sanitize_trim.py; SAN_SCRIPTS: others too, with arguments, e.g.
# "scripts/sanitize_chain.py; scripts/sanitize_case.py 1 --eps --lanes"; SAN_TOOLS, SAN_FILTERS
# below; NARROW: one racecheck run narrowed to a kernel, see below), then the GPU test files TESTS
# (TEST_CAP s).
set -uo pipefail
T0=$(date +%s); since() { echo $(( $(date +%s) - T0 )); }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/wheels/*.whl >/dev/null 2>&1 || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 CUWFST_CACHE_DIR=$PWD/.cache/cuwfst
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; L=$OUT/final.log
{ nvidia-smi --query-gpu=name --format=csv,noheader; echo "commit $(cat .device/COMMIT)"; } | tee $L
python3 -m cuwfst.cli build --cuda-arch 9.0 2>&1 | tail -1 | tee -a $L
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
# SAN_SCRIPTS: ";"-separated runs, each a script and its arguments; SAN_TOOLS: the tools;
# SAN_FILTERS: one run per kernel filter ("all": none; "kns=Refill": those kernels alone;
# "x:kns=Refill": all but them). The sanitizer's report goes to its own file (--log-file), the
# app's output (python -X faulthandler) to another, so an app that dies silently shows it.
IFS=';' read -ra RUNS <<< "${SAN_SCRIPTS:-scripts/sanitize_trim.py}"
for run in "${RUNS[@]}"; do
  read -ra argv <<< "$run"
  [ ${#argv[@]} -gt 0 ] || continue
  for tool in ${SAN_TOOLS:-memcheck racecheck}; do
    for f in ${SAN_FILTERS:-all}; do
      case $f in all) flt=();; x:*) flt=(--kernel-name-exclude "${f#x:}");; *) flt=(--kernel-name "$f");; esac
      name=$(printf %s "$(basename ${argv[0]} .py)${argv[*]:1}-$tool-$f" | tr -c 'A-Za-z0-9_.-' '_')
      t0=$(since)
      timeout ${SAN_CAP:-60} "$CS" --tool $tool --error-exitcode 9 "${flt[@]}" --log-file $OUT/$name.txt \
        python3 -X faulthandler "${argv[@]}" > $OUT/$name-app.txt 2>&1
      echo "${argv[*]} $tool [$f] rc=$? $(( $(since) - t0 )) s: $(grep -hE 'SUMMARY|Error' $OUT/$name.txt | tr '\n' ' ') app: $(tail -c 200 $OUT/$name-app.txt | tr '\n' ' ')" \
        | cut -c1-400 | tee -a $L
    done
  done
done
# NARROW: one "script args" run under racecheck on the kernels NARROW_KERNEL names alone, with
# --racecheck-report all, the host's used memory and the largest processes sampled every 2 s
# (NARROW_CAP s): for a run that dies without a report
if [ -n "${NARROW:-}" ]; then
  read -ra argv <<< "$NARROW"
  for env in ${NARROW_ENVS:-default}; do  # NARROW_ENVS: one run per setting, e.g. CUWFST_KERNELS=new_nopdl
    tag=$(printf %s "$env" | tr -c 'A-Za-z0-9_.-' '_')
    ( while sleep 2; do echo "$(since) s: $(free -m | awk 'NR==2{print $3}') MiB used; $(ps -eo rss,comm --sort=-rss | sed -n 2,3p | tr '\n' ' ')"; done ) > $OUT/narrow-$tag-mem.txt &
    MP=$!
    t0=$(since)
    ( [ "$env" = default ] || export "$env"
      timeout ${NARROW_CAP:-90} "$CS" --tool racecheck --racecheck-report all ${NARROW_FLAGS:-} --error-exitcode 9 --kernel-name "kns=${NARROW_KERNEL:-EpsListExpand}" \
        --log-file $OUT/narrow-$tag.txt python3 -X faulthandler "${argv[@]}" > $OUT/narrow-$tag-app.txt 2>&1 )
    rc=$?
    kill $MP 2>/dev/null
    echo "narrow [$env] ${argv[*]} racecheck [${NARROW_KERNEL:-EpsListExpand}] rc=$rc $(( $(since) - t0 )) s: $(grep -hE 'SUMMARY|Error|hazard' $OUT/narrow-$tag.txt | head -5 | tr '\n' ' ') app: $(tail -c 200 $OUT/narrow-$tag-app.txt | tr '\n' ' ') mem: $(tail -2 $OUT/narrow-$tag-mem.txt | tr '\n' ' ')" | cut -c1-700 | tee -a $L
  done
  (dmesg 2>/dev/null | grep -iE "killed process|out of memory" | tail -3) | tee -a $L
fi
echo "[$(since) s] sanitizers" | tee -a $L
TESTS=${TESTS:-tests/test_gpu_trim.py tests/test_gpu_variants.py}
timeout -s INT ${TEST_CAP:-240} python3 -m pytest -q -p no:cacheprovider -m gpu $TESTS -s -rf --maxfail=20 > $OUT/tests.log 2>&1
grep -E "passed|failed|GPU vs CPU|lanes:|rows compared|GPU lattices|goldens|trimmed slots|variants" $OUT/tests.log | tail -10 | tee -a $L
grep -E "^FAILED" $OUT/tests.log | head -20 | cut -c1-240 | tee -a $L
echo "[$(since) s] done" | tee -a $L
