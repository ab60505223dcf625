// Epsilon closure (TLG graphs): eps_iterations passes after every real step and once for
// the start token, each pass EpsScanKernel -> EpsExpandKernel -> EpsResolveKernel, then
// ClearClaimsKernel after the last one. The rule is the CPU reference's (reference_decoder.cc,
// ExpandEpsilon; docs/design.md):
//  * a pass relaxes the epsilon arcs of the tokens the previous pass changed (pass 0: the
//    whole frontier the real step built), reading their scores and winners as they were at
//    the start of the pass (Jacobi order);
//  * end = score + weight is admitted iff end > the step's cutoff (max - beam of the real
//    step; 0 - search_beam for the start) and end > the destination's score if the
//    destination is already in the frontier; the best admitted end per destination wins;
//  * a winning candidate gets a fresh winners-log entry; it updates its token in place or
//    appends a new one, and the token joins the next pass's list.
//
// How the hash carries it: after a real step's FinalizeKernel (or InitKernel for the start)
// every frontier token's hash slot stays claimed with payload {score : 0xFFFFFFFF} (the
// baseline, EpsBaseline) and hash_pos = its frontier index. A candidate's payload
// {end : slot} passes atomicMax over the baseline only with a strictly greater end, and the
// one atomicMax that lifts a slot off its baseline (or off empty) appends the slot to the
// pass's touched list, once per slot per pass. EpsResolveKernel turns each touched slot into
// a token update and restores the baseline for the next pass.
#pragma once

#include <cub/block/block_scan.cuh>

#include "cuwfst/expand.cuh"
#include "cuwfst/finalize.cuh"
#include "cuwfst/scan.cuh"

namespace cuwfst {

// A lane whose closure runs: its step was real (the start counts as one) and, with
// closure = scan, EpsScanKernel has marked it kPhaseEps; closure = lists leaves it kPhaseReal.
__device__ __forceinline__ bool InClosure(const LaneCounters& lc) {
  return lc.length >= 0 && (lc.phase == kPhaseReal || lc.phase == kPhaseEps);
}

// EpsScanKernel — per closure pass, grid = max_lanes blocks of kScanThreads (CTA per lane),
// kScanItems entries per thread per round.
// Takes part: lanes whose step was real (kPhaseReal; InitKernel marks the start so) or that
// are in this closure (kPhaseEps); others publish 0 slots.
// Reads: the pass's entries (pass 0: tokens 0..next_size of frontier buffer lc.buf; later:
// eps_tok[0..eps_changed)), their states, scores and winners, the graph's epsilon ranges.
// Writes, per entry j: tok_begin[j] (first epsilon arc), tok_ub[j] (the token's score now:
// the pass reads this snapshot, not the live score), eps_winner[j], arc_offsets, tok_hint;
// per lane: phase = kPhaseEps, frontier_size = entries, total_arcs, hint_ok, eps_base (pass 0), and zeroes eps_touched/eps_changed for EpsExpand/EpsResolve. The last CTA builds
// lane_arc_offsets (LaneScanLastBlock).
__global__ void __launch_bounds__(kScanThreads)
EpsScanKernel(DeviceGraph g, Workspace ws, int32_t pass) {
  StepKernelEntry();
  using BlockScan = cub::BlockScan<int64_t, kScanThreads>;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ int64_t running;
  const int32_t lane = blockIdx.x;
  LaneCounters& lc = ws.lanes[lane];
  const bool in = lc.length >= 0 && (lc.phase == kPhaseReal || lc.phase == kPhaseEps);
  if (!in) {
    if (threadIdx.x == 0) lc.total_arcs = 0;
    LaneScanLastBlock(ws, false);
    return;
  }
  const int32_t buf = lc.buf;  // the frontier the step (or the start) built
  const int32_t n = pass == 0 ? min(lc.next_size, lc.tok_cap[buf]) : lc.eps_changed;
  const int64_t q = lc.tok_off[buf];  // the pass's scratch shares the frontier's region
  const int32_t* state = ws.tok_state[buf] + q;
  const float* score = ws.tok_score[buf] + q;
  const int32_t* winner = ws.tok_winner[buf] + q;
  const int32_t* eps_tok = ws.eps_tok + q;
  int32_t* eps_winner = ws.eps_winner + q;
  int32_t* begin = ws.tok_begin + q;
  float* snap = ws.tok_ub + q;
  int32_t* offsets = ws.arc_offsets + q;
  int32_t* hint = ws.tok_hint + HintBase(ws, lc, lane, buf);
  const int64_t hint_slots = static_cast<int64_t>(HintCap(ws, lc, buf)) << kHintShift;
  if (threadIdx.x == 0) running = 0;
  __syncthreads();
  constexpr int kPerRound = kScanThreads * kScanItems;
  for (int32_t base = 0; base < n; base += kPerRound) {
    const int32_t first = base + threadIdx.x * kScanItems;
    int64_t deg[kScanItems];
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      const int32_t j = first + k;
      deg[k] = 0;
      if (j < n) {
        const int32_t tok = pass == 0 ? j : eps_tok[j];
        const StateArcs sa = ArcsOf(g, state[tok]);
        begin[j] = sa.EpsBegin();
        deg[k] = sa.eps_count;
        snap[j] = score[tok];
        eps_winner[j] = winner[tok];
      }
    }
    int64_t excl[kScanItems], total;
    BlockScan(scan).ExclusiveSum(deg, excl, total);
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      const int32_t j = first + k;
      const int64_t off = running + excl[k];
      if (j < n) offsets[j] = off > INT32_MAX ? INT32_MAX : static_cast<int32_t>(off);
      const int64_t last = min(off + deg[k], hint_slots);
      for (int64_t m = (off + (1 << kHintShift) - 1) >> kHintShift; (m << kHintShift) < last; ++m)
        hint[m] = j;
    }
    __syncthreads();
    if (threadIdx.x == 0) running += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    int64_t total = running;
    if (total > INT32_MAX) {  // cannot index this pass's slots in int32: drop the pass
      lc.overflow |= kOverflowSlots;
      total = 0;
    }
    offsets[n] = static_cast<int32_t>(total);
    if (pass == 0) lc.eps_base = n;
    lc.phase = kPhaseEps;
    lc.frontier_size = n;
    lc.total_arcs = static_cast<int32_t>(total);
    lc.hint_ok = total <= hint_slots ? kHintShift : 0;  // the pass's hints: every 32nd slot
    lc.max_lp = 0.f;
    lc.eps_touched = 0;
    lc.eps_changed = 0;
  }
  LaneScanLastBlock(ws, false);
}

