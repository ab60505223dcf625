// The records after the search's step log (docs/design.md "The records after the search"): what
// lattice_after.cuh's LatLogKernel writes after each step's FinalizeKernel, or, under
// Workspace::lat_log_fold (CUWFST_LATTICE_LOG=finalize), FinalizeKernel<false, false, true> itself
// at its end (LatLogInFinalize), one launch a step fewer. Apart from lattice_after.cuh so that
// finalize.cuh can include it. Under lat_log_fold 2 (CUWFST_LATTICE_LOG=side) FinalizeKernel writes
// the scalars and a copy job, and LatLogSideKernel copies S_t off the step's chain.
#pragma once

#include "cuwfst/common.cuh"

namespace cuwfst {

// The step's scalars and LatStepLog: one thread, once the step's FinalizeKernel has written all it
// writes (next_size, final_winner: read through volatile, since under the fold other CTAs of the
// same launch wrote them). Every counter is read before the first store (the stores may alias the
// counters as far as the compiler knows, so a read after one waits for it): one round of loads,
// then the filter's recursion and the stores. Values as before: nothing else writes them meanwhile.
__device__ __forceinline__ void LatLogScalars(const DeviceGraph& g, const Workspace& ws, int32_t lane, LaneCounters& lc,
                                              int32_t phase) {
  const volatile LaneCounters* v = &lc;
  const int32_t next_size = v->next_size;
  const bool final_alive = v->final_winner != -2;
  const int32_t n = lc.step_size;
  const long long total = lc.frontier_total;
  const int32_t k = lc.t - 1;
  const int32_t cap = lc.tok_cap[lc.buf];
  const float* row32 = lc.lp_row_f32;
  const auto row16 = lc.lp_row_f16;
  const float cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;
  const float lf1 = ws.lat_filter[1], lf3 = ws.lat_filter[3];
  // (no lattice trim: the search is the 1-best's, and the pass reads every arc it needs)
  const LatFilterStep f = LatFilterAdvance(g, ws, lc, phase, false);
  const int64_t at = static_cast<int64_t>(lane) * ws.seg_cap + k;
  ws.lat_cutoff[at] = cutoff;
  ws.lat_size[at] = phase == kPhaseReal ? min(next_size, cap) : (final_alive ? 1 : 0);
  LatStepLog s;
  s.src_off = static_cast<long long>(lane) * ws.lat_log_lane + (total - n);
  s.row32 = phase == kPhaseReal ? row32 : nullptr;
  s.row16 = phase == kPhaseReal ? row16 : nullptr;
  s.tab_off = 0;
  s.src_n = n;
  s.phase = phase;
  s.cutoff = cutoff;
  // (ws.lat_filter[3] == 0, CUWFST_LATTICE_PREFILTER=off: every arc probed)
  s.pre_low = f.on && lf3 != 0.f ? (cutoff - lf1) - f.slack : -INFINITY;
  s.slack = f.slack;
  s.filter_on = f.on ? 1 : 0;
  s.final_alive = final_alive ? 1 : 0;
  s.tab_bits = 0;
  ws.lat_steps[at] = s;
}

// Workspace::lat_log_scan (CUWFST_LATTICE_LOG=scan): the scalars of the lane's last applied step, if
// not yet written, from its counters as that step's FinalizeKernel left them (one thread a lane: at
// the next step's scan before it rewrites them, ScanKernel / ApplyLaneStep, or after the sequence,
// LatLogPendingKernel). Nothing writes those counters between that FinalizeKernel and the next scan's
// apply on the graphs and paths this mode runs on (no refill, no closure, no late hand-out), and every
// CTA of that scan reads them before the lane's step is applied, so the values are LatLogKernel's.
__device__ __forceinline__ void LatLogPending(const DeviceGraph& g, const Workspace& ws, int32_t lane,
                                              LaneCounters& lc) {
  if (!lc.lat_log_pending) return;
  LatLogScalars(g, ws, lane, lc, lc.step_phase);
  lc.lat_log_pending = 0;
}

// LatLogPendingKernel — before a lat_log_scan sequence's records pass; one thread a lane: the
// scalars of each lane's last step (no scan came after it).
__global__ void LatLogPendingKernel(DeviceGraph g, Workspace ws) {
  const int32_t lane = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  if (lane < ws.max_lanes) LatLogPending(g, ws, lane, ws.lanes[lane]);
}

// Share `cta` of `ctas` (blockDim.x threads each) of the copy of n tokens (st, sc) to the log at
// `off`; kAhead: four tokens a thread in flight (LatLogKernel, LatLogSideKernel), else one (in
// FinalizeKernel, whose registers the claims take).
template <bool kAhead>
__device__ __forceinline__ void LatLogCopyTokens(const Workspace& ws, const int32_t* st, const float* sc, long long off,
                                                 int32_t n, int32_t cta, int32_t ctas) {
  // four tokens a thread in flight (the loads before the stores: the log may alias nothing the
  // compiler can see, so it would not reorder them itself)
  const int32_t stride = ctas * static_cast<int32_t>(blockDim.x);
  int32_t i = cta * static_cast<int32_t>(blockDim.x) + static_cast<int32_t>(threadIdx.x);
  for (; kAhead && i + 3 * stride < n; i += 4 * stride) {
    int32_t x[4];
    float y[4];
#pragma unroll
    for (int32_t u = 0; u < 4; ++u) {
      x[u] = st[i + u * stride];
      y[u] = sc[i + u * stride];
    }
#pragma unroll
    for (int32_t u = 0; u < 4; ++u) {
      ws.lat_log_state[off + i + u * stride] = x[u];
      ws.lat_log_score[off + i + u * stride] = y[u];
    }
  }
  for (; i < n; i += stride) {
    ws.lat_log_state[off + i] = st[i];
    ws.lat_log_score[off + i] = sc[i];
  }
}

// The copy of S_t (the lane's step_size tokens of buffer buf ^ 1, the frontier the step expanded)
// into the lane's log region at its frontier_total before the step, as a job (n 0 where the region
// is full).
__device__ __forceinline__ LatLogJob LatLogJobFor(const Workspace& ws, int32_t lane, const LaneCounters& lc) {
  const int32_t n = lc.step_size;
  const long long total = lc.frontier_total;
  const int32_t src = lc.buf ^ 1;
  LatLogJob j;
  j.dst = static_cast<long long>(lane) * ws.lat_log_lane + (total - n);
  j.src = lc.tok_off[src];
  j.buf = src;
  j.n = total > ws.lat_log_lane ? 0 : n;
  return j;
}

// Share `cta` of `ctas` of the copy of S_t into the lane's log region (nothing where it is full).
template <bool kAhead>
__device__ __forceinline__ void LatLogCopy(const Workspace& ws, int32_t lane, const LaneCounters& lc, int32_t cta,
                                           int32_t ctas) {
  const LatLogJob j = LatLogJobFor(ws, lane, lc);
  if (j.n <= 0) return;
  LatLogCopyTokens<kAhead>(ws, ws.tok_state[j.buf] + j.src, ws.tok_score[j.buf] + j.src, j.dst, j.n, cta, ctas);
}

// FinalizeKernel's end under Workspace::lat_log_fold (finalize.cuh, every CTA of a lane whose step
// is not idle, after its claims): the CTA's share of the copy, then the lane's last CTA to arrive
// (lat_log_arrive[lane], back to 0 for the next step) writes the scalars, after every CTA's writes
// of the step (the counts of next_size, final_winner) are visible. What it writes is what
// LatLogKernel would write after the launch.
__device__ inline void LatLogInFinalize(const DeviceGraph& g, const Workspace& ws, int32_t lane, LaneCounters& lc) {
  const int32_t phase = lc.step_phase;
  if (phase == kPhaseIdle) return;  // (uniform in the lane; the side copy's job stays empty)
  const bool side = ws.lat_log_fold == 2;
  if (!side) LatLogCopy<false>(ws, lane, lc, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(gridDim.x));
  __syncthreads();  // the CTA's writes (its claims' and its copy's) are issued
  if (threadIdx.x == 0) {
    __threadfence();  // ... and visible before the count says so
    if (atomicAdd(&ws.lat_log_arrive[lane], 1) == static_cast<int32_t>(gridDim.x) - 1) {
      __threadfence();  // the other CTAs' writes are read after their counts
      ws.lat_log_arrive[lane] = 0;
      LatLogScalars(g, ws, lane, lc, phase);
      if (side) ws.lat_log_job[lane] = LatLogJobFor(ws, lane, lc);  // (LatLogSideKernel's, after this launch)
    }
  }
}

// LatLogSideKernel — under Workspace::lat_log_fold 2, after each step's FinalizeKernel on a side
// stream (forked after it, joined before the next step's FinalizeKernel, which is the first launch
// to write into S_t's buffer); grid max_lanes x 1,024 threads: the lane's job (written by that
// FinalizeKernel, or empty: an idle step writes none), then the job emptied once every thread has
// read it, so that a step that writes no job copies nothing. Nothing it reads is written on the
// main stream before the join: the job and S_t's tokens; the log is read after the sequence.
__global__ void __launch_bounds__(1024) LatLogSideKernel(Workspace ws) {
  const int32_t lane = blockIdx.x;
  const LatLogJob j = ws.lat_log_job[lane];
  __syncthreads();  // every thread has read the job
  if (threadIdx.x == 0 && j.n != 0) ws.lat_log_job[lane].n = 0;
  if (j.n <= 0) return;
  LatLogCopyTokens<true>(ws, ws.tok_state[j.buf] + j.src, ws.tok_score[j.buf] + j.src, j.dst, j.n, 0, 1);
}

}  // namespace cuwfst
