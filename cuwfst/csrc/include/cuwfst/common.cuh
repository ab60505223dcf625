// Small device helpers shared by the pipeline stages.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "cuwfst/types.cuh"

namespace cuwfst {

// %globaltimer in ns (the scan trace, the records pass's phase sums: measurements)
__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Programmatic dependent launch (DecoderConfig::pdl, sm_90 and later): the decoder launches
// the step pipeline's kernels (gpu_decoder.cu LaunchStep) with the programmatic-serialization
// attribute, so a kernel's launch (grid set-up, its CTAs made resident) overlaps the end of the
// kernel before it. Every kernel so launched calls this first, before any global memory access:
// `griddepcontrol.wait` returns once the kernels it depends on have completed and their writes
// are visible, so what a kernel reads is what a plain launch would read, and since every such
// kernel waits before it can finish, the chain is transitive (a kernel that finished implies
// every kernel before it did). It then lets the next kernel launch (its CTAs wait here in
// turn). Without the attribute (older GPUs, profiling, pdl off) both are no-ops.
// tests/test_pdl_entry.py checks that every kernel LaunchStep is given starts with it.
__device__ __forceinline__ void StepKernelEntry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// float <-> int with the same order as the floats (signed compare); -inf..+inf monotone.
__device__ __forceinline__ int32_t FloatToOrderedInt(float f) {
  int32_t i = __float_as_int(f);
  return i >= 0 ? i : i ^ 0x7FFFFFFF;
}
__device__ __forceinline__ float OrderedIntToFloat(int32_t i) {
  return __int_as_float(i >= 0 ? i : i ^ 0x7FFFFFFF);
}
// float -> uint32 with the float order under unsigned compare (for the u64 payload).
__device__ __forceinline__ uint32_t FloatToOrderedU32(float f) {
  uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float OrderedU32ToFloat(uint32_t u) {
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7FFFFFFFu) : ~u);
}

// k2's dynamic-beam update (intersect_dense_pruned.cu, GetPruningCutoffs) in k2's
// arithmetic: float state, double constants, no contraction into FMA (explicit _rn ops),
// so it matches the CPU reference bit for bit. online: k2's online mode, where the length
// is unknown before the final step, so the last-5-frames clauses never apply.
__device__ __forceinline__ float UpdateBeam(float beam, int32_t active_states, int32_t t,
                                            int32_t final_t, float search_beam,
                                            int32_t min_active_i, int32_t max_active_i, bool online) {
  float default_beam = search_beam, max_active = static_cast<float>(max_active_i),
        min_active = static_cast<float>(min_active_i);
  float current_min_active = min_active;
  if (!online && t + 5 >= final_t) current_min_active = fmaxf(min_active, max_active / 2);
  float active = static_cast<float>(active_states);
  if (active <= max_active) {
    if (active >= current_min_active || active_states == 0) {
      beam = __double2float_rn(__dadd_rn(__dmul_rn(0.8, static_cast<double>(beam)),
                                         __dmul_rn(0.2, static_cast<double>(default_beam))));
    } else {
      if (beam < default_beam) beam = default_beam;
      beam = __double2float_rn(__dmul_rn(static_cast<double>(beam), 1.25));
    }
  } else if (online || t + 5 < final_t) {
    if (beam > default_beam) beam = default_beam;
    beam = __double2float_rn(__dmul_rn(static_cast<double>(beam), 0.8));
  }
  if (t == final_t - 1) beam = 1.0e+10f;
  return beam;
}

// First index i in [lo, hi) with a[i] > x, searching forward from lo by galloping
// (the walkers' cursors only move forward, by a few tokens per slot stride).
__device__ __forceinline__ int32_t GallopUpperBound(const int32_t* a, int32_t lo, int32_t hi,
                                                    int32_t x) {
  int32_t step = 1, prev = lo;
  int32_t cur = lo;
  while (cur < hi && a[cur] <= x) {
    prev = cur + 1;
    cur += step;
    step <<= 1;
  }
  if (cur > hi) cur = hi;
  int32_t l = prev, r = cur;  // answer in [prev, cur]
  while (l < r) {
    int32_t m = (l + r) >> 1;
    if (a[m] <= x) l = m + 1; else r = m;
  }
  return l;
}

// First index i in [0, n) with a[i] > x (n if none); I is int32_t (a lane's token offsets)
// or int64_t (the batch's lane offsets).
template <typename I>
__device__ __forceinline__ int32_t UpperBound(const I* a, int32_t n, I x) {
  int32_t l = 0, r = n;
  while (l < r) {
    int32_t m = (l + r) >> 1;
    if (a[m] <= x) l = m + 1; else r = m;
  }
  return l;
}

