// K2a MaxKernel and K2b ExpandKernel: both walk the step's flattened slot space.
//
// Slot walk: each block owns one contiguous chunk of the global slot space; its threads
// take slots chunk_begin + threadIdx.x + k * blockDim.x. Each thread keeps a cursor
// (lane, token) that only moves forward, so resolving a slot is a galloping search of a
// few steps instead of a full binary search. Both kernels visit exactly the same slots.
#pragma once

#include "cuwfst/common.cuh"

namespace cuwfst {

constexpr int kWalkThreads = 256;
constexpr int kMaxSharedLanes = 256;

inline int ExpandBlocksFor(int lanes) {
  int b = 160 * lanes;
  return b < 1024 ? 1024 : (b > 8192 ? 8192 : b);
}

// The end score of one slot; also yields the graph arc and destination state.
struct SlotWalker {
  const DeviceGraph& g;
  const Workspace& ws;
  int32_t lane = -1;
  int32_t lane_base = 0;  // first global slot of the lane
  int32_t lane_end = 0;
  int32_t n = 0;          // tokens in the lane's frontier
  int32_t tok = 0;
  const int32_t* offsets = nullptr;
  const int32_t* begin = nullptr;
  const float* ub = nullptr;
  const float* score = nullptr;
  const int32_t* state = nullptr;
  int32_t phase = kPhaseIdle;
  float max_lp = 0.f;
  const float* row32 = nullptr;
  const uint16_t* row16 = nullptr;

  __device__ SlotWalker(const DeviceGraph& g_, const Workspace& ws_) : g(g_), ws(ws_) {}

  // Moves the cursor to global slot `s` (never backwards). Returns the local slot.
  __device__ __forceinline__ int32_t Seek(int32_t s, int32_t t) {
    if (s >= lane_end) {
      lane = UpperBound(ws.lane_arc_offsets, ws.max_lanes + 1, s) - 1;
      lane_base = ws.lane_arc_offsets[lane];
      lane_end = ws.lane_arc_offsets[lane + 1];
      const LaneCounters& lc = ws.lanes[lane];
      n = lc.frontier_size;
      phase = lc.phase;
      max_lp = lc.max_lp;
      row32 = lc.lp_row_f32;
      row16 = lc.lp_row_f16;
      int64_t q = static_cast<int64_t>(lane) * ws.main_q;
      offsets = ws.arc_offsets + static_cast<int64_t>(lane) * (ws.main_q + 1);
      begin = ws.tok_begin + q;
      ub = ws.tok_ub + q;
      score = ws.tok_score[t & 1] + q;
      state = ws.tok_state[t & 1] + q;
      tok = 0;
    }
    int32_t local = s - lane_base;
    // offsets[tok] <= local < offsets[tok + 1]; tokens of degree 0 are skipped over.
    tok = GallopUpperBound(offsets, tok + 1, n + 1, local) - 1;
    return local;
  }

