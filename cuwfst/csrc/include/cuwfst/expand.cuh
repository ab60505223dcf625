// K2a MaxKernel and K2b ExpandKernel: both walk the step's flattened slot space with the
// same walker, so they visit exactly the same slots. FusedExpandKernel (fused_max) is the two
// in one pass: it admits against a lower bound of the max and computes the max as it goes.
//
// Two walkers, chosen at run time (DecoderConfig::walker) so they can be timed side by side:
//  * kWalkWarp (default, the spec's shape): each warp owns a contiguous, 32-aligned span
//    and streams through it in 32-slot strips. Per strip the warp loads the next 32 token
//    boundaries coalesced and every thread finds its token with a 5-step shuffle search
//    over the register-held boundaries; the cursor only moves forward; no shared memory,
//    no __syncthreads, and neighbouring threads read neighbouring arcs.
//  * kWalkThread: each block owns a contiguous chunk, thread i takes slots
//    chunk_begin + i + k * blockDim; each thread's cursor gallops forward.
#pragma once

#include <cooperative_groups.h>

#include "cuwfst/common.cuh"

namespace cuwfst {

constexpr int kWalkThreads = 256;
constexpr int kMaxSharedLanes = 256;
// kWalkWarpSearch: the warp walker with the binary searches it entered lanes by before
// WarpLaneOf (Workspace::walk_search; the kWalkWarp kernels, a run-time switch kept for A/B runs)
// kWalkWarpCoop: the warp walker, Max and Expand in one cooperative kernel (CoopWalkKernel)
// kWalkWarpCoopPdl: kWalkWarpCoop launched with programmatic dependent launch as well
enum : int32_t { kWalkWarp = 0, kWalkThread = 1, kWalkWarpSearch = 2, kWalkWarpCoop = 3, kWalkWarpCoopPdl = 4 };

// The walkers' grid when DecoderConfig::walk_blocks is 0: 160 CTAs a lane untrimmed, 64 with
// trimmed slots (~6.6x fewer slots a step on the full HLG); between 1,024 and 8,192. Measured on
// the H200, full HLG, uniform 32 x 250, trimmed (docs/benchmarks.md, session of 2026-11-30 18:03):
// 5,120 CTAs (160 a lane) 38.30 ms, 2,048 35.11, 1,024 35.17; the TLG the same at all three.
inline int ExpandBlocksFor(int lanes, bool trimmed = false) {
  int b = (trimmed ? 64 : 160) * lanes;
  return b < 1024 ? 1024 : (b > 8192 ? 8192 : b);
}
// MaxKernel's grid when DecoderConfig::walk_blocks is 0: with trimmed slots half the walkers'
// (32 CTAs a lane, between 1,024 and 8,192), since the known lanes leave it a fraction of the
// step's slots and its CTAs without slots still cost. Measured on the H200, full HLG, 256
// utterances, batches of 32 (docs/benchmarks.md, session of 2026-12-03 17:22): MaxKernel 3.56 ms
// a 1-best batch at 1,024 and 528 CTAs against 4.00-4.02 at 2,048 and 4.37 at 264; in lattice
// decodes 4.19 / 4.43 against 4.70-4.73 and 5.63.
inline int MaxBlocksFor(int lanes, bool trimmed = false) {
  if (!trimmed) return ExpandBlocksFor(lanes, false);
  int b = 32 * lanes;
  return b < 1024 ? 1024 : (b > 8192 ? 8192 : b);
}
// LatPersistKernel's grid when DecoderConfig::walk_blocks is 0: in candidate mode (the decode has
// a candidate buffer: Workspace::lat_cand) MaxKernel's, 32 CTAs a lane (its 64 registers allow 4
// CTAs a multiprocessor, so the walkers' 2,048 at 32 lanes were ~3.9 waves of mostly one round of
// candidates each); else the walkers'. Measured on the H200, full HLG, 256 utterances, batches of
// 32 (docs/benchmarks.md, session of 2026-12-03 18:47; Nsight Compute: 50% theoretical occupancy):
// 8.16-8.25 ms a lattice batch at 1,024 CTAs against 8.67-8.86 at 2,048.
inline int LatBlocksFor(int lanes, bool trimmed, bool candidates, int walk_blocks) {
  return candidates ? MaxBlocksFor(lanes, trimmed) : walk_blocks;
}

// What a walker knows about the lane a slot belongs to.
struct LaneView {
  int32_t lane = -1;
  int64_t base = 0;  // first global slot of the lane (the batch's slot space is int64)
  int64_t end = 0;   // one past its last global slot; end - base < 2^31 (ScanKernel)
  int32_t n = 0;     // tokens in the lane's frontier
  int32_t phase = kPhaseIdle;
  float max_lp = 0.f;
  const int32_t* offsets = nullptr;
  const int32_t* hint = nullptr;
  bool hint_ok = false;
  const int32_t* begin = nullptr;
  const float* ub = nullptr;
  const float* score = nullptr;
  const float* row32 = nullptr;
  const uint16_t* row16 = nullptr;
  int32_t hint_shift = kHintShift;  // the hints' sampling (types.cuh LaneHintShift)

