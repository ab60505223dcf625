// K3 FinalizeKernel, BacktrackKernel and HashSanitizeKernel.
#pragma once

#include <cub/block/block_scan.cuh>

#include "cuwfst/common.cuh"
#include "cuwfst/lattice_log.cuh"  // LatLogInFinalize (kLog)
#include "cuwfst/scan.cuh"  // InitLane, RefillLaneNow

namespace cuwfst {

constexpr int kFinalizeThreads = 256;
constexpr int kFinalizeItems = 4;
// CTAs per lane of FinalizeKernel, EpsResolveKernel, EpsListResolveKernel, ClearClaimsKernel
// (the grid's x; DecoderConfig::finalize_split): 8 in the old kernels, more in the new ones so
// that a lane with many claims is walked by more CTAs (the kernels read gridDim.x).
constexpr int kFinalizeSplit = 8;

// FinalizeKernel — per step t, grid (finalize_split, max_lanes) x kFinalizeThreads: the
// CTAs of a lane share its claims list in contiguous chunks, kFinalizeItems claims per
// thread per round.
// Reads: the claims and their resolved hash payloads {end : slot}, the current frontier
// (buffer lc.buf ^ 1), tok_begin and arc_offsets (a binary search turns a slot back into its
// token and arc). Writes: the next frontier (buffer lc.buf; each round reserves its
// positions with one atomicAdd on next_size, so the order is claim order per CTA), one
// winners-log entry {prev winner, arc} per survivor (one arena atomicAdd per round), and
// clears exactly the claimed hash slots. On the final step it records the lane's result.
// With epsilon closure after a real step the claimed slots stay: each holds its token's
// score as the closure's baseline and its frontier index in hash_pos (epsilon.cuh), and
// ClearClaimsKernel clears them after the last pass. A lattice decode keeps them too: the
// lattice walk asks the hash which destinations survived (lattice.cuh), and
// LatStepEndKernel clears them.
// Survivors are the claims whose end passes the exact cutoff (max_ord - beam, exact here:
// MaxKernel or FusedExpandKernel has finished). After ExpandKernel every claim passes it (the
// test is the invariant); after FusedExpandKernel the claims are a superset (admitted against
// a lower bound of the max) and this test is what drops the extra ones: a claim that fails
// is not in the frontier, gets no winners entry, and where the claims are kept (epsilon mode,
// lattice decodes) leaves its slot at the empty-token baseline {-inf : 0xFFFFFFFF} with
// hash_pos -1 (written here, not assumed from the last clear), which the closure treats as a
// state not in the frontier (as a token past main_q) and the lattice walk as a destination
// that did not survive; ClearClaims / LatStepEnd clear it.
// The refill in Finalize (ws.refill == kRefillInFinalize, a continuous-batching segment): the
// CTAs of a lane whose row took its final step count themselves out on refill_arrive[lane],
// and the last one refills the lane (scan.cuh RefillLaneNow) once all of the lane's writes of
// the step are done, in place of a RefillKernel launch after every step.
// A round's exclusive sum in claim order over values held striped (thread x's item k is the
// round's claim k * kFinalizeThreads + x): to the blocked arrangement (thread x's kFinalizeItems
// consecutive claims) through s_x, the block scan, and back, so the sums are those of the
// blocked rounds before (the same positions, the same frontier order). Every thread must call
// it; s_x is free again after the caller's next barrier.
template <typename BlockScan>
__device__ __forceinline__ void StripedRoundSum(typename BlockScan::TempStorage& scan, int32_t* s_x,
                                                const int32_t (&v)[kFinalizeItems], int32_t (&out)[kFinalizeItems],
                                                int32_t& total) {
  static_assert(kFinalizeItems == 4, "one int4 a thread");
#pragma unroll
  for (int k = 0; k < kFinalizeItems; ++k) s_x[k * kFinalizeThreads + threadIdx.x] = v[k];
  __syncthreads();
  const int4 b = reinterpret_cast<const int4*>(s_x)[threadIdx.x];
  int32_t in[kFinalizeItems] = {b.x, b.y, b.z, b.w};
  int32_t ex[kFinalizeItems];
  BlockScan(scan).ExclusiveSum(in, ex, total);
  __syncthreads();  // (every thread read its blocked values)
  reinterpret_cast<int4*>(s_x)[threadIdx.x] = make_int4(ex[0], ex[1], ex[2], ex[3]);
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kFinalizeItems; ++k) out[k] = s_x[k * kFinalizeThreads + threadIdx.x];
}