// The token holding local slot `slot` of a lane: the last j with offsets[j] <= slot. With
// valid hints sampled every 2^shift slots (the token holding slot (slot >> shift) << shift;
// shift = kHintShift, or types.cuh HintShiftOf under the pooled adaptive hints) it is a short
// forward gallop over the few tokens of a 2^shift-slot stretch; else a binary search.
__device__ __forceinline__ int32_t TokenOfSlot(const int32_t* offsets, const int32_t* hint,
                                               bool hint_ok, int32_t n, int32_t slot,
                                               int32_t shift = kHintShift) {
  if (hint_ok) return GallopUpperBound(offsets, hint[slot >> shift] + 1, n + 1, slot) - 1;
  return UpperBound(offsets, n + 1, slot) - 1;
}

// One warp's exclusive scan of v (int64) over its 32 lanes; returns the exclusive prefix
// and sets *total to the warp's sum (every thread gets the same total).
__device__ __forceinline__ int64_t WarpExclusiveScan(int64_t v, int64_t* total) {
  int64_t incl = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int64_t o = __shfl_up_sync(0xFFFFFFFFu, incl, d);
    if (static_cast<int>(threadIdx.x & 31) >= d) incl += o;
  }
  *total = __shfl_sync(0xFFFFFFFFu, incl, 31);
  return incl - v;
}

// The home slot of state s in a table of `size` slots (a power of two >= 2): Fibonacci
// hashing, the product's top bits, which depend on every bit of s. (The low bits of the
// product depend only on s's low bits: states equal modulo the table size would share a
// home slot, which the pooled layout's small tables make common.)
__device__ __forceinline__ uint32_t HashSlot(uint32_t s, int32_t size) {
  const int shift = __clz(static_cast<uint32_t>(size)) + 1;  // 32 - log2(size)
  return (s * 2654435761u) >> shift;
}

// An arc's end score in float32, in the one order every kernel uses (MaxKernel,
// ExpandKernel, FusedExpandKernel and the scans' lower bound must agree bit for bit): k2's,
// score + (acoustic + weight) (intersect_dense_pruned: arc_loglike = acoustic + arc score,
// end_loglike = forward + arc_loglike; the CPU's RowSearch::Step). `acoustic` is 0.f off real
// steps, and `0.f + weight` is kept: it turns a -0 weight into +0 exactly as the CPU does.
// Every bound on ends is built in the same shape, score + (an acoustic bound + a weight
// bound): fp32 addition is monotone in each operand, so it bounds every end it covers.
__device__ __forceinline__ float ArcEnd(float score, float weight, float acoustic) {
  return score + (acoustic + weight);
}

// The acoustic score of an arc on a step of `phase`: the log-prob row's column ilabel on a
// real step (fp16 rows are widened as the walkers do), 0 on the final and redirect steps.
__device__ __forceinline__ float ArcAcoustic(const DeviceGraph& g, int32_t arc, int32_t phase,
                                             const float* row32, const uint16_t* row16) {
  if (phase != kPhaseReal) return 0.f;
  const uint16_t il = ArcLabel(g, arc);
  return row16 ? __half2float(__ushort_as_half(row16[il])) : row32[il];
}

// The arcs a token of state arcs `sa` expands on a step of `phase`: [*b, *e).
__device__ __forceinline__ void PhaseArcs(const StateArcs& sa, int32_t phase, int32_t* b, int32_t* e) {
  if (phase == kPhaseReal) {  // emitting arcs
    *b = sa.EmitBegin();
    *e = sa.EmitEnd();
  } else if (phase == kPhaseFinal) {
    *b = sa.FinalBegin();
    *e = *b + sa.final_count;
  } else {  // redirect: every arc of the state, as the CPU reference
    *b = sa.begin;
    *e = sa.end;
  }
}