// EpsExpandKernel — per closure pass, grid = the walkers' (ExpandBlocksFor) x kWalkThreads,
// over the pass's slot space (entry j, epsilon arc tok_begin[j] + local - arc_offsets[j]).
// Reads: the snapshot scores (tok_ub), the step's cutoff (max_ord - beam, untouched since
// the real step), epsilon arcs' weights and destinations, the lane's hash.
// Writes: hash keys (new destinations, appended to claims), payloads (atomicMax of
// {end : local slot}), the touched list (eps_touched), overflow bits.
// Invariant: every frontier token's slot holds its baseline (see the top of this file).
template <int kWalker>
__global__ void __launch_bounds__(kWalkThreads)
EpsExpandKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  if (ws.lane_arc_offsets[ws.max_lanes] == 0) return;
  int32_t cur_lane = -1;
  float cutoff = INFINITY;
  LaneTable table;
  Walk<kWalker>(ws, [&](const LaneView& lv, int32_t j, int32_t local) {
    if (lv.lane != cur_lane) {
      cur_lane = lv.lane;
      const LaneCounters& lc = ws.lanes[cur_lane];
      cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;
      table.Load(ws, lc);
    }
    const int32_t arc = lv.begin[j] + (local - lv.offsets[j]);
    const float end = lv.ub[j] + g.arc_weight[arc];  // the CPU's snap_score + weight
    if (!(end > cutoff)) return;
    const int32_t h = FindOrClaim(ws, cur_lane, table, static_cast<uint32_t>(ArcDest(g, arc)));
    if (h < 0) return;
    const unsigned long long p =
        (static_cast<unsigned long long>(FloatToOrderedU32(end)) << 32) | static_cast<uint32_t>(local);
    if (!(*reinterpret_cast<volatile unsigned long long*>(&table.payload[h]) < p)) return;
    const unsigned long long old = atomicMax(&table.payload[h], p);
    // The one raise off the baseline (or off an empty slot) registers the slot for Resolve.
    if (old < p && (old == 0ull || static_cast<uint32_t>(old) == kBaselineSlot)) {
      const LaneCounters& lc = ws.lanes[cur_lane];
      const int32_t c = atomicAdd(&ws.lanes[cur_lane].eps_touched, 1);
      if (c < lc.claim_cap) ws.eps_touched[lc.claim_off + c] = h;
      else atomicOr(&ws.lanes[cur_lane].overflow, kOverflowClaims);
    }
  });
}

