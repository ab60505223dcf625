#!/usr/bin/env bash
# GPU machine: issue 10, the second call of the session after 2026-12-05 04:55. NOT yet run. The model
# set (256 rows, made here) is host-bound (s136: the one host worker busy 1,832 of a 1,980 ms call):
#   1. lattice_speed on the model set with CUWFST_LATTICE_HOST_WORKERS 1 / 2 / 3 / 1 in separate
#      processes (the switch is read at each call); each traced call prints the worker's jobs and,
#      since 2026-12-05 06:30, each job's host work in three parts (hypotheses; Lattice objects, i.e.
#      ref_lattices_arcs and _word_ids; word times and confidences, i.e. ref_lattices_word_rests), to
#      set against attach_threads' standalone times for the same native calls (item 3);
#      predicted (docs/speed-notes.md, "Two host workers"): 2 workers 115-125 ms a lattice batch
#      against ~180 with 1, if the host's threads are not already saturated by one job's native calls;
#   2. (since 2026-12-05 06:30, instead of sim with 1 / 2 workers: sim is not host-bound, and s139 times
#      sim) the model set with one worker and NUMPY_MADVISE_HUGEPAGE=0: on the dev VM a large numpy
#      allocation after the process has fragmented its memory stalls 1.2-1.4 s in the kernel's
#      huge-page compaction (92 MB arange: 1.195 s with numpy's madvise, 0.085 without; THP defrag
#      "madvise" there); a lattice job allocates hundreds of MB of numpy arrays, so if the device's
#      host does the same, this is where its host work goes. The host's THP settings go into the log;
#   3. scripts/attach_threads.py on 32 model rows (threads 1 2 4 8 16): how one job's native host work
#      scales on this host for the model's lattices.
# Stage: .device/wheels with espeakng_loader and kaldi_native_fbank, without riva's wheel. Until END
# (default 570) s. Carry .device.
# $OUT: s140.log, lat_model.jsonl, make_set.log, attach_threads.txt
. scripts/device_common.sh
END=${END:-570}
device_setup s140.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
start_model_set 256
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
# (the runs after the model set is made: its synthesis and model would share the host's CPUs)
while ! grep -q MODEL-DONE $OUT/make_set.log 2>/dev/null && [ $(since) -lt 330 ]; do sleep 2; done
echo "[$(since) s] model set" | tee -a $L
echo "THP: enabled $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null), defrag $(cat /sys/kernel/mm/transparent_hugepage/defrag 2>/dev/null)" | tee -a $L
for w in 1 2 3; do CUWFST_LATTICE_HOST_WORKERS=$w lat_speed model lat_model.jsonl $(( $(since) + 50 )) "model w$w" --check 1; done
NUMPY_MADVISE_HUGEPAGE=0 CUWFST_LATTICE_HOST_WORKERS=1 lat_speed model lat_model.jsonl $(( $(since) + 50 )) "model w1 no-madvise"
CUWFST_LATTICE_HOST_WORKERS=1 lat_speed model lat_model.jsonl $(( $(since) + 50 )) "model w1 again"
echo "[$(since) s] lattice_speed" | tee -a $L
timeout -s INT $(left $((END - 5))) python3 scripts/attach_threads.py $C/HLG.img $C/model/shard-00000.npz 32 1 2 4 8 16 \
  > $OUT/attach_threads.txt 2>&1; tail -n 7 $OUT/attach_threads.txt | cut -c1-200 | tee -a $L
echo "[$(since) s] end" | tee -a $L