// Epsilon closure: the payload a frontier token's hash slot holds between passes,
// {its score : 0xFFFFFFFF}. A closure candidate {end : slot} beats it only with a strictly
// greater end (slots are < 2^31), which is the CPU's `end > score` test.
constexpr uint32_t kBaselineSlot = 0xFFFFFFFFu;
// The items [x, y) of CTA blockIdx.x in a claim-split kernel: num items in even chunks over
// the grid's gridDim.x CTAs a lane, each chunk at least ws.split_min items (a kernel whose
// threads take one item each in a strided loop, per_thread: at most blockDim.x of them, so no
// thread walks several dependent chains in turn; measured: EpsChainLink 3.74 -> 5.43 ms a
// batch with 1,024); a CTA past the last chunk gets an empty range (x >= y) and leaves. Every
// item is in exactly one chunk, so the kernels' results do not depend on the split (their
// output order does, and that order is already set by the CTAs' atomics).
__device__ __forceinline__ int2 SplitRange(const Workspace& ws, int32_t num, bool per_thread = false) {
  const int32_t least = per_thread ? min(ws.split_min, static_cast<int32_t>(blockDim.x)) : ws.split_min;
  const int32_t chunk = max((num + static_cast<int32_t>(gridDim.x) - 1) / static_cast<int32_t>(gridDim.x),
                            max(least, 1));
  const int64_t b = static_cast<int64_t>(blockIdx.x) * chunk;
  const int32_t lo = static_cast<int32_t>(min(b, static_cast<int64_t>(num)));
  const int32_t hi = static_cast<int32_t>(min(b + chunk, static_cast<int64_t>(num)));
  return make_int2(lo, hi);
}

__device__ __forceinline__ unsigned long long EpsBaseline(float score) {
  return (static_cast<unsigned long long>(FloatToOrderedU32(score)) << 32) | kBaselineSlot;
}

// The pooled hand-out of a step's regions (types.cuh, PooledAskOf / PooledAssign), by one
// warp (threadIdx.x < 32) of the last block of ScanKernel (by the slots, fused_max) or of
// MaxKernel (pool_at_max: by LaneCounters::admit, or by the bins bound under pool_bins;
// PooledBoundInput), or of PoolHandOutKernel after MaxKernel in its place
// (pool_handout_kernel, expand.cuh): each lane's claims list, hash table and
// next frontier (in buffer lc.buf, which this step builds: survivors are claims, at most the
// bound). All or nothing: a first pass adds up what the step asks of each pool; if the
// batch's asks fit the pools' committed capacities every lane gets its regions, else the
// batch pauses: no lane gets any, every lane that stepped is put back where the step found it
// (PooledUndoStep: its frontier, t, buf and beam as before the step), and the pause flag
// (pool_need[kPoolPauseSlot]) idles every lane's later steps of this sequence; the caller
// then leaves the step no slots. The host commits what the step asked (pool_need: exact,
// since no lane lost anything before it) and resumes the batch from that step
// (SeqKind::kResume): no step is decoded twice. Returns whether the step fits (the same in
// every thread of the warp).
// What lane l's regions are sized by (PooledAskOf's `slots`): its step's slots (by_max
// false: ScanKernel's last block), or in MaxKernel's last block (by_max) MaxKernel's count of
// admissible arcs, or under the bins bound (Workspace::pool_bins) the slots of the bins at and
// above the exact cutoff's (pool_bins.h; MaxKernel has finished the max: every block flushed
// into max_ord before counting itself done). Off real steps the slots (PooledClaimsBound
// makes them a bound of 1 or 0).
__device__ __forceinline__ int32_t PooledBoundInput(const Workspace& ws, int32_t l, bool by_max) {
  volatile LaneCounters* v = &ws.lanes[l];
  if (!by_max) return v->total_arcs;
  if (!ws.pool_bins) return v->admit;
  if (v->phase != kPhaseReal) return v->total_arcs;
  // the cutoff exactly as ExpandKernel computes it
  const float cutoff = OrderedIntToFloat(v->max_ord) - v->beam;
  const int32_t first = PoolFirstBin(cutoff, OrderedIntToFloat(v->prev_max_ord));
  return *reinterpret_cast<volatile int32_t*>(&ws.bin_slots[static_cast<int64_t>(l) * kPoolBins + first]);
}

// Whether this CTA is the grid's last to finish (a last-block-done counter, 0 between launches):
// every CTA's writes before the call are issued and fenced before it counts itself done, and the
// last one fences again before it reads them. Every thread of every CTA calls it; the result is
// the same in the whole CTA. The caller of the last CTA puts the counter back to 0. MaxKernel's
// and ExpandKernel's last blocks (scan.cuh ScanGridLast keeps its own copy).
__device__ __forceinline__ bool GridLastCta(int32_t* done) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(done, 1) == static_cast<int32_t>(gridDim.x) - 1;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// What a step asked of the pools, summed over the lanes, into pool_need (the high water; the
// host grows a pool to it after a pause), and the pause flag where it does not fit the
// committed capacities (thread 0 of the hand-out's warp writes). Returns whether it fits.
__device__ __forceinline__ bool PooledReportStep(Workspace& ws, int64_t c_sum, int64_t h_sum, int64_t t_sum,
                                                 long long c_cap, long long h_cap, long long t_cap) {
  const bool fits = PooledStepFits(c_sum, h_sum, t_sum, c_cap, h_cap, t_cap);
  if (threadIdx.x == 0) {
    atomicMax(&ws.pool_need[kPoolClaims], static_cast<unsigned long long>(c_sum));
    atomicMax(&ws.pool_need[kPoolHash], static_cast<unsigned long long>(h_sum));
    atomicMax(&ws.pool_need[kPoolTokens], static_cast<unsigned long long>(t_sum));
    if (!fits) ws.pool_need[kPoolPauseSlot] = 1ull;
  }
  return fits;
}