// EpsResolveKernel — per closure pass, grid (finalize_split, max_lanes) x kFinalizeThreads:
// the CTAs of a lane share its touched list in contiguous chunks, kFinalizeItems per thread
// per round.
// Reads: each touched slot's key (state), resolved payload {end : local slot} and hash_pos;
// the pass's entries (arc_offsets/tok_hint turn the slot back into entry j and its arc,
// eps_winner[j] is the predecessor). Writes: a winners-log entry per updated token, the
// token (in place when hash_pos >= 0, else appended at next_size), the next pass's list
// (eps_tok, eps_changed), the slot's new baseline and hash_pos.
__global__ void __launch_bounds__(kFinalizeThreads)
EpsResolveKernel(Workspace ws) {
  StepKernelEntry();
  using BlockScan = cub::BlockScan<int32_t, kFinalizeThreads>;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ int32_t new_base, chg_base;
  __shared__ long long arena_base;
  const int32_t lane = blockIdx.y;
  LaneCounters& lc = ws.lanes[lane];
  if (lc.phase != kPhaseEps) return;
  const int32_t num = min(lc.eps_touched, lc.claim_cap);
  const int2 range = SplitRange(ws, num);
  const int32_t c_begin = range.x, c_end = range.y;
  if (c_begin >= c_end) return;
  const int32_t n = lc.frontier_size;  // this pass's entries
  const int32_t buf = lc.buf;
  const long long arena_limit = *ws.arena_limit;
  const int64_t q = lc.tok_off[buf];
  const int32_t frontier_cap = lc.tok_cap[buf];
  const int64_t hb = lc.hash_off;
  const int32_t* offsets = ws.arc_offsets + q;
  const int32_t* hint = ws.tok_hint + HintBase(ws, lc, lane, buf);
  const bool hint_ok = lc.hint_ok != 0;
  const int32_t* begin = ws.tok_begin + q;
  const int32_t* eps_winner = ws.eps_winner + q;
  int32_t* eps_tok = ws.eps_tok + q;
  int32_t* tok_state = ws.tok_state[buf] + q;
  float* tok_score = ws.tok_score[buf] + q;
  int32_t* tok_winner = ws.tok_winner[buf] + q;
  const int32_t* touched = ws.eps_touched + lc.claim_off;
  constexpr int kPerRound = kFinalizeThreads * kFinalizeItems;
  for (int32_t base = c_begin; base < c_end; base += kPerRound) {
    const int32_t first = base + threadIdx.x * kFinalizeItems;
    int32_t h[kFinalizeItems], pos[kFinalizeItems], slot[kFinalizeItems], is_new[kFinalizeItems],
        has_pos[kFinalizeItems], rank[kFinalizeItems], round_new, round_chg;
    float end[kFinalizeItems];
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      const int32_t i = first + k;
      h[k] = i < c_end ? touched[i] : -1;
      is_new[k] = 0;
      if (h[k] >= 0) {
        const unsigned long long p = ws.hash_payload[hb + h[k]];
        end[k] = OrderedU32ToFloat(static_cast<uint32_t>(p >> 32));
        slot[k] = static_cast<int32_t>(p & 0xFFFFFFFFull);
        pos[k] = ws.hash_pos[hb + h[k]];
        is_new[k] = pos[k] < 0;
      }
    }
    BlockScan(scan).ExclusiveSum(is_new, rank, round_new);
    if (threadIdx.x == 0) new_base = atomicAdd(&lc.next_size, round_new);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      has_pos[k] = 0;
      if (h[k] < 0) continue;
      if (is_new[k]) {
        const int32_t idx = new_base + rank[k];
        if (idx < frontier_cap) {
          pos[k] = idx;
          tok_state[idx] = static_cast<int32_t>(ws.hash_key[hb + h[k]]);
        } else {
          atomicOr(&lc.overflow, kOverflowKept);
        }
      }
      has_pos[k] = pos[k] >= 0;
    }
    BlockScan(scan).ExclusiveSum(has_pos, rank, round_chg);
    if (threadIdx.x == 0) {
      chg_base = atomicAdd(&lc.eps_changed, round_chg);
      arena_base = static_cast<long long>(atomicAdd(ws.arena_cursor, static_cast<unsigned long long>(round_chg)));
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      if (h[k] < 0) continue;
      if (has_pos[k]) {
        const int32_t j = TokenOfSlot(offsets, hint, hint_ok, n, slot[k]);
        const int32_t arc = begin[j] + (slot[k] - offsets[j]);
        const long long wi = arena_base + rank[k];
        int32_t winner = -1;
        if (wi < arena_limit) {
          winner = static_cast<int32_t>(wi);
          ws.arena[wi] = {eps_winner[j], arc};
        } else {
          atomicOr(&lc.overflow, kOverflowArena);
        }
        tok_score[pos[k]] = end[k];
        tok_winner[pos[k]] = winner;
        eps_tok[chg_base + rank[k]] = pos[k];
      }
      ws.hash_pos[hb + h[k]] = has_pos[k] ? pos[k] : -1;
      ws.hash_payload[hb + h[k]] = EpsBaseline(has_pos[k] ? end[k] : -INFINITY);
    }
    __syncthreads();  // the shared bases are rewritten by the next round
  }
}

// ClearClaimsKernel — after a closure's last pass, grid (finalize_split, max_lanes) x
// kFinalizeThreads. Reads: the lane's claims list (the real step's and the closure's new
// destinations). Writes: clears exactly those slots (key, payload, hash_pos), the targeted
// delete FinalizeKernel does on epsilon-free steps. Lanes whose claims overflowed are wiped
// whole by HashSanitizeKernel at the end of the decode. Also adds the closure's new tokens
// to the lane's closure_added.
__global__ void __launch_bounds__(kFinalizeThreads) ClearClaimsKernel(Workspace ws) {
  StepKernelEntry();
  const int32_t lane = blockIdx.y;
  const LaneCounters& lc = ws.lanes[lane];
  if (!InClosure(lc)) return;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    ws.lanes[lane].closure_added += min(lc.next_size, lc.tok_cap[lc.buf]) - lc.eps_base;
  const int32_t num = min(lc.claims, lc.claim_cap);
  const int2 range = SplitRange(ws, num, true);
  const int32_t c_begin = range.x, c_end = range.y;
  const int64_t hb = lc.hash_off;
  const int2* claims = ws.claims + lc.claim_off;
  for (int32_t i = c_begin + threadIdx.x; i < c_end; i += blockDim.x) {
    const int32_t h = claims[i].y;
    ws.hash_key[hb + h] = kEmptyKey;
    ws.hash_payload[hb + h] = 0ull;
    ws.hash_pos[hb + h] = -1;
  }
}

