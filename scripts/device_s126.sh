#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-04 20:07, second call. NOT yet run on a GPU: LatLogKernel's
# copy four tokens a thread in flight and its CTAs a lane by CUWFST_LATTICE_LOG_SPLIT; the trim guard
# test's expectation for bounded runs; the measurement switches' test.
#   1. wheels; the full tier (HLG only) in the background; the module built
#   2. test_gpu_lattice.py's records-after tests; the other files' GPU tests with lattice decodes under
#      the default (the records after the search)
#   3. lattice_speed --utts 256 --env-ab: LatLogKernel on 16 and 32 CTAs a lane, the in-step stage;
#      then --profile (per-kind kernel ms) of the default
#   4. Nsight Compute: the records pass's kernels under the default (claimed items), until END
# Until END (default 500) s. Carry .device. $OUT: s126.log, tests_*.log, lat*.jsonl, ncu_claims.txt
. scripts/device_common.sh
END=${END:-500}
FULL_GRAPHS=hlg device_setup s126.log
gpu_tests tests_after.log 60 "records-after tests" tests/test_gpu_lattice.py -k "after or trim_guard or guard_decodes"
gpu_tests tests_files.log 200 "other files' lattice tests (default)" -k "test_memory_stats_agree_with_the_module_counters or test_pooled_lanes_may_outgrow_main_q_and_skip_the_rescue or test_a_pooled_decoders_winners_log_lies_in_host_memory or test_trim_with_epsilon_graphs_and_lattices or test_max_from_the_anchor_equals_the_max_from_scratch or test_grids_and_appends_leave_the_results_alone or test_label_bound_equals_without or test_trim_weights_equals_labelled_search or test_lattice_record_switches_refuse_other_values or test_lattice_decodes_run_the_lists_and_equal_the_cpu or test_lattice_walk_entry or test_lattice_frames_and_word_times_remapped or test_lattice_on_random_graphs_any_span or test_nbest_and_confidences_from_lattices or test_lattice_outputs_on_the_gpu_equal_the_cpus or test_memory_option_on_the_gpu or test_packed_and_unpacked_arcs_decode_alike" tests/test_gpu_memory.py \
  tests/test_gpu_trim.py tests/test_gpu_chain.py tests/test_gpu_walk_entry.py tests/test_cli.py tests/test_gpu_epsilon.py
wait_full 400; echo "[$(since) s] full tier" | tee -a $L
lat_speed lat.jsonl $((END - 130)) --utts 256 --env-ab split16:CUWFST_LATTICE_LOG_SPLIT=16 \
  split32:CUWFST_LATTICE_LOG_SPLIT=32 step:CUWFST_LATTICE_RECORDS=step
echo "[$(since) s] lattice_speed" | tee -a $L
lat_speed lat_prof.jsonl $((END - 100)) --utts 64 --profile
echo "[$(since) s] profile" | tee -a $L
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout -s KILL $(left $((END - 5))) "$NCU" --target-processes application-only \
  --kernel-name "regex:LatRecordsKernel|LatTailKernel|LatPlanKernel|LatTab" --launch-skip 16 --launch-count 8 \
  --section SpeedOfLight --section Occupancy --section LaunchStats python3 -m benchmarks.lattice_speed --graph $C/HLG.img \
  --log-probs $C/sim/shard-00000.npz --utts 32 --batch 32 --reps 1 --one-call --check 0 > $OUT/ncu_claims.txt 2>&1
grep -E "^  [a-zA-Z].*Kernel|Duration|Achieved Occupancy|Registers Per" $OUT/ncu_claims.txt | sed -E 's/\(.*//' | cut -c1-100 | tee -a $L
echo "[$(since) s] ncu" | tee -a $L