// A step put back after its expansion (Workspace::pool_late: PooledLateHandOut or FinalizeLate):
// the lane's CTAs clear the slots its claims took, as FinalizeClaims' targeted delete does, and nothing else
// (no frontier, no winners entry). Where the claims overflowed their list some keys are in no
// claim: the CTAs wipe the whole table between them instead (WipeOverflowedTable does it again
// at the next scan; both leave it empty).
// claim_range: this CTA's share of the claims list (SplitRange over min(claims, claim_cap), per
// thread), as the caller has it.
// overflowed: the lane's claims overflowed their list (claims > claim_cap).
__device__ __forceinline__ void LateUndoClaims(const Workspace& ws, const LaneCounters& lc, int2 claim_range,
                                               bool overflowed) {
  uint32_t* keys = ws.hash_key + lc.hash_off;
  unsigned long long* payload = ws.hash_payload + lc.hash_off;
  if (overflowed) {
    const int2 r = SplitRange(ws, lc.hash_cap);
    for (int32_t i = r.x + static_cast<int32_t>(threadIdx.x); i < r.y; i += blockDim.x) {
      keys[i] = kEmptyKey;
      payload[i] = 0ull;
    }
    return;
  }
  const int2* claims = ws.claims + lc.claim_off;
  for (int32_t i = claim_range.x + static_cast<int32_t>(threadIdx.x); i < claim_range.y; i += blockDim.x) {
    const int32_t h = claims[i].y;
    if (h >= 0) {
      keys[h] = kEmptyKey;
      payload[h] = 0ull;
    }
  }
}

// What a CTA of FinalizeLate does besides its claims (FinalizeClaims<true>): the grid's first
// CTA reports the step's ask, a lane's first CTA publishes its region or marks the undo.
struct LateRole {
  bool reporter, first, overflowed;
};

// The prefix of the lanes' token asks under Workspace::pool_late 3 (FinalizeLate), by warp 0:
// this lane's offset and ask, and the total, into shared memory for the CTA after its next
// barrier. phase / claims / cap: lane threadIdx.x's (idle past the lanes), read earlier.
__device__ __forceinline__ void LatePrefix(const Workspace& ws, int32_t lane, int32_t phase, int32_t claims,
                                           int32_t cap, long long* s_off, int32_t* s_tokens, long long* s_total) {
  const int32_t tokens = PooledLateTokens(ws, phase, claims, cap);
  int64_t total;
  const int64_t off = WarpExclusiveScan(tokens, &total);
  if (static_cast<int32_t>(threadIdx.x) == lane) {
    *s_off = off;
    *s_tokens = tokens;
  }
  if (threadIdx.x == 0) *s_total = total;
}

// A stepping lane's CTA once the prefix is known (FinalizeLate, FinalizeClaims<true>): the
// grid's first CTA reports the ask; a step that does not fit is undone (the CTA's share of the
// claims cleared, its first CTA marking late_undo 2) and fits false; otherwise the lane's
// region, which its first CTA publishes for the next step's scan. (Returned by value: out
// parameters took FinalizeKernel<true> an 8-byte spill.)
struct LateRegion {
  bool fits;
  int32_t next_cap;
  int64_t qd;
};
__device__ __forceinline__ LateRegion LateSettle(const Workspace& ws, LaneCounters& lc, int2 range, LateRole role,
                                                 long long total, long long off, int32_t tokens) {
  if (role.reporter) PooledLateReport(ws, total);
  if (total > ws.pool_cap[kPoolTokens]) {
    LateUndoClaims(ws, lc, range, role.overflowed);
    if (role.first && threadIdx.x == 0) lc.late_undo = 2;
    return LateRegion{false, 0, 0};
  }
  const int32_t next_cap = tokens - 1 < ws.main_q ? tokens - 1 : ws.main_q;
  if (role.first && threadIdx.x == 0) {  // (no CTA of this kernel reads them)
    lc.tok_off[lc.buf] = off;
    lc.tok_cap[lc.buf] = next_cap;
  }
  return LateRegion{true, next_cap, off};
}