// ---------------------------------------------------------------------------------------
// closure = lists: the same passes without EpsScanKernel. A pass's entries are a list of
// frontier indices: pass 0's is written by FinalizeKernel (LaneSetupKernel for the start),
// pass p's by pass p - 1's EpsListResolveKernel; only tokens whose epsilon arcs can pass
// the cutoff are listed (score + eps_maxw > cutoff; the others relax nothing). A pass is
// then two launches: Expand walks the entries (a thread per entry and its epsilon arcs),
// Resolve as before. Entry j's k-th epsilon arc is slot j * eps_stride + k of the payload
// (eps_stride = the graph's most epsilon arcs of a state), so Resolve recovers entry and arc
// by a division: no degree scan, no slot-to-entry search. Jacobi order holds as in the scan
// path: Expand reads the scores as the previous pass left them (Resolve, which changes them,
// is the next launch) and snapshots each entry's winner (eps_winner) and first epsilon arc
// (tok_begin) for Resolve. A tie between equal ends keeps the larger slot as before: entry
// order, then arc order.
// Counters (LaneCounters): pass p reads list p & 1 (eps_tok, eps_list1) of eps_list_n[p & 1]
// entries and registers its lifted slots in eps_touched_n[p & 1]; its Resolve fills the other
// list. Expand p zeroes the other parity's counters (their last readers, pass p - 1, are done);
// ScanKernel and LaneSetupKernel zero parity 0's before Finalize fills it.

constexpr int kEpsListMaxLanes = 1024;

// EpsListExpandKernel — per closure pass (closure = lists), grid = eps_blocks x kWalkThreads,
// grid-stride over the concatenated entries of every closure lane.
// Reads: the lists, the frontier (states, scores, winners of buffer lc.buf), the step's
// cutoff, epsilon arcs, the lane's hash. Writes: eps_winner / tok_begin per entry, hash keys
// (new destinations appended to claims), payloads (atomicMax {end : entry * eps_stride + k}),
// the touched list and eps_touched_n[p & 1]; block 0 zeroes the other parity's counters and,
// in pass 0, records eps_base.
// Invariant: every frontier token's slot holds its baseline (the top of this file).
__global__ void __launch_bounds__(kWalkThreads)
EpsListExpandKernel(DeviceGraph g, Workspace ws, int32_t pass) {
  StepKernelEntry();
  using BlockScan = cub::BlockScan<int64_t, kWalkThreads>;
  constexpr int kLanesPerThread = kEpsListMaxLanes / kWalkThreads;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ int64_t lane_off[kEpsListMaxLanes + 1];
  const int32_t par = pass & 1;
  const int32_t L = ws.max_lanes;
  int64_t cnt[kLanesPerThread], excl[kLanesPerThread], total;
#pragma unroll
  for (int k = 0; k < kLanesPerThread; ++k) {
    const int32_t l = threadIdx.x * kLanesPerThread + k;
    cnt[k] = 0;
    if (l < L) {
      const LaneCounters& lc = ws.lanes[l];
      if (InClosure(lc)) cnt[k] = min(lc.eps_list_n[par], lc.tok_cap[lc.buf]);
    }
  }
  BlockScan(scan).ExclusiveSum(cnt, excl, total);
#pragma unroll
  for (int k = 0; k < kLanesPerThread; ++k) {
    const int32_t l = threadIdx.x * kLanesPerThread + k;
    if (l < L) lane_off[l] = excl[k];
  }
  if (threadIdx.x == 0) lane_off[L] = total;
  __syncthreads();
  if (blockIdx.x == 0) {
    for (int32_t l = threadIdx.x; l < L; l += blockDim.x) {
      LaneCounters& lc = ws.lanes[l];
      lc.eps_list_n[par ^ 1] = 0;
      lc.eps_touched_n[par ^ 1] = 0;
      if (pass == 0 && InClosure(lc)) lc.eps_base = min(lc.next_size, lc.tok_cap[lc.buf]);
    }
  }
  const int32_t stride = ws.eps_stride;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t lane = UpperBound(lane_off, L + 1, e) - 1;
    const int32_t j = static_cast<int32_t>(e - lane_off[lane]);
    const LaneCounters& lc = ws.lanes[lane];
    const int32_t buf = lc.buf;
    // the frontier's region; the pass's scratch (lists, eps_winner, tok_begin) shares it
    const int64_t q = lc.tok_off[buf];
    const int32_t tok = (par ? ws.eps_list1 : ws.eps_tok)[q + j];
    const int32_t s = ws.tok_state[buf][q + tok];
    const float score = ws.tok_score[buf][q + tok];
    ws.eps_winner[q + j] = ws.tok_winner[buf][q + tok];
    const StateArcs sa = ArcsOf(g, s);
    const int32_t b = sa.EpsBegin();
    ws.tok_begin[q + j] = b;
    const float cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;
    LaneTable table;  // the lane's table and claims list (LaneCounters' regions)
    table.Load(ws, lc);
    for (int32_t k = 0; k < sa.eps_count; ++k) {
      const int32_t arc = b + k;
      const float end = score + g.arc_weight[arc];  // the CPU's snap_score + weight
      if (!(end > cutoff)) continue;
      const int32_t h = FindOrClaim(ws, lane, table, static_cast<uint32_t>(ArcDest(g, arc)));
      if (h < 0) continue;
      const uint32_t slot = static_cast<uint32_t>(j) * static_cast<uint32_t>(stride) + static_cast<uint32_t>(k);
      const unsigned long long p = (static_cast<unsigned long long>(FloatToOrderedU32(end)) << 32) | slot;
      if (!(*reinterpret_cast<volatile unsigned long long*>(&table.payload[h]) < p)) continue;
      const unsigned long long old = atomicMax(&table.payload[h], p);
      // The one raise off the baseline (or off an empty slot) registers the slot for Resolve.
      if (old < p && (old == 0ull || static_cast<uint32_t>(old) == kBaselineSlot)) {
        const int32_t c = atomicAdd(&ws.lanes[lane].eps_touched_n[par], 1);
        if (c < table.claim_cap) ws.eps_touched[lc.claim_off + c] = h;
        else atomicOr(&ws.lanes[lane].overflow, kOverflowClaims);
      }
    }
  }
}

