// Lattice records: a stage of the step pipeline that runs only in a lattice decode
// (Workspace::lattice = 1). After a step's FinalizeKernel (and its epsilon closure) every
// arc of the step whose destination is in the new frontier is recorded, admitted by the
// beam or not (k2's rule, docs/k2-lattice-facts.md fact 1), as {source state, arc,
// acoustic, lane}; with each step's cutoff and frontier size, those records are all the
// host needs to build the CPU decoder's lattice exactly: the CPU reference replays the
// search on them and its LatticeBuilder prunes (reference_lattice.h, LatticeFromRecords;
// docs/design.md "Lattices on the GPU"). Epsilon arcs are not recorded: the replay runs the
// closure itself, in the CPU's order.
//
// What the stage needs from the rest of the pipeline:
//  * FinalizeKernel keeps a real step's claimed hash slots (as for the epsilon closure):
//    a slot's hash_pos is its state's index in the new frontier, -1 when the state did not
//    survive; the closure keeps it so for the states it adds. The walk asks the hash, so
//    "the destination survived" is one probe;
//  * the step's slot space (tok_begin, arc_offsets, tok_hint, lane_arc_offsets) is intact
//    after the closure: in a lattice decode the closure's kernels get a Workspace whose
//    slot-space arrays are a second set (GpuDecoder::EnqueueClosure; closure = lists writes
//    only tok_begin, so only that one is swapped), and the step's own phase, frontier size
//    and hint flag are in LaneCounters::step_* (ScanKernel and ScanSplitKernel both set
//    them).
// Every kernel variant (docs/design.md "Kernel variants") records the same arcs: the
// variants leave the same frontier, hash (keys, hash_pos) and slot space behind, and the
// walk and the hash probe do not depend on which kernels built them.
// Both lane layouts (types.cuh, Workspace::pooled): every array is reached through the
// lane's regions (tok_off[b]/tok_cap[b], hash_off/hash_cap, claim_off/claim_cap, HintBase),
// never lane * main_q; the pooled layout's regions of a step stay put from its hand-out
// (MaxKernel's last block, or ScanKernel's under fused_max) until the next step's, so the walk
// after Finalize reads the step's own. A pooled
// step that paused the batch (PooledUndoStep) has step_phase idle and no slots: neither
// kernel records or writes anything for it, and the resumed sequence takes the step again.
// hash_pos on an epsilon-free graph is one max_lanes x hash_cap array (EnsureLattice), the
// hash pool's most, so pooled table offsets index it as they index the keys.
#pragma once

#include "cuwfst/expand.cuh"
#include "cuwfst/finalize.cuh"