  __device__ __forceinline__ void Load(const Workspace& ws, int32_t l) {
    const LaneCounters& lc = ws.lanes[l];
    // the frontier the step expands (Scan flipped buf) and the scratch sharing its region;
    // a closure pass (epsilon.cuh) expands the frontier just built, in buffer buf
    LoadAt(ws, l, lc.phase == kPhaseEps ? lc.buf : lc.buf ^ 1);
  }
  // The step's own slot space after an epsilon closure overwrote the lane's phase, size and
  // hint flag (the lattice walk, lattice.cuh): ScanKernel kept them in step_*, and the step
  // expanded buffer buf ^ 1 whatever phase the closure left the lane in.
  __device__ __forceinline__ void LoadStep(const Workspace& ws, int32_t l) {
    const LaneCounters& lc = ws.lanes[l];
    LoadAt(ws, l, lc.buf ^ 1);
    n = lc.step_size;
    phase = lc.step_phase;
    hint_ok = lc.step_hint_ok != 0;
    hint_shift = hint_ok ? lc.step_hint_ok : kHintShift;  // the shift the step's scan wrote them with
  }
  // Lane l's slot span and the frontier in buffer b with the scratch sharing its region
  // (tok_off[b]; the hints at HintBase), either layout.
  __device__ __forceinline__ void LoadAt(const Workspace& ws, int32_t l, int32_t b) {
    lane = l;
    base = ws.lane_arc_offsets[l];
    end = ws.lane_arc_offsets[l + 1];
    const LaneCounters& lc = ws.lanes[l];
    n = lc.frontier_size;
    phase = lc.phase;
    max_lp = lc.max_lp;
    row32 = lc.lp_row_f32;
    row16 = lc.lp_row_f16;
    const int64_t q = lc.tok_off[b];
    offsets = ws.arc_offsets + q;
    hint = ws.tok_hint + HintBase(ws, lc, l, b);
    hint_ok = lc.hint_ok != 0;
    hint_shift = hint_ok ? lc.hint_ok : kHintShift;  // LaneCounters::hint_ok holds the shift
    begin = ws.tok_begin + q;
    ub = ws.tok_ub + q;
    score = ws.tok_score[b] + q;
  }
  __device__ __forceinline__ float Acoustic(const DeviceGraph& g, int32_t arc) const {
    return ArcAcoustic(g, arc, phase, row32, row16);
  }
};

__device__ __forceinline__ int64_t MinSlot(int64_t a, int64_t b) { return a < b ? a : b; }

// The lane holding global slot s: UpperBound(a, L + 1, s) - 1 over the lanes' non-decreasing
// slot offsets a[0..L] (a[0] = 0 <= s < a[L]), by the whole warp with coalesced loads and
// ballots instead of a chain of dependent probes: one round for up to 32 lanes; up to 1,024
// two (every K-th offset, then the K - 1 between the two it falls in); more lanes, the binary
// search. a non-decreasing makes each ballot a prefix, so its count is the search's answer.
// Warp-uniform; every thread of the warp calls it.
__device__ __forceinline__ int32_t WarpLaneOf(const int64_t* a, int32_t L, int64_t s) {
  constexpr unsigned kFull = 0xFFFFFFFFu;
  if (L > 32 * 32) return UpperBound(a, L + 1, s) - 1;
  const int32_t me = threadIdx.x & 31;
  int32_t lo = 0, width = 32;
  if (L > 32) {
    const int32_t K = (L + 31) / 32;  // <= 32
    const int32_t j = (me + 1) * K;
    lo = __popc(__ballot_sync(kFull, j <= L && a[j] <= s)) * K;  // a[lo] <= s < a[lo + K] (or lo + K > L)
    width = K - 1;
  }
  const int32_t j = lo + 1 + me;
  return lo + __popc(__ballot_sync(kFull, me < width && j <= L && a[j] <= s));
}

// Calls visit(lv, tok, local) for every slot this thread owns (kWalkThread). Global slots
// are int64 (the batch's total can pass 2^31); `local` = slot - lane base is < 2^31.
template <bool kStep, typename Visit>
__device__ __forceinline__ void ThreadWalk(const Workspace& ws, Visit&& visit) {
  const int64_t total = ws.lane_arc_offsets[ws.max_lanes];
  int64_t per = (total + gridDim.x - 1) / gridDim.x;
  per = (per + blockDim.x - 1) / blockDim.x * blockDim.x;
  const int64_t lo = per * blockIdx.x, hi = MinSlot(lo + per, total);
  LaneView lv;
  int32_t tok = 0;
  for (int64_t s = lo + threadIdx.x; s < hi; s += blockDim.x) {
    if (s >= lv.end) {
      const int32_t l = UpperBound(ws.lane_arc_offsets, ws.max_lanes + 1, s) - 1;
      if (kStep) lv.LoadStep(ws, l); else lv.Load(ws, l);
      tok = 0;
    }
    const int32_t local = static_cast<int32_t>(s - lv.base);
    tok = GallopUpperBound(lv.offsets, tok + 1, lv.n + 1, local) - 1;
    visit(lv, tok, local);
  }
}

// This warp's span of the step's slot space (kWalkWarp): [*lo, *hi), 32-aligned; false when
// the warp has none.
__device__ __forceinline__ bool WarpSpan(const Workspace& ws, int64_t* lo, int64_t* hi) {
  const int64_t total = ws.lane_arc_offsets[ws.max_lanes];
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  int64_t per = (total + warps - 1) / warps;
  per = (per + 31) & ~static_cast<int64_t>(31);
  *lo = per * warp;
  *hi = MinSlot(*lo + per, total);
  return *lo < total;
}

// Calls strip(lv, tok, local, active, s0) on every thread of the warp for every 32-slot strip
// of [lo, hi) (a strip ends early at a lane's end; s0 is its first global slot; tok and local
// are the thread's slot's token and lane-local slot where active): WarpWalk's loop for
// CoopWalkKernel, which needs the strips. (WarpWalk keeps its own copy: built on this one,
// MaxKernel took 47 registers instead of 40.) Global slots (s0, the
// span, strip ends) are int64, so s0 + 32 cannot overflow; the per-lane token search works
// on `local` < 2^31.
template <bool kStep, typename Strip>
__device__ __forceinline__ void WarpWalkStrips(const Workspace& ws, int64_t lo, int64_t hi, Strip&& strip) {
  constexpr unsigned kFull = 0xFFFFFFFFu;
  const int32_t me = threadIdx.x & 31;
  LaneView lv;
  int32_t tok = 0;  // warp-uniform: a token at or before the next slot's token
  for (int64_t s0 = lo; s0 < hi;) {
    if (s0 >= lv.end) {  // warp-uniform: enter the lane holding s0
      const int32_t l = ws.walk_search ? UpperBound(ws.lane_arc_offsets, ws.max_lanes + 1, s0) - 1
                                       : WarpLaneOf(ws.lane_arc_offsets, ws.max_lanes, s0);
      if (kStep) lv.LoadStep(ws, l); else lv.Load(ws, l);
      const int32_t local0 = static_cast<int32_t>(s0 - lv.base);
      int32_t first = 0;
      if (me == 0) {
        if (ws.walk_search) first = TokenOfSlot(lv.offsets, lv.hint, lv.hint_ok, lv.n, local0, lv.hint_shift);
        // with valid hints, the token holding the sampled slot at or before s0 (offsets[first] <=
        // s0's slot, all the strip loop below needs: its coalesced rounds go on from there)
        else first = lv.hint_ok ? lv.hint[local0 >> lv.hint_shift] : UpperBound(lv.offsets, lv.n + 1, local0) - 1;
      }
      tok = __shfl_sync(kFull, first, 0);
    }
    const int64_t strip_end = MinSlot(MinSlot(s0 + 32, hi), lv.end);
    const int64_t s = s0 + me;
    const bool active = s < strip_end;
    const int32_t local = active ? static_cast<int32_t>(s - lv.base) : -1;
    // Find my token: the last j >= tok with offsets[j] <= local. Boundaries
    // offsets[base + 1 .. base + 32] are loaded coalesced; cnt = how many are <= local.
    int32_t my_tok = tok;
    bool resolved = !active;
    for (int32_t base = tok;; base += 32) {
      const int32_t idx = base + 1 + me;
      const int32_t bnd = idx <= lv.n ? lv.offsets[idx] : INT32_MAX;
      int32_t cnt = 0;
#pragma unroll
      for (int step = 16; step >= 1; step >>= 1) {
        int32_t v = __shfl_sync(kFull, bnd, cnt + step - 1);
        if (v <= local) cnt += step;
      }
      if (__shfl_sync(kFull, bnd, 31) <= local) cnt = 32;
      if (!resolved && cnt < 32) {
        my_tok = base + cnt;
        resolved = true;
      }
      if (__all_sync(kFull, resolved)) break;
    }
    tok = __shfl_sync(kFull, my_tok, static_cast<int32_t>(strip_end - 1 - s0));
    strip(lv, my_tok, local, active, s0);
    s0 = strip_end;
  }
}

// Calls visit(lv, tok, local) for every slot of this warp's span (kWalkWarp). Every
// thread of the warp runs the loop; visit runs on the threads that own a slot. Global
// slots (s0, the span, strip ends) are int64, so s0 + 32 cannot overflow; the per-lane
// token search works on `local` < 2^31.
template <bool kStep, typename Visit>
__device__ __forceinline__ void WarpWalk(const Workspace& ws, Visit&& visit) {
  constexpr unsigned kFull = 0xFFFFFFFFu;
  const int64_t total = ws.lane_arc_offsets[ws.max_lanes];
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const int32_t me = threadIdx.x & 31;
  int64_t per = (total + warps - 1) / warps;
  per = (per + 31) & ~static_cast<int64_t>(31);
  const int64_t lo = per * warp;
  if (lo >= total) return;
  const int64_t hi = MinSlot(lo + per, total);
  LaneView lv;
  int32_t tok = 0;  // warp-uniform: a token at or before the next slot's token
  for (int64_t s0 = lo; s0 < hi;) {
    if (s0 >= lv.end) {  // warp-uniform: enter the lane holding s0
      const int32_t l = ws.walk_search ? UpperBound(ws.lane_arc_offsets, ws.max_lanes + 1, s0) - 1
                                       : WarpLaneOf(ws.lane_arc_offsets, ws.max_lanes, s0);
      if (kStep) lv.LoadStep(ws, l); else lv.Load(ws, l);
      const int32_t local0 = static_cast<int32_t>(s0 - lv.base);
      int32_t first = 0;
      if (me == 0) {
        if (ws.walk_search) first = TokenOfSlot(lv.offsets, lv.hint, lv.hint_ok, lv.n, local0, lv.hint_shift);
        // with valid hints, the token holding the sampled slot at or before s0 (offsets[first] <=
        // s0's slot, all the strip loop below needs: its coalesced rounds go on from there)
        else first = lv.hint_ok ? lv.hint[local0 >> lv.hint_shift] : UpperBound(lv.offsets, lv.n + 1, local0) - 1;
      }
      tok = __shfl_sync(kFull, first, 0);
    }
    const int64_t strip_end = MinSlot(MinSlot(s0 + 32, hi), lv.end);
    const int64_t s = s0 + me;
    const bool active = s < strip_end;
    const int32_t local = active ? static_cast<int32_t>(s - lv.base) : -1;
    // Find my token: the last j >= tok with offsets[j] <= local. Boundaries
    // offsets[base + 1 .. base + 32] are loaded coalesced; cnt = how many are <= local.
    int32_t my_tok = tok;
    bool resolved = !active;
    for (int32_t base = tok;; base += 32) {
      const int32_t idx = base + 1 + me;
      const int32_t bnd = idx <= lv.n ? lv.offsets[idx] : INT32_MAX;
      int32_t cnt = 0;
#pragma unroll
      for (int step = 16; step >= 1; step >>= 1) {
        int32_t v = __shfl_sync(kFull, bnd, cnt + step - 1);
        if (v <= local) cnt += step;
      }
      if (__shfl_sync(kFull, bnd, 31) <= local) cnt = 32;
      if (!resolved && cnt < 32) {
        my_tok = base + cnt;
        resolved = true;
      }
      if (__all_sync(kFull, resolved)) break;
    }
    tok = __shfl_sync(kFull, my_tok, static_cast<int32_t>(strip_end - 1 - s0));
    if (active) visit(lv, my_tok, local);
    s0 = strip_end;
  }
}

// Whether this CTA owns any slot of the step's walk under Walk<kWalker>'s split (WarpWalk's
// per-warp spans, ThreadWalk's per-CTA ones); CTA-uniform. A kernel whose CTA has no slot and
// nothing else to do returns at once instead of setting up (MaxKernel's shared lane maxima,
// LatPersistKernel's lanes): with the walkers' grid of 2,048 CTAs at 32 lanes and a step's slots
// spread 32 to a warp, most CTAs of a small step own none.
template <int kWalker>
__device__ __forceinline__ bool CtaHasSlots(const Workspace& ws) {
  const int64_t total = ws.lane_arc_offsets[ws.max_lanes];
  if (kWalker == kWalkWarp) {
    const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
    int64_t per = (total + warps - 1) / warps;
    per = (per + 31) & ~static_cast<int64_t>(31);
    return per * ((static_cast<int64_t>(blockIdx.x) * blockDim.x) >> 5) < total;
  }
  int64_t per = (total + gridDim.x - 1) / gridDim.x;
  per = (per + blockDim.x - 1) / blockDim.x * blockDim.x;
  return per * static_cast<int64_t>(blockIdx.x) < total;
}

// kStep: walk with the lanes' step_* fields (LaneView::LoadStep), for the lattice walk.
template <int kWalker, bool kStep = false, typename Visit>
__device__ __forceinline__ void Walk(const Workspace& ws, Visit&& visit) {
  if (kWalker == kWalkWarp) WarpWalk<kStep>(ws, visit);
  else ThreadWalk<kStep>(ws, visit);
}

// The hand-out after the max, by one warp (threadIdx.x < 32), once MaxKernel's counts and max
// are final: MaxLastBlock's, or PoolHandOutKernel's (pool_handout_kernel).
__device__ __forceinline__ void MaxHandOut(Workspace& ws) {
  const bool fits = PooledHandOut(ws, true);
  if (!fits)
    for (int32_t l = threadIdx.x; l <= ws.max_lanes; l += 32) ws.lane_arc_offsets[l] = 0;
}

// MaxKernel's last block (pool_at_max, types.cuh): every CTA has added its lanes' counts
// into LaneCounters::admit; the CTA that finishes last hands the step's regions out by them
// (scan.cuh PooledHandOut), and where the step does not fit the pools it leaves the step no
// slots, so ExpandKernel and the lattice walk do nothing and every lane is back before the
// step (the batch pauses, as a pause in ScanKernel's last block does).
__device__ __forceinline__ void MaxLastBlock(Workspace& ws) {
  if (!GridLastCta(ws.max_done) || threadIdx.x >= 32) return;
  MaxHandOut(ws);
  if (threadIdx.x == 0) *ws.max_done = 0;
}

// Lane l's region at `off` (the step fits), or the lane put back (it does not).
__device__ __forceinline__ void PooledLateAssign(const Workspace& ws, volatile LaneCounters* v, LaneCounters* lc,
                                                 int32_t tokens, int64_t off, bool fits) {
  if (fits) {
    const int32_t dst = v->buf;
    v->tok_off[dst] = off;
    v->tok_cap[dst] = tokens - 1 < ws.main_q ? tokens - 1 : ws.main_q;
  } else {
    PooledUndoStep(lc);
    v->late_undo = 1;
  }
}
// The next frontiers' regions by the claims (Workspace::pool_late), by one warp of ExpandKernel's
// last CTA once every CTA's claims are in: each lane that steps gets PooledTokenRegion of its
// claims (at most its claims list: survivors are claims), in lane order by a prefix sum, and
// at most main_q survivors as PooledAssign gives them; a lane without claims gets the one-token
// region the slots' hand-out gave it too (the arc_offsets sentinel needs one). All or nothing:
// where the step's total does not fit the token pool's committed capacity, the batch pauses as
// in PooledHandOut (pool_need, the pause flag) and every lane that stepped is put back
// (PooledUndoStep) and marked late_undo for its FinalizeKernel CTAs, which clear its claims.
// Volatile: the CTAs' claims counts are in L2, this SM's L1 may hold old lines.
__device__ __forceinline__ void PooledLateHandOut(Workspace& ws) {
  if (ws.max_lanes <= 32) {  // one round: each thread's lane read once
    const int32_t l = static_cast<int32_t>(threadIdx.x);
    volatile LaneCounters* v = l < ws.max_lanes ? &ws.lanes[l] : nullptr;
    const int32_t phase = v ? v->phase : kPhaseIdle;
    const int32_t tokens = v ? PooledLateAsk(ws, v, phase) : 0;
    int64_t total;
    const int64_t off = WarpExclusiveScan(tokens, &total);
    const bool fits = PooledLateReport(ws, total);
    if (phase != kPhaseIdle) PooledLateAssign(ws, v, &ws.lanes[l], tokens, off, fits);
    return;
  }
  int64_t t_sum = 0;
  for (int32_t base = 0; base < ws.max_lanes; base += 32) {
    const int32_t l = base + static_cast<int32_t>(threadIdx.x);
    volatile LaneCounters* v = l < ws.max_lanes ? &ws.lanes[l] : nullptr;
    int64_t total;
    WarpExclusiveScan(v ? PooledLateAsk(ws, v, v->phase) : 0, &total);
    t_sum += total;
  }
  const bool fits = PooledLateReport(ws, t_sum);
  int64_t carry = 0;
  for (int32_t base = 0; base < ws.max_lanes; base += 32) {
    const int32_t l = base + static_cast<int32_t>(threadIdx.x);
    volatile LaneCounters* v = l < ws.max_lanes ? &ws.lanes[l] : nullptr;
    const int32_t phase = v ? v->phase : kPhaseIdle;
    const int32_t tokens = v ? PooledLateAsk(ws, v, phase) : 0;
    int64_t total;
    const int64_t off = carry + WarpExclusiveScan(tokens, &total);
    carry += total;
    if (phase != kPhaseIdle) PooledLateAssign(ws, v, &ws.lanes[l], tokens, off, fits);
  }
}

// ExpandKernel's last CTA under pool_late: after every CTA has counted itself done (its claims
// issued and fenced), one warp hands the next frontiers out (PooledLateHandOut). Every CTA
// calls it, also on a step without slots (lanes that step still need their region).
__device__ __forceinline__ void ExpandLastBlock(Workspace& ws) {
  if (!GridLastCta(ws.expand_done) || threadIdx.x >= 32) return;
  PooledLateHandOut(ws);
  if (threadIdx.x == 0) *ws.expand_done = 0;
}

// PoolHandOutKernel — per step under pool_handout_kernel (CUWFST_POOL_HANDOUT=kernel), right
// after MaxKernel, grid 1 x 32: what MaxLastBlock's warp does, in a kernel of its own
// (MaxKernel has finished: every block's counts and max are in LaneCounters). It runs on
// every step, idle ones included (MaxKernel's early return hands out there too: real lanes
// without slots still get their next frontier's region). (static: this header is included by
// more than one translation unit, and the kernel is not a template.)
static __global__ void __launch_bounds__(32) PoolHandOutKernel(Workspace ws) {
  StepKernelEntry();
  if (ws.pool_at_max) MaxHandOut(ws);
}

// MaxKernel — per step, grid = ExpandBlocksFor(max_lanes) x kWalkThreads.
// Reads: the slot space, frontier scores, tok_ub, graph weights/ilabels, log-prob rows.
// Writes: lanes[l].max_ord = the exact max end score over ALL of the lane's slots.
// Skip: a token whose upper bound tok_ub = score + (max_lp + max emitting weight) is <= the
// thread's running max cannot raise the max (fp32 addition is monotone), so its arc is
// not read; the result is bit-identical to the full maximum.
// pool_at_max (pooled, types.cuh): ScanKernel started max_ord at L, an arc end of the step
// (scan.cuh BestTokenEnd), so any value v read from it later is a lower bound of the max and
// low = v - beam a lower bound of the cutoff (fp32 subtraction is monotone). Each lane's
// arcs whose end passes low are counted into admit: every admitted arc (end > max - beam)
// among them, so the step's claims are at most admit. Arcs are read unless their token's
// upper bound is <= low (then end <= low < v <= max: neither admissible nor the max), so the
// max stays exact. The last block hands the regions out (MaxLastBlock), or under
// pool_handout_kernel PoolHandOutKernel after this kernel.
// pool_bins (CUWFST_POOL_BOUND=bins): no count and no lower bound; the max is found as in the
// static layout, and the last block sizes the regions by the bins the scans filled at the
// exact cutoff (common.cuh PooledBoundInput).
// max_anchor (the static layout, Workspace::max_anchor): the scans started max_ord at the trim's
// anchor, and each thread's running max starts at the max_ord it reads on entering a lane, so
// the skip above holds from the first slot (a thread walks about one slot a step, so its own
// running max alone rarely skipped anything).
template <int kWalker>
__global__ void __launch_bounds__(kWalkThreads)
MaxKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  __shared__ int32_t lane_max[kMaxSharedLanes];
  __shared__ int32_t lane_cnt[kMaxSharedLanes];
  // pool_at_max: the last block hands the regions out; by this kernel's count unless the bins
  // bound sizes them (pool_bins: then the max is found as in the static layout)
  const bool count = ws.pool_at_max != 0 && !ws.pool_bins;
  if (ws.lane_arc_offsets[ws.max_lanes] == 0) {  // an idle step
    if (ws.pool_at_max && !ws.pool_handout_kernel) MaxLastBlock(ws);  // (real lanes without slots still get their next frontier's region)
    return;
  }
  // a CTA without slots has nothing to add (pool_at_max: every CTA counts into the last block's)
  if (!ws.pool_at_max && !CtaHasSlots<kWalker>(ws)) return;
  const bool shared_ok = ws.max_lanes <= kMaxSharedLanes;
  const int32_t kNegInf = FloatToOrderedInt(-INFINITY);
  if (shared_ok)
    for (int i = threadIdx.x; i < ws.max_lanes; i += blockDim.x) {
      lane_max[i] = kNegInf;
      lane_cnt[i] = 0;
    }
  __syncthreads();
  float run = -INFINITY, low = -INFINITY;
  int32_t run_lane = -1, cnt = 0;
  auto flush = [&]() {
    if (run_lane < 0) return;
    if (cnt > 0) {
      if (shared_ok) atomicAdd(&lane_cnt[run_lane], cnt);
      else atomicAdd(&ws.lanes[run_lane].admit, cnt);
    }
    if (run == -INFINITY) return;
    int32_t o = FloatToOrderedInt(run);
    if (shared_ok) atomicMax(&lane_max[run_lane], o);
    else atomicMax(&ws.lanes[run_lane].max_ord, o);
  };
  Walk<kWalker>(ws, [&](const LaneView& lv, int32_t tok, int32_t local) {
    if (lv.lane != run_lane) {
      flush();
      run_lane = lv.lane;
      run = -INFINITY;
      cnt = 0;
      // max_anchor: the scans started the lane's max at the anchor, an arc end of the step (or
      // -inf), and other CTAs may have raised it: every value read is an end <= the max, so a
      // token whose bound cannot pass it cannot raise the max, and the max stays exact
      if (ws.max_anchor && !count)
        run = OrderedIntToFloat(*reinterpret_cast<const volatile int32_t*>(&ws.lanes[lv.lane].max_ord));
      if (count) {
        const LaneCounters& lc = ws.lanes[lv.lane];
        low = OrderedIntToFloat(*reinterpret_cast<const volatile int32_t*>(&lc.max_ord)) - lc.beam;
      }
    }
    if (count) {
      if (lv.ub[tok] <= low) return;
      const int32_t arc = lv.begin[tok] + (local - lv.offsets[tok]);
      const float end = ArcEnd(lv.score[tok], g.arc_weight[arc], lv.Acoustic(g, arc));
      run = fmaxf(run, end);
      cnt += end > low ? 1 : 0;
      return;
    }
    if (lv.ub[tok] <= run) return;
    const int32_t arc = lv.begin[tok] + (local - lv.offsets[tok]);
    run = fmaxf(run, ArcEnd(lv.score[tok], g.arc_weight[arc], lv.Acoustic(g, arc)));
  });
  flush();
  if (shared_ok) {
    __syncthreads();
    for (int i = threadIdx.x; i < ws.max_lanes; i += blockDim.x) {
      if (lane_max[i] != kNegInf) atomicMax(&ws.lanes[i].max_ord, lane_max[i]);
      if (lane_cnt[i] != 0) atomicAdd(&ws.lanes[i].admit, lane_cnt[i]);
    }
  }
  if (ws.pool_at_max && !ws.pool_handout_kernel) MaxLastBlock(ws);
}