// The token region lane l asks for under pool_late (0: the lane does not step).
__device__ __forceinline__ int32_t PooledLateTokens(const Workspace& ws, int32_t phase, int32_t claims, int32_t cap) {
  if (phase == kPhaseIdle) return 0;
  // (the diagnostic Workspace::pool_full: a main_q region, as the static layout's)
  return PooledTokenRegion(ws, (ws.pool_full & kPoolFullTokens) ? ws.main_q : claims < cap ? claims : cap);
}
__device__ __forceinline__ int32_t PooledLateAsk(const Workspace& ws, volatile LaneCounters* v, int32_t phase) {
  if (phase == kPhaseIdle) return 0;
  return PooledLateTokens(ws, phase, v->claims, v->claim_cap);
}
// The pool_late hand-outs' report (PooledLateHandOut, FinalizeLate): the step's token asks
// summed over the lanes into pool_need, and the pause flag where they do not fit (thread 0).
__device__ __forceinline__ bool PooledLateReport(const Workspace& ws, int64_t total) {
  const bool fits = total <= ws.pool_cap[kPoolTokens];
  if (threadIdx.x == 0) {
    atomicMax(&ws.pool_need[kPoolTokens], static_cast<unsigned long long>(total));
    if (!fits) ws.pool_need[kPoolPauseSlot] = 1ull;
  }
  return fits;
}

// PooledHandOut for a batch of at most 32 lanes, in one pass: each thread issues its lane's
// loads (phase, buffer, slots, and the bound input) together, the warp scans the asks once and
// assigns from the same scans, and `*slots` returns the lane's total_arcs as read (the scan's
// tail reuses it for the slot offsets). The two-pass version re-reads every lane's counters
// from L2 in its second pass (a chain of dependent round trips by one warp while the rest of
// the GPU waits on it); the values, sums and offsets are the same. (Returned by value: an
// output through a pointer took a stack frame.)
struct HandOutResult {
  bool fits;
  int32_t slots;
};
__device__ __forceinline__ HandOutResult PooledHandOutWarp(Workspace& ws, bool by_max) {
  const int32_t l = static_cast<int32_t>(threadIdx.x);
  const bool live = l < ws.max_lanes;
  int32_t phase = kPhaseIdle, dst = 0, total = 0, input = 0;
  if (live) {
    volatile LaneCounters* v = &ws.lanes[l];
    phase = v->phase;
    dst = v->buf;
    total = v->total_arcs;
    input = by_max ? PooledBoundInput(ws, l, true) : total;
  }
  PooledAsk ask = live ? PooledAskOf(ws, phase, input) : PooledAsk{0, 0, 0, 0};
  if (ws.pool_late) ask.tokens = 0;  // the next frontier's region comes after the expansion
  int64_t c_sum, h_sum, t_sum;
  const int64_t c_off = WarpExclusiveScan(ask.claims, &c_sum);
  const int64_t h_off = WarpExclusiveScan(ask.hash, &h_sum);
  const int64_t t_off = WarpExclusiveScan(ask.tokens, &t_sum);
  const long long c_cap = ws.pool_cap[kPoolClaims];
  const long long h_cap = ws.pool_cap[kPoolHash];
  const long long t_cap = ws.pool_cap[kPoolTokens];
  const bool fits = PooledReportStep(ws, c_sum, h_sum, t_sum, c_cap, h_cap, t_cap);
  if (live) {
    if (fits) {
      LaneCounters& lc = ws.lanes[l];
      if (!PooledAssign(ws, lc, dst, ask, c_off, h_off, t_off, c_cap, h_cap, t_cap))
        atomicOr(&lc.overflow, kOverflowPool);
    } else if (phase != kPhaseIdle) {
      PooledUndoStep(&ws.lanes[l]);  // the batch pauses before this step
    }
  }
  return HandOutResult{fits, total};
}