// EpsListResolveKernel — per closure pass (closure = lists), grid (finalize_split, max_lanes) x
// kFinalizeThreads, as EpsResolveKernel. Reads: each touched slot's key, payload
// {end : entry * eps_stride + k} and hash_pos; the pass's eps_winner / tok_begin. Writes: a
// winners-log entry per updated token, the token (in place, or appended at next_size), the
// next pass's list (only tokens whose epsilon arcs can pass the cutoff; none after the last
// pass), the slot's new baseline and hash_pos.
__global__ void __launch_bounds__(kFinalizeThreads)
EpsListResolveKernel(DeviceGraph g, Workspace ws, int32_t pass) {
  StepKernelEntry();
  using BlockScan = cub::BlockScan<int32_t, kFinalizeThreads>;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ int32_t new_base, list_base;
  __shared__ long long arena_base;
  const int32_t lane = blockIdx.y;
  LaneCounters& lc = ws.lanes[lane];
  if (!InClosure(lc)) return;
  const int32_t par = pass & 1;
  const int32_t num = min(lc.eps_touched_n[par], lc.claim_cap);
  const int2 range = SplitRange(ws, num);
  const int32_t c_begin = range.x, c_end = range.y;
  if (c_begin >= c_end) return;
  const bool last_pass = pass + 1 >= ws.eps_iterations;
  const float cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;
  const int32_t stride = ws.eps_stride;
  const int32_t buf = lc.buf;
  const long long arena_limit = *ws.arena_limit;  // the log's published capacity
  const int64_t q = lc.tok_off[buf];
  const int32_t frontier_cap = lc.tok_cap[buf];
  const int64_t hb = lc.hash_off;
  const int32_t* begin = ws.tok_begin + q;
  const int32_t* eps_winner = ws.eps_winner + q;
  int32_t* next_list = (par ? ws.eps_tok : ws.eps_list1) + q;
  int32_t* tok_state = ws.tok_state[buf] + q;
  float* tok_score = ws.tok_score[buf] + q;
  int32_t* tok_winner = ws.tok_winner[buf] + q;
  const int32_t* touched = ws.eps_touched + lc.claim_off;
  constexpr int kPerRound = kFinalizeThreads * kFinalizeItems;
  for (int32_t base = c_begin; base < c_end; base += kPerRound) {
    const int32_t first = base + threadIdx.x * kFinalizeItems;
    int32_t h[kFinalizeItems], pos[kFinalizeItems], slot[kFinalizeItems], is_new[kFinalizeItems],
        key[kFinalizeItems], flags[kFinalizeItems], rank[kFinalizeItems], round_new, round_flags;
    float end[kFinalizeItems];
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      const int32_t i = first + k;
      h[k] = i < c_end ? touched[i] : -1;
      is_new[k] = 0;
      if (h[k] >= 0) {
        const unsigned long long p = ws.hash_payload[hb + h[k]];
        end[k] = OrderedU32ToFloat(static_cast<uint32_t>(p >> 32));
        slot[k] = static_cast<int32_t>(p & 0xFFFFFFFFull);
        pos[k] = ws.hash_pos[hb + h[k]];
        key[k] = static_cast<int32_t>(ws.hash_key[hb + h[k]]);  // the destination state
        is_new[k] = pos[k] < 0;
      }
    }
    BlockScan(scan).ExclusiveSum(is_new, rank, round_new);
    if (threadIdx.x == 0) new_base = atomicAdd(&lc.next_size, round_new);
    __syncthreads();
    // flags: bit 0 the token changes (a winners entry), bit 16 it joins the next pass's list;
    // one scan counts both (at most kPerRound of each per round, below 2^16).
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      flags[k] = 0;
      if (h[k] < 0) continue;
      if (is_new[k]) {
        const int32_t idx = new_base + rank[k];
        if (idx < frontier_cap) {
          pos[k] = idx;
          tok_state[idx] = key[k];
        } else {
          atomicOr(&lc.overflow, kOverflowKept);
        }
      }
      if (pos[k] >= 0) {
        flags[k] = 1;
        if (!last_pass && end[k] + g.eps_maxw[key[k]] > cutoff) flags[k] |= 1 << 16;
      }
    }
    BlockScan(scan).ExclusiveSum(flags, rank, round_flags);
    if (threadIdx.x == 0) {
      arena_base = static_cast<long long>(
          atomicAdd(ws.arena_cursor, static_cast<unsigned long long>(round_flags & 0xFFFF)));
      list_base = atomicAdd(&lc.eps_list_n[par ^ 1], round_flags >> 16);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      if (h[k] < 0) continue;
      const bool changed = flags[k] & 1;
      if (changed) {
        const int32_t j = static_cast<int32_t>(static_cast<uint32_t>(slot[k]) / static_cast<uint32_t>(stride));
        const int32_t arc = begin[j] + (slot[k] - j * stride);
        const long long wi = arena_base + (rank[k] & 0xFFFF);
        int32_t winner = -1;
        if (wi < arena_limit) {
          winner = static_cast<int32_t>(wi);
          ws.arena[wi] = {eps_winner[j], arc};
        } else {
          atomicOr(&lc.overflow, kOverflowArena);
        }
        tok_score[pos[k]] = end[k];
        tok_winner[pos[k]] = winner;
        if (flags[k] >> 16) next_list[list_base + (rank[k] >> 16)] = pos[k];
      }
      ws.hash_pos[hb + h[k]] = changed ? pos[k] : -1;
      ws.hash_payload[hb + h[k]] = EpsBaseline(changed ? end[k] : -INFINITY);
    }
    __syncthreads();  // the shared bases are rewritten by the next round
  }
}

