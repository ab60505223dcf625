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
// new_n: the new frontier's size; an index at or past it is treated as -1. FinalizeKernel writes
// hash_pos for every listed claim of a real step (its frontier index, below new_n, or -1), so a
// key of the step reads a fresh value; the bound matters only where the lattice keeps its
// hash_pos uncleared (Workspace::lat_keys_only) and a lane's claims list overflowed: a key it
// claimed unlisted may then read a stale index of an earlier step (its row is rescued and its
// lattice dropped), which must not index past the lane's frontier.
__device__ __forceinline__ int32_t NewFrontierPos(const uint32_t* keys, const int32_t* hash_pos, int32_t size,
                                                  uint32_t dest, int32_t new_n) {
  if (size == 0) return -1;
  const uint32_t mask = static_cast<uint32_t>(size - 1);
  uint32_t h = HashSlot(dest, size);
  for (int probe = 0; probe < kMaxProbes; ++probe) {
    const uint32_t k = keys[h];
    if (k == dest) {
      const int32_t pos = hash_pos[h];
      return pos >= 0 && pos < new_n ? pos : -1;
    }
    if (k == kEmptyKey) return -1;
    h = (h + 1) & mask;
  }
  return -1;
}

// The records' filter (Workspace::lattice == 2, whole batches and bounded runs; ws.lat_filter[0]
// = 1). Of a real step's arcs whose destination survived, most can never survive the output
// beam: full tier HLG on the H200, 7.1% of them were written (48.0 M of 676.5 M over 64
// utterances; docs/benchmarks.md). A non-admitted arc is not written when
//     end < s(dst) - output_beam - slack,   end = (s(src) + weight) + acoustic,
// s the search's token scores. Why such an arc is dropped by every k2 window that covers it
// (k2's forward f and backward b, gpu_lattice_prune.cu; exact reals first): f(dst) >= f(src) +
// score (the forward is the max over the step's records), and in any window b(x) <= -f(x) at its
// end (b = -f or -inf) and so, by induction backwards, everywhere in it; hence an arc kept
// ((score + b(dst)) + f(src) >= -output_beam) has f(src) + score >= f(dst) - output_beam. The
// slack covers float rounding, bounded with upward-rounded sums of u = 2^-24 times magnitudes:
//  * |s - f| on a token: both are Viterbi maxima over the same paths in a different order of
//    float additions; each step adds at most 4u H of difference, H = the old and new
//    frontiers' |score| bounds plus max |weight| plus 1 (every term of a max path's sums is
//    within H: scores lie in [cutoff, max] of their step). lat_drift sums 16u H a step;
//  * the arc's own sums, the threshold's and the keep test's: 32u H + 0.25;
//  * a window's backward values: at most 31 steps of 4u (2G + W + output_beam), which the
//    0.25 pad covers while every |score| G in the window is below kLatGuardMag (16,384) and
//    W below kLatFilterMaxWeight (1,024): 124u (34,800) = 0.13.
// The filter drops arcs only on steps whose new frontier lies within kLatFilterMag (8,192) and
// while lat_drift stays below 2 (slack <= ~4.7); LatStepEndKernel raises lat_guard when a
// step within 32 of a filtered one leaves kLatGuardMag, and the host then decodes the batch
// again without the filter (GpuDecoder::LatticeFilterGuard; a bounded decode restarts from its
// first run). ws.lat_filter[2] is added to the pad (0; tests lower it to show a filter that
// drops too much is caught). Admitted arcs are always written: the CPU's
// token order (the first admitted offer) reads them. So the pruned lattice is the one the
// unfiltered records give; lat_all counts every surviving arc the step walked (k2's recorded
// arcs, unless the lattice trim left some unwalked: common.cuh LatTrimLow).
// (The constants and the slack's arithmetic are in common.cuh, LatSlackFor: the lattice trim
// bounds the same slack.)
// (LatFilterStep, LatFilterFor and LatPreLowFor are in common.cuh: ExpandKernel reads them too.)