// A lane's recombination table and claims list for this step (read once per lane by the
// walkers' callbacks).
struct LaneTable {
  uint32_t* keys = nullptr;
  unsigned long long* payload = nullptr;
  int2* claims = nullptr;
  int32_t size = 0;       // slots, a power of two; 0: the lane has no table this step
  int32_t claim_cap = 0;  // entries of the claims list

  __device__ __forceinline__ void Load(const Workspace& ws, const LaneCounters& lc) {
    keys = ws.hash_key + lc.hash_off;
    payload = ws.hash_payload + lc.hash_off;
    claims = ws.claims + lc.claim_off;
    size = lc.hash_cap;
    claim_cap = lc.claim_cap;
  }
};

// The slot of `dest` in a lane's open-addressing table: a plain read first, a CAS only on
// an empty slot (within a step a slot goes EMPTY -> key once, so matched and mismatched
// slots need no atomic); the thread whose CAS claims the slot appends {dest, slot} to the
// lane's claims list. A thread claims at most one slot, so a step's claims are at most its
// admitted slots (the pooled layout sizes the list by that). Past the list's end the key
// stays in the table unlisted (kOverflowClaims): the targeted clears miss it, so the table
// is wiped whole — at the sequence's end (HashSanitizeKernel) and, pooled, by the lane's
// next ScanKernel, before the pool hands the table to another lane. Returns -1 (and flags
// kOverflowHash) past kMaxProbes probes; a lane without a table this step (a pooled lane
// refused its regions, kOverflowPool: the guard; the pause keeps it from happening) gets -1.
__device__ __forceinline__ int32_t FindOrClaim(const Workspace& ws, int32_t lane, const LaneTable& t,
                                               uint32_t dest) {
  if (t.size == 0) return -1;
  const uint32_t mask = static_cast<uint32_t>(t.size - 1);
  uint32_t h = HashSlot(dest, t.size);
  for (int probe = 0; probe < kMaxProbes; ++probe) {
    uint32_t k = *reinterpret_cast<volatile uint32_t*>(&t.keys[h]);
    if (k == kEmptyKey) {
      k = atomicCAS(&t.keys[h], kEmptyKey, dest);
      if (k == kEmptyKey) {
        const int32_t c = atomicAdd(&ws.lanes[lane].claims, 1);
        if (c < t.claim_cap) t.claims[c] = make_int2(static_cast<int32_t>(dest), static_cast<int32_t>(h));
        else atomicOr(&ws.lanes[lane].overflow, kOverflowClaims);
        return static_cast<int32_t>(h);
      }
    }
    if (k == dest) return static_cast<int32_t>(h);
    h = (h + 1) & mask;
  }
  atomicOr(&ws.lanes[lane].overflow, kOverflowHash);
  return -1;
}

