#!/usr/bin/env bash
# GPU machine: issue 10, the records pass's flat walk at 1, 2 and 4 arcs a thread at once against the warp
# walk (pipe), counts checked against numpy (docs/speed-notes.md, "Session of 2026-12-04 17:08").
# Carry .device. $OUT: post.log, post.{txt,jsonl}
POST_ARGS="--variants pipe flat flat2 flat4 flat4_count" LAT_SPEED=0 exec bash scripts/device_lattice_post.sh