// What the records (LatPersistKernel's walk and LatCandRecords) read of a lane's step, loaded on
// entering the lane.
struct LatLane {
  int32_t lane = -1;
  int32_t table = 0;                   // the lane's hash size this step (its region)
  const int32_t* state = nullptr;      // the frontier the step expanded: states
  const float* score = nullptr;        // and scores
  const uint32_t* keys = nullptr;
  const int32_t* hash_pos = nullptr;
  const float* new_score = nullptr;    // the new frontier's scores (the filter's s(dst))
  int32_t new_n = 0;                   // the new frontier's size (NewFrontierPos's bound)
  int32_t* count = nullptr;
  int32_t* all = nullptr;
  bool final_alive = false;
  bool final_step = false;             // a final step: every arc enters the final state
  bool cand = false;                   // the step's records come from candidates (LatCandLane, LatCandFinalOn)
  float cutoff = 0.f;
  float pre_low = -INFINITY;           // the prefilter's bound, -inf where it is off
  int32_t step_t = 0;
  LatFilterStep filter{};
  LatEpsFilter eps_filter{};           // lattice == 1 on epsilon graphs (common.cuh LatEpsFilterFor)

  __device__ __forceinline__ void Load(const DeviceGraph& g, const Workspace& ws, int32_t l, int32_t phase) {
    lane = l;
    const LaneCounters& lc = ws.lanes[l];
    state = ws.tok_state[lc.buf ^ 1] + lc.tok_off[lc.buf ^ 1];
    score = ws.tok_score[lc.buf ^ 1] + lc.tok_off[lc.buf ^ 1];
    new_score = ws.tok_score[lc.buf] + lc.tok_off[lc.buf];
    keys = ws.hash_key + lc.hash_off;
    hash_pos = ws.hash_pos + lc.hash_off;
    table = lc.hash_cap;
    new_n = min(lc.next_size, lc.tok_cap[lc.buf]);  // (final: Finalize and the closure have run)
    const int64_t at = static_cast<int64_t>(l) * ws.seg_cap + (lc.t - 1);
    count = ws.lat_count + at;
    all = ws.lattice == 2 ? ws.lat_all + at : nullptr;
    final_alive = lc.final_winner != -2;
    cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;  // LatStepEndKernel's lat_cutoff
    step_t = lc.t - 1;
    filter = ws.lattice == 2 ? LatFilterFor(g, ws, lc, phase) : LatFilterStep{};
    eps_filter = LatEpsFilterFor(ws, lc, phase);
    // The prefilter: on a filtered step every destination that survived scores s > cutoff
    // (the new frontier is the admitted arcs' destinations: lattice == 2 runs only on
    // epsilon-free graphs), and float subtraction is monotone, so an arc ending below
    // (cutoff - output_beam) - slack is below (s - output_beam) - slack for any such s: not
    // admitted (that needs end > cutoff), and dropped by the filter whether or not its
    // destination survived. Its hash probe is skipped. Only where the lattice trim's
    // accounting holds (ws.trim with the filter: the rows' recorded arcs are not counted,
    // GpuDecoder::lat_trim_used_), since lat_all then misses such arcs that survived.
    // (ws.lat_filter[3]: 0 turns it off, CUWFST_LATTICE_PREFILTER=off)
    pre_low = LatPreLowFor(ws, filter, cutoff);
    final_step = phase == kPhaseFinal;
    cand = LatCandLane(ws, lc, pre_low) || (final_step && LatCandFinalOn(ws) && lc.lat_cand_over == 0);
    // an epsilon graph's prefilter, with its lattice trim (ws.lat_filter[8]; set after `cand`:
    // candidates are for epsilon-free graphs): a new token scores s > cutoff (the closure admits
    // only above it too), so an arc ending below cutoff - c is below s - c for every destination
    // that survived: not admitted (c >= 0: a negative filter_pad, tests only, could break it),
    // and the records' filter on epsilon graphs drops it. Its probe is skipped.
    if (eps_filter.on && ws.lattice == 2 && ws.lat_filter[8] != 0.f && ws.lat_filter[3] != 0.f && eps_filter.c >= 0.f)
      pre_low = cutoff - eps_filter.c;
  }
  // A candidate's destination in the new frontier, as the walk finds it: on a final step the
  // final token (index 0) where the lane has one, else the probe.
  __device__ __forceinline__ int32_t CandDestPos(const DeviceGraph& g, int32_t arc) const {
    return final_step ? (final_alive ? 0 : -1)
                      : NewFrontierPos(keys, hash_pos, table, static_cast<uint32_t>(ArcDest(g, arc)), new_n);
  }
};