// The low word of an emitting payload for the arc at a lane's local slot `local`, the
// index-th slot of frontier token tok (index = local - offsets[tok]): the slot, or under
// Workspace::payload_tok {tok : index}, which orders as the slot does.
__device__ __forceinline__ uint32_t PayloadLow(const Workspace& ws, int32_t tok, int32_t local, int32_t index) {
  return ws.payload_tok ? (static_cast<uint32_t>(tok) << ws.payload_tok) | static_cast<uint32_t>(index)
                        : static_cast<uint32_t>(local);
}

// Recombines one admitted arc of a lane's step: its destination's hash slot (FindOrClaim) in
// the lane's table this step (LaneTable: its region, either layout), then one 64-bit
// atomicMax of {ordered end : low} (low: PayloadLow; a tie keeps the larger slot).
__device__ __forceinline__ void Recombine(const Workspace& ws, int32_t lane, const LaneTable& table, uint32_t dest,
                                          float end, uint32_t low) {
  const unsigned long long p = (static_cast<unsigned long long>(FloatToOrderedU32(end)) << 32) | low;
  const int32_t h = FindOrClaim(ws, lane, table, dest);
  if (h < 0) return;
  // Dominance: a candidate below the slot's current best cannot win (a stale read is
  // only lower, so this never drops a winner).
  if (*reinterpret_cast<volatile unsigned long long*>(&table.payload[h]) < p) atomicMax(&table.payload[h], p);
}