// This CTA's share of a stepping lane's claims list: SplitRange over min(claims, claim_cap), per
// thread (the auto grid gives a CTA at least kFinalizeThreads claims, not a whole round:
// striped, a CTA of 256 claims has every thread on one).
__device__ __forceinline__ int2 FinalizeRange(const Workspace& ws, const LaneCounters& lc) {
  return SplitRange(ws, min(lc.claims, lc.claim_cap), true);
}

// range: this CTA's share of the claims (FinalizeRange; the caller has it, so a CTA divides once).
// qd, next_cap: the next frontier's region (lc.tok_off[lc.buf], lc.tok_cap[lc.buf]).
// kLate (Workspace::pool_late 3 with at most 32 lanes, from FinalizeLate; role: its roles): the
// region is not known yet (qd, next_cap unread). Warp 0 issues its loads of every lane's
// counters with the first round's claim loads and scans them (LatePrefix) before the round's
// block scan, whose barriers publish the result; the first side effect (thread 0's atomics)
// comes after it, so a step that does not fit returns there having written nothing but the
// undo (LateUndoClaims, late_undo 2), as FinalizeLate's own path does; the same offsets.
template <bool kLate = false>
__device__ __forceinline__ void FinalizeClaims(const DeviceGraph& g, const Workspace& ws, int32_t lane,
                                               LaneCounters& lc, int32_t phase, int2 range, int64_t qd,
                                               int32_t next_cap, LateRole role = LateRole{false, false, false}) {
  using BlockScan = cub::BlockScan<int32_t, kFinalizeThreads>;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ int32_t round_base, list_base;
  __shared__ long long arena_base;
  __shared__ __align__(16) int32_t s_x[kFinalizeThreads * kFinalizeItems];  // StripedRoundSum
  const int32_t c_begin = range.x, c_end = range.y;
  if (c_begin >= c_end) return;
  const int32_t n = lc.frontier_size;
  const long long arena_limit = *ws.arena_limit;
  const float step_max = OrderedIntToFloat(lc.max_ord);
  const float cutoff = step_max - lc.beam;
  const int32_t next_t = lc.t;  // (ScanKernel advanced it: the step the new frontier feeds)
  const int32_t src = lc.buf ^ 1, dst = lc.buf;  // Scan flipped buf to the buffer it builds
  const int64_t qs = lc.tok_off[src];
  const int32_t* offsets = ws.arc_offsets + qs;
  const int32_t* hint = ws.tok_hint + HintBase(ws, lc, lane, src);
  const int32_t hint_word = lc.hint_ok;  // the shift the step's scan wrote the hints with, or 0
  const bool hint_ok = hint_word != 0;
  const int32_t hshift = hint_ok ? hint_word : kHintShift;
  const int32_t* begin = ws.tok_begin + qs;
  const int32_t* cur_winner = ws.tok_winner[src] + qs;
  int32_t* nxt_state = ws.tok_state[dst] + qd;  // (kLate: set once the first round knows qd)
  float* nxt_score = ws.tok_score[dst] + qd;
  int32_t* nxt_winner = ws.tok_winner[dst] + qd;
  uint32_t* keys = ws.hash_key + lc.hash_off;
  unsigned long long* payload = ws.hash_payload + lc.hash_off;
  const int2* claims = ws.claims + lc.claim_off;
  const bool keep_claims = (ws.eps_iterations > 0 || ws.lattice) && phase == kPhaseReal;
  int32_t* hash_pos = keep_claims ? ws.hash_pos + lc.hash_off : nullptr;
  // closure = lists: the kept tokens whose epsilon arcs can pass the cutoff form pass 0's list
  // (frontier indices of the frontier being built, so in its region, as the closure reads it)
  const bool list_eps = keep_claims && ws.closure_lists;
  int32_t* eps_list = list_eps ? ws.eps_tok + qd : nullptr;
  constexpr int kPerRound = kFinalizeThreads * kFinalizeItems;
  __shared__ long long s_late_off, s_late_total;
  __shared__ int32_t s_late_tokens;
  int32_t l_phase = kPhaseIdle, l_claims = 0, l_cap = 0;  // (kLate: lane threadIdx.x's, warp 0)
  if (kLate && threadIdx.x < 32 && static_cast<int32_t>(threadIdx.x) < ws.max_lanes) {
    volatile LaneCounters* v = &ws.lanes[threadIdx.x];
    l_phase = v->phase;
    l_claims = v->claims;
    l_cap = v->claim_cap;
  }
  for (int32_t base = c_begin; base < c_end; base += kPerRound) {
    // striped: this thread's item k is claim base + k * kFinalizeThreads + thread, so a round of
    // up to 256 claims gives each thread one claim and its dependent reads (the payload, then
    // the slot's token and arc) run in every warp at once; the positions come from the blocked
    // scan (StripedRoundSum), as before
    const int32_t first = base + threadIdx.x;
    int32_t keep[kFinalizeItems], state[kFinalizeItems], slot[kFinalizeItems], hslot[kFinalizeItems];
    float end[kFinalizeItems], eps_w[kFinalizeItems];
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      const int32_t i = first + k * kFinalizeThreads;
      keep[k] = 0;
      hslot[k] = -1;
      eps_w[k] = -INFINITY;
      if (i < c_end) {
        const int2 c = claims[i];
        const unsigned long long p = payload[c.y];
        if (list_eps) eps_w[k] = g.eps_maxw[c.x];
        end[k] = OrderedU32ToFloat(static_cast<uint32_t>(p >> 32));
        slot[k] = static_cast<int32_t>(p & 0xFFFFFFFFull);
        state[k] = c.x;
        hslot[k] = c.y;
        keep[k] = p != 0ull && end[k] > cutoff;
      }
    }
    int32_t pos[kFinalizeItems], round_kept;
    if (kLate && base == c_begin && threadIdx.x < 32)
      LatePrefix(ws, lane, l_phase, l_claims, l_cap, &s_late_off, &s_late_tokens, &s_late_total);
    StripedRoundSum<BlockScan>(scan, s_x, keep, pos, round_kept);
    if (kLate && base == c_begin) {  // (uniform in the CTA: shared values after the round's barriers)
      const LateRegion r = LateSettle(ws, lc, range, role, s_late_total, s_late_off, s_late_tokens);
      if (!r.fits) return;
      qd = r.qd;
      next_cap = r.next_cap;
      nxt_state = ws.tok_state[dst] + qd;
      nxt_score = ws.tok_score[dst] + qd;
      nxt_winner = ws.tok_winner[dst] + qd;
      if (list_eps) eps_list = ws.eps_tok + qd;
    }
    if (threadIdx.x == 0) {
      round_base = atomicAdd(&lc.next_size, round_kept);
      arena_base = static_cast<long long>(atomicAdd(ws.arena_cursor, static_cast<unsigned long long>(round_kept)));
    }
    __syncthreads();
    if (list_eps) {
      // Exact: a token's epsilon arcs end at score + w <= score + eps_maxw (fp32 addition is
      // monotone), so a token with score + eps_maxw <= cutoff relaxes nothing in pass 0.
      int32_t listed[kFinalizeItems], lpos[kFinalizeItems], round_listed;
#pragma unroll
      for (int k = 0; k < kFinalizeItems; ++k)
        listed[k] = keep[k] && round_base + pos[k] < next_cap && end[k] + eps_w[k] > cutoff;
      StripedRoundSum<BlockScan>(scan, s_x, listed, lpos, round_listed);
      if (threadIdx.x == 0) list_base = atomicAdd(&lc.eps_list_n[0], round_listed);
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kFinalizeItems; ++k)
        if (listed[k]) eps_list[list_base + lpos[k]] = round_base + pos[k];
    }