// ---------------------------------------------------------------------------------------
// closure = chain (kClosureChain): the passes' fixpoint in three launches, on graphs where
// every state has at most one epsilon arc, the epsilon arcs are acyclic and eps_iterations is
// at least the longest epsilon chain (the host checks all three; Decoder, gpu.py), outside
// lattice decodes (whose stage records every pass's arcs, as the CPU's observer sees them).
// Why the result is the passes': with eps_iterations >= the longest chain, the passes
// (Bellman-Ford in Jacobi order, epsilon.cuh's top) end at each state's best score over the
// epsilon paths out of the step's frontier whose every hop passes the cutoff (and, into a
// token of the frontier, beats its score), and a state's winning path runs through its
// predecessor's final winner: a path through a lower score of the predecessor ends at most
// as high (fp32 addition is monotone), so it wins only an exact-score tie. Here each listed
// token follows its chain (one epsilon arc a state) hop by hop, with the same fp32 sums
// (end = previous end + weight, as a pass's snapshot + weight), offering every hop's end to
// the hop's destination ({end : j * eps_iterations + hop}, one atomicMax, a tie keeps the
// larger slot); it stops where the end fails the cutoff, where the destination is a
// frontier token whose score the end does not beat (that token's own chain covers what
// follows), where a better offer already holds the slot, or after eps_iterations hops.
// EpsChainResolveKernel turns each touched slot into a token update (a winners-log entry,
// the token in place or appended); EpsChainLinkKernel then points each new entry at its
// predecessor's final winner (the origin token's, or the hop before's), which exists only
// once every update of the closure is in. Differences from the passes: the winners log
// holds no entries for improvements the fixpoint overrides, and which of two EQUAL ends
// wins may differ (an exact-score tie, as between the other variants).

// EpsChainExpandKernel — after a real step (or the start), grid = eps_blocks x kWalkThreads,
// grid-stride over pass 0's list entries of every closure lane (EpsListExpandKernel's lane
// scan). Reads: the lists (Finalize / LaneSetupKernel), the frontier, the step's cutoff,
// epsilon arcs, the lane's hash (keys, hash_pos) and the frontier's scores (unchanged until
// EpsChainResolveKernel). Writes: hash keys (new destinations appended to claims),
// payloads, the touched list (eps_touched_n[0]); block 0 records eps_base and zeroes parity
// 1's counters (kept as the passes leave them: nothing reads them).
__global__ void __launch_bounds__(kWalkThreads)
EpsChainExpandKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  using BlockScan = cub::BlockScan<int64_t, kWalkThreads>;
  constexpr int kLanesPerThread = kEpsListMaxLanes / kWalkThreads;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ int64_t lane_off[kEpsListMaxLanes + 1];
  const int32_t L = ws.max_lanes;
  int64_t cnt[kLanesPerThread], excl[kLanesPerThread], total;
#pragma unroll
  for (int k = 0; k < kLanesPerThread; ++k) {
    const int32_t l = threadIdx.x * kLanesPerThread + k;
    cnt[k] = 0;
    if (l < L) {
      const LaneCounters& lc = ws.lanes[l];
      if (InClosure(lc)) cnt[k] = min(lc.eps_list_n[0], lc.tok_cap[lc.buf]);
    }
  }
  BlockScan(scan).ExclusiveSum(cnt, excl, total);