// A lattice candidate into the step's candidate buffer (candidate mode, common.cuh LatCandOn):
// the calling threads take consecutive entries (one atomicAdd per warp); an entry past the
// buffer marks its lane (LatPersistKernel then records that lane by its walk).
__device__ __forceinline__ void LatCandWrite(const Workspace& ws, int32_t lane, int32_t tok, int32_t arc,
                                             float acoustic) {
  const unsigned writing = __activemask();
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
  const int32_t leader = __ffs(writing) - 1;
  unsigned long long base = 0;
  if (me == leader) base = atomicAdd(ws.lat_cand_n, static_cast<unsigned long long>(__popc(writing)));
  base = __shfl_sync(writing, base, leader);
  const unsigned long long i = base + static_cast<unsigned long long>(__popc(writing & ((1u << me) - 1u)));
  if (i < static_cast<unsigned long long>(ws.lat_cand_cap)) ws.lat_cand[i] = LatCand{tok, arc, acoustic, lane};
  else atomicOr(&ws.lanes[lane].lat_cand_over, 1);
}

// ExpandKernel's work for one slot, and the lane it is in (cutoff and table, read on entering a
// lane; max_ord read volatile: in CoopWalkKernel other CTAs raised it in this launch).
struct ExpandLane {
  int32_t lane = -1;
  float cutoff = INFINITY;
  // candidate mode (lattice decodes, common.cuh LatCandOn): the prefilter's bound, at or above
  // which a walked arc is written as a candidate; INFINITY: no candidates
  float cand_low = INFINITY;
  LaneTable table;