namespace cuwfst {

// Whether `dest` is in the lane's new frontier: its slot is claimed and has a frontier
// index. The hash is read-only during the walk (the step's writers have finished). The
// probe sequence is FindOrClaim's: home slot HashSlot(dest, size), then linear. size 0: the
// lane has no table this step (a pooled lane refused its regions; the pause prevents it).
// NewFrontierPos: its index in the new frontier, -1 when it is not there.
__device__ __forceinline__ int32_t NewFrontierPos(const uint32_t* keys, const int32_t* hash_pos, int32_t size,
                                                  uint32_t dest) {
  if (size == 0) return -1;
  const uint32_t mask = static_cast<uint32_t>(size - 1);
  uint32_t h = HashSlot(dest, size);
  for (int probe = 0; probe < kMaxProbes; ++probe) {
    const uint32_t k = keys[h];
    if (k == dest) return hash_pos[h] >= 0 ? hash_pos[h] : -1;
    if (k == kEmptyKey) return -1;
    h = (h + 1) & mask;
  }
  return -1;
}
__device__ __forceinline__ bool InNewFrontier(const uint32_t* keys, const int32_t* hash_pos, int32_t size,
                                              uint32_t dest) {
  return NewFrontierPos(keys, hash_pos, size, dest) >= 0;
}

// LatPersistKernel — per step of a lattice decode, after FinalizeKernel and the epsilon
// closure; grid = the walkers' (ExpandBlocksFor) x kWalkThreads, over the step's own slot
// space (Walk<kStep = true>: every slot the step's Max/Expand visited).
// Reads: the expanded frontier's states (buffer lc.buf ^ 1), the graph's destinations, the
// lane's hash (keys, hash_pos) on a real step, final_winner on the final step (every arc of
// a final or redirect step enters the final state, which survived iff the lane has a final
// token), the log-prob row. Writes: one LatRecord per surviving slot at a cursor shared by
// all lanes (one atomicAdd per warp and lane: the threads recording for the same lane share
// it), lat_count[lane][t] += the warp's records; past lat_cap only the cursor and the counts
// move (the host grows the records and decodes again: decode is idempotent).
template <int kWalker>
__global__ void __launch_bounds__(kWalkThreads)
LatPersistKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  if (ws.lane_arc_offsets[ws.max_lanes] == 0) return;
  int32_t cur_lane = -1;
  int32_t table = 0;  // the lane's hash size this step (its region)
  const int32_t* state = nullptr;
  const uint32_t* keys = nullptr;
  const int32_t* hash_pos = nullptr;
  int32_t* count = nullptr;
  bool final_alive = false;
  float cutoff = 0.f;
  int32_t step_t = 0;
  Walk<kWalker, true>(ws, [&](const LaneView& lv, int32_t tok, int32_t local) {
    if (lv.lane != cur_lane) {
      cur_lane = lv.lane;
      const LaneCounters& lc = ws.lanes[cur_lane];
      state = ws.tok_state[lc.buf ^ 1] + lc.tok_off[lc.buf ^ 1];  // the frontier the step expanded
      keys = ws.hash_key + lc.hash_off;
      hash_pos = ws.hash_pos + lc.hash_off;
      table = lc.hash_cap;
      count = ws.lat_count + static_cast<int64_t>(cur_lane) * ws.seg_cap + (lc.t - 1);
      final_alive = lc.final_winner != -2;
      cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;  // LatStepEndKernel's lat_cutoff
      step_t = lc.t - 1;
    }
    const int32_t arc = lv.begin[tok] + (local - lv.offsets[tok]);
    const int32_t dst_pos = lv.phase == kPhaseReal
                                ? NewFrontierPos(keys, hash_pos, table, static_cast<uint32_t>(g.arc_dest[arc]))
                                : (final_alive ? 0 : -1);
    const bool keep = dst_pos >= 0;
    // The recording threads of this call, grouped by lane (the warp walker gives a strip
    // one lane; the thread walker's neighbours may sit in different lanes).
    const unsigned active = __activemask();
    const unsigned recording = __ballot_sync(active, keep);
    if (!keep) return;
    const unsigned peers = __match_any_sync(recording, cur_lane);
    const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
    const int32_t leader = __ffs(peers) - 1;
    const int32_t rank = __popc(peers & ((1u << me) - 1u));
    unsigned long long base = 0;
    if (me == leader) {
      const int32_t n = __popc(peers);
      base = atomicAdd(ws.lat_cursor, static_cast<unsigned long long>(n));
      atomicAdd(count, n);
    }
    base = __shfl_sync(peers, base, leader);
    const unsigned long long i = base + static_cast<unsigned long long>(rank);
    if (i < static_cast<unsigned long long>(ws.lat_cap)) {
      const float acoustic = lv.Acoustic(g, arc);
      ws.lat[i] = {state[tok], lv.phase == kPhaseRedirect ? (arc | kRedirectArcBit) : arc, acoustic, cur_lane};
      if (ws.lattice == 2) {
        // admitted: Expand's test, end = (score + weight) + acoustic > the exact cutoff
        const bool admitted = ArcEnd(lv.score[tok], g.arc_weight[arc], acoustic) > cutoff;
        ws.lat_ext[i] = {step_t, tok, dst_pos, admitted ? 1 : 0};
      }
    }
  });
}

// LatStepEndKernel — per step of a lattice decode, after LatPersistKernel (in place of the
// closure's ClearClaimsKernel), grid (finalize_split, max_lanes) x kFinalizeThreads (the
// CTAs of a lane split its claims in contiguous chunks; the kernel reads gridDim.x).
// Reads: the lane's counters and claims list. Writes: lat_cutoff[lane][t] (the step's
// exact max - beam, the cutoff the replay admits against) and lat_size[lane][t] (the new
// frontier's size, which the replay checks), the closure's closure_added, and clears the
// step's (and its closure's) claimed hash slots: key, payload, hash_pos.
__global__ void __launch_bounds__(kFinalizeThreads) LatStepEndKernel(Workspace ws) {
  StepKernelEntry();
  const int32_t lane = blockIdx.y;
  LaneCounters& lc = ws.lanes[lane];
  const int32_t step_phase = lc.step_phase;
  if (step_phase == kPhaseIdle) return;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const int64_t at = static_cast<int64_t>(lane) * ws.seg_cap + (lc.t - 1);
    const int32_t size = min(lc.next_size, lc.tok_cap[lc.buf]);  // the new frontier (its region's cap)
    ws.lat_cutoff[at] = OrderedIntToFloat(lc.max_ord) - lc.beam;
    ws.lat_size[at] = step_phase == kPhaseReal ? size : (lc.final_winner != -2 ? 1 : 0);
    // a real step's closure ran (ClearClaimsKernel's count): closure = scan leaves the lane
    // kPhaseEps, closure = lists kPhaseReal; either way eps_base is the size before it
    if (ws.eps_iterations > 0 && step_phase == kPhaseReal && (lc.phase == kPhaseEps || lc.phase == kPhaseReal))
      lc.closure_added += size - lc.eps_base;
  }
  if (step_phase != kPhaseReal) return;  // a final step's FinalizeKernel cleared its slots
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

}  // namespace cuwfst
