// Winners-log garbage collection and partial results, for lanes that live across launch
// sequences (streams, continuous batching). Launched by the host between sequences, never
// inside a captured graph.
//
// A GC round keeps what a live lane's future can still read and nothing else:
//  1. GcMarkKernel: per live lane, the convergence point of every current token's chain
//     (stamp token 0's chain with each entry's distance from the head, walk every other
//     chain to its first stamped entry; the stamped hit farthest from the head is on every
//     chain); the arcs from the root to it are final, so they are drained to the host; the
//     entries above it that some token reaches are marked live and numbered.
//  2. GcCopyKernel: the live entries, renumbered, into the arena's free tail; a
//     predecessor that is not live (the convergence point or below) becomes the root, -1.
//  3. GcRemapKernel: the frontiers' winners follow; the host then moves the tail to the
//     arena's start and sets the cursor to the live count.
// Dead lanes (finished, released, unused) keep nothing. Tags are 64-bit {round : value}
// with two rounds per GC (2r: stamps, value = distance from token 0's head; 2r + 1: live
// marks, value = new index, 0xFFFFFFFF while being claimed), so no tag is ever cleared:
// a stale tag carries an older round. Chains need not be index-ordered after a GC (new
// indices follow claim order); nothing here or in the backtracks relies on that order.
#pragma once

#include <cub/block/block_reduce.cuh>

#include "cuwfst/common.cuh"