  __device__ __forceinline__ void Enter(const DeviceGraph& g, const Workspace& ws, int32_t l, int32_t phase) {
    if (l == lane) return;
    lane = l;
    const LaneCounters& lc = ws.lanes[l];
    cutoff = OrderedIntToFloat(*reinterpret_cast<const volatile int32_t*>(&lc.max_ord)) - lc.beam;
    table.Load(ws, lc);
    cand_low = INFINITY;
    if (ws.lattice == 2 && ws.lat_cand != nullptr) {  // (the same bound LatPersistKernel computes)
      const float low = LatPreLowFor(ws, LatFilterFor(g, ws, lc, phase), cutoff);
      if (LatCandOn(ws, low)) cand_low = low;
      else if (phase == kPhaseFinal && LatCandFinalOn(ws)) cand_low = -INFINITY;  // every walked final arc
    }
  }
  __device__ __forceinline__ void Slot(const DeviceGraph& g, const Workspace& ws, const LaneView& lv, int32_t tok,
                                       int32_t local) {
    Enter(g, ws, lv.lane, lv.phase);
    const float bound = lv.ub[tok];
    if (!(bound > cutoff) && !(bound >= cand_low)) return;  // no arc of this token can pass (or be a candidate)
    const int32_t index = local - lv.offsets[tok];
    const int32_t arc = lv.begin[tok] + index;
    const float acoustic = lv.Acoustic(g, arc);
    const float end = ArcEnd(lv.score[tok], g.arc_weight[arc], acoustic);
    if (end >= cand_low) LatCandWrite(ws, lane, tok, arc, acoustic);  // (cand_low: only real and final steps)
    if (!(end > cutoff)) return;
    const uint32_t dest = lv.phase == kPhaseRedirect ? static_cast<uint32_t>(g.num_states - 1)
                                                     : static_cast<uint32_t>(ArcDest(g, arc));
    Recombine(ws, lane, table, dest, end, PayloadLow(ws, tok, local, index));
  }
};