__device__ __forceinline__ bool PooledHandOut(Workspace& ws, bool by_max) {
  // (MaxKernel's last block keeps the two passes: inlined there, the one-pass version took
  // MaxKernel<1> a 4-byte spill on sm_90)
  if (!by_max && ws.max_lanes <= 32) return PooledHandOutWarp(ws, false).fits;
  int64_t c_sum = 0, h_sum = 0, t_sum = 0;
  for (int32_t base = 0; base < ws.max_lanes; base += 32) {
    const int32_t l = base + threadIdx.x;
    PooledAsk ask{0, 0, 0, 0};
    if (l < ws.max_lanes)
      ask = PooledAskOf(ws, *reinterpret_cast<volatile int32_t*>(&ws.lanes[l].phase), PooledBoundInput(ws, l, by_max));
    if (!by_max && ws.pool_late) ask.tokens = 0;  // (pool_late: the scan's hand-out only)
    int64_t c_total, h_total, t_total;
    WarpExclusiveScan(ask.claims, &c_total);
    WarpExclusiveScan(ask.hash, &h_total);
    WarpExclusiveScan(ask.tokens, &t_total);
    c_sum += c_total;
    h_sum += h_total;
    t_sum += t_total;
  }
  const long long c_cap = ws.pool_cap[kPoolClaims];
  const long long h_cap = ws.pool_cap[kPoolHash];
  const long long t_cap = ws.pool_cap[kPoolTokens];
  const bool fits = PooledReportStep(ws, c_sum, h_sum, t_sum, c_cap, h_cap, t_cap);
  int64_t c_carry = 0, h_carry = 0, t_carry = 0;
  for (int32_t base = 0; base < ws.max_lanes; base += 32) {
    const int32_t l = base + threadIdx.x;
    if (fits) {
      PooledAsk ask{0, 0, 0, 0};
      if (l < ws.max_lanes)
        ask = PooledAskOf(ws, *reinterpret_cast<volatile int32_t*>(&ws.lanes[l].phase), PooledBoundInput(ws, l, by_max));
      if (!by_max && ws.pool_late) ask.tokens = 0;  // (pool_late: the scan's hand-out only)
      int64_t c_total, h_total, t_total;
      const int64_t c_off = c_carry + WarpExclusiveScan(ask.claims, &c_total);
      const int64_t h_off = h_carry + WarpExclusiveScan(ask.hash, &h_total);
      const int64_t t_off = t_carry + WarpExclusiveScan(ask.tokens, &t_total);
      if (l < ws.max_lanes) {
        LaneCounters& lc = ws.lanes[l];
        const int32_t dst = *reinterpret_cast<volatile int32_t*>(&lc.buf);
        // the step's total fits every pool, so every lane's prefix does: PooledAssign gives
        // each lane its regions (a lane it refused would get none, never a region past the
        // capacity; it would be flagged, and nothing reads its frontier: HasTokenRegion)
        if (!PooledAssign(ws, lc, dst, ask, c_off, h_off, t_off, c_cap, h_cap, t_cap))
          atomicOr(&lc.overflow, kOverflowPool);  // (L2: the lane's own bits may be newer than L1)
      }
      c_carry += c_total;
      h_carry += h_total;
      t_carry += t_total;
    } else if (l < ws.max_lanes && *reinterpret_cast<volatile int32_t*>(&ws.lanes[l].phase) != kPhaseIdle) {
      PooledUndoStep(&ws.lanes[l]);  // the batch pauses before this step
    }
  }
  return fits;
}

// Whether the scans start each lane's step max at the trim's anchor (Workspace::pool_anchor,
// Workspace::max_anchor): never with the fused scans, whose scan_best names the best token.
__device__ __forceinline__ bool AnchorStartsMax(const Workspace& ws) { return ws.pool_anchor || ws.max_anchor; }

