#!/usr/bin/env bash
# GPU machine: issue 10, session of 2026-12-06 14:13, after s198 (the suite at the compacted walk's default: every
# group passed but test_every_construction_site_fails_cleanly[lazy, eager] in the mem group, whose free-memory
# bound saw 192 MiB go while four other pytest processes shared the GPU; Nsight Compute on the compacted kernel:
# the item's first barrier held 16 % of the warps' samples, the arcs' loads 25 %). 1. The claimed tokens'
# tests and the compacted walk's, beside the full tier's build; test_gpu_faults.py alone. 2. lattice_speed
# --env-ab on the full HLG, 256 sim rows, batch 32, one call: claim / stride (the default) alternating, and the
# uncompacted walk once. 3. The phase sums of claim and stride.
# Prediction (written before the run): exact; test_gpu_faults.py passes alone; claimed tokens cut the pass
# 4-10 % (the barrier's wait 16 % of the warps' cycles -> under 6 %), a lattice batch 0.3-0.8 ms below stride.
# $OUT: s199.log, tests_claim.log, tests_faults.log, tests_lat_claim.log, ab_full.{txt,err,jsonl}, ab_prof.{txt,err,jsonl}
. scripts/device_common.sh
FULL_GRAPHS=hlg device_setup s199.log
gpu_tests tests_claim.log 150 "claim tests" tests/test_gpu_lattice.py -k "compacted or claimed_tokens"
echo "[$(since) s] tests" | tee -a $L
wait_full 260; echo "[$(since) s] full tier" | tee -a $L
env_ab full $C/HLG.img $C/sim/shard-00000.npz 200 --env-ab claim:CUWFST_LATTICE_AFTER_TOKENS=claim \
  stride:CUWFST_LATTICE_AFTER_TOKENS=stride claim2:CUWFST_LATTICE_AFTER_TOKENS=claim stride2:CUWFST_LATTICE_AFTER_TOKENS=stride \
  claim3:CUWFST_LATTICE_AFTER_TOKENS=claim stride3:CUWFST_LATTICE_AFTER_TOKENS=stride off:CUWFST_LATTICE_AFTER_COMPACT=off
echo "[$(since) s] A/B" | tee -a $L
gpu_tests tests_faults.log 100 "test_gpu_faults.py" tests/test_gpu_faults.py
env_ab prof $C/HLG.img $C/sim/shard-00000.npz 60 --env-ab prof:CUWFST_LATTICE_AFTER_PROF=on \
  cprof:CUWFST_LATTICE_AFTER_PROF=on,CUWFST_LATTICE_AFTER_TOKENS=claim
echo "[$(since) s] prof" | tee -a $L
CUWFST_LATTICE_AFTER_TOKENS=claim gpu_tests tests_lat_claim.log $(left 420) "test_gpu_lattice.py -k 'after or k2' under claim" \
  tests/test_gpu_lattice.py -k "after or k2"
echo "[$(since) s] end" | tee -a $L