namespace cuwfst {

constexpr int kGcThreads = 256;
// GcMarkKernel keeps the arcs of token 0's chain (newest first) in shared memory while it
// stamps it, up to this many; the drain (a suffix of that chain) is then copied out in
// parallel instead of walked twice more. A longer chain falls back to the walks.
constexpr int kGcChainArcs = 4096;
constexpr uint32_t kGcClaiming = 0xFFFFFFFFu;

__device__ __forceinline__ bool GcLive(const LaneCounters& lc) { return lc.length >= 0 && lc.t <= lc.length; }

__device__ __forceinline__ long long GcTag(long long round, uint32_t value) {
  return static_cast<long long>((static_cast<unsigned long long>(round) << 32) | value);
}
__device__ __forceinline__ long long GcRound(long long tag) {
  return static_cast<long long>(static_cast<unsigned long long>(tag) >> 32);
}

// A winners entry's new index after the round (mark round m), or -1 if it is not live.
__device__ __forceinline__ int32_t GcRemap(const Workspace& ws, long long m, int32_t w) {
  if (w < 0) return -1;
  const long long tag = ws.gc_tag[w];
  return GcRound(tag) == m ? static_cast<int32_t>(static_cast<uint32_t>(tag)) : -1;
}

// GcMarkKernel — one GC round, grid = max_lanes blocks of kGcThreads.
// Reads: each live lane's frontier winners (buffer lc.buf), the arena. Writes: gc_tag
// (stamps, live marks), gc_live (live count), gc_conv[lane] (its convergence entry, -1:
// the root), drain[lane][0..drain_len) (the final arcs, root first; kOverflowPath if more
// than path_cap). Invariant: every chain ends at -1 (the previous round's cut).
__global__ void __launch_bounds__(kGcThreads) GcMarkKernel(Workspace ws, long long round) {
  using BlockReduce = cub::BlockReduce<long long, kGcThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  __shared__ int32_t conv;
  const int32_t lane = blockIdx.x;
  LaneCounters& lc = ws.lanes[lane];
  if (!GcLive(lc)) {
    if (threadIdx.x == 0) {
      ws.drain_len[lane] = 0;
      ws.gc_conv[lane] = -1;
    }
    return;
  }
  const int32_t n = min(lc.next_size, lc.tok_cap[lc.buf]);
  const int32_t* winners = ws.tok_winner[lc.buf] + lc.tok_off[lc.buf];
  const long long stamp_round = 2 * round, mark_round = 2 * round + 1;
  __shared__ int32_t chain_arcs[kGcChainArcs];  // token 0's chain: arc at depth d (0: its head)
  __shared__ int32_t chain_len, drain_len;
  if (threadIdx.x == 0) {
    uint32_t depth = 0;
    if (n > 0) {
      for (int32_t w = winners[0]; w >= 0;) {
        const WinnerEntry e = ws.arena[w];
        ws.gc_tag[w] = GcTag(stamp_round, depth);
        if (depth < static_cast<uint32_t>(kGcChainArcs)) chain_arcs[depth] = e.arc;
        ++depth;
        w = e.prev;
      }
    }
    chain_len = static_cast<int32_t>(depth);
  }
  __syncthreads();
  // The stamped entry each chain meets first; the farthest from token 0's head is the
  // convergence point. Key {depth : entry}, depth 0x7FFFFFFF for the root (-1).
  long long best = -1;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
    int32_t w = winners[i];
    while (w >= 0 && GcRound(ws.gc_tag[w]) != stamp_round) w = ws.arena[w].prev;
    const long long depth = w < 0 ? 0x7FFFFFFFll : static_cast<long long>(static_cast<uint32_t>(ws.gc_tag[w]));
    const long long key = (depth << 32) | static_cast<uint32_t>(w);
    best = max(best, key);
  }
  best = BlockReduce(tmp).Reduce(best, [](long long a, long long b) { return a > b ? a : b; });
  int32_t* out = ws.drain + static_cast<int64_t>(lane) * ws.path_cap;
  if (threadIdx.x == 0) {
    const bool root = best < 0 || (best >> 32) == 0x7FFFFFFFll;
    conv = root ? -1 : static_cast<int32_t>(static_cast<uint32_t>(best));
    ws.gc_conv[lane] = conv;
    // drain the final arcs: conv .. root, written root first. conv is on token 0's chain at
    // the depth its stamp holds, so they are that chain's arcs from there to its end.
    int32_t len = root ? 0 : chain_len - static_cast<int32_t>(best >> 32);
    if (chain_len > kGcChainArcs) {  // (not all kept: walk)
      len = 0;
      for (int32_t w = conv; w >= 0; w = ws.arena[w].prev) ++len;
      int32_t k = 0;
      for (int32_t w = conv; w >= 0; w = ws.arena[w].prev, ++k)
        if (len - 1 - k < ws.path_cap) out[len - 1 - k] = ws.arena[w].arc;
    }
    ws.drain_len[lane] = len;
    drain_len = len;
    if (len > ws.path_cap) lc.overflow |= kOverflowPath;
  }
  __syncthreads();
  if (chain_len <= kGcChainArcs)  // root first: out[j] = the arc at depth chain_len - 1 - j
    for (int32_t j = threadIdx.x; j < min(drain_len, ws.path_cap); j += blockDim.x) out[j] = chain_arcs[chain_len - 1 - j];
  const int32_t c = conv;
  // Number every entry above the convergence point that a token reaches, once.
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
    for (int32_t w = winners[i]; w >= 0 && w != c; w = ws.arena[w].prev) {
      const long long old = ws.gc_tag[w];
      if (GcRound(old) == mark_round) break;  // numbered, or being numbered, by another walk
      if (atomicCAS(reinterpret_cast<unsigned long long*>(&ws.gc_tag[w]), static_cast<unsigned long long>(old),
                    static_cast<unsigned long long>(GcTag(mark_round, kGcClaiming))) !=
          static_cast<unsigned long long>(old))
        break;
      const unsigned long long k = atomicAdd(ws.gc_live, 1ull);
      ws.gc_tag[w] = GcTag(mark_round, static_cast<uint32_t>(k));
    }
  }
}

