// K0 LaneSetupKernel and K1 ScanKernel (with the lane scan of the flattened slot space).
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuwfst/common.cuh"

namespace cuwfst {

// LaneSetupKernel — launched before every launch sequence (a decode, a stream's chunk, a
// segment of continuous batching), grid = max_lanes blocks of 32 threads.
// Reads: ws.commands. Writes, per lane, what its command says: kCmdInit resets the lane to
// a new row (counters, the start token in frontier buffer 0, t = 0), kCmdSetLength arms
// the final step of a stream, kCmdRelease empties the lane, kCmdAvail sets the frames the
// lane may step through. Every lane not initialized here is parked (phase idle): the
// start-closure passes that may follow must take only the new lanes, and every Scan
// decides each lane's phase anew. reset_arena: a whole batch starts (offline decode):
// the winners cursor returns to 0 and the pools' demand counters restart.
// Layout (types.cuh, Workspace::pooled): an initialized lane gets the static layout's
// regions, or with pooled its start token at token kPoolAlign * lane of buffer 0 (the pools
// always hold kPoolAlign x max_lanes tokens) and no claims or hash region until its first
// ScanKernel hands them out.
// After an init a lane depends on nothing left from its previous row, except the hash
// tables, which Finalize, ClearClaimsKernel and HashSanitizeKernel leave empty.
// With epsilon closure the start token also enters the lane's hash as the closure expects
// a real step's frontier (epsilon.cuh): claimed, its score as the slot's baseline,
// hash_pos 0; the lane's phase is real and its cutoff 0 - search_beam, so the closure
// passes that follow treat the start like a step's frontier.
__global__ void LaneSetupKernel(DeviceGraph g, Workspace ws, StepParams p, int32_t reset_arena) {
  int32_t lane = blockIdx.x;
  if (threadIdx.x != 0) return;
  LaneCounters& lc = ws.lanes[lane];
  const LaneCommand cmd = ws.commands[lane];
  if (lane == 0 && reset_arena) {
    *ws.arena_cursor = 0ull;
    *ws.scan_done = 0;
    ws.pool_need[kPoolTokens] = static_cast<unsigned long long>(kPoolAlign) * ws.max_lanes;
    ws.pool_need[kPoolClaims] = 0ull;
    ws.pool_need[kPoolHash] = 0ull;
  }
  if (!(cmd.op & kCmdInit)) {
    if (cmd.op & kCmdRelease) {
      lc.length = -1;
      lc.final_winner = -2;
      ws.out_path_len[lane] = 0;
    }
    if (cmd.op & kCmdSetLength) lc.length = cmd.length;
    if (cmd.op & kCmdAvail) lc.avail = cmd.avail;
    lc.phase = kPhaseIdle;
    return;
  }
  lc.length = cmd.length;  // -1 marks a lane this sequence does not use
  lc.avail = cmd.avail;
  lc.online = cmd.online;
  lc.t = 0;
  lc.buf = 0;
  const bool used = lc.length >= 0;
  lc.phase = used && ws.eps_iterations > 0 ? kPhaseReal : kPhaseIdle;
  lc.frontier_size = used ? 1 : 0;
  lc.next_size = used ? 1 : 0;  // the frontier a step reads is what the previous one built
  lc.total_arcs = 0;
  lc.beam = p.search_beam;
  lc.max_ord = FloatToOrderedInt(0.f);  // the start closure's cutoff is 0 - search_beam
  lc.eps_changed = 0;
  lc.eps_touched = 0;
  lc.eps_base = 0;
  lc.frontier_total = 0;
  lc.closure_added = 0;
  lc.max_lp = 0.f;
  lc.claims = 0;
  lc.overflow = 0;
  lc.max_frontier = 0;
  lc.final_winner = -2;
  lc.final_score = -INFINITY;
  lc.reached_final = 0;
  lc.redirected = 0;
  lc.lp_row_f32 = nullptr;
  lc.lp_row_f16 = nullptr;
  if (ws.pooled) {
    lc.tok_off[0] = lc.tok_off[1] = static_cast<long long>(kPoolAlign) * lane;
    lc.tok_cap[0] = lc.tok_cap[1] = 1;
    lc.claim_off = lc.hash_off = 0;
    lc.claim_cap = lc.hash_cap = 0;
  } else {
    StaticLayout(ws, lane, lc);
  }
  const int64_t base = lc.tok_off[0];
  ws.tok_state[0][base] = g.start_state;
  ws.tok_score[0][base] = 0.f;
  ws.tok_winner[0][base] = -1;
  ws.out_path_len[lane] = 0;
  if (used && ws.eps_iterations > 0) {  // (the static layout: epsilon graphs are never pooled)
    const int64_t hb = lc.hash_off;
    const uint32_t h = HashSlot(static_cast<uint32_t>(g.start_state), lc.hash_cap);
    ws.hash_key[hb + h] = static_cast<uint32_t>(g.start_state);  // the table is empty here
    ws.hash_payload[hb + h] = EpsBaseline(0.f);
    ws.hash_pos[hb + h] = 0;
    ws.claims[lc.claim_off] = make_int2(g.start_state, static_cast<int32_t>(h));
    lc.claims = 1;
  }
}

// ScanKernel — per step of a launch sequence, grid = max_lanes blocks of kScanThreads (one
// CTA per lane), kScanItems consecutive tokens per thread per round.
// Each lane takes its own step t = lc.t: a real step while t < length and t < avail, the
// final step at t == length, else none (idle: unused, finished, or waiting for frames).
// Reads: the lane's frontier (buffer lc.buf; its size is what the previous step's
// FinalizeKernel blocks added up in next_size), the graph's row_splits/final_count/
// emit_maxw, the lane's log-prob row (ws.inputs). Writes: phase, k2's dynamic beam,
// tok_begin, tok_ub, arc_offsets (exclusive degree prefix sums, [n + 1]), total_arcs,
// max_lp, resets the step's max and claim count, and advances the lane: t + 1, and buf
// flips to the buffer this step builds (later kernels read buf ^ 1, write buf). Idle
// lanes publish 0 arcs and keep their frontier.
// The last CTA to finish also builds lane_arc_offsets, the flattened int64 slot space (a
// last-block-done pattern instead of a separate launch).
constexpr int kScanThreads = 512;
constexpr int kScanItems = 4;

__device__ __forceinline__ void LaneScanLastBlock(Workspace& ws) {
  // Every CTA: publish, then count; the CTA that counts last sees every lane's total.
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(ws.scan_done, 1) == static_cast<int32_t>(gridDim.x) - 1;
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  __threadfence();
  // One warp scans the lanes' totals, 32 at a time, in int64: each lane's total is below
  // 2^31 (ScanKernel drops a lane's step past that), the batch's sum need not be, and no
  // lane loses its step because of the others. Pooled: the same pass hands out each lane's
  // regions for the step, in lane order (types.cuh, PooledClaimsBound and friends): its
  // claims list, its hash table and the next frontier (in buffer lc.buf, which this step
  // builds: survivors are claims, at most the bound); a lane past a pool's committed
  // capacity gets none and is flagged kOverflowPool (its step claims and keeps nothing; the
  // host grows the pool and re-runs the batch).
  int64_t carry = 0, c_carry = 0, h_carry = 0, t_carry = 0;
  const long long c_cap = ws.pooled ? ws.pool_cap[kPoolClaims] : 0;
  const long long h_cap = ws.pooled ? ws.pool_cap[kPoolHash] : 0;
  const long long t_cap = ws.pooled ? ws.pool_cap[kPoolTokens] : 0;
  for (int32_t base = 0; base < ws.max_lanes; base += 32) {
    const int32_t l = base + threadIdx.x;
    const int64_t v = l < ws.max_lanes ? *reinterpret_cast<volatile int32_t*>(&ws.lanes[l].total_arcs) : 0;
    int64_t step_total;
    const int64_t excl = WarpExclusiveScan(v, &step_total);
    if (l < ws.max_lanes) ws.lane_arc_offsets[l] = carry + excl;
    carry += step_total;
    if (ws.pooled) {
      PooledAsk ask{0, 0, 0, 0};
      if (l < ws.max_lanes)
        ask = PooledAskOf(ws, *reinterpret_cast<volatile int32_t*>(&ws.lanes[l].phase), static_cast<int32_t>(v));
      int64_t c_total, h_total, t_total;
      const int64_t c_off = c_carry + WarpExclusiveScan(ask.claims, &c_total);
      const int64_t h_off = h_carry + WarpExclusiveScan(ask.hash, &h_total);
      const int64_t t_off = t_carry + WarpExclusiveScan(ask.tokens, &t_total);
      if (l < ws.max_lanes) {
        LaneCounters& lc = ws.lanes[l];
        // (volatile: the lane's CTA flipped buf; this SM's L1 may hold the old line)
        const int32_t dst = *reinterpret_cast<volatile int32_t*>(&lc.buf);
        // a lane that does not fit gets no region at all (offsets 0, capacities 0): the next
        // step's ScanKernel writes nothing through it (HasTokenRegion)
        if (!PooledAssign(ws, lc, dst, ask, c_off, h_off, t_off, c_cap, h_cap, t_cap))
          atomicOr(&lc.overflow, kOverflowPool);  // (L2: the lane's own bits may be newer than L1)
      }
      c_carry += c_total;
      h_carry += h_total;
      t_carry += t_total;
    }
  }
  if (threadIdx.x == 0) {
    ws.lane_arc_offsets[ws.max_lanes] = carry;
    if (ws.pooled) {
      atomicMax(&ws.pool_need[kPoolClaims], static_cast<unsigned long long>(c_carry));
      atomicMax(&ws.pool_need[kPoolHash], static_cast<unsigned long long>(h_carry));
      atomicMax(&ws.pool_need[kPoolTokens], static_cast<unsigned long long>(t_carry));
    }
    *ws.scan_done = 0;
  }
}

__global__ void __launch_bounds__(kScanThreads)
ScanKernel(DeviceGraph g, Workspace ws, StepParams p) {
  using BlockScan = cub::BlockScan<int64_t, kScanThreads>;
  using BlockReduce = cub::BlockReduce<float, kScanThreads>;
  __shared__ union {
    typename BlockScan::TempStorage scan;
    typename BlockReduce::TempStorage reduce;
  } tmp;
  __shared__ int64_t running;
  const int32_t lane = blockIdx.x;
  LaneCounters& lc = ws.lanes[lane];
  if (ws.pooled && lc.claims > lc.claim_cap) {
    // The previous step's claims list overflowed, so its table holds keys no claim lists
    // (FindOrClaim): wipe it before this step's last block hands the pool's tables out
    // again (that block starts after every CTA, this one included, is done).
    uint32_t* keys = ws.hash_key + lc.hash_off;
    unsigned long long* payload = ws.hash_payload + lc.hash_off;
    for (int32_t i = threadIdx.x; i < lc.hash_cap; i += blockDim.x) {
      keys[i] = kEmptyKey;
      payload[i] = 0ull;
    }
    __syncthreads();
    if (threadIdx.x == 0) lc.claims = 0;
    __syncthreads();
  }
  const int32_t T = lc.length;
  const int32_t t = lc.t;
  // The arena guard (streams): every CTA reads the cursor before this step appends anything,
  // so all lanes take the same decision; a lane that waits keeps t and its frontier. Half
  // the arena: after the step at most half is in use, so the GC round that follows always
  // has the free tail it copies the live entries into. The arena is the log's published
  // limit (device memory, the bound FinalizeKernel appends up to): a lazily committed log
  // grows between rounds without a new capture, so no captured value may stand in for it.
  const bool arena_short = t < T && *ws.arena_guard != 0ull &&
                           2ull * (*ws.arena_cursor + *ws.arena_guard) > static_cast<unsigned long long>(*ws.arena_limit);
  if (T < 0 || t > T || (t < T && t >= lc.avail) || arena_short) {
    if (threadIdx.x == 0) {
      lc.phase = kPhaseIdle;
      lc.total_arcs = 0;
    }
    LaneScanLastBlock(ws);
    return;
  }
  // The frontier the previous step (and its epsilon closure) built; at t = 0 the start
  // token and its closure. The step's scratch shares the frontier's region (tok_off).
  const int32_t cur = lc.buf;
  const int32_t n = min(lc.next_size, lc.tok_cap[cur]);
  const int64_t q = lc.tok_off[cur];
  const int32_t* state = ws.tok_state[cur] + q;
  const float* score = ws.tok_score[cur] + q;
  int32_t* begin = ws.tok_begin + q;
  float* ub = ws.tok_ub + q;
  int32_t* offsets = ws.arc_offsets + q;
  int32_t* hint = ws.tok_hint + HintBase(ws, lc, lane, cur);
  const int64_t hint_slots = static_cast<int64_t>(HintCap(ws, lc, cur)) << kHintShift;

  int32_t phase = kPhaseReal;
  if (t == T) {
    int any_final = 0;
    for (int32_t i = threadIdx.x; i < n && !any_final; i += blockDim.x)
      any_final |= g.final_count[state[i]] > 0;
    any_final = __syncthreads_or(any_final);
    phase = (any_final || !p.allow_partial) ? kPhaseFinal : kPhaseRedirect;
  }
  if (threadIdx.x == 0) running = 0;
  __syncthreads();
  constexpr int kPerRound = kScanThreads * kScanItems;
  for (int32_t base = 0; base < n; base += kPerRound) {
    const int32_t first = base + threadIdx.x * kScanItems;
    int64_t deg[kScanItems];
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      const int32_t i = first + k;
      deg[k] = 0;
      if (i < n) {
        const int32_t s = state[i];
        const StateArcs sa = ArcsOf(g, s);
        int32_t b, e;
        if (phase == kPhaseReal) {  // emitting arcs
          b = sa.EmitBegin();
          e = sa.EmitEnd();
        } else if (phase == kPhaseFinal) {
          b = sa.FinalBegin();
          e = b + sa.final_count;
        } else {  // redirect: every arc of the state, as the CPU reference
          b = sa.begin;
          e = sa.end;
        }
        begin[i] = b;
        deg[k] = e - b;
        ub[i] = phase == kPhaseReal ? score[i] + g.emit_maxw[s] : INFINITY;
      }
    }
    int64_t excl[kScanItems], total;
    BlockScan(tmp.scan).ExclusiveSum(deg, excl, total);
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      const int32_t i = first + k;
      const int64_t off = running + excl[k];
      if (i < n) offsets[i] = off > INT32_MAX ? INT32_MAX : static_cast<int32_t>(off);
      // every sampled slot m << kHintShift inside [off, off + deg) names token i
      const int64_t last = min(off + deg[k], hint_slots);
      for (int64_t m = (off + (1 << kHintShift) - 1) >> kHintShift; (m << kHintShift) < last; ++m)
        hint[m] = i;
    }
    __syncthreads();
    if (threadIdx.x == 0) running += total;
    __syncthreads();
  }
  // Max log-prob of the row: the acoustic ingredient of the upper bounds.
  float max_lp = 0.f;
  const float* row32 = nullptr;
  const uint16_t* row16 = nullptr;
  if (phase == kPhaseReal) {
    const LaneInput in = ws.inputs[lane];
    const int64_t off = static_cast<int64_t>(t - in.t0) * in.stride_t;
    if (p.lp_is_f16) row16 = static_cast<const uint16_t*>(in.base) + off;
    else row32 = static_cast<const float*>(in.base) + off;
    float m = -INFINITY;
    for (int32_t v = threadIdx.x; v < g.vocab_size; v += blockDim.x)
      m = fmaxf(m, row16 ? __half2float(__ushort_as_half(row16[v])) : row32[v]);
    __syncthreads();
    max_lp = BlockReduce(tmp.reduce).Reduce(m, [](float a, float b) { return fmaxf(a, b); });
  }
  if (threadIdx.x == 0) {
    int64_t total = running;
    if (total > INT32_MAX) {  // cannot index this step's slots in int32: drop the lane's step
      lc.overflow |= kOverflowSlots;
      total = 0;
    }
    // the sentinel after the frontier's offsets; a pooled frontier the pools could not hold
    // has no region (n is 0 and the step has no slots, so nothing reads it)
    if (HasTokenRegion(ws, lc, cur)) offsets[n] = static_cast<int32_t>(total);
    lc.frontier_size = n;
    lc.next_size = 0;
    lc.phase = phase;
    lc.total_arcs = static_cast<int32_t>(total);
    lc.beam = UpdateBeam(lc.beam, n, t, T + 1, p.search_beam, p.min_active, p.max_active, lc.online != 0);
    lc.t = t + 1;
    lc.buf = cur ^ 1;
    lc.max_ord = FloatToOrderedInt(-INFINITY);
    lc.max_lp = max_lp;
    lc.hint_ok = total <= hint_slots;
    lc.claims = 0;
    lc.max_frontier = max(lc.max_frontier, n);
    lc.frontier_total += n;
    lc.lp_row_f32 = row32;
    lc.lp_row_f16 = row16;
  }
  LaneScanLastBlock(ws);
}

}  // namespace cuwfst
