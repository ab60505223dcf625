#!/usr/bin/env bash
# GPU machine (session of 2026-12-04 07:55): the standing tables of issues 7 and 10 on main's code
# (8f34327's cuwfst/), one call, one process per peers run.
#   1. wheels; the full tier (HLG and TLG) in the background; the module built
#   2. while the tier builds: tests/test_gpu_epsilon.py -k "tlg or full or chain" is not run (the
#      whole suite ran on this code: docs/benchmarks.md "Issue 11's table again"); nothing waits
#   3. issue 7: peers on the full tier's sim set, 256 utterances, --feed all (the protocol of the
#      3.05x table: every utterance in one call, --batch lanes / riva's channels), batch 1 8 32,
#      reps 2: cuwfst-gpu-tlg (TLG.img), riva (TLG.fst), cuwfst-gpu (HLG.img), cuwfst-cpu-tlg
#      (TLG.img, 8 utterances: --cpu-utts)
#   4. issue 10: peers, batch 32, --feed all, reps 3: cuwfst-gpu, cuwfst-gpu-lattice, riva
# Until END seconds (default 590). Carry .device. $OUT: s97.log, tlg.{jsonl,md,txt}, peers.{jsonl,md,txt}
. scripts/device_common.sh
END=${END:-590}
device_setup s97.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
wait_full 330; echo "[$(since) s] full tier" | tee -a $L
timeout -s INT $(left $((END - 130))) python3 -m benchmarks.peers.run --corpus $C --set sim --batch 1 8 32 --utts 256 \
  --cpu-utts 8 --reps 2 --feed all --decoders cuwfst-gpu-tlg riva cuwfst-gpu cuwfst-cpu-tlg \
  --json $OUT/tlg.jsonl --md $OUT/tlg.md > $OUT/tlg.txt 2>&1
echo "tlg peers exit $?" | tee -a $L
grep -E "^\[peers\]" $OUT/tlg.txt | tail -14 | cut -c1-220 | tee -a $L
echo "[$(since) s] issue 7 table" | tee -a $L
peers $END cuwfst-gpu cuwfst-gpu-lattice riva
echo "[$(since) s] done" | tee -a $L
