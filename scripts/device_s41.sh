#!/usr/bin/env bash
# GPU machine, one call (~6 minutes on a fresh machine), for the next session: whether the
# pooled layout's time outside the kernels on padded batches (0.4-0.8 ms a batch over the 256
# rows, none on the uniform batch: docs/benchmarks.md, session of 2026-12-02 19:45) is the trims
# around the rescue of row 211 (the main instance's pools unmapped before it and mapped back
# after, the rescue's grown and given back every pass). Prediction: docs/speed-notes.md "The
# trims around the rescue", written before.
#   fresh-process memory at batch 32: riva, pooled-late-ahead-keep, pooled-late-ahead-hostlog-keep
#   then gpu_speed --profile, one process, then reversed: lazy / pooled-late-ahead / -keep /
#   pooled-late-ahead-hostlog / -hostlog-keep over the 256 rows in padded batches of 32; lazy /
#   pooled-late-ahead / -keep on the uniform 32 x 250 (no rescue: the control)
# then (issue 10) lattice_speed --one-call --profile on 64 utterances at batch 32 with the records' count
# (the most records held at once, candidate lane-steps): docs/speed-notes.md "Issue 10: the records the
# filter lets through", prediction written before.
# Carry .device (wheels, COMMIT, data). $OUT: s41.log, memory.jsonl, speed41.jsonl, lat_speed.jsonl.
. scripts/device_common.sh
device_setup s41.log
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
mem_fresh riva --riva-dir $C --skip memory speed long
for m in pooled-late-ahead-keep pooled-late-ahead-hostlog-keep; do mem_fresh $m --modes $m --skip riva speed long; done
echo "[$(since) s] memory" | tee -a $L
A=pooled-late-ahead
speed_both speed41.jsonl "lazy $A $A-keep $A-hostlog $A-hostlog-keep" --utts 256
speed_both speed41.jsonl "lazy $A $A-keep" --uniform 250 --utts 32
echo "[$(since) s] speed" | tee -a $L
lat_speed lat_speed.jsonl 585 --profile
echo "[$(since) s] done" | tee -a $L