  __device__ __forceinline__ float Acoustic(int32_t arc) const {
    if (phase != kPhaseReal) return 0.f;
    uint16_t il = g.arc_ilabel[arc];
    return row16 ? __half2float(__ushort_as_half(row16[il])) : row32[il];
  }
};

__device__ __forceinline__ void ChunkOf(int32_t total, int32_t* b, int32_t* e) {
  int64_t per = (static_cast<int64_t>(total) + gridDim.x - 1) / gridDim.x;
  per = (per + blockDim.x - 1) / blockDim.x * blockDim.x;
  int64_t lo = per * blockIdx.x, hi = lo + per;
  *b = static_cast<int32_t>(lo < total ? lo : total);
  *e = static_cast<int32_t>(hi < total ? hi : total);
}

// MaxKernel — per step, grid = ExpandBlocksFor(max_lanes) x kWalkThreads.
// Reads: the slot space, frontier scores, tok_ub, graph weights/ilabels, log-prob rows.
// Writes: lanes[l].max_ord = the exact max end score over ALL of the lane's slots.
// Skip: a token whose upper bound (score + max emitting weight) + max_lp is <= the
// thread's running max cannot raise the max (fp32 addition is monotone), so its arcs
// are not read; the result is bit-identical to the full maximum.
__global__ void __launch_bounds__(kWalkThreads)
MaxKernel(DeviceGraph g, Workspace ws, int32_t t) {
  __shared__ int32_t lane_max[kMaxSharedLanes];
  const int32_t total = ws.lane_arc_offsets[ws.max_lanes];
  int32_t cb, ce;
  ChunkOf(total, &cb, &ce);
  if (cb >= ce) return;
  const bool shared_ok = ws.max_lanes <= kMaxSharedLanes;
  if (shared_ok)
    for (int i = threadIdx.x; i < ws.max_lanes; i += blockDim.x) lane_max[i] = FloatToOrderedInt(-INFINITY);
  __syncthreads();
  SlotWalker w(g, ws);
  float run = -INFINITY;
  int32_t run_lane = -1;
  auto flush = [&]() {
    if (run_lane < 0 || run == -INFINITY) return;
    int32_t o = FloatToOrderedInt(run);
    if (shared_ok) atomicMax(&lane_max[run_lane], o);
    else atomicMax(&ws.lanes[run_lane].max_ord, o);
  };
  for (int32_t s = cb + threadIdx.x; s < ce; s += blockDim.x) {
    int32_t local = w.Seek(s, t);
    if (w.lane != run_lane) {
      flush();
      run_lane = w.lane;
      run = -INFINITY;
    }
    if (w.ub[w.tok] + w.max_lp <= run) continue;
    int32_t arc = w.begin[w.tok] + (local - w.offsets[w.tok]);
    float end = (w.score[w.tok] + g.arc_weight[arc]) + w.Acoustic(arc);
    run = fmaxf(run, end);
  }
  flush();
  if (shared_ok) {
    __syncthreads();
    for (int i = threadIdx.x; i < ws.max_lanes; i += blockDim.x)
      if (lane_max[i] != FloatToOrderedInt(-INFINITY)) atomicMax(&ws.lanes[i].max_ord, lane_max[i]);
  }
}

// ExpandKernel — per step, same grid and slots as MaxKernel.
// Reads: lanes[l].max_ord (final after MaxKernel) and beam; admits a slot iff
// end > max - beam (k2's test), recombines admitted arcs by destination state in the
// lane's open-addressing hash: a plain read first, a CAS only on an empty slot, the
// first claimer appends {state, hash slot} to the claims list, then one 64-bit atomicMax
// of {ordered end : local slot} resolves the best score and its argmax together (a tie
// keeps the larger slot). Writes: hash keys/payloads, claims, overflow bits.
__global__ void __launch_bounds__(kWalkThreads)
ExpandKernel(DeviceGraph g, Workspace ws, int32_t t) {
  const int32_t total = ws.lane_arc_offsets[ws.max_lanes];
  int32_t cb, ce;
  ChunkOf(total, &cb, &ce);
  SlotWalker w(g, ws);
  int32_t cur_lane = -1;
  float cutoff = INFINITY;
  uint32_t* keys = nullptr;
  unsigned long long* payload = nullptr;
  int2* claims = nullptr;
  const uint32_t mask = static_cast<uint32_t>(ws.hash_cap - 1);
  const int32_t final_state = g.num_states - 1;
  for (int32_t s = cb + threadIdx.x; s < ce; s += blockDim.x) {
    int32_t local = w.Seek(s, t);
    if (w.lane != cur_lane) {
      cur_lane = w.lane;
      const LaneCounters& lc = ws.lanes[cur_lane];
      cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;
      keys = ws.hash_key + static_cast<int64_t>(cur_lane) * ws.hash_cap;
      payload = ws.hash_payload + static_cast<int64_t>(cur_lane) * ws.hash_cap;
      claims = ws.claims + static_cast<int64_t>(cur_lane) * ws.claims_cap;
    }
    if (!(w.ub[w.tok] + w.max_lp > cutoff)) continue;  // no arc of this token can pass
    int32_t arc = w.begin[w.tok] + (local - w.offsets[w.tok]);
    float end = (w.score[w.tok] + g.arc_weight[arc]) + w.Acoustic(arc);
    if (!(end > cutoff)) continue;
    uint32_t dest = w.phase == kPhaseRedirect ? static_cast<uint32_t>(final_state)
                                              : static_cast<uint32_t>(g.arc_dest[arc]);
    unsigned long long p = (static_cast<unsigned long long>(FloatToOrderedU32(end)) << 32) |
                           static_cast<uint32_t>(local);
    uint32_t h = HashState(dest) & mask;
    bool found = false;
    for (int probe = 0; probe < kMaxProbes; ++probe) {
      uint32_t k = *reinterpret_cast<volatile uint32_t*>(&keys[h]);
      if (k == kEmptyKey) {
        k = atomicCAS(&keys[h], kEmptyKey, dest);
        if (k == kEmptyKey) {
          int32_t c = atomicAdd(&ws.lanes[cur_lane].claims, 1);
          if (c < ws.claims_cap) claims[c] = make_int2(static_cast<int32_t>(dest), static_cast<int32_t>(h));
          else atomicOr(&ws.lanes[cur_lane].overflow, kOverflowClaims);
          found = true;
          break;
        }
      }
      if (k == dest) {
        found = true;
        break;
      }
      h = (h + 1) & mask;
    }
    if (!found) {
      atomicOr(&ws.lanes[cur_lane].overflow, kOverflowHash);
      continue;
    }
    // Dominance: a candidate below the slot's current best cannot win (a stale read is
    // only lower, so this never drops a winner).
    if (*reinterpret_cast<volatile unsigned long long*>(&payload[h]) < p) atomicMax(&payload[h], p);
  }
}

}  // namespace cuwfst