#pragma unroll
  for (int k = 0; k < kLanesPerThread; ++k) {
    const int32_t l = threadIdx.x * kLanesPerThread + k;
    if (l < L) lane_off[l] = excl[k];
  }
  if (threadIdx.x == 0) lane_off[L] = total;
  __syncthreads();
  if (blockIdx.x == 0) {
    for (int32_t l = threadIdx.x; l < L; l += blockDim.x) {
      LaneCounters& lc = ws.lanes[l];
      lc.eps_list_n[1] = 0;
      lc.eps_touched_n[1] = 0;
      if (InClosure(lc)) lc.eps_base = min(lc.next_size, lc.tok_cap[lc.buf]);
    }
  }
  const uint32_t hops = static_cast<uint32_t>(ws.eps_iterations);
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t lane = UpperBound(lane_off, L + 1, e) - 1;
    const int32_t j = static_cast<int32_t>(e - lane_off[lane]);
    const LaneCounters& lc = ws.lanes[lane];
    const int32_t buf = lc.buf;
    const int64_t q = lc.tok_off[buf];
    const int32_t tok = ws.eps_tok[q + j];
    const float* tok_score = ws.tok_score[buf] + q;
    const int32_t* hash_pos = ws.hash_pos + lc.hash_off;
    const float cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;
    LaneTable table;
    table.Load(ws, lc);
    int32_t state = ws.tok_state[buf][q + tok];
    float score = tok_score[tok];
    for (uint32_t k = 0; k < hops; ++k) {
      const StateArcs sa = ArcsOf(g, state);
      if (sa.eps_count == 0) break;
      const int32_t arc = sa.EpsBegin();
      const float end = score + g.arc_weight[arc];  // the CPU's snap_score + weight, hop by hop
      if (!(end > cutoff)) break;
      const int32_t dest = ArcDest(g, arc);
      const int32_t h = FindOrClaim(ws, lane, table, static_cast<uint32_t>(dest));
      if (h < 0) break;
      const int32_t pos = hash_pos[h];  // a token of the frontier the closure started from, or -1
      if (pos >= 0 && !(end > tok_score[pos])) break;
      const unsigned long long p = (static_cast<unsigned long long>(FloatToOrderedU32(end)) << 32) |
                                   (static_cast<uint32_t>(j) * hops + k);
      const unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(&table.payload[h]);
      if (seen < p) {
        const unsigned long long old = atomicMax(&table.payload[h], p);
        // The one raise off the baseline (or off an empty slot) registers the slot for Resolve.
        if (old < p && (old == 0ull || static_cast<uint32_t>(old) == kBaselineSlot)) {
          const int32_t c = atomicAdd(&ws.lanes[lane].eps_touched_n[0], 1);
          if (c < table.claim_cap) ws.eps_touched[lc.claim_off + c] = h;
          else atomicOr(&ws.lanes[lane].overflow, kOverflowClaims);
        }
      } else if (static_cast<uint32_t>(seen) != kBaselineSlot &&
                 OrderedU32ToFloat(static_cast<uint32_t>(seen >> 32)) > end) {
        break;  // a better offer holds the slot: its chain goes on from there, higher
      }
      score = end;
      state = dest;
    }
  }
}

// EpsChainResolveKernel — after EpsChainExpandKernel, grid (finalize_split, max_lanes) x
// kFinalizeThreads; the CTAs of a lane share its touched list in contiguous chunks (under the
// auto grid at least kFinalizeThreads slots a CTA, SplitRange per_thread), a thread's items
// striped over the round (item k = slot base + k * kFinalizeThreads + thread), their positions
// from the round's blocked scan (StripedRoundSum, finalize.cuh).
// Reads: each touched slot's key, payload and hash_pos. Writes: the token (its new score and
// a fresh winners-log entry, whose prev EpsChainLinkKernel writes; in place, or appended at
// next_size), hash_pos of new tokens. The payload keeps {end : slot} for the link.
__global__ void __launch_bounds__(kFinalizeThreads) EpsChainResolveKernel(Workspace ws) {
  StepKernelEntry();
  using BlockScan = cub::BlockScan<int32_t, kFinalizeThreads>;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ int32_t new_base;
  __shared__ long long arena_base;
  __shared__ __align__(16) int32_t s_x[kFinalizeThreads * kFinalizeItems];  // StripedRoundSum
  const int32_t lane = blockIdx.y;
  LaneCounters& lc = ws.lanes[lane];
  if (!InClosure(lc)) return;
  const int32_t num = min(lc.eps_touched_n[0], lc.claim_cap);
  const int2 range = SplitRange(ws, num, true);
  const int32_t c_begin = range.x, c_end = range.y;
  if (c_begin >= c_end) return;
  const int32_t buf = lc.buf;
  const long long arena_limit = *ws.arena_limit;
  const int64_t q = lc.tok_off[buf];
  const int32_t frontier_cap = lc.tok_cap[buf];
  const int64_t hb = lc.hash_off;
  int32_t* tok_state = ws.tok_state[buf] + q;
  float* tok_score = ws.tok_score[buf] + q;
  int32_t* tok_winner = ws.tok_winner[buf] + q;
  const int32_t* touched = ws.eps_touched + lc.claim_off;
  constexpr int kPerRound = kFinalizeThreads * kFinalizeItems;
  for (int32_t base = c_begin; base < c_end; base += kPerRound) {
    const int32_t first = base + threadIdx.x;
    int32_t h[kFinalizeItems], pos[kFinalizeItems], key[kFinalizeItems], is_new[kFinalizeItems],
        has_pos[kFinalizeItems], rank[kFinalizeItems], round_new, round_chg;
    float end[kFinalizeItems];
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      const int32_t i = first + k * kFinalizeThreads;
      h[k] = i < c_end ? touched[i] : -1;
      is_new[k] = 0;
      if (h[k] >= 0) {  // (the key is read with the others, not after the scan: one round trip)
        end[k] = OrderedU32ToFloat(static_cast<uint32_t>(ws.hash_payload[hb + h[k]] >> 32));
        pos[k] = ws.hash_pos[hb + h[k]];
        key[k] = static_cast<int32_t>(ws.hash_key[hb + h[k]]);
        is_new[k] = pos[k] < 0;
      }
    }
    StripedRoundSum<BlockScan>(scan, s_x, is_new, rank, round_new);
    if (threadIdx.x == 0) new_base = atomicAdd(&lc.next_size, round_new);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      has_pos[k] = 0;
      if (h[k] < 0) continue;
      if (is_new[k]) {
        const int32_t idx = new_base + rank[k];
        if (idx < frontier_cap) {
          pos[k] = idx;
          tok_state[idx] = key[k];
        } else {
          atomicOr(&lc.overflow, kOverflowKept);
        }
      }
      has_pos[k] = pos[k] >= 0;
    }
    StripedRoundSum<BlockScan>(scan, s_x, has_pos, rank, round_chg);
    if (threadIdx.x == 0)
      arena_base = static_cast<long long>(atomicAdd(ws.arena_cursor, static_cast<unsigned long long>(round_chg)));
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      if (h[k] < 0 || !has_pos[k]) continue;
      const long long wi = arena_base + rank[k];
      int32_t winner = -1;
      if (wi < arena_limit) {
        winner = static_cast<int32_t>(wi);
      } else {
        atomicOr(&lc.overflow, kOverflowArena);
      }
      tok_score[pos[k]] = end[k];
      tok_winner[pos[k]] = winner;
      if (is_new[k]) ws.hash_pos[hb + h[k]] = pos[k];
    }
    __syncthreads();  // the shared bases are rewritten by the next round
  }
}

