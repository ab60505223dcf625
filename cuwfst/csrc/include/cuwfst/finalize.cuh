// K3 FinalizeKernel, BacktrackKernel and HashSanitizeKernel.
#pragma once

#include <cub/block/block_scan.cuh>

#include "cuwfst/common.cuh"

namespace cuwfst {

constexpr int kFinalizeThreads = 1024;

// FinalizeKernel — per step t, grid = max_lanes blocks of kFinalizeThreads (CTA per lane).
// Reads: the lane's claims and their resolved hash payloads {end : slot}, the current
// frontier (buffer t & 1), tok_begin and arc_offsets (to turn a slot back into its token
// and arc). Writes: the next frontier (buffer (t + 1) & 1) compacted in claim order, one
// winners-log entry {prev winner, arc} per survivor (one arena atomicAdd per round),
// and clears exactly the claimed hash slots. On the final step it records the lane's
// result (final token's winner and score). Survivors are the claims whose end passes the
// exact cutoff, which every admitted claim does; the test is kept as the invariant.
__global__ void __launch_bounds__(kFinalizeThreads)
FinalizeKernel(DeviceGraph g, Workspace ws, int32_t t) {
  using BlockScan = cub::BlockScan<int32_t, kFinalizeThreads>;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ int32_t kept_total;
  __shared__ long long arena_base;
  const int32_t lane = blockIdx.x;
  LaneCounters& lc = ws.lanes[lane];
  const int32_t phase = lc.phase;
  if (phase == kPhaseIdle) return;
  const int32_t n = lc.frontier_size;
  const int32_t num_claims = min(lc.claims, ws.claims_cap);
  const float cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;
  const int64_t q = static_cast<int64_t>(lane) * ws.main_q;
  const int32_t* offsets = ws.arc_offsets + static_cast<int64_t>(lane) * (ws.main_q + 1);
  const int32_t* begin = ws.tok_begin + q;
  const int32_t* cur_winner = ws.tok_winner[t & 1] + q;
  int32_t* nxt_state = ws.tok_state[(t + 1) & 1] + q;
  float* nxt_score = ws.tok_score[(t + 1) & 1] + q;
  int32_t* nxt_winner = ws.tok_winner[(t + 1) & 1] + q;
  uint32_t* keys = ws.hash_key + static_cast<int64_t>(lane) * ws.hash_cap;
  unsigned long long* payload = ws.hash_payload + static_cast<int64_t>(lane) * ws.hash_cap;
  const int2* claims = ws.claims + static_cast<int64_t>(lane) * ws.claims_cap;
  if (threadIdx.x == 0) kept_total = 0;
  __syncthreads();
  for (int32_t base = 0; base < num_claims; base += blockDim.x) {
    int32_t i = base + threadIdx.x;
    int32_t keep = 0, state = 0, slot = 0;
    float end = -INFINITY;
    int2 c = make_int2(0, 0);
    if (i < num_claims) {
      c = claims[i];
      unsigned long long p = payload[c.y];
      end = OrderedU32ToFloat(static_cast<uint32_t>(p >> 32));
      slot = static_cast<int32_t>(p & 0xFFFFFFFFull);
      state = c.x;
      keep = p != 0ull && end > cutoff;
    }
    int32_t pos, round_kept;
    BlockScan(scan).ExclusiveSum(keep, pos, round_kept);
    if (threadIdx.x == 0) {
      arena_base = static_cast<long long>(atomicAdd(ws.arena_cursor, static_cast<unsigned long long>(round_kept)));
    }
    __syncthreads();
    if (keep) {
      int32_t idx = kept_total + pos;
      int32_t tok = UpperBound(offsets, n + 1, slot) - 1;
      int32_t arc = begin[tok] + (slot - offsets[tok]);
      long long wi = arena_base + pos;
      int32_t winner = -1;
      if (wi < ws.arena_cap) {
        winner = static_cast<int32_t>(wi);
        ws.arena[wi] = {cur_winner[tok], phase == kPhaseRedirect ? (arc | kRedirectArcBit) : arc};
      } else {
        atomicOr(&lc.overflow, kOverflowArena);
      }
      if (idx < ws.main_q) {
        nxt_state[idx] = state;
        nxt_score[idx] = end;
        nxt_winner[idx] = winner;
      } else {
        atomicOr(&lc.overflow, kOverflowKept);
      }
      if (phase != kPhaseReal) {  // the final state: at most one claim
        lc.final_winner = winner;
        lc.final_score = end;
        lc.reached_final = phase == kPhaseFinal;
        lc.redirected = phase == kPhaseRedirect;
      }
    }
    if (i < num_claims) {  // k2's targeted delete: only the slots this step claimed
      keys[c.y] = kEmptyKey;
      payload[c.y] = 0ull;
    }
    __syncthreads();
    if (threadIdx.x == 0) kept_total += round_kept;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    lc.frontier_size = min(kept_total, ws.main_q);
    if (phase != kPhaseReal) lc.frontier_size = 0;  // finished: nothing left to expand
  }
}

// BacktrackKernel — once per decode, one thread per lane. Walks the winners chain from
// the final token and writes the path's arcs in order into out_path[lane]; a path longer
// than path_cap keeps its newest path_cap arcs and is flagged kOverflowPath. out_path_len
// is the TRUE length. The chain's indices strictly decrease, so the walk ends.
__global__ void BacktrackKernel(Workspace ws) {
  int32_t lane = blockIdx.x * blockDim.x + threadIdx.x;
  if (lane >= ws.max_lanes) return;
  LaneCounters& lc = ws.lanes[lane];
  int32_t len = 0;
  for (int32_t w = lc.final_winner; w >= 0; w = ws.arena[w].prev) ++len;
  ws.out_path_len[lane] = len;
  if (len > ws.path_cap) lc.overflow |= kOverflowPath;
  const int32_t kept = min(len, ws.path_cap);
  int32_t* out = ws.out_path + static_cast<int64_t>(lane) * ws.path_cap;
  int32_t k = 0;
  for (int32_t w = lc.final_winner; w >= 0 && k < kept; w = ws.arena[w].prev, ++k)
    out[kept - 1 - k] = ws.arena[w].arc;
}

// HashSanitizeKernel — once per decode, grid (blocks, max_lanes). A lane whose claims
// list overflowed (or whose step was dropped) may hold CAS-claimed slots the targeted
// clear never saw: wipe its whole table so the next decode starts clean.
__global__ void HashSanitizeKernel(Workspace ws) {
  const int32_t lane = blockIdx.y;
  if (!(ws.lanes[lane].overflow & (kOverflowClaims | kOverflowHash))) return;
  const int64_t base = static_cast<int64_t>(lane) * ws.hash_cap;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < ws.hash_cap;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    ws.hash_key[base + i] = kEmptyKey;
    ws.hash_payload[base + i] = 0ull;
  }
}

}  // namespace cuwfst