// ExpandKernel — per step, same grid and slots as MaxKernel.
// (Under the bins bound, Workspace::pool_bins, it first zeroes bin_slots, which MaxKernel's
// last block has read, even on a step that paused.)
// Reads: lanes[l].max_ord (final after MaxKernel) and beam; admits a slot iff
// end > max - beam (k2's test), recombines admitted arcs by destination state in the
// lane's open-addressing hash: a plain read first, a CAS only on an empty slot, the
// first claimer appends {state, hash slot} to the claims list, then one 64-bit atomicMax
// of {ordered end : local slot} resolves the best score and its argmax together (a tie
// keeps the larger slot). Writes: hash keys/payloads, claims, overflow bits.
// kMinBlocks: __launch_bounds__'s CTAs a multiprocessor, 1 (no bound: the default) or 6
// (CUWFST_EXPAND_MIN_BLOCKS=6 at construction, warp walker: registers capped near 40, so 6 CTAs
// of 256 threads fit where 58 registers allowed 4; Nsight Compute on the H200, session of
// 2026-12-03 18:47: 50% theoretical and 38-39% achieved occupancy, held by registers). Same code
// otherwise, so the same results.
template <int kWalker, int kMinBlocks = 1>
__global__ void __launch_bounds__(kWalkThreads, kMinBlocks)
ExpandKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  if (ws.pool_bins) {  // MaxKernel's last block has read the bins bound: zero it for the next step's scan
    const int64_t all = static_cast<int64_t>(ws.max_lanes) * kPoolBins;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < all;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
      ws.bin_slots[i] = 0;
  }
  if (ws.lane_arc_offsets[ws.max_lanes] != 0) {  // (the same total in every CTA)
    ExpandLane e;
    Walk<kWalker>(ws, [&](const LaneView& lv, int32_t tok, int32_t local) { e.Slot(g, ws, lv, tok, local); });
  }
  if (ws.pool_late == 1) ExpandLastBlock(ws);
}

// CoopWalkKernel — per step instead of MaxKernel and ExpandKernel under walker="warp_coop"
// (DecoderConfig::walker kWalkWarpCoop; the static layout without fused_max, else those two
// run), one cooperative launch of at most the co-resident CTAs (GpuDecoder::coop_grid_).
// Phase one walks the slots as MaxKernel does, but reads every slot's arc (no upper-bound skip:
// the max over all ends is the same max), and keeps each thread's end, arc and slot for the
// first kCoopStrips strips of its warp's span. A grid-wide sync then makes every lane's max
// final. Phase two admits and recombines the kept strips from registers (the destination and
// the hash alone: no lane entry, token search or arc reads again) and walks the rest of the
// span as ExpandKernel does. The same slots, ends (ArcEnd of the same operands), maxima,
// admissions (end > max - beam) and payloads as the two kernels.
constexpr int kCoopStrips = 4;
// (static: this header is included by more than one translation unit, and the kernel is not a template.)
static __global__ void __launch_bounds__(kWalkThreads) CoopWalkKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  __shared__ int32_t lane_max[kMaxSharedLanes];
  if (ws.lane_arc_offsets[ws.max_lanes] == 0) return;  // an idle step (the same total in every CTA: none syncs)
  const bool shared_ok = ws.max_lanes <= kMaxSharedLanes;
  const int32_t kNegInf = FloatToOrderedInt(-INFINITY);
  if (shared_ok)
    for (int i = threadIdx.x; i < ws.max_lanes; i += blockDim.x) lane_max[i] = kNegInf;
  __syncthreads();
  int64_t lo = 0, hi = 0;
  const bool have = WarpSpan(ws, &lo, &hi);
  float c_end[kCoopStrips];
  int32_t c_arc[kCoopStrips], c_lane[kCoopStrips], c_phase[kCoopStrips];
  uint32_t c_low[kCoopStrips];  // (PayloadLow of the kept strips)
  int32_t cached = 0;   // warp-uniform: the strips kept
  int64_t resume = hi;  // warp-uniform: the first strip not kept
  float run = -INFINITY;
  int32_t run_lane = -1;
  auto flush = [&]() {
    if (run_lane < 0 || run == -INFINITY) return;
    const int32_t o = FloatToOrderedInt(run);
    if (shared_ok) atomicMax(&lane_max[run_lane], o);
    else atomicMax(&ws.lanes[run_lane].max_ord, o);
  };
  if (have)
    WarpWalkStrips<false>(ws, lo, hi, [&](const LaneView& lv, int32_t tok, int32_t local, bool active, int64_t s0) {
      float end = -INFINITY;
      int32_t arc = 0;
      uint32_t low = 0;
      if (active) {
        if (lv.lane != run_lane) {
          flush();
          run_lane = lv.lane;
          run = -INFINITY;
        }
        const int32_t index = local - lv.offsets[tok];
        arc = lv.begin[tok] + index;
        low = PayloadLow(ws, tok, local, index);
        end = ArcEnd(lv.score[tok], g.arc_weight[arc], lv.Acoustic(g, arc));
        run = fmaxf(run, end);
      }
      if (cached < kCoopStrips) {
#pragma unroll
        for (int j = 0; j < kCoopStrips; ++j)  // (register arrays: constant indices only)
          if (j == cached) {
            c_end[j] = end;  // -inf where inactive: never admitted
            c_arc[j] = arc;
            c_low[j] = low;
            c_lane[j] = lv.lane;
            c_phase[j] = lv.phase;
          }
        ++cached;
      } else if (resume == hi) {
        resume = s0;
      }
    });
  flush();
  if (shared_ok) {
    __syncthreads();
    for (int i = threadIdx.x; i < ws.max_lanes; i += blockDim.x)
      if (lane_max[i] != kNegInf) atomicMax(&ws.lanes[i].max_ord, lane_max[i]);
  }
  cooperative_groups::this_grid().sync();  // every lane's max is final
  const int32_t final_state = g.num_states - 1;
  ExpandLane e;