#pragma unroll
    for (int k = 0; k < kFinalizeItems; ++k) {
      if (keep[k]) {
        const int32_t idx = round_base + pos[k];
        // the slot's token and arc: from the payload's low word itself under payload_tok
        // (expand.cuh PayloadLow), else by the search over the offsets
        int32_t tok, arc;
        if (ws.payload_tok) {
          const uint32_t low = static_cast<uint32_t>(slot[k]);
          tok = static_cast<int32_t>(low >> ws.payload_tok);
          arc = begin[tok] + static_cast<int32_t>(low & ((1u << ws.payload_tok) - 1u));
        } else {
          tok = TokenOfSlot(offsets, hint, hint_ok, n, slot[k], hshift);
          arc = begin[tok] + (slot[k] - offsets[tok]);
        }
        const long long wi = arena_base + pos[k];
        int32_t winner = -1;
        if (wi < arena_limit) {
          winner = static_cast<int32_t>(wi);
          ws.arena[wi] = {cur_winner[tok], phase == kPhaseRedirect ? (arc | kRedirectArcBit) : arc};
        } else {
          atomicOr(&lc.overflow, kOverflowArena);
        }
        if (idx < next_cap) {
          nxt_state[idx] = state[k];
          nxt_score[idx] = end[k];
          nxt_winner[idx] = winner;
          // the next step's trim anchor: a token scoring the step's exact max (types.cuh best_key)
          if (phase == kPhaseReal && end[k] == step_max) atomicMax(&lc.best_key, BestKeyOf(next_t, idx));
        } else {
          atomicOr(&lc.overflow, kOverflowKept);
        }
        if (keep_claims) {
          hash_pos[hslot[k]] = idx < next_cap ? idx : -1;
          // (lat_keys_only: no closure reads the baseline, and LatStepEndKernel clears only the key)
          payload[hslot[k]] = ws.lat_keys_only ? 0ull : EpsBaseline(idx < next_cap ? end[k] : -INFINITY);
        }
        if (phase != kPhaseReal) {  // the final state: at most one claim
          lc.final_winner = winner;
          lc.final_score = end[k];
          lc.reached_final = phase == kPhaseFinal;
          lc.redirected = phase == kPhaseRedirect;
        }
      }
      if (keep_claims) {
        if (hslot[k] >= 0 && !keep[k]) {  // not in the frontier (fused_max's extra claims)
          payload[hslot[k]] = ws.lat_keys_only ? 0ull : EpsBaseline(-INFINITY);
          hash_pos[hslot[k]] = -1;
        }
      } else if (hslot[k] >= 0) {  // k2's targeted delete: only the slots this step claimed
        keys[hslot[k]] = kEmptyKey;
        payload[hslot[k]] = 0ull;
      }
    }
    __syncthreads();  // round_base/arena_base are rewritten by the next round
  }
}

