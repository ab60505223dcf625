#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-05 17:20, the session's last device seconds (~290 s). The
# lattice mode on a TLG against riva on the very same graph: the small tier (its TLG.img and TLG.fst,
# its 256 sim rows), batch 32, feed all, 3 reps: cuwfst-gpu-tlg, cuwfst-gpu-tlg-lattice (new peer row),
# riva, and cuwfst-gpu-lattice on the small HLG for reference.
# Prediction (written before the run): the TLG lattice mode at ~330 ms a batch of 32 (s153, H100) is
# 800-1,200 RTFx, riva on the small TLG 2,500-4,500: riva 2-5x faster than our TLG lattices (the host
# replay), while our HLG lattice mode stays ahead of riva.
# Stage: .device/wheels with riva's wheel (no synthesis wheels). Carry .device. $OUT: s156.log, peers_small.*
. scripts/device_common.sh
END=${END:-185}
NO_FULL=1 device_setup s156.log
export PYTHONPATH=$PYTHONPATH:$PWD/.device/pylib
small_tier; echo "[$(since) s] small tier: $(ls $S/TLG.fst $S/sim/shard-00000.npz 2>&1 | tr '\n' ' ')" | tee -a $L
C=$S
sweep sim 20 cuwfst-gpu-tlg cuwfst-gpu-tlg-lattice riva cuwfst-gpu-lattice
echo "[$(since) s] end" | tee -a $L