// GcCopyKernel — grid over the arena's used entries [0, cursor). Reads: gc_tag, the
// arena. Writes: arena[tail + k] = the live entry numbered k, its predecessor renumbered
// (-1 when it is not live). Requires tail + live <= the arena limit (the host ensures it).
__global__ void GcCopyKernel(Workspace ws, long long round, int64_t cursor, int64_t tail) {
  const long long mark_round = 2 * round + 1;
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; w < cursor;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const long long tag = ws.gc_tag[w];
    if (GcRound(tag) != mark_round) continue;
    const WinnerEntry e = ws.arena[w];
    ws.arena[tail + static_cast<uint32_t>(tag)] = {GcRemap(ws, mark_round, e.prev), e.arc};
  }
}

// GcRemapKernel — grid = max_lanes blocks of kGcThreads. Reads/writes each live lane's
// frontier winners (buffer lc.buf): their new indices (-1: the token's winner was the
// convergence point itself, now the root).
__global__ void __launch_bounds__(kGcThreads) GcRemapKernel(Workspace ws, long long round) {
  const int32_t lane = blockIdx.x;
  const LaneCounters& lc = ws.lanes[lane];
  if (!GcLive(lc)) return;
  const int32_t n = min(lc.next_size, lc.tok_cap[lc.buf]);
  int32_t* winners = ws.tok_winner[lc.buf] + lc.tok_off[lc.buf];
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) winners[i] = GcRemap(ws, 2 * round + 1, winners[i]);
}

// PartialKernel — grid = max_lanes blocks of kGcThreads; lanes whose command has
// kCmdPartial. Reads: the lane's frontier (buffer lc.buf) and the arena. Writes: the best
// token's chain into out_path[lane] (root first; the newest path_cap arcs, kOverflowPath
// beyond), out_path_len (the true length), lc.partial_score. The best token: the highest
// score, the lowest state on a tie (a deterministic choice; partial paths are not part of
// the CPU-equality contract, only final results are).
__global__ void __launch_bounds__(kGcThreads) PartialKernel(Workspace ws) {
  using BlockReduce = cub::BlockReduce<unsigned long long, kGcThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  const int32_t lane = blockIdx.x;
  LaneCounters& lc = ws.lanes[lane];
  if (!(ws.commands[lane].op & kCmdPartial)) return;
  const int32_t n = GcLive(lc) ? min(lc.next_size, lc.tok_cap[lc.buf]) : 0;
  const int64_t q = lc.tok_off[lc.buf];
  const int32_t* state = ws.tok_state[lc.buf] + q;
  const float* score = ws.tok_score[lc.buf] + q;
  // key {ordered score : ~state}: the max is the best score, then the lowest state
  unsigned long long best = 0;
  for (int32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const unsigned long long key = (static_cast<unsigned long long>(FloatToOrderedU32(score[i])) << 32) |
                                   static_cast<uint32_t>(~static_cast<uint32_t>(state[i]));
    best = best > key ? best : key;
  }
  best = BlockReduce(tmp).Reduce(best, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; });
  if (threadIdx.x != 0) return;
  int32_t* out = ws.out_path + static_cast<int64_t>(lane) * ws.path_cap;
  if (n == 0) {
    ws.out_path_len[lane] = 0;
    lc.partial_score = -INFINITY;
    return;
  }
  const int32_t best_state = static_cast<int32_t>(~static_cast<uint32_t>(best));
  int32_t tok = 0;
  while (state[tok] != best_state) ++tok;  // one thread, once: the frontier holds each state once
  lc.partial_score = score[tok];
  int32_t len = 0;
  for (int32_t w = ws.tok_winner[lc.buf][q + tok]; w >= 0; w = ws.arena[w].prev) ++len;
  ws.out_path_len[lane] = len;
  if (len > ws.path_cap) lc.overflow |= kOverflowPath;
  const int32_t kept = min(len, ws.path_cap);
  int32_t k = 0;
  for (int32_t w = ws.tok_winner[lc.buf][q + tok]; w >= 0 && k < kept; w = ws.arena[w].prev, ++k)
    out[kept - 1 - k] = ws.arena[w].arc;
}

}  // namespace cuwfst