// The records' shared tail: of the calling threads, those whose arc survived count into `all`
// (grouped by lane: one atomicAdd per warp and lane), those that keep it take consecutive
// records at the cursor shared by all lanes (one atomicAdd per warp and lane) and count into
// `count`; write(i) stores record i (below lat_cap: past it only the cursor and the counts
// move, and the host grows the records and decodes again).
template <typename Write>
__device__ __forceinline__ void LatAppend(const Workspace& ws, int32_t lane, int32_t* count, int32_t* all,
                                          bool survives, bool keep, Write&& write) {
  const unsigned active = __activemask();
  const unsigned surviving = __ballot_sync(active, survives);
  if (!survives) return;
  const unsigned peers = __match_any_sync(surviving, lane);
  const unsigned writing = peers & __ballot_sync(surviving, keep);
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
  if (all != nullptr && me == __ffs(peers) - 1) atomicAdd(all, __popc(peers));
  if (!keep) return;
  const int32_t leader = __ffs(writing) - 1;
  const int32_t rank = __popc(writing & ((1u << me) - 1u));
  unsigned long long base = 0;
  if (me == leader) {
    const int32_t n = __popc(writing);
    base = atomicAdd(ws.lat_cursor, static_cast<unsigned long long>(n));
    atomicAdd(count, n);
  }
  base = __shfl_sync(writing, base, leader);
  const unsigned long long i = base + static_cast<unsigned long long>(rank);
  if (i < static_cast<unsigned long long>(ws.lat_cap)) write(i);
}

// The candidate records (candidate mode: ws.lat_cand; common.cuh LatCandOn), the first part
// of LatPersistKernel: grid-stride over the step's candidates (ExpandKernel wrote
// ws.lat_cand_n of them: every walked arc of a prefiltered lane-step that ends at or above the
// prefilter's bound). Of a lane whose candidates all fit (LatCandLane), each candidate gets
// the walk's test and record: the destination's probe, admission against the exact cutoff,
// the filter; the arcs below the bound are the ones the walk's prefilter drops unprobed, so
// the records are the walk's. A lane with lat_cand_over is skipped here and walked after.
// lane_of(l) gives the LatLane of lane l (the CTA's shared copies, or a thread's own Load).
template <typename LaneOf>
__device__ __forceinline__ void LatCandRecords(const DeviceGraph& g, const Workspace& ws, LaneOf&& lane_of) {
  const unsigned long long cap = static_cast<unsigned long long>(ws.lat_cand_cap);
  const unsigned long long n = min(*ws.lat_cand_n, cap);
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    const LatCand c = ws.lat_cand[i];
    const LatLane& ll = lane_of(c.lane);
    if (!ll.cand) continue;
    const int32_t dst_pos = ll.CandDestPos(g, c.arc);
    const bool survives = dst_pos >= 0;
    const float end = ArcEnd(ll.score[c.tok], g.arc_weight[c.arc], c.acoustic);
    const bool admitted = end > ll.cutoff;
    // (the filter: on every real candidate lane-step, off on final steps, as in the walk)
    const bool keep = survives && (admitted || !ll.filter.on ||
                                   !(end < (ll.new_score[dst_pos] - ws.lat_filter[1]) - ll.filter.slack));
    LatAppend(ws, c.lane, ll.count, ll.all, survives, keep, [&](unsigned long long r) {
      ws.lat[r] = {ll.state[c.tok], c.arc, c.acoustic, c.lane};
      ws.lat_ext[r] = {ll.step_t, c.tok, dst_pos, admitted ? 1 : 0};
    });
  }
}

