#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 01:22. One call:
#   1. the records pass's timeline (prof-timeline, merged: CUWFST_LATTICE_AFTER_PROF=on prints each pass
#      kernel's start and end): test_gpu_lattice.py -k phase_sums beside the small tier's build;
#   2. the small HLG (256 sim rows, batch 32, --profile): the prof side beside the default, the timeline
#      averaged by scripts/records_prof.py; the records kernels bound to 6 and 8 CTAs a multiprocessor
#      (CUWFST_LATTICE_AFTER_CTAS, 40 / 32 registers with spills) beside them;
#   3. the whole GPU suite at this commit (the chain in lattice decodes on by default since 93e1873's
#      successor; the marks in the pass kernels) and test_gpu_eps_prune.py, beside the full HLG's build;
#   4. the full HLG: the same as 2, if built in time.
# Predictions (written before any run): exact everywhere, every test passes. The default's lattice batch
# within 2 % of the prof side's. Timeline (small HLG, pass 6.2 ms a batch in the profile's bucket): the plan
# and the clear/build under 0.3 ms together; the four classes overlap (c11, c13 start within 0.1 ms of each
# other), their union ~2.8 ms; the tail 1-2 ms after the classes; the rest of the 6.2 ms (~1.5 ms) is
# between the bucket's events and the pass's first start (the joins, the side streams' events).
# CTAs: the walk is ~84 % of the warps' cycles at 32 warps a multiprocessor, and 3 CTAs (s169's on3)
# cost +13 % against 4: so 6 CTAs (48 warps; c13 stays at 4 by its shared memory) cut the pass 15-30 %
# (small HLG 6.2 -> 4.3-5.3 ms), 8 no better than 6 (more spills; only c11 and the global class fit 8).
# Side log (CUWFST_LATTICE_LOG=finalize, never run on a GPU; speed-notes "The log in FinalizeKernel"):
# the lattice batch 0.3-1.0 ms faster, the 1-best unchanged, the log bucket (2.0 ms) gone.
# Stage: .device/wheels. Carry .device. $OUT: s172.log, tests.tgz, ab_small.*, ab_full.*
. scripts/device_common.sh
END=${END:-585}
FULL_GRAPHS=hlg device_setup s172.log
small_tier &
gpu_tests tests_phase.log ${TEST_CAP:-120} "test_gpu_lattice.py -k 'phase_sums or records_after or ctas'" tests/test_gpu_lattice.py -k "phase_sums or records_after or ctas"
wait
echo "[$(since) s] small tier, phase tests" | tee -a $L
# (TL_SIDES: the A/B's sides as unquoted words, in place of these; SUITE=0, SUITE_CAP, NO_FULL: ab_suite_full)
SIDES=("prof:CUWFST_LATTICE_AFTER_PROF=on" "c6:CUWFST_LATTICE_AFTER_CTAS=6" "c8:CUWFST_LATTICE_AFTER_CTAS=8"
       "c6prof:CUWFST_LATTICE_AFTER_CTAS=6,CUWFST_LATTICE_AFTER_PROF=on" "log:CUWFST_LATTICE_LOG=finalize")
ab_suite_full 120 "${SIDES[@]}"
echo "[$(since) s] end" | tee -a $L
