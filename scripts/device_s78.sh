#!/usr/bin/env bash
# GPU machine, issue 10: the candidates carry their end and destination (LatCand 24 bytes;
# LatPersistKernel's chain starts at the probe, key and hash_pos loaded together). Prediction:
# docs/speed-notes.md "The candidates carry their end and destination", written before.
#   the old module (.device/ab_old: the files as at the parent commit) built in its own copy of
#   the tree in the background; while the full tier (HLG) builds: test_gpu_trim.py whole, the
#   lattice subset, test_gpu.py's random rows, memcheck and racecheck over --lattice;
#   then lattice_speed --utts 256 --profile: new, old, new (one process each, same call);
#   then test_gpu_variants.py whole until the call's end.
# Carry .device (wheels, pylib, COMMIT, data, ab_old). $OUT: s78.log, tests*.log, memcheck.log,
# racecheck.log, lat_{new,old,new2}.jsonl.
FULL_GRAPHS=hlg
. scripts/device_common.sh
device_setup s78.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
OLD=/tmp/oldtree; rm -rf $OLD; mkdir -p $OLD
cp -r cuwfst benchmarks tests scripts pyproject.toml $OLD/ 2>/dev/null
(cd .device/ab_old && find . -type f) | while read -r f; do cp .device/ab_old/$f $OLD/$f; done
( cd $OLD && PYTHONPATH=/tmp/site:$OLD python3 -m cuwfst.cli build --cuda-arch 9.0 > /tmp/oldbuild.txt 2>&1 ) &
gpu_tests tests1.log 45 "test_gpu_trim.py (whole)" tests/test_gpu_trim.py
gpu_tests tests2.log 90 "test_gpu_lattice.py -k 'cand or random_lattices or gpu_pruning or grow or k2 or filter'" \
  tests/test_gpu_lattice.py -k "cand or random_lattices or gpu_pruning or grow or k2 or filter"
gpu_tests tests3.log 30 "test_gpu.py -k random" tests/test_gpu.py -k random
lattice_memcheck 80
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout -s INT 70 "$CS" --tool racecheck --error-exitcode 9 python3 scripts/sanitize_case.py 1 --lattice \
  > $OUT/racecheck.log 2>&1; echo "racecheck --lattice exit $?: $(tail -3 $OUT/racecheck.log | tr '\n' ' ')" | cut -c1-300 | tee -a $L
echo "[$(since) s] tests" | tee -a $L
wait; tail -1 /tmp/oldbuild.txt | cut -c1-150 | tee -a $L
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat_new.jsonl 390 --utts 256 --profile
echo "[$(since) s] new" | tee -a $L
PYLIB=$PWD/.device/pylib
( cd $OLD && PYTHONPATH=/tmp/site:$OLD:$PYLIB; export PYTHONPATH; lat_speed lat_old.jsonl 470 --utts 256 --profile )
echo "[$(since) s] old" | tee -a $L
lat_speed lat_new2.jsonl 545 --utts 256 --profile
echo "[$(since) s] new again" | tee -a $L
gpu_tests tests4.log $(left 590) "test_gpu_variants.py (whole, until the end)" tests/test_gpu_variants.py
echo "[$(since) s] done" | tee -a $L