// The pool_late 2 and 3 path of FinalizeKernel<true> (types.cuh Workspace::pool_late): the CTAs that
// need it compute every lane's token ask from its claims, PooledTokenRegion(min(claims,
// claim_cap)) for a lane that steps, and the exclusive prefix over the lanes (one warp, the
// lanes' counters read from L2: Expand has finished, so every CTA computes the same numbers);
// the grid's first CTA reports the total and the pause; a lane's first CTA publishes its region
// for the next step's scan. A step that does not fit the token pool writes nothing: the lane's
// CTAs clear its claims' slots (or, where its claims overflowed the list, wipe its table between
// them), and its first CTA marks it late_undo 2 for the host.
// kAhead (pool_late 3, FinalizeKernel<true, true>; its own instance: the overlap takes registers
// the pool_late 2 kernel does not): with at most 32 lanes a CTA with claims computes the prefix
// inside FinalizeClaims<true>, beside its first round's loads.
template <bool kAhead>
__device__ __forceinline__ void FinalizeLate(const DeviceGraph& g, const Workspace& ws, int32_t lane, LaneCounters& lc,
                                             int32_t phase) {
  __shared__ long long s_off, s_total;
  __shared__ int32_t s_tokens;
  const bool stepping = phase != kPhaseIdle;
  const int2 range = stepping ? FinalizeRange(ws, lc) : make_int2(0, 0);
  const bool work = range.x < range.y;
  const bool overflowed = stepping && lc.claims > lc.claim_cap;
  const bool first = blockIdx.x == 0;
  const bool reporter = first && blockIdx.y == 0;
  if (!(work || overflowed || reporter || (first && stepping))) return;  // (uniform in the CTA)
  if (kAhead && work && ws.max_lanes <= 32) {  // the prefix beside the first round's loads
    FinalizeClaims<true>(g, ws, lane, lc, phase, range, 0, 0, LateRole{reporter, first, overflowed});
    return;
  }
  if (threadIdx.x < 32) {
    int64_t carry = 0;
    for (int32_t base = 0; base < ws.max_lanes; base += 32) {
      const int32_t l = base + static_cast<int32_t>(threadIdx.x);
      volatile LaneCounters* v = l < ws.max_lanes ? &ws.lanes[l] : nullptr;
      const int32_t tokens = v ? PooledLateAsk(ws, v, v->phase) : 0;
      int64_t total;
      const int64_t off = carry + WarpExclusiveScan(tokens, &total);
      if (l == lane) {
        s_off = off;
        s_tokens = tokens;
      }
      carry += total;
    }
    if (threadIdx.x == 0) s_total = carry;
  }
  __syncthreads();
  if (!stepping) {
    if (reporter) PooledLateReport(ws, s_total);
    return;
  }
  const LateRegion r = LateSettle(ws, lc, range, LateRole{reporter, first, overflowed}, s_total, s_off, s_tokens);
  if (r.fits && work) FinalizeClaims(g, ws, lane, lc, phase, range, r.qd, r.next_cap);
}