// ---- The lattice records' filter's rounding slack (lattice.cuh LatFilterFor) and the lattice
// trim (scan.cuh RowAndTrim), shared so the two compute the same bound bit for bit.
// kLatFilterMag: the filter drops arcs only on steps whose new frontier lies within it;
// kLatGuardMag: the guard's magnitude; kLatTrimMag: a lane's lattice trim needs its current
// frontier within it (one step's move, up to kLatFilterMag - kLatTrimMag, keeps the step
// filtered; a step that still leaves kLatFilterMag raises the guard: LatStepEndKernel).
constexpr float kLatFilterMag = 8192.f, kLatGuardMag = 16384.f, kLatFilterMaxWeight = 1024.f;
constexpr float kLatFilterMaxDrift = 2.f, kLatTrimMag = 7168.f;
struct LatSlack {
  float drift;  // lat_drift after the step
  float slack;  // end < s(dst) - output_beam - slack drops a non-admitted arc
};
// The slack of a step whose new frontier's |score| bound is `mag`, from the lane's counters
// before the step (lat_mag, lat_drift): upward-rounded, so it is non-decreasing in `mag`
// (the lattice trim takes it at mag = kLatFilterMag as a bound of the step's own).
__device__ __forceinline__ LatSlack LatSlackFor(const DeviceGraph& g, const Workspace& ws, const LaneCounters& lc,
                                                float mag) {
  constexpr float u = 5.9604645e-08f;  // 2^-24
  const float h = __fadd_ru(__fadd_ru(__fadd_ru(lc.lat_mag, mag), g.max_abs_weight), 1.f);
  LatSlack s;
  s.drift = __fadd_ru(lc.lat_drift, __fmul_ru(16.f * u, h));
  s.slack = __fadd_ru(__fadd_ru(__fmul_ru(2.f, s.drift), __fadd_ru(0.5f, ws.lat_filter[2])), __fmul_ru(32.f * u, h));
  return s;
}
struct LatFilterStep {
  bool on;           // this step drops arcs (a real step, the filter on, magnitudes in range)
  float slack;       // end < s(dst) - output_beam - slack drops a non-admitted arc
  float mag;         // |score| bound of the new frontier
  float drift;       // lat_drift after the step
};
__device__ __forceinline__ LatFilterStep LatFilterFor(const DeviceGraph& g, const Workspace& ws, const LaneCounters& lc,
                                                      int32_t step_phase) {
  const float mx = OrderedIntToFloat(lc.max_ord);
  LatFilterStep f;
  // The new frontier's scores: [max - beam, max] on a real step; the final token alone on a
  // final or redirect step (its score is the max; their beam is k2's 1e10); none when no arc
  // of the step ended anywhere (max -inf: the new frontier is empty)
  f.mag = mx == -INFINITY ? 0.f : step_phase == kPhaseReal ? fmaxf(fabsf(mx), fabsf(mx - lc.beam)) : fabsf(mx);
  const LatSlack sl = LatSlackFor(g, ws, lc, f.mag);
  f.drift = sl.drift;
  f.slack = sl.slack;
  // (!(x <= limit) also refuses NaN and infinities)
  f.on = ws.lat_filter[0] != 0.f && step_phase == kPhaseReal && f.mag <= kLatFilterMag &&
         g.max_abs_weight <= kLatFilterMaxWeight && f.drift <= kLatFilterMaxDrift;
  return f;
}

// The records' filter on graphs with epsilon arcs (Workspace::lattice == 1, whose records the
// host replays: decoder/lattice_records.py; ws.lat_filter[7] = 1, the host's choice where the
// search's eps_iterations covers the graph's longest epsilon chain). A non-admitted arc of a real
// step is not recorded when end < s(dst) - c, s the search's scores (after the closure), c =
// output_beam + (2 K + 22) u H + pad, K = 29 + 30 L (L = eps_iterations), H = 6 A + output_beam
// + 1, A = 2 m + 4096 with m = max(lat_mag, the new frontier's bound from its max and beam):
// the CPU LatticeBuilder's records filter (reference_lattice.h; RecordsFilterOffset computes the
// same c) with the search's scores in place of the builder's forward. Why that is safe is the
// builder's argument, given what the host replay checks on the rows (RecordedRow::producer_a,
// which gets A through lat_all): every window that tests the step sees magnitudes within A
// and at most L epsilon layers, and the forward equals the search's score on the step's tokens
// (equal floats where the closure is complete: both are the max over the same paths of the same
// left-to-right sums); a row that fails is decoded again without this filter.
struct LatEpsFilter {
  bool on;
  float a;     // the magnitude assumed (the host replay's guard)
  float c;     // end < s(dst) - c drops a non-admitted arc
};
// The offset c for magnitude A (RecordsFilterOffset on the CPU, the same operations in the same
// order): false where the bound's rounding argument does not hold. c grows with A.
__device__ __forceinline__ bool LatEpsOffset(const Workspace& ws, double A, float* c) {
  const double B = static_cast<double>(ws.lat_filter[1]);
  if (!(__dadd_rn(A, B) < 4194304.0)) return false;  // 2^22: the bound's rounding argument needs less
  const double H = __dadd_rn(__dadd_rn(__dmul_rn(6.0, A), B), 1.0);
  const double K = __dadd_rn(29.0, __dmul_rn(30.0, static_cast<double>(ws.eps_iterations)));
  const double x = __dmul_rn(__dmul_rn(__dadd_rn(__dmul_rn(2.0, K), 22.0), 5.9604644775390625e-08), H);
  *c = static_cast<float>(__dadd_rn(__dadd_rn(B, x), static_cast<double>(ws.lat_filter[2])));
  return true;
}
__device__ __forceinline__ LatEpsFilter LatEpsFilterFor(const Workspace& ws, const LaneCounters& lc, int32_t step_phase) {
  LatEpsFilter f{false, 0.f, 0.f};
  // (lattice 1: the host replay checks its guard; lattice 2: the GPU pruning does, gpu_lattice_prune.cu)
  if (ws.lattice == 0 || ws.lat_filter[7] == 0.f || ws.eps_iterations <= 0 || step_phase != kPhaseReal) return f;
  const float mx = OrderedIntToFloat(lc.max_ord);
  const float mag = mx == -INFINITY ? 0.f : fmaxf(fabsf(mx), fabsf(mx - lc.beam));
  const float m = fmaxf(lc.lat_mag, mag);
  if (!isfinite(m)) return f;
  const double A = __dadd_rn(__dmul_rn(2.0, static_cast<double>(m)), 4096.0);
  if (!LatEpsOffset(ws, A, &f.c)) return f;
  f.a = static_cast<float>(A);
  f.on = true;
  return f;
}

