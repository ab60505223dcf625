#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-04 20:07. The records after the search become the
# default (CUWFST_LATTICE_RECORDS=step the in-step stage), only where the in-step stage would run
# the lattice trim (filter and trim on); LatRecordsKernel's CTAs claim work items one at a time
# (CUWFST_LATTICE_CLAIMS=stride: the fixed stride measured before). NOT yet run on a GPU:
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. test_gpu_lattice.py's changed tests (default, then the in-step stage's pinned ones); the other
#      test files with lattice decodes (-m gpu) under the new default; compute-sanitizer memcheck
#   3. lattice_speed --utts 256 --env-ab stride / step (same call)
#   4. the rest of test_gpu_lattice.py under the default, until END
# Until END (default 590) s. Carry .device. $OUT: s125.log, tests_*.log, memcheck.log, lat.jsonl
. scripts/device_common.sh
END=${END:-590}
FULL_GRAPHS=hlg device_setup s125.log
gpu_tests tests_changed.log 100 "changed tests (default)" tests/test_gpu_lattice.py \
  -k "after or guard or candidates or every_lattice_allocation or keeps_every_lattice or drops_most or golden"
gpu_tests tests_files.log 150 "other lattice files (default)" tests/test_gpu_memory.py tests/test_gpu_host.py \
  tests/test_gpu_trim.py tests/test_gpu_chain.py tests/test_gpu_walk_entry.py tests/test_blank_skip.py tests/test_cli.py \
  tests/test_k2_lattice.py tests/test_lattice.py tests/test_lattice_attach_exact.py tests/test_lattice_objects_exact.py \
  tests/test_lattice_post.py tests/test_lattice_records.py tests/test_peers.py
lattice_memcheck 70
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl $((END - 150)) --utts 256 --env-ab stride:CUWFST_LATTICE_CLAIMS=stride step:CUWFST_LATTICE_RECORDS=step
echo "[$(since) s] lattice_speed" | tee -a $L
gpu_tests tests_rest.log $(left $((END - 5))) "the rest of test_gpu_lattice.py (default)" tests/test_gpu_lattice.py \
  -k "not (after or guard or candidates or every_lattice_allocation or keeps_every_lattice or drops_most or golden)"