// kLog: the records after the search's step log at the end (LatLogInFinalize; lat_after decodes
// under Workspace::lat_log_fold, which never take the kLate path: a lattice decode is not pool_late)
template <bool kLate, bool kAhead = false, bool kLog = false>
__global__ void __launch_bounds__(kFinalizeThreads)
FinalizeKernel(DeviceGraph g, Workspace ws, StepParams p) {
  static_assert(!(kLate && kLog), "the log's fold is not on the late path");
  StepKernelEntry();
  const int32_t lane = blockIdx.y;
  LaneCounters& lc = ws.lanes[lane];
  const int32_t phase = lc.phase;
  if (kLate) {  // (Workspace::pool_late 2, 3: pooled offline batches, no refill, no closure, no lattice)
    FinalizeLate<kAhead>(g, ws, lane, lc, phase);
    return;
  }
  if (phase == kPhaseIdle) {
    if (ws.pool_late == 1 && lc.late_undo == 1)
      LateUndoClaims(ws, lc, FinalizeRange(ws, lc), lc.claims > lc.claim_cap);
    return;
  }
  // (uniform in the CTA: every thread returns here)
  FinalizeClaims(g, ws, lane, lc, phase, FinalizeRange(ws, lc), lc.tok_off[lc.buf], lc.tok_cap[lc.buf]);
  if constexpr (kLog) LatLogInFinalize(g, ws, lane, lc);  // (every CTA of the lane: it counts them)
  if (ws.refill != kRefillInFinalize || !(phase == kPhaseFinal || phase == kPhaseRedirect)) return;
  __syncthreads();  // the CTA's writes are issued
  if (threadIdx.x == 0) {
    __threadfence();  // ... and visible before the count says so
    if (atomicAdd(&ws.refill_arrive[lane], 1) == static_cast<int32_t>(gridDim.x) - 1) {
      __threadfence();  // the other CTAs' writes are read after their counts
      ws.refill_arrive[lane] = 0;
      RefillLaneNow(g, ws, p, lane, lc, phase);
    }
  }
}