// The lattice trim on epsilon graphs (lattice == 2 with the records' filter on epsilon graphs,
// ws.lat_filter[8] = 1: the host's choice, GpuBackend.lattice_eps_trim_on): a real step whose
// expanded frontier lies within kLatTrimMag (lc.lat_mag, LatStepEndKernel's bound of it) trims
// its slots at LatTrimLow's (L - beam) - c_cap, c_cap the filter's offset at A_cap = 2
// kLatFilterMag + 4096. An arc left out ends below that; a destination that survived scores s >
// cutoff = M - beam >= L - beam (the closure admits only above the step's cutoff too), and where
// the step's own offset c is at most c_cap (as where its A is at most A_cap), end < (s - c): not
// admitted, and the filter drops it (the CPU twin: reference_lattice.h RecordingObserver's trim).
// A step whose c exceeds c_cap, or that is not filtered, raises lat_guard (LatStepEndKernel), and
// the host decodes the batch again without the trim (GpuDecoder::LatticeFilterGuard).
// (c_cap: the cap's offset; the trim needs it to exist and to be >= 0, which a negative
// filter_pad, tests only, could break: its trimmed arcs must end below the cutoff)
constexpr double kLatEpsTrimA = 2.0 * static_cast<double>(kLatFilterMag) + 4096.0;
__device__ __forceinline__ bool LatEpsTrimOn(const Workspace& ws, const LaneCounters& lc, float* c_cap) {
  return ws.lattice == 2 && ws.trim != 0 && ws.eps_iterations > 0 && ws.lat_filter[7] != 0.f &&
         ws.lat_filter[8] != 0.f && lc.lat_mag <= kLatTrimMag && LatEpsOffset(ws, kLatEpsTrimA, c_cap) &&
         *c_cap >= 0.f;
}

// The records' prefilter bound of a step (LatPersistKernel): a filtered step's arcs ending
// below it are dropped by the filter whatever their destination; -inf where the prefilter is
// off (an unfiltered step, no lattice trim, or ws.lat_filter[3] == 0). cutoff = max - beam.
__device__ __forceinline__ float LatPreLowFor(const Workspace& ws, const LatFilterStep& f, float cutoff) {
  return f.on && ws.trim != 0 && ws.lat_filter[3] != 0.f ? (cutoff - ws.lat_filter[1]) - f.slack : -INFINITY;
}
// Candidate mode (lattice.cuh LatCandRecords): ExpandKernel writes every walked arc of a
// prefiltered lane-step (pre_low > -inf) that ends at or above pre_low, admitted or not, as a
// candidate; LatPersistKernel first turns them into records, then its walk skips the lane, unless
// some of its candidates did not fit (lat_cand_over: the walk records the lane as before).
// On where the host gave the decode a candidate buffer (ws.lat_cand: lattice == 2, walkers
// whose Expand is ExpandLane::Slot) and ws.lat_filter[4] != 0 (CUWFST_LATTICE_CAND).
__device__ __forceinline__ bool LatCandOn(const Workspace& ws, float pre_low) {
  return ws.lattice == 2 && ws.lat_cand != nullptr && ws.lat_filter[4] != 0.f && pre_low > -INFINITY;
}
__device__ __forceinline__ bool LatCandLane(const Workspace& ws, const LaneCounters& lc, float pre_low) {
  return LatCandOn(ws, pre_low) && lc.lat_cand_over == 0;
}
// A final step's arcs as candidates too (ws.lat_filter[6], CUWFST_LATTICE_CAND_FINAL=off at
// construction turns it off): ExpandKernel writes every final arc it walks (a final step is not
// trimmed and its beam is k2's 1e10, so it walks every slot LatPersistKernel's walk would), and
// their records need no probe: the destination is the final state, which survived iff the lane
// has a final token. Without it each lane's final step made LatPersistKernel walk the whole
// step's slot space (every lane's), about one step in eight of a length-sorted batch of 32.
__device__ __forceinline__ bool LatCandFinalOn(const Workspace& ws) {
  return ws.lattice == 2 && ws.lat_cand != nullptr && ws.lat_filter[4] != 0.f && ws.lat_filter[6] != 0.f;
}