#pragma unroll
  for (int j = 0; j < kCoopStrips; ++j) {
    if (j >= cached) break;
    // (no lattice candidates here: the host gives a cooperative walker's decodes no candidate
    // buffer, ws.lat_cand nullptr, since the strips kept in registers skip ExpandLane::Slot)
    e.Enter(g, ws, c_lane[j], c_phase[j]);
    if (!(c_end[j] > e.cutoff)) continue;
    const uint32_t dest = c_phase[j] == kPhaseRedirect ? static_cast<uint32_t>(final_state)
                                                       : static_cast<uint32_t>(ArcDest(g, c_arc[j]));
    Recombine(ws, e.lane, e.table, dest, c_end[j], c_low[j]);
  }
  if (have && resume < hi)
    WarpWalkStrips<false>(ws, resume, hi, [&](const LaneView& lv, int32_t tok, int32_t local, bool active, int64_t) {
      if (active) e.Slot(g, ws, lv, tok, local);
    });
}

// FusedExpandKernel — per step with fused_max, instead of MaxKernel + ExpandKernel; same grid
// and slots. Reads: lanes[l].max_ord, which ScanKernel / ScanSplitKernel set to L, the best
// end of the lane's best-scoring token with arcs (BestTokenEnd): an end this kernel computes
// too, bit for bit, so L <= M, the step's exact max. Writes: max_ord raised to M (each
// thread's running max, flushed through shared memory as in MaxKernel), hash keys/payloads,
// claims, overflow bits.
// Each thread admits an arc iff end > x - beam, with x its running max: the max_ord it read
// on entering the lane (L or more), then every end it computes. Every value x takes is an
// end of the lane's step, so x <= M and x - beam <= M - beam (IEEE subtraction is monotone):
// every arc k2 admits (end > M - beam) is admitted here, and some arcs below M - beam too.
// Exactness (docs/design.md, "Kernel variants"): for a destination whose best end e* passes
// M - beam, every arc of it ending at e* passes too, so all of them are admitted here and the
// {end : slot} atomicMax settles on exactly the payload ExpandKernel gives it; a destination
// whose best end fails M - beam is at most claimed, and FinalizeKernel, which tests each
// claim against the exact cutoff M - beam, drops it. So the survivors, their scores and their
// winning slots are those of MaxKernel + ExpandKernel; only the claims list is longer (a
// claims overflow the exact path would not have is possible and is flagged like any other).
// The max is exact: a token is skipped only when score + (max_lp + max emitting weight) (an
// upper bound of its ends, fp32 addition being monotone) is <= x - beam <= x, and x is in
// max_ord already or is flushed, so max_ord = max(L, every end computed) = M once the kernel
// has finished. The cutoff is therefore known only after this kernel: FinalizeKernel and the
// epsilon closure, later launches, read the exact one, and so do the lattice stage's kernels
// (lattice.cuh), which run after Finalize and ask the hash which destinations survived.
// Pooled layout: the claims list and table come from the lane's regions (LaneTable), sized
// by the step's slots (PooledClaimsBound); a thread claims at most one slot, so the longer
// claims list still fits that bound.
template <int kWalker>
__global__ void __launch_bounds__(kWalkThreads)
FusedExpandKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  __shared__ int32_t lane_max[kMaxSharedLanes];
  if (ws.lane_arc_offsets[ws.max_lanes] == 0) return;  // an idle step
  const bool shared_ok = ws.max_lanes <= kMaxSharedLanes;
  const int32_t kNegInf = FloatToOrderedInt(-INFINITY);
  if (shared_ok)
    for (int i = threadIdx.x; i < ws.max_lanes; i += blockDim.x) lane_max[i] = kNegInf;
  __syncthreads();
  const int32_t final_state = g.num_states - 1;
  int32_t cur_lane = -1;
  float beam = 0.f, read_max = -INFINITY, run = -INFINITY, cutoff = INFINITY;
  LaneTable table;  // the lane's hash and claims this step (its regions, either layout)
  auto flush = [&]() {  // only a max above what max_ord held when this thread read it
    if (cur_lane < 0 || !(run > read_max)) return;
    const int32_t o = FloatToOrderedInt(run);
    if (shared_ok) atomicMax(&lane_max[cur_lane], o);
    else atomicMax(&ws.lanes[cur_lane].max_ord, o);
  };
  Walk<kWalker>(ws, [&](const LaneView& lv, int32_t tok, int32_t local) {
    if (lv.lane != cur_lane) {
      flush();
      cur_lane = lv.lane;
      const LaneCounters& lc = ws.lanes[cur_lane];
      beam = lc.beam;
      // other blocks may be raising it: any value it holds is an end of the step (or L)
      read_max = run = OrderedIntToFloat(*reinterpret_cast<const volatile int32_t*>(&lc.max_ord));
      cutoff = run - beam;
      table.Load(ws, lc);
    }
    if (!(lv.ub[tok] > cutoff)) return;  // no arc of this token can pass or raise x
    const int32_t index = local - lv.offsets[tok];
    const int32_t arc = lv.begin[tok] + index;
    const float end = ArcEnd(lv.score[tok], g.arc_weight[arc], lv.Acoustic(g, arc));
    if (end > run) {
      run = end;
      cutoff = run - beam;
    }
    if (!(end > cutoff)) return;
    const uint32_t dest = lv.phase == kPhaseRedirect ? static_cast<uint32_t>(final_state)
                                                     : static_cast<uint32_t>(ArcDest(g, arc));
    Recombine(ws, cur_lane, table, dest, end, PayloadLow(ws, tok, local, index));
  });
  flush();
  if (shared_ok) {
    __syncthreads();
    for (int i = threadIdx.x; i < ws.max_lanes; i += blockDim.x)
      if (lane_max[i] != kNegInf) atomicMax(&ws.lanes[i].max_ord, lane_max[i]);
  }
}

}  // namespace cuwfst