// BacktrackKernel — once per decode, one thread per lane. Walks the winners chain from
// the final token and writes the path's arcs in order into out_path[lane]; a path longer
// than path_cap keeps its newest path_cap arcs and is flagged kOverflowPath. out_path_len
// is the TRUE length. The walk ends: a chain goes back one step at every emitting entry and
// along acyclic epsilon arcs in between (closure = chain links an entry to its predecessor's
// final winner, which can have a higher index, so the indices need not decrease).
// The walk of one path: its true length into *len, its newest path_cap arcs into out (in
// order), kOverflowPath into *overflow past path_cap. One pass over the chain (each entry
// read once: the log may lie in host memory, where every read is a trip over the bus): the
// newest arcs go into out newest first, then out's first `kept` are reversed in place.
__device__ __forceinline__ void WalkPath(const Workspace& ws, int32_t final_winner, int32_t* out, int32_t* len_out,
                                         int32_t* overflow) {
  int32_t len = 0;
  for (int32_t w = final_winner; w >= 0; ++len) {
    const WinnerEntry e = ws.arena[w];
    if (len < ws.path_cap) out[len] = e.arc;
    w = e.prev;
  }
  *len_out = len;
  if (len > ws.path_cap) *overflow |= kOverflowPath;
  const int32_t kept = min(len, ws.path_cap);
  for (int32_t i = 0, j = kept - 1; i < j; ++i, --j) {
    const int32_t a = out[i];
    out[i] = out[j];
    out[j] = a;
  }
}

__global__ void BacktrackKernel(Workspace ws) {
  int32_t lane = blockIdx.x * blockDim.x + threadIdx.x;
  if (lane >= ws.max_lanes) return;
  LaneCounters& lc = ws.lanes[lane];
  WalkPath(ws, lc.final_winner, ws.out_path + static_cast<int64_t>(lane) * ws.path_cap, &ws.out_path_len[lane],
           &lc.overflow);
}

// RefillBacktrackKernel — at the end of a SeqKind::kSegmentRefill sequence, one thread per
// done record of RefillKernel: the record's path into refill_path[r], as BacktrackKernel.
__global__ void RefillBacktrackKernel(Workspace ws) {
  const int32_t r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= min(ws.refill_ctl[kRefillDone], ws.refill_ctl[kRefillDoneCap])) return;
  RefillDone& d = ws.refill_done[r];
  WalkPath(ws, d.final_winner, ws.refill_path + static_cast<int64_t>(r) * ws.path_cap, &ws.refill_path_len[r],
           &d.overflow);
}

// HashSanitizeKernel — once per decode, grid (blocks, max_lanes). A lane whose claims
// list overflowed (or whose step was dropped) may hold CAS-claimed slots the targeted
// clear never saw: wipe its table (its last step's, pooled) so the next decode starts
// clean. all_slots > 0: the host's recovery after a sequence that failed half-way — every
// slot of the hash pool, [0, all_slots), is wiped, whatever the layout.
__global__ void HashSanitizeKernel(Workspace ws, int64_t all_slots) {
  const int32_t lane = blockIdx.y;
  int64_t base = 0, n = all_slots, i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (all_slots > 0) {  // the whole pool over the whole grid
    i += static_cast<int64_t>(lane) * stride;
    stride *= gridDim.y;
  } else {
    const LaneCounters& lc = ws.lanes[lane];
    if (!(lc.overflow & (kOverflowClaims | kOverflowHash))) return;
    base = lc.hash_off;
    n = lc.hash_cap;
  }
  for (; i < n; i += stride) {
    ws.hash_key[base + i] = kEmptyKey;
    ws.hash_payload[base + i] = 0ull;
    if (ws.hash_pos) ws.hash_pos[base + i] = -1;
  }
}

}  // namespace cuwfst