// Whether a real step of the lane trims its slots for the lattice (Workspace::lattice == 2,
// Workspace::trim, the filter on): read by the scan (RowAndTrim) and by LatStepEndKernel
// (the guard) from the same counters, so both see the same answer.
__device__ __forceinline__ bool LatTrimOn(const DeviceGraph& g, const Workspace& ws, const LaneCounters& lc) {
  return ws.lattice == 2 && ws.trim != 0 && ws.lat_filter[0] != 0.f && g.max_abs_weight <= kLatFilterMaxWeight &&
         lc.lat_mag <= kLatTrimMag && LatSlackFor(g, ws, lc, kLatFilterMag).drift <= kLatFilterMaxDrift;
}
// The records' filter's recursion at the end of a lane's step (lattice == 2; lattice.cuh's LatStepEndKernel,
// and lattice_log.cuh's LatLogScalars): the step's LatFilterStep (LatFilterFor), then the step it last
// dropped arcs on, the guard (a step within 32 of a filtered one whose frontier left kLatGuardMag),
// and the lane's lat_mag and lat_drift for the next step. trim_guard: also the lattice trim's guard
// (a real step the scan may have trimmed for the lattice, LatTrimOn, from the counters it read: they
// change only below, left out arcs that only the filter may drop; if the step is not filtered
// after all, its frontier having left kLatFilterMag, the batch is decoded again without it).
__device__ __forceinline__ LatFilterStep LatFilterAdvance(const DeviceGraph& g, const Workspace& ws, LaneCounters& lc,
                                                          int32_t phase, bool trim_guard) {
  // (every read before the first write: the same values, one round of loads)
  const LatFilterStep f = LatFilterFor(g, ws, lc, phase);
  const int32_t step = lc.t - 1;
  const int32_t last = f.on ? step : lc.lat_filter_last;
  const bool guard = (ws.lat_filter[0] != 0.f && step - last <= 32 && !(f.mag <= kLatGuardMag)) ||
                     (trim_guard && phase == kPhaseReal && !f.on && LatTrimOn(g, ws, lc));
  if (f.on) lc.lat_filter_last = step;
  if (guard) lc.lat_guard = 1;
  lc.lat_mag = f.mag;
  lc.lat_drift = f.drift;
  return f;
}

// The lattice trim's low (scan.cuh RowAndTrim; docs/design.md "The lattice trim"): from c =
// L - beam (the search trim's low), the largest float below (c - output_beam) - S, S the
// slack bound at kLatFilterMag. An arc left out ends at e <= that < (c - output_beam) - S;
// its destination, if it survives, scores s > M - beam >= c, so (s - output_beam) - slack >=
// (c - output_beam) - S > e (float subtraction is monotone; the step's slack <= S while the
// step is filtered): the records' filter drops it, and it is not admitted (e < c <= M - beam).
// -inf (nothing trimmed) where the lane's lattice trim is off.
__device__ __forceinline__ float LatTrimLow(const DeviceGraph& g, const Workspace& ws, const LaneCounters& lc,
                                            float c) {
  if (ws.eps_iterations > 0) {  // an epsilon graph's (LatEpsTrimOn)
    float c_cap;
    return LatEpsTrimOn(ws, lc, &c_cap) ? nextafterf(c - c_cap, -INFINITY) : -INFINITY;
  }
  if (!LatTrimOn(g, ws, lc)) return -INFINITY;
  return nextafterf((c - ws.lat_filter[1]) - LatSlackFor(g, ws, lc, kLatFilterMag).slack, -INFINITY);
}

}  // namespace cuwfst