// LatCandRecords with the appends gathered per CTA (ws.lat_filter[5] != 0, the default;
// CUWFST_LATTICE_APPEND=warp keeps LatAppend's per warp): the shared-lanes path (at most
// kWalkThreads lanes), every CTA's threads in CTA-uniform rounds of one candidate each. A round's
// kept records take one range at the shared cursor (one atomicAdd a CTA and round, where LatAppend
// took one a warp and lane), laid out by warp and lane in the CTA; the per-lane counts (`count`,
// `all`) gather in shared memory and reach the lanes' step counters once a CTA at the end. The
// same tests and the same records (their order inside the step aside, which nothing reads: the
// pruning sorts them), the same counts, the cursor counting on past lat_cap as before.
// (About 370 k candidates a step at 32 lanes on the full HLG, ~17% kept, counted on the CPU by
// benchmarks/lattice_band.py. Measured on the H200, s75: LatPersistKernel 8.93 ms a lattice batch
// against 9.18 with LatAppend, so the atomics were a small part of its time.)
__device__ __forceinline__ void LatCandRecordsBlock(const DeviceGraph& g, const Workspace& ws, const LatLane* lanes) {
  __shared__ int32_t s_cnt[kWalkThreads], s_all[kWalkThreads], s_warp[kWalkThreads / 32];
  __shared__ unsigned long long s_base;
  for (int32_t l = threadIdx.x; l < ws.max_lanes; l += blockDim.x) s_cnt[l] = s_all[l] = 0;
  __syncthreads();
  const unsigned long long cap = static_cast<unsigned long long>(ws.lat_cand_cap);
  const unsigned long long n = min(*ws.lat_cand_n, cap);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31), wid = static_cast<int32_t>(threadIdx.x >> 5);
  for (unsigned long long b = static_cast<unsigned long long>(blockIdx.x) * blockDim.x; b < n; b += stride) {
    const unsigned long long i = b + threadIdx.x;  // (the loop is CTA-uniform: b is)
    bool keep = false, admitted = false;
    int32_t dst_pos = -1;
    LatCand c{};
    if (i < n) {
      c = ws.lat_cand[i];
      const LatLane& ll = lanes[c.lane];
      if (ll.cand) {
        dst_pos = ll.CandDestPos(g, c.arc);
        if (dst_pos >= 0) {  // (the end's operands only for a surviving destination)
          const float end = ArcEnd(ll.score[c.tok], g.arc_weight[c.arc], c.acoustic);
          admitted = end > ll.cutoff;
          keep = admitted || !ll.filter.on || !(end < (ll.new_score[dst_pos] - ws.lat_filter[1]) - ll.filter.slack);
          if (ll.all != nullptr) atomicAdd(&s_all[c.lane], 1);
          if (keep) atomicAdd(&s_cnt[c.lane], 1);
        }
      }
    }
    const unsigned kept = __ballot_sync(0xFFFFFFFFu, keep);
    if (me == 0) s_warp[wid] = __popc(kept);
    __syncthreads();
    if (threadIdx.x == 0) {
      int32_t total = 0;
      for (int32_t w = 0; w < static_cast<int32_t>(blockDim.x >> 5); ++w) {
        const int32_t x = s_warp[w];
        s_warp[w] = total;
        total += x;
      }
      s_base = total > 0 ? atomicAdd(ws.lat_cursor, static_cast<unsigned long long>(total)) : 0ull;
    }
    __syncthreads();
    if (keep) {
      const unsigned long long r =
          s_base + static_cast<unsigned long long>(s_warp[wid] + __popc(kept & ((1u << me) - 1u)));
      if (r < static_cast<unsigned long long>(ws.lat_cap)) {
        const LatLane& ll = lanes[c.lane];
        ws.lat[r] = {ll.state[c.tok], c.arc, c.acoustic, c.lane};
        ws.lat_ext[r] = {ll.step_t, c.tok, dst_pos, admitted ? 1 : 0};
      }
    }
    __syncthreads();  // (s_warp and s_base again next round)
  }
  for (int32_t l = threadIdx.x; l < ws.max_lanes; l += blockDim.x) {
    if (s_all[l] != 0) atomicAdd(lanes[l].all, s_all[l]);
    if (s_cnt[l] != 0) atomicAdd(lanes[l].count, s_cnt[l]);
  }
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
// move (the host grows the records and decodes again: decode is idempotent). In candidate
// mode (common.cuh LatCandOn) it first records the step's candidates (LatCandRecords; with at
// most kWalkThreads lanes every CTA loads each lane's LatLane once into shared memory, else a
// thread loads the lanes it meets), then walks only the lane-steps they do not cover, and
// returns at once when there are none (at most kWalkThreads lanes; else it walks and skips).
// kMinBlocks: as ExpandKernel's, 4 by default (unbounded, ptxas gave it 66 registers, rounded
// to 72 a thread: 3 CTAs a multiprocessor), 6 with CUWFST_LAT_MIN_BLOCKS=6 (64 registers and,
// before LatPersistSmem, its static shared memory held it to 4).
template <int kWalker, int kMinBlocks = 4>
__global__ void __launch_bounds__(kWalkThreads, kMinBlocks)
LatPersistKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  if (ws.lane_arc_offsets[ws.max_lanes] == 0) return;
  // a CTA with no slot of the walk and no candidate of the grid-stride has nothing to record
  if (!CtaHasSlots<kWalker>(ws) &&
      (ws.lat_cand == nullptr || static_cast<unsigned long long>(blockIdx.x) * blockDim.x >=
                                     min(*ws.lat_cand_n, static_cast<unsigned long long>(ws.lat_cand_cap))))
    return;
  if (ws.lat_cand != nullptr && ws.max_lanes <= kWalkThreads) {
    // candidate mode: each lane's LatLane in shared memory (the launch's dynamic shared memory,
    // max_lanes of them: LatPersistSmem), the candidates' records, then the walk only if some
    // lane that took a step is not recorded from its candidates
    extern __shared__ __align__(16) unsigned char lat_lanes_raw[];
    LatLane* lanes = reinterpret_cast<LatLane*>(lat_lanes_raw);
    bool walk = false;
    if (threadIdx.x < ws.max_lanes) {
      LatLane ll;
      const LaneCounters& lc = ws.lanes[threadIdx.x];
      if (lc.step_phase != kPhaseIdle) {
        ll.Load(g, ws, threadIdx.x, lc.step_phase);
        walk = !ll.cand;
      }
      lanes[threadIdx.x] = ll;  // an idle lane: cand false (it has no candidates)
    }
    walk = __syncthreads_or(walk);
    if (ws.lat_filter[5] != 0.f) LatCandRecordsBlock(g, ws, lanes);
    else LatCandRecords(g, ws, [&](int32_t l) -> const LatLane& { return lanes[l]; });
    if (!walk) return;
  } else if (ws.lat_cand != nullptr) {
    LatLane own;
    LatCandRecords(g, ws, [&](int32_t l) -> const LatLane& {
      if (l != own.lane) own.Load(g, ws, l, ws.lanes[l].step_phase);
      return own;
    });
  }
  LatLane ll;
  Walk<kWalker, true>(ws, [&](const LaneView& lv, int32_t tok, int32_t local) {
    if (lv.lane != ll.lane) ll.Load(g, ws, lv.lane, lv.phase);
    if (ll.cand) return;  // recorded above from ExpandKernel's candidates
    const int32_t arc = lv.begin[tok] + (local - lv.offsets[tok]);
    float acoustic = 0.f, end = 0.f;
    bool have_end = false, dropped = false;
    if (lv.phase == kPhaseReal && ll.pre_low > -INFINITY) {
      acoustic = lv.Acoustic(g, arc);
      end = ArcEnd(lv.score[tok], g.arc_weight[arc], acoustic);
      have_end = true;
      dropped = end < ll.pre_low;
    }
    const int32_t dst_pos = dropped ? -1
                            : lv.phase == kPhaseReal
                                ? NewFrontierPos(ll.keys, ll.hash_pos, ll.table, static_cast<uint32_t>(ArcDest(g, arc)),
                                                 ll.new_n)
                                : (ll.final_alive ? 0 : -1);
    const bool survives = dst_pos >= 0;
    bool admitted = false, keep = survives;
    if (survives && ws.lattice == 2) {
      if (!have_end) {
        acoustic = lv.Acoustic(g, arc);
        end = ArcEnd(lv.score[tok], g.arc_weight[arc], acoustic);
      }
      // admitted: Expand's test, end = score + (acoustic + weight) > the exact cutoff
      admitted = end > ll.cutoff;
      if (ll.filter.on && !admitted) keep = !(end < (ll.new_score[dst_pos] - ws.lat_filter[1]) - ll.filter.slack);
      // (an epsilon graph's: the records' filter on epsilon graphs, as lattice 1 tests it)
      if (ll.eps_filter.on && !admitted) keep = !(end < ll.new_score[dst_pos] - ll.eps_filter.c);
    } else if (survives && ll.eps_filter.on) {  // (lattice == 1, a real step: its arcs are real)
      acoustic = lv.Acoustic(g, arc);
      end = ArcEnd(lv.score[tok], g.arc_weight[arc], acoustic);
      keep = end > ll.cutoff || !(end < ll.new_score[dst_pos] - ll.eps_filter.c);
    }
    // The recording threads of this call, grouped by lane (the warp walker gives a strip
    // one lane; the thread walker's neighbours may sit in different lanes).
    LatAppend(ws, ll.lane, ll.count, ll.all, survives, keep, [&](unsigned long long i) {
      if (ws.lattice != 2) acoustic = lv.Acoustic(g, arc);
      ws.lat[i] = {ll.state[tok], lv.phase == kPhaseRedirect ? (arc | kRedirectArcBit) : arc, acoustic, ll.lane};
      if (ws.lattice == 2) ws.lat_ext[i] = {ll.step_t, tok, dst_pos, admitted ? 1 : 0};
    });
  });
}