// EpsChainLinkKernel — after EpsChainResolveKernel, grid (finalize_split, max_lanes) x
// kFinalizeThreads over the same touched slots. Reads: each slot's payload {end : j * hops +
// hop}, hash_pos and its token's new winner; the origin entry j of pass 0's list, the chain's
// states and arcs (re-walked hop arcs from the origin's state), the predecessor's slot
// (a read-only probe: the expansion claimed it) and final winner. Writes: the entry
// {prev, arc}: prev = the origin token's winner (hop 0) or the hop before's destination's.
__global__ void __launch_bounds__(kFinalizeThreads) EpsChainLinkKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  const int32_t lane = blockIdx.y;
  const LaneCounters& lc = ws.lanes[lane];
  if (!InClosure(lc)) return;
  const int32_t num = min(lc.eps_touched_n[0], lc.claim_cap);
  const int2 range = SplitRange(ws, num, true);
  const int32_t c_begin = range.x, c_end = range.y;
  const int32_t buf = lc.buf;
  const int64_t q = lc.tok_off[buf];
  const int64_t hb = lc.hash_off;
  const uint32_t hops = static_cast<uint32_t>(ws.eps_iterations);
  const int32_t* tok_state = ws.tok_state[buf] + q;
  const int32_t* tok_winner = ws.tok_winner[buf] + q;
  const int32_t* touched = ws.eps_touched + lc.claim_off;
  const uint32_t mask = static_cast<uint32_t>(lc.hash_cap - 1);
  for (int32_t i = c_begin + threadIdx.x; i < c_end; i += blockDim.x) {
    const int32_t h = touched[i];
    const int32_t pos = ws.hash_pos[hb + h];
    if (pos < 0) continue;  // the frontier was full (kOverflowKept)
    const int32_t wi = tok_winner[pos];
    if (wi < 0) continue;  // the log was full (kOverflowArena)
    const uint32_t slot = static_cast<uint32_t>(ws.hash_payload[hb + h]);
    const uint32_t j = slot / hops, hop = slot - j * hops;
    const int32_t origin = ws.eps_tok[q + j];
    int32_t state = tok_state[origin];
    for (uint32_t k = 0; k < hop; ++k) state = ArcDest(g, ArcsOf(g, state).EpsBegin());
    const int32_t arc = ArcsOf(g, state).EpsBegin();
    int32_t prev = tok_winner[origin];
    if (hop > 0) {  // the predecessor is a token (the expansion offered to it and went on)
      prev = -1;
      uint32_t s = HashSlot(static_cast<uint32_t>(state), lc.hash_cap);
      for (int probe = 0; probe < kMaxProbes; ++probe, s = (s + 1) & mask) {
        const uint32_t key = ws.hash_key[hb + s];
        if (key == static_cast<uint32_t>(state)) {
          const int32_t ppos = ws.hash_pos[hb + s];
          if (ppos >= 0) prev = tok_winner[ppos];
          break;
        }
        if (key == kEmptyKey) break;
      }
    }
    // a predecessor without a token (its offer did not fit the frontier or the touched list;
    // the lane already carries kOverflowKept / kOverflowClaims): the entry's chain stops here,
    // and the lane is flagged (the row's path then need not add up to its score)
    if (hop > 0 && prev < 0) atomicOr(&ws.lanes[lane].overflow, kOverflowKept);
    ws.arena[wi] = {prev, arc};
  }
}

}  // namespace cuwfst