// LatPersistKernel's dynamic shared memory: in candidate mode with at most kWalkThreads lanes a
// LatLane for each lane (96 bytes each: 24 KB at 256 lanes, under the 48 KB a launch may take
// without opting in), else none. Sized to max_lanes rather than kWalkThreads as a static array
// was (26.7 KB a CTA with the rest, Nsight Compute on the H200, session of 2026-12-03 18:47): at
// 32 lanes a CTA holds ~5 KB, so shared memory no longer bounds the CTAs a multiprocessor; its
// registers still hold it to 4 (kMinBlocks; 6 with CUWFST_LAT_MIN_BLOCKS=6).
inline size_t LatPersistSmem(const Workspace& w) {
  return w.lat_cand != nullptr && w.max_lanes <= kWalkThreads ? static_cast<size_t>(w.max_lanes) * sizeof(LatLane) : 0;
}

// LatStepEndKernel — per step of a lattice decode, after LatPersistKernel (in place of the
// closure's ClearClaimsKernel), grid (finalize_split, max_lanes) x kFinalizeThreads (the
// CTAs of a lane split its claims in contiguous chunks; the kernel reads gridDim.x).
// Reads: the lane's counters and claims list. Writes: the records' filter state (lat_mag,
// lat_drift, lat_filter_last, lat_guard; lattice == 2), lat_cutoff[lane][t] (the step's
// exact max - beam, the cutoff the replay admits against) and lat_size[lane][t] (the new
// frontier's size, which the replay checks), the closure's closure_added, and clears the
// step's (and its closure's) claimed hash slots: key, payload, hash_pos; under
// Workspace::lat_keys_only (epsilon-free graphs, the default) the keys alone, a third of the
// scattered stores: FinalizeKernel has left the step's payloads 0 already, and every hash_pos a
// later step reads is one its own FinalizeKernel wrote (NewFrontierPos). Measured on the H200,
// full HLG, 256 utterances, batch 32 (docs/benchmarks.md, session of 2026-12-04 12:11): this
// kernel 2.22-2.30 ms a lattice batch against 2.96-3.06 clearing all three.
__global__ void __launch_bounds__(kFinalizeThreads) LatStepEndKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  const int32_t lane = blockIdx.y;
  LaneCounters& lc = ws.lanes[lane];
  // candidate mode: the lane-step counts (MemStats [57] / [58]: recorded from candidates or,
  // past the buffer, walked), then the next step's candidates start afresh (also after a step
  // that paused: its phase is idle, and it is not counted)
  if (ws.lat_cand != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    if (ws.lattice == 2 && lc.step_phase == kPhaseReal) {
      const float cutoff = OrderedIntToFloat(lc.max_ord) - lc.beam;
      if (LatCandOn(ws, LatPreLowFor(ws, LatFilterFor(g, ws, lc, kPhaseReal), cutoff)))
        atomicAdd(&ws.lat_cand_n[lc.lat_cand_over ? 2 : 1], 1ull);
    }
    // (final lane-steps recorded from candidates, LatCandFinalOn: MemStats [72])
    if (lc.step_phase == kPhaseFinal && LatCandFinalOn(ws) && !lc.lat_cand_over) atomicAdd(&ws.lat_cand_n[3], 1ull);
    if (lane == 0) *ws.lat_cand_n = 0;
    lc.lat_cand_over = 0;
  }
  const int32_t step_phase = lc.step_phase;
  if (step_phase == kPhaseIdle) return;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const int64_t at = static_cast<int64_t>(lane) * ws.seg_cap + (lc.t - 1);
    // (an epsilon graph's lattice 2 decode has no records' filter of its own: the epsilon one below)
    if (ws.lattice == 2 && ws.eps_iterations <= 0) LatFilterAdvance(g, ws, lc, step_phase, true);
    if (ws.lattice == 1 || ws.eps_iterations > 0) {  // the records' filter on epsilon graphs: the step's
      // A (0: unfiltered) in lat_all (in place of its counts, lattice 2 with the filter on: the GPU
      // pruning's guard reads it), and the new frontier's bound for the next step's m (read above
      // before it changes)
      const LatEpsFilter f = LatEpsFilterFor(ws, lc, step_phase);
      if (ws.lattice == 1 || ws.lat_filter[7] != 0.f) ws.lat_all[at] = __float_as_int(f.on ? f.a : 0.f);
      // the lattice trim's guard (common.cuh LatEpsTrimOn, from the lat_mag the scan read): a step
      // that may have trimmed needs its own offset within the cap's
      float c_cap;
      if (step_phase == kPhaseReal && LatEpsTrimOn(ws, lc, &c_cap) && !(f.on && f.c <= c_cap)) lc.lat_guard = 1;
      const float mx = OrderedIntToFloat(lc.max_ord);
      if (step_phase == kPhaseReal) lc.lat_mag = mx == -INFINITY ? 0.f : fmaxf(fabsf(mx), fabsf(mx - lc.beam));
    }
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
  if (ws.lat_keys_only) {  // (FinalizeKernel left the payloads 0; hash_pos stays: NewFrontierPos)
    for (int32_t i = c_begin + threadIdx.x; i < c_end; i += blockDim.x) ws.hash_key[hb + claims[i].y] = kEmptyKey;
    return;
  }
  for (int32_t i = c_begin + threadIdx.x; i < c_end; i += blockDim.x) {
    const int32_t h = claims[i].y;
    ws.hash_key[hb + h] = kEmptyKey;
    ws.hash_payload[hb + h] = 0ull;
    ws.hash_pos[hb + h] = -1;
  }
}

}  // namespace cuwfst
