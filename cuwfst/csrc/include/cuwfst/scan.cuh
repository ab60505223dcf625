// K0 LaneSetupKernel and K1 ScanKernel (with the lane scan of the flattened slot space).
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuwfst/common.cuh"
#include "cuwfst/lattice_log.cuh"

namespace cuwfst {

// A lane's kCmdInit (LaneSetupKernel before a sequence, RefillKernel inside a segment): the
// lane takes a new row (cmd's length, avail and online): counters, the start token in frontier
// buffer 0, t = 0, and on epsilon graphs the start token in the (empty) hash as a real step's
// frontier, for the closure passes that follow.
__device__ __forceinline__ void InitLane(const DeviceGraph& g, const Workspace& ws, const StepParams& p,
                                         int32_t lane, LaneCounters& lc, const LaneCommand& cmd) {
  lc.length = cmd.length;  // -1 marks a lane this sequence does not use
  lc.avail = cmd.avail;
  lc.online = cmd.online;
  lc.t = 0;
  lc.buf = 0;
  const bool used = lc.length >= 0;
  lc.phase = used && ws.eps_iterations > 0 ? kPhaseReal : kPhaseIdle;
  lc.frontier_size = used ? 1 : 0;
  lc.next_size = used ? 1 : 0;  // the frontier a step reads is what the previous one built
  lc.total_arcs = 0;
  lc.beam = p.search_beam;
  lc.max_ord = FloatToOrderedInt(0.f);  // the start closure's cutoff is 0 - search_beam
  lc.prev_max_ord = lc.max_ord;  // (the bins bound's first reference: the start token's score)
  lc.eps_changed = 0;
  lc.eps_touched = 0;
  lc.eps_base = 0;
  lc.frontier_total = 0;
  lc.lat_log_pending = 0;
  lc.closure_added = 0;
  lc.max_lp = 0.f;
  lc.claims = 0;
  lc.admit = 0;
  lc.overflow = 0;
  lc.max_frontier = 0;
  lc.best_key = BestKeyOf(0, 0);  // the start token (the anchor of step 0's trim)
  lc.final_winner = -2;
  lc.lat_mag = 0.f;  // the start token's score
  lc.lat_drift = 0.f;
  lc.lat_filter_last = kLatFilterNever;
  lc.lat_guard = 0;
  lc.lat_cand_over = 0;
  lc.late_undo = 0;  // (a decode that failed half-way may have left a mark; only this decode's pauses set one)
  lc.final_score = -INFINITY;
  lc.reached_final = 0;
  lc.redirected = 0;
  lc.lp_row_f32 = nullptr;
  lc.lp_row_f16 = nullptr;
  if (ws.pooled) {
    lc.tok_off[0] = lc.tok_off[1] = static_cast<long long>(kPoolAlign) * lane;
    lc.tok_cap[0] = lc.tok_cap[1] = 1;
    lc.claim_off = lc.hash_off = 0;
    lc.claim_cap = lc.hash_cap = 0;
  } else {
    StaticLayout(ws, lane, lc);
  }
  const int64_t base = lc.tok_off[0];
  ws.tok_state[0][base] = g.start_state;
  ws.tok_score[0][base] = 0.f;
  ws.tok_winner[0][base] = -1;
  ws.out_path_len[lane] = 0;
  if (used && ws.eps_iterations > 0) {  // (the static layout: epsilon graphs are never pooled)
    const int64_t hb = lc.hash_off;
    const uint32_t h = HashSlot(static_cast<uint32_t>(g.start_state), lc.hash_cap);
    ws.hash_key[hb + h] = static_cast<uint32_t>(g.start_state);  // the table is empty here
    ws.hash_payload[hb + h] = EpsBaseline(0.f);
    ws.hash_pos[hb + h] = 0;
    ws.claims[lc.claim_off] = make_int2(g.start_state, static_cast<int32_t>(h));
    lc.claims = 1;
    // closure = lists: pass 0 takes the start token if it has epsilon arcs
    ws.eps_tok[base] = 0;
    lc.eps_list_n[0] = g.eps_count[g.start_state] > 0 ? 1 : 0;
    lc.eps_list_n[1] = 0;
    lc.eps_touched_n[0] = 0;
    lc.eps_touched_n[1] = 0;
  }
}

// LaneSetupKernel — launched before every launch sequence (a decode, a stream's chunk, a
// segment of continuous batching), grid = max_lanes blocks of 32 threads.
// Reads: ws.commands. Writes, per lane, what its command says: kCmdInit resets the lane to
// a new row (counters, the start token in frontier buffer 0, t = 0), kCmdSetLength arms
// the final step of a stream, kCmdRelease empties the lane, kCmdAvail sets the frames the
// lane may step through. Every lane not initialized here is parked (phase idle): the
// start-closure passes that may follow must take only the new lanes, and every Scan
// decides each lane's phase anew. reset_arena: a whole batch starts (offline decode):
// the winners cursor returns to 0 and the pools' demand counters restart.
// Layout (types.cuh, Workspace::pooled): an initialized lane gets the static layout's
// regions, or with pooled its start token at token kPoolAlign * lane of buffer 0 (the pools
// always hold kPoolAlign x max_lanes tokens) and no claims or hash region until its first
// ScanKernel hands them out.
// After an init a lane depends on nothing left from its previous row, except the hash
// tables, which Finalize, ClearClaimsKernel and HashSanitizeKernel leave empty.
// With epsilon closure the start token also enters the lane's hash as the closure expects
// a real step's frontier (epsilon.cuh): claimed, its score as the slot's baseline,
// hash_pos 0; the lane's phase is real and its cutoff 0 - search_beam, so the closure
// passes that follow treat the start like a step's frontier.
__global__ void LaneSetupKernel(DeviceGraph g, Workspace ws, StepParams p, int32_t reset_arena) {
  int32_t lane = blockIdx.x;
  if (threadIdx.x != 0) return;
  LaneCounters& lc = ws.lanes[lane];
  const LaneCommand cmd = ws.commands[lane];
  if (lane == 0 && reset_arena) {
    *ws.arena_cursor = 0ull;
    ws.pool_need[kPoolTokens] = static_cast<unsigned long long>(kPoolAlign) * ws.max_lanes;
    ws.pool_need[kPoolClaims] = 0ull;
    ws.pool_need[kPoolHash] = 0ull;
  }
  // The scan counters are zero between launches; a sequence that failed half-way may have
  // left them set, and no scan runs while this kernel does.
  if (lane == 0) {
    *ws.scan_done = 0;
    *ws.max_done = 0;
    *ws.scan_ticket = 0;
    ws.pool_need[kPoolPauseSlot] = 0ull;  // a paused batch resumes (or a new sequence starts)
    *ws.arena_pause = 0ull;  // (streams: each round of an advance starts with room)
  }
  ws.scan_lane_done[lane] = 0;
  ws.scan_best[lane] = 0ull;
  if (ws.pool_bins)  // (zero between steps; a sequence that failed half-way may have left some)
    for (int32_t b = 0; b < kPoolBins; ++b) ws.bin_slots[static_cast<int64_t>(lane) * kPoolBins + b] = 0;
  for (int32_t c = 0; c < ws.scan_split; ++c) ws.scan_status[static_cast<int64_t>(lane) * ws.scan_split + c] = 0ull;
  if (!(cmd.op & kCmdInit)) {
    if (cmd.op & kCmdRelease) {
      lc.length = -1;
      lc.final_winner = -2;
      ws.out_path_len[lane] = 0;
    }
    if (cmd.op & kCmdSetLength) lc.length = cmd.length;
    if (cmd.op & kCmdAvail) lc.avail = cmd.avail;
    lc.phase = kPhaseIdle;
    return;
  }
  InitLane(g, ws, p, lane, lc, cmd);
}

// The device-side refill of continuous batching (SeqKind::kSegmentRefill): a lane whose row
// took its final step this step (phase final or redirect) with no overflow bit (an overflowed
// row may leave claimed hash slots that only the sequence's HashSanitizeKernel clears, and its
// rescue needs the host) takes the next row the host queued for the segment: the finished
// row's result goes to a done record (RefillBacktrackKernel walks its path at the segment's
// end, before any GC round moves the winners log), and InitLane starts the new row, whose
// start closure the step's closure passes then compute as they do at a sequence's start. A
// lane with no queued row or done record left keeps its finished row for the host, as without
// the refill. Which lane takes which row changes nothing in a row's result (every row is
// decoded as if alone), so the order lanes take rows in is free.
// (volatile reads: in FinalizeKernel other CTAs wrote the counters; this SM's L1 may hold old lines)
__device__ __forceinline__ bool RefillWanted(const volatile LaneCounters& lc, int32_t phase) {
  return (phase == kPhaseFinal || phase == kPhaseRedirect) && lc.length >= 0 && lc.online == 0 && lc.overflow == 0;
}

// Lane `lane` takes queue entry k: its ended row into done record k, the entry's row started.
__device__ __forceinline__ void RefillTake(const DeviceGraph& g, const Workspace& ws, const StepParams& p,
                                           int32_t lane, LaneCounters& lc, int32_t k) {
  const volatile LaneCounters& v = lc;  // (see RefillWanted)
  RefillDone& d = ws.refill_done[k];
  d.row = ws.refill_row[lane];
  d.lane = lane;
  d.final_winner = v.final_winner;
  d.reached_final = v.reached_final;
  d.redirected = v.redirected;
  d.overflow = v.overflow;
  d.max_frontier = v.max_frontier;
  d.pad = 0;
  d.final_score = v.final_score;
  d.frontier_total = v.frontier_total;
  d.closure_added = v.closure_added;
  const RefillEntry e = ws.refill_queue[k];
  ws.refill_inputs[lane] = e.input;
  ws.refill_row[lane] = e.row;
  InitLane(g, ws, p, lane, lc, LaneCommand{kCmdInit, e.length, e.length, 0});
}

// kRefillInFinalize: one thread of the last of an ended lane's FinalizeKernel CTAs (all of the
// lane's writes of the step are visible to it) takes the next queue entry, if one is left.
// Lanes that end in the same step take entries in the order of their atomics; the entries
// taken are always [0, done).
__device__ __forceinline__ void RefillLaneNow(const DeviceGraph& g, const Workspace& ws, const StepParams& p,
                                              int32_t lane, LaneCounters& lc, int32_t phase) {
  if (!RefillWanted(lc, phase)) return;
  const int32_t limit = min(ws.refill_ctl[kRefillQueued], ws.refill_ctl[kRefillDoneCap]);
  const int32_t k = atomicAdd(&ws.refill_ctl[kRefillHead], 1);
  if (k >= limit) return;
  RefillTake(g, ws, p, lane, lc, k);
  atomicAdd(&ws.refill_ctl[kRefillDone], 1);
}

// RefillKernel — kRefillByKernel: after every step's FinalizeKernel and before its closure,
// one CTA of kRefillThreads; the lanes that want a row take the queue's entries in lane order.
constexpr int kRefillThreads = 1024;
__global__ void __launch_bounds__(kRefillThreads) RefillKernel(DeviceGraph g, Workspace ws, StepParams p) {
  StepKernelEntry();
  using BlockScan = cub::BlockScan<int32_t, kRefillThreads>;
  __shared__ typename BlockScan::TempStorage scan;
  __shared__ int32_t head, done;
  if (threadIdx.x == 0) {
    head = ws.refill_ctl[kRefillHead];
    done = ws.refill_ctl[kRefillDone];
  }
  __syncthreads();
  const int32_t queued = ws.refill_ctl[kRefillQueued], done_cap = ws.refill_ctl[kRefillDoneCap];
  for (int32_t base = 0; base < ws.max_lanes; base += kRefillThreads) {
    const int32_t lane = base + static_cast<int32_t>(threadIdx.x);
    int32_t want = 0;
    if (lane < ws.max_lanes) {
      const LaneCounters& lc = ws.lanes[lane];
      want = RefillWanted(lc, lc.phase) ? 1 : 0;  // (the scan set the phase; a lane that ended earlier is idle)
    }
    int32_t rank, total;
    BlockScan(scan).ExclusiveSum(want, rank, total);
    const int32_t room = min(queued - head, done_cap - done);
    if (want && rank < room) RefillTake(g, ws, p, lane, ws.lanes[lane], done + rank);
    __syncthreads();  // every thread has read head and done
    if (threadIdx.x == 0) {
      head += min(total, room);
      done += min(total, room);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    ws.refill_ctl[kRefillHead] = head;
    ws.refill_ctl[kRefillDone] = done;
  }
}

// ScanKernel — per step of a launch sequence, grid = max_lanes blocks of kScanThreads (one
// CTA per lane), kScanItems consecutive tokens per thread per round.
// Each lane takes its own step t = lc.t: a real step while t < length and t < avail, the
// final step at t == length, else none (idle: unused, finished, or waiting for frames).
// Reads: the lane's frontier (buffer lc.buf; its size is what the previous step's
// FinalizeKernel blocks added up in next_size), the graph's row_splits/final_count/
// emit_maxw, the lane's log-prob row (ws.inputs). Writes: phase, k2's dynamic beam,
// tok_begin, tok_ub, arc_offsets (exclusive degree prefix sums, [n + 1]), total_arcs,
// max_lp, step_phase/step_size/step_hint_ok (kept for the lattice walk), resets the
// step's max and claim count, and advances the lane: t + 1, and buf
// flips to the buffer this step builds (later kernels read buf ^ 1, write buf). Idle
// lanes publish 0 arcs and keep their frontier. fused_max: the step's max starts at L (the
// best end of the lane's best-scoring token with arcs, BestTokenEnd) instead of -inf.
// The last CTA to finish also builds lane_arc_offsets, the flattened int64 slot space (a
// last-block-done pattern instead of a separate launch).
constexpr int kScanThreads = 512;
constexpr int kScanItems = 4;
static_assert(kScanThreads * kScanItems == kScanRoundTokens, "types.cuh's round (ScanChunkOf's host replays)");

// fused_max (expand.cuh, FusedExpandKernel): the scans also name each lane's best token, the
// one with the highest score among those with arcs on this step, as {ordered score : index}
// (0: none; a real score never orders to 0), and the lane's last CTA turns it into the lower
// bound L of the step's maximum end that FusedExpandKernel admits against.
__device__ __forceinline__ unsigned long long BestTokenKey(float score, int32_t i) {
  return (static_cast<unsigned long long>(FloatToOrderedU32(score)) << 32) | static_cast<uint32_t>(i);
}
__device__ __forceinline__ unsigned long long MaxKey(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}
// pool_anchor: a lane's anchor in scan_best as {ordered anchor : 1} (0: none), and back
__device__ __forceinline__ unsigned long long AnchorKey(float anchor) {
  return (static_cast<unsigned long long>(FloatToOrderedU32(anchor)) << 32) | 1ull;
}
__device__ __forceinline__ float AnchorOf(unsigned long long key) {
  return key != 0ull ? OrderedU32ToFloat(static_cast<uint32_t>(key >> 32)) : -INFINITY;
}

// Warp 0 of a lane's last scan CTA: L = the largest end over the arcs (this phase's) of the
// token `key` names, -inf without one; valid in every thread of the warp. Each end is ArcEnd
// of the operands the walkers read (the same score, weight and acoustic), and fmaxf returns
// one of its operands, so L is bit for bit an end that FusedExpandKernel computes too: L <= the
// step's exact maximum.
__device__ __forceinline__ float BestTokenEnd(const DeviceGraph& g, unsigned long long key, const int32_t* state,
                                              const float* score, int32_t phase, const float* row32,
                                              const uint16_t* row16) {
  float m = -INFINITY;
  if (key != 0ull) {
    const int32_t i = static_cast<int32_t>(key & 0xFFFFFFFFull);
    const float sc = score[i];
    int32_t b, e;
    PhaseArcs(ArcsOf(g, state[i]), phase, &b, &e);
    for (int32_t arc = b + static_cast<int32_t>(threadIdx.x & 31); arc < e; arc += 32)
      m = fmaxf(m, ArcEnd(sc, g.arc_weight[arc], ArcAcoustic(g, arc, phase, row32, row16)));
  }
#pragma unroll
  for (int d = 16; d >= 1; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, d));
  return m;
}

// ---- Trimmed slots (Workspace::trim; docs/design.md, "Trimmed slots")
// On a graph whose emitting arcs are sorted (DeviceGraph::emit_sorted: a state's label-0 arcs,
// then the others by weight, best first), a real step gives token i only the first d_i of
// its emitting arcs as slots, where every arc left out ends at most at low = L - beam:
//  * L is an arc end of the step (RowAndTrim: the best end over the first arcs of the
//    lane's best-scoring token), so L <= M, the step's exact max, and low <= M - beam
//    (fp32 subtraction is monotone): an arc left out is not admitted (k2's end > M - beam);
//  * low < L (else nothing is trimmed), and the arc that gave L is kept (its bound is at
//    least its end, L > low), so the max over the kept arcs is M exactly;
//  * an arc's bound: score + (the row's max over the labels it may read + weight) (every
//    label for the label-0 arcs, which are always kept, else labels >= 1) is >= its end
//    (fp32 addition is monotone), and after the label-0 arcs the bounds do not increase,
//    so the arcs that pass form a prefix and a binary search finds its end.
// The slots keep their order and each token's first arc (a token left with no slots has none,
// as a token of a state without emitting arcs always had), so every later kernel (the max,
// the admission, the lattice walk, Finalize's slot-to-token search) works unchanged on the
// shorter slot space, and the survivors, scores and winning slots are those of the full one.
constexpr int32_t kTrimMinDegree = 8;    // a token with at most this many arcs keeps them all
constexpr int32_t kTrimAnchorArcs = 64;  // L: over the best token's first arcs (its best ones)

struct LaneTrim {
  float low = -INFINITY;  // L - beam; -inf: nothing is trimmed
  float lp_all = 0.f;     // the row's max over every label
  float lp_rest = 0.f;    // the row's max over labels >= 1 (-inf with one label)
  float anchor = -INFINITY;  // the anchor L itself (-inf: none); Workspace::pool_anchor
  // The label bound (LabelBitLoads, LabelBound; Workspace::label_bound): the row's two best labels >= 1
  // (lp_rest is the first's log-prob), their bits in a heavy state's folded label bitmap, the
  // second's log-prob and the third best's. lb false: every token's bound is lp_rest.
  bool lb = false;
  // the weights-only search (Workspace::trim_weights): TokenLoad read each searched token's
  // label-0 count (TokenRound::n0) under the same flag
  bool tw = false;
  int32_t bit0 = 0, bit1 = 0;
  float lp_2nd = -INFINITY, lp_3rd = -INFINITY;
};

// The label bound (Workspace::label_bound; docs/design.md "The label bound"). A token's arcs of
// labels >= 1 read at most the best log-prob over its state's labels; a heavy state's labels sit
// in a bitmap folded to 32 label_words bits, and with the row's best labels a, b (a's log-prob
// lp_rest >= b's lp_2nd >= every other label's, whose best is lp_3rd): if a's bit is set, the
// bound is lp_rest (as without the tables); else a is not a label of the state (a bit is set for
// each label the state has), and if b's bit is set, every label of the state is at most lp_2nd;
// else neither is, and every label is at most lp_3rd. A folded bit set by another label only
// picks an earlier, larger bound. So each bound is at least the log-prob of every non-blank arc
// of the token, and TrimKeeps stays an upper bound of every arc's end.
// The top three of a thread's labels, merged in by value (an index < 0: none yet)
struct RowTop {
  float v0 = -INFINITY, v1 = -INFINITY, v2 = -INFINITY;
  int32_t i0 = -1, i1 = -1;
  __device__ __forceinline__ void Add(float x, int32_t i) {  // a label i (i >= 0) of log-prob x
    if (i0 < 0 || x > v0) {
      v2 = v1;
      v1 = v0;
      i1 = i0;
      v0 = x;
      i0 = i;
    } else if (i1 < 0 || x > v1) {
      v2 = v1;
      v1 = x;
      i1 = i;
    } else {
      v2 = fmaxf(v2, x);
    }
  }
};
// The top three over a warp's lists (disjoint labels), in every lane: three extractions, each the
// warp's best head (a max butterfly), named by the lowest lane that holds it with a label and
// popped from that lane's list. A list's heads are named while they can be the first or the second
// (Add names v0 and v1; only a list popped twice shows its unnamed v2, in the third extraction,
// which needs no name). Three max butterflies in place of a butterfly of merges (five rounds of
// five shuffles and two Adds; docs/speed-notes.md "The search's empty pairs"); the same three values,
// and under a tie of log-probs another label may be named (either gives a bound).
__device__ __forceinline__ void WarpTop(RowTop& top) {
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
  float h = top.v0, n1 = top.v1, n2 = top.v2;
  int32_t hl = top.i0, l1 = top.i1;
  RowTop out;
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    float m = h;
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, d));
    const uint32_t named = __ballot_sync(0xFFFFFFFFu, h == m && hl >= 0);
    const int32_t src = named ? __ffs(named) - 1 : -1;
    const int32_t label = __shfl_sync(0xFFFFFFFFu, hl, src < 0 ? 0 : src);
    if (r == 0) {
      out.v0 = m;
      out.i0 = src < 0 ? -1 : label;
    } else if (r == 1) {
      out.v1 = m;
      out.i1 = src < 0 ? -1 : label;
    } else {
      out.v2 = m;
    }
    if (me == src) {  // the head goes: the list moves up (its third was never named)
      h = n1;
      hl = l1;
      n1 = n2;
      l1 = -1;
      n2 = -INFINITY;
    }
  }
  top = out;
}
// A thread's tokens' heavy indices (TokenLoad: -1 for a light token, one the trim does not
// search, or without the bound) to their bounds on labels >= 1, in two halves so the bitmap
// words' round trip overlaps the search's first probes (TrimDegrees): LabelBitLoads issues each
// heavy token's two words, LabelBound is the cascade (lp_rest for every other token).
__device__ __forceinline__ void LabelBitLoads(const DeviceGraph& g, const LaneTrim& tr, const int32_t (&heavy)[kScanItems],
                                              uint32_t (&w0)[kScanItems], uint32_t (&w1)[kScanItems]) {
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    w0[k] = w1[k] = 0u;
    if (tr.lb && heavy[k] >= 0) {
      const uint32_t* bits = g.heavy_labels + static_cast<int64_t>(heavy[k]) * g.label_words;
      w0[k] = bits[tr.bit0 >> 5];
      w1[k] = bits[tr.bit1 >> 5];
    }
  }
}
__device__ __forceinline__ float LabelBound(const LaneTrim& tr, int32_t heavy, uint32_t w0, uint32_t w1) {
  return !(tr.lb && heavy >= 0) || ((w0 >> (tr.bit0 & 31)) & 1u) ? tr.lp_rest
         : ((w1 >> (tr.bit1 & 31)) & 1u)                         ? tr.lp_2nd
                                                                 : tr.lp_3rd;
}
// State s's heavy index, or -1 (a light state, or no tables)
__device__ __forceinline__ int32_t HeavyIndex(const DeviceGraph& g, int32_t s) {
  const uint32_t w = g.heavy_bits[s >> 5];
  const int32_t r = g.heavy_rank[s >> 5];
  const uint32_t bit = 1u << (s & 31);
  return (w & bit) ? r + __popc(w & (bit - 1u)) : -1;
}

// The slots of a thread's kScanItems tokens on a real step under `tr` (see above): deg[k]
// comes in as the token's emitting arcs [b[k], b[k] + deg[k]) and leaves as the prefix that can
// pass. An 8-ary search (7 probes a round, about log8 of the degree rounds: 4 for the HLG's
// 1,212-arc states), the four tokens' searches in lockstep, round by round; in a round each
// token's probes load together before its first decision (a round trip a token a round; all
// four tokens' loads at once spilled at 128 registers). Invariant: every arc before lo
// passes, the arc at hi (if any) fails.
constexpr int kTrimFan = 8;
// Whether the trim keeps an arc of label `label` and weight `weight` out of a token of score
// `score`: a label-0 arc always, any other while its bound can pass (both operands loaded
// beforehand; no short-circuit, so neither load waits on the other)
__device__ __forceinline__ bool TrimKeeps(uint16_t label, float weight, float score, float rest, const LaneTrim& tr) {
  return (label == 0) | (score + (rest + weight) > tr.low);
}
// The weights-only search (LaneTrim::tw, Workspace::trim_weights): a token's search starts past
// its n0 label-0 arcs (always kept; the sorted arcs put them first, DeviceGraph::emit_blank), so
// every probe is an arc of label >= 1 and its decision needs its weight alone: one load a probe,
// and kTrimGroup tokens of the thread load their seven probes before either's decisions (14 loads,
// one round trip a round for the pair; four tokens spilled at 128 registers). The passing arcs
// are a prefix (sorted weights), so both searches find the same end. (At the default 512-token
// granules a thread holds one token: the gain there is the halved loads, docs/design.md.)
// A pair with no token left to search is skipped: at the default granule a thread's second pair
// is always empty, and its address arithmetic, predicated off, issued a third of every round's
// instructions (Nsight Compute's source page, s91; docs/speed-notes.md "The search's empty
// pairs"). (Splitting a pair with one live token into a one-token round as well spilled.)
#ifndef CUWFST_TRIM_GROUP
#define CUWFST_TRIM_GROUP 2
#endif
constexpr int kTrimGroup = CUWFST_TRIM_GROUP;  // tokens whose probes load together (divides kScanItems)
static_assert(kScanItems % kTrimGroup == 0, "whole groups");
// Probe j (1 <= j < kTrimFan) of [lo, lo + len): lo + floor(len * j / 8) in 32 bits (len = 8q + r:
// q * j + floor(r * j / 8), at most 7/8 of len); non-decreasing in j, and every position of the
// range once len < 8, so that round ends the search.
__device__ __forceinline__ int32_t TrimProbe(int32_t lo, int32_t len, int j) {
  static_assert(kTrimFan == 8, "the shifts below");
  return lo + (len >> 3) * j + (((len & 7) * j) >> 3);
}
__device__ __forceinline__ void TrimSearchWeights(const DeviceGraph& g, const LaneTrim& tr,
                                                  const float (&score)[kScanItems], const int32_t (&heavy)[kScanItems],
                                                  const uint32_t (&w0)[kScanItems], const uint32_t (&w1)[kScanItems],
                                                  int32_t (&lo)[kScanItems], int32_t (&hi)[kScanItems]) {
  float rest[kScanItems];
  for (bool more = true, round0 = true; more; round0 = false) {
    more = false;
#pragma unroll
    for (int k0 = 0; k0 < kScanItems; k0 += kTrimGroup) {
    bool live = false;
#pragma unroll
    for (int k = k0; k < k0 + kTrimGroup; ++k) live |= lo[k] < hi[k];
    if (!live) continue;
    float wt[kTrimGroup][kTrimFan - 1];
#pragma unroll
    for (int k = k0; k < k0 + kTrimGroup; ++k) {
      const int32_t len = hi[k] - lo[k];
#pragma unroll
      for (int j = 1; j < kTrimFan; ++j)
        wt[k - k0][j - 1] = len > 0 ? g.arc_weight[TrimProbe(lo[k], len, j)] : 0.f;
    }
    if (round0)
#pragma unroll
      for (int k = k0; k < k0 + kTrimGroup; ++k) rest[k] = LabelBound(tr, heavy[k], w0[k], w1[k]);
#pragma unroll
    for (int k = k0; k < k0 + kTrimGroup; ++k) {
      const int32_t len = hi[k] - lo[k];
      if (len <= 0) continue;
      int32_t nlo = lo[k], nhi = hi[k];
      bool failed = false;
#pragma unroll
      for (int j = 1; j < kTrimFan; ++j) {
        const int32_t pos = TrimProbe(lo[k], len, j);
        const bool keep = score[k] + (rest[k] + wt[k - k0][j - 1]) > tr.low;
        if (failed) continue;
        if (keep) nlo = pos + 1;
        else {
          nhi = pos;
          failed = true;
        }
      }
      lo[k] = nlo;
      hi[k] = nhi;
      more |= nlo < nhi;
    }
    }
  }
}
__device__ __forceinline__ void TrimDegrees(const DeviceGraph& g, const LaneTrim& tr, const float (&score)[kScanItems],
                                            const float (&maxw)[kScanItems], const int32_t (&b)[kScanItems],
                                            const int32_t (&heavy)[kScanItems], uint32_t n0,
                                            int32_t (&deg)[kScanItems]) {
  int32_t lo[kScanItems], hi[kScanItems];
  uint32_t w0[kScanItems], w1[kScanItems];
  LabelBitLoads(g, tr, heavy, w0, w1);
  float rest[kScanItems];  // each token's bound on its labels >= 1 (LabelBound, in the first round)
  bool search[kScanItems];
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    lo[k] = hi[k] = 0;
    search[k] = false;
    if (deg[k] == 0) continue;
    if (!(score[k] + (tr.lp_all + maxw[k]) > tr.low)) {  // no arc of the token can pass
      deg[k] = 0;
    } else if (deg[k] > kTrimMinDegree) {
      hi[k] = b[k] + static_cast<int32_t>(deg[k]);
      // (tw: past the token's label-0 arcs, n0's byte k; they are at most its degree)
      lo[k] = tr.tw ? min(b[k] + static_cast<int32_t>((n0 >> (8 * k)) & 0xFFu), hi[k]) : b[k];
      search[k] = true;
    }
  }
  if (tr.tw) {
    TrimSearchWeights(g, tr, score, heavy, w0, w1, lo, hi);
#pragma unroll
    for (int k = 0; k < kScanItems; ++k)
      if (search[k]) deg[k] = lo[k] - b[k];
    return;
  }
  for (bool more = true, round0 = true; more; round0 = false) {
    more = false;
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      if (lo[k] < hi[k]) {
        // The token's seven probes at lo + floor(len * j / 8), j = 1..7 (non-decreasing, and
        // every position of [lo, hi) once len < 8, so that round ends the search): their label
        // and weight loads all issued before the first decision (no load waits on another; a
        // short-circuit `||` made each weight's load wait on its label's, and each probe on the
        // branch before it), then the decisions (TrimKeeps; the sum is evaluated where the label
        // is 0 too, which changes no decision).
        const int64_t len = hi[k] - lo[k];
        int32_t pos[kTrimFan - 1];
        uint16_t lab[kTrimFan - 1];
        float wt[kTrimFan - 1];
#pragma unroll
        for (int j = 1; j < kTrimFan; ++j) {
          pos[j - 1] = lo[k] + static_cast<int32_t>(len * j / kTrimFan);
          lab[j - 1] = ArcLabel(g, pos[j - 1]);
          wt[j - 1] = g.arc_weight[pos[j - 1]];
        }
        // (after the probes' loads: the bitmap words' round trip ran beside them)
        if (round0) rest[k] = LabelBound(tr, heavy[k], w0[k], w1[k]);
        int32_t nlo = lo[k], nhi = hi[k];
        bool failed = false;
#pragma unroll
        for (int j = 0; j < kTrimFan - 1; ++j) {
          const bool keep = TrimKeeps(lab[j], wt[j], score[k], rest[k], tr);
          if (failed) continue;
          if (keep) nlo = pos[j] + 1;
          else {
            nhi = pos[j];
            failed = true;
          }
        }
        lo[k] = nlo;
        hi[k] = nhi;
        more |= nlo < nhi;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < kScanItems; ++k)
    if (search[k]) deg[k] = lo[k] - b[k];
}

// A thread's tokens first + k * stride (k < kScanItems) below `end` on a step of `phase`, for
// both scans (ScanKernel: blocked, stride 1; ScanSplitKernel: striped, stride kScanThreads): each token's first arc and upper bound written (begin, ub), deg[k] its slots (the
// prefix TrimDegrees keeps under `trim` when `trimmed`, else every arc of the phase), the fused_max best key
// (kFused: the best-scoring token with arcs), and with `hist` the bins bound's histogram of
// the slots (pool_bins). In two halves: TokenLoad (the reads and the writes that need no trim)
// and TokenTrim, so that ScanSplitKernel can read a round's tokens before the trim is known.
struct TokenRound {
  int32_t b[kScanItems];    // first arc of the phase
  float sc[kScanItems];     // score
  float mw[kScanItems];     // max emitting weight (real steps)
  int32_t deg[kScanItems];    // arcs of the phase (< 2^31: a state's arc range)
  int32_t heavy[kScanItems];  // the label bound's heavy index (HeavyIndex), -1: none
  uint32_t n0;                // byte k: token k's label-0 arcs (tw and a searched token), else 0
};
// token k's upper bound on its arc ends, as TokenTrim writes it to ub (hist: the bins bound,
// real steps only): score + (max_lp + max emitting weight), the ends' own shape (ArcEnd), so
// fp32 addition's monotony makes it a bound; +inf off real steps (no skip there)
__device__ __forceinline__ float RoundBound(const TokenRound& r, int k, int32_t phase, float max_lp) {
  return phase == kPhaseReal ? r.sc[k] + (max_lp + r.mw[k]) : INFINITY;
}
template <bool kFused>
__device__ __forceinline__ void TokenLoad(const DeviceGraph& g, const int32_t* state, const float* score,
                                          int32_t* begin, int32_t first, int32_t stride, int32_t end,
                                          int32_t phase, bool lb, bool tw, unsigned long long& best,
                                          TokenRound& r, const Workspace& ws, long long log_off) {
  r.n0 = 0u;
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    const int32_t i = first + k * stride;
    r.deg[k] = 0;
    r.heavy[k] = -1;
    r.b[k] = 0;
    r.sc[k] = r.mw[k] = 0.f;
    if (i < end) {
      const int32_t s = state[i];
      int32_t b, e;
      PhaseArcs(ArcsOf(g, s), phase, &b, &e);
      begin[i] = b;
      r.b[k] = b;
      r.sc[k] = score[i];
      if (log_off >= 0) {  // Workspace::lat_log_scan: S_t into the lane's log as it is read
        ws.lat_log_state[log_off + i] = s;
        ws.lat_log_score[log_off + i] = r.sc[k];
      }
      r.mw[k] = phase == kPhaseReal ? g.emit_maxw[s] : 0.f;
      r.deg[k] = e - b;
      // lb: a real step of a decoder with the label bound; only tokens the trim may search
      if (lb && r.deg[k] > kTrimMinDegree) r.heavy[k] = HeavyIndex(g, s);
      // tw: a real step of a decoder with the weights-only search (LaneTrim::tw, the same flag)
      if (tw && r.deg[k] > kTrimMinDegree) r.n0 |= static_cast<uint32_t>(g.emit_blank[s]) << (8 * k);
      if (kFused && e > b) best = MaxKey(best, BestTokenKey(r.sc[k], i));
    }
  }
}
// (TokenLoad's tokens first + k * stride below end: their bounds written to ub here, where the
// row's max trim.lp_all is known, which ScanSplitKernel's preloaded round reads before it)
__device__ __forceinline__ void TokenTrim(const DeviceGraph& g, bool trimmed, const LaneTrim& trim, int32_t* hist,
                                          float bin_ref, float* ub, int32_t first, int32_t stride, int32_t end,
                                          int32_t phase, TokenRound& r, int64_t (&deg)[kScanItems]) {
#pragma unroll
  for (int k = 0; k < kScanItems; ++k)
    if (first + k * stride < end) ub[first + k * stride] = RoundBound(r, k, phase, trim.lp_all);
  if (trimmed) TrimDegrees(g, trim, r.sc, r.mw, r.b, r.heavy, r.n0, r.deg);
  if (hist)
#pragma unroll
    for (int k = 0; k < kScanItems; ++k)
      if (r.deg[k] > 0) atomicAdd(&hist[PoolBinOf(RoundBound(r, k, kPhaseReal, trim.lp_all), bin_ref)], r.deg[k]);
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) deg[k] = r.deg[k];
}
template <bool kFused>
__device__ __forceinline__ void TokenSlots(const DeviceGraph& g, const int32_t* state, const float* score,
                                           int32_t* begin, float* ub, int32_t first, int32_t end, int32_t phase,
                                           bool trimmed, const LaneTrim& trim, bool lb, int32_t* hist, float bin_ref,
                                           unsigned long long& best, int64_t (&deg)[kScanItems],
                                           const Workspace& ws, long long log_off) {
  TokenRound r;
  TokenLoad<kFused>(g, state, score, begin, first, 1, end, phase, lb, trim.tw, best, r, ws, log_off);
  TokenTrim(g, trimmed, trim, hist, bin_ref, ub, first, 1, end, phase, r, deg);
}

// A real step's row, its maxima (the bounds' acoustic ingredient: the walkers' skip and the
// trim's) and, with `want_trim`, the lane's trim, by the whole CTA with one barrier (every CTA
// of a lane computes the same, bit for bit). The anchor (want_trim): the token FinalizeKernel
// named for step t (LaneCounters::best_key, a token scoring the previous step's exact max; any
// token of the frontier would do, this one gives the tightest L); L = the best end over its
// first kTrimAnchorArcs emitting arcs, low = L - beam when that is below L (in a GPU-pruned
// lattice decode, Workspace::lattice == 2, the lower LatTrimLow). Without a key for this
// step's frontier, or without want_trim, low is -inf: nothing is trimmed. The CTA's last warp
// walks the anchor's arcs while the other warps read the row (the last: in ScanSplitKernel's
// chunks of up to 1,920 tokens it holds no tokens, so the token warps read theirs meanwhile;
// warp 0 without Workspace::scan_preload, as before).
__device__ __forceinline__ LaneTrim RowAndTrim(const DeviceGraph& g, const Workspace& ws, int32_t lane, int32_t t,
                                               const StepParams& p, bool want_trim, unsigned long long key,
                                               const int32_t* state, const float* score, int32_t n, float beam,
                                               const float** row32, const uint16_t** row16) {
  constexpr int kWarps = kScanThreads / 32;
  __shared__ float s_max[2][kWarps];
  __shared__ float s_low, s_anchor;
  const LaneInput in = ws.inputs[lane];
  const int64_t off = static_cast<int64_t>(t - in.t0) * in.stride_t;
  const float* r32 = nullptr;
  const uint16_t* r16 = nullptr;
  if (p.lp_is_f16) r16 = static_cast<const uint16_t*>(in.base) + off;
  else r32 = static_cast<const float*>(in.base) + off;
  const int32_t wid = static_cast<int32_t>(threadIdx.x >> 5), me = static_cast<int32_t>(threadIdx.x & 31);
  if (want_trim && wid == (ws.scan_preload ? kWarps - 1 : 0)) {
    float m = -INFINITY;
    const int32_t i = static_cast<int32_t>(key & 0xFFFFFFFFull);
    if ((key & kBestKeyValid) && static_cast<int32_t>((key >> 32) & 0x7FFFFFFFull) == t && i >= 0 && i < n) {
      const float sc = score[i];
      int32_t b, e;
      PhaseArcs(ArcsOf(g, state[i]), kPhaseReal, &b, &e);
      e = min(e, b + kTrimAnchorArcs);
      for (int32_t arc = b + me; arc < e; arc += 32)
        m = fmaxf(m, ArcEnd(sc, g.arc_weight[arc], ArcAcoustic(g, arc, kPhaseReal, r32, r16)));
    }
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, d));
    if (me == 0) {
      // a GPU-pruned lattice decode trims lower: every arc it leaves out is one the records'
      // filter would drop (common.cuh LatTrimLow; -inf: the lane does not trim this step)
      const float low = ws.lattice == 2 ? LatTrimLow(g, ws, ws.lanes[lane], m - beam) : m - beam;
      s_low = low < m ? low : -INFINITY;
      s_anchor = m;
    }
  }
  float m = -INFINITY, mr = -INFINITY;
  // the label bound: the row's three best labels >= 1 (each merge keeps the top three of a
  // multiset of (log-prob, label); under a tie of log-probs, which label is named may differ)
  const bool lb = ws.label_bound != 0 && want_trim;
  RowTop top;
  for (int32_t v = threadIdx.x; v < g.vocab_size; v += blockDim.x) {
    const float x = r16 ? __half2float(__ushort_as_half(r16[v])) : r32[v];
    m = fmaxf(m, x);
    if (v > 0) {
      mr = fmaxf(mr, x);
      if (lb) top.Add(x, v);
    }
  }
#pragma unroll
  for (int d = 16; d >= 1; d >>= 1) {
    m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, d));
    mr = fmaxf(mr, __shfl_xor_sync(0xFFFFFFFFu, mr, d));
  }
  __shared__ float s_topv[3][kWarps];
  __shared__ int32_t s_topi[2][kWarps];
  if (lb) {
    WarpTop(top);
    if (me == 0) {
      s_topv[0][wid] = top.v0;
      s_topv[1][wid] = top.v1;
      s_topv[2][wid] = top.v2;
      s_topi[0][wid] = top.i0;
      s_topi[1][wid] = top.i1;
    }
  }
  if (me == 0) {
    s_max[0][wid] = m;
    s_max[1][wid] = mr;
  }
  __syncthreads();
  LaneTrim tr;
  float a = -INFINITY, r = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    a = fmaxf(a, s_max[0][w]);
    r = fmaxf(r, s_max[1][w]);
  }
  tr.lp_all = a;
  tr.lp_rest = r;
  if (lb) {
    // each warp merges the warps' lists, one a lane, as it merged its lanes' (in a warp the
    // lanes may name different labels of one log-prob; any of them gives a bound)
    static_assert(kWarps <= 32, "a warp's list a lane");
    RowTop all;
    if (me < kWarps) {
      all.v0 = s_topv[0][me];
      all.v1 = s_topv[1][me];
      all.v2 = s_topv[2][me];
      all.i0 = s_topi[0][me];
      all.i1 = s_topi[1][me];
    }
    WarpTop(all);  // (every lane ends with the merge of all 32: lanes kWarps.. hold empty lists)
    // two labels >= 1 (else every label >= 1 is the best one: lp_rest is exact already)
    tr.lb = all.i1 >= 0;
    const int32_t fold = g.label_words * 32;
    tr.bit0 = all.i0 % fold;
    tr.bit1 = all.i1 % fold;
    tr.lp_2nd = all.v1;
    tr.lp_3rd = all.v2;
  }
  tr.low = want_trim ? s_low : -INFINITY;
  tr.anchor = want_trim ? s_anchor : -INFINITY;
  tr.tw = want_trim && ws.trim_weights != 0;  // (ScanSplitKernel's TokenLoad takes the same flag: its `tw`)
  *row32 = r32;
  *row16 = r16;
  return tr;  // (each scan calls it once a step: s_max and s_low are not written again before the kernel ends)
}

// Every CTA: publish, then count; true in the CTA that counts last (it sees every lane's total).
// (common.cuh GridLastCta's pattern, kept written out here: through the helper the
// non-persistent split scans took 1-6 more registers on sm_90)
__device__ __forceinline__ bool ScanGridLast(Workspace& ws) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(ws.scan_done, 1) == static_cast<int32_t>(gridDim.x) - 1;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// Streams' arena guard (Workspace::arena_guard on: a stream advance), by warp 0 of an emitting
// step's last scan CTA, after every lane's scan applied its step and before anything of the
// step appends to the log: the most the step can append, each stepping lane's claims bound
// (PooledClaimsBound: min(claims_cap, its slots), since a claim is a distinct destination of
// one of the step's slots and the step appends at most one entry a claim) plus, on a real
// step, eps_iterations x main_q for its closure passes (each appends at most a frontier),
// summed over the lanes. Unless 2 (cursor + need) <= *arena_limit
// (after the step at most half the log is in use: the GC round that follows has its free
// tail), every stepping lane is put back where the step found it (PooledUndoStep: frontier,
// t, buf, beam; the static layout's scan wrote nothing else the step taken again does not
// rewrite), the step gets no slots, and *arena_pause takes the need, which idles the
// sequence's later steps (ScanLaneSize). One decision for the whole grid, so every lane
// waits or steps alike. Returns whether the step fits (the same in every thread of the warp).
__device__ __forceinline__ bool ArenaStepFits(Workspace& ws) {
  const unsigned long long per_pass = static_cast<unsigned long long>(ws.eps_iterations) *
                                      static_cast<unsigned long long>(ws.main_q);
  unsigned long long need = 0;
  for (int32_t base = 0; base < ws.max_lanes; base += 32) {
    const int32_t l = base + static_cast<int32_t>(threadIdx.x);
    if (l >= ws.max_lanes) continue;
    // (volatile: the lanes' CTAs wrote these; this SM's L1 may hold old lines)
    const volatile LaneCounters* v = &ws.lanes[l];
    const int32_t phase = v->phase;
    if (phase == kPhaseIdle) continue;
    need += static_cast<unsigned long long>(PooledClaimsBound(ws, phase, v->total_arcs)) +
            (phase == kPhaseReal ? per_pass : 0ull);
  }
  for (int32_t o = 16; o > 0; o >>= 1) need += __shfl_xor_sync(0xffffffffu, need, o);
  const unsigned long long cursor = *reinterpret_cast<volatile unsigned long long*>(ws.arena_cursor);
  const bool fits = 2ull * (cursor + need) <= static_cast<unsigned long long>(*ws.arena_limit);
  if (fits) return true;
  for (int32_t base = 0; base < ws.max_lanes; base += 32) {
    const int32_t l = base + static_cast<int32_t>(threadIdx.x);
    if (l < ws.max_lanes && *reinterpret_cast<volatile int32_t*>(&ws.lanes[l].phase) != kPhaseIdle)
      PooledUndoStep(&ws.lanes[l]);
  }
  if (threadIdx.x == 0) *ws.arena_pause = need > 0 ? need : 1ull;
  return false;
}

// The grid's last scan CTA, warp 0: the pooled hand-out (or, an emitting step of a stream
// advance, the arena guard) and the flattened slot space.
__device__ __forceinline__ void LaneScanTail(Workspace& ws, bool step) {
  // One warp scans the lanes' totals, 32 at a time, in int64: each lane's total is below
  // 2^31 (ScanKernel drops a lane's step past that), the batch's sum need not be, and no
  // lane loses its step because of the others.
  // Pooled: the step's regions are handed out here by the slots (PooledHandOut), unless
  // MaxKernel hands them out by the admissible arcs (pool_at_max); a step that does not fit
  // gets no slots (every lane's total 0).
  if (ws.pooled && !ws.pool_at_max && ws.max_lanes <= 32) {
    // one pass: the hand-out's reads of the lanes' slots serve the slot offsets too
    const HandOutResult r = PooledHandOutWarp(ws, false);
    const int32_t l = static_cast<int32_t>(threadIdx.x);
    const int64_t v = r.fits ? r.slots : 0;
    int64_t total;
    const int64_t excl = WarpExclusiveScan(v, &total);
    if (l < ws.max_lanes) ws.lane_arc_offsets[l] = excl;
    // MaxKernel's slot space without the lanes whose max is known (Workspace::max_known), as below
    int64_t total_m = 0;
    if (step && ws.max_known) {
      const int64_t vm = l < ws.max_lanes && *reinterpret_cast<volatile int32_t*>(&ws.lanes[l].max_known) ? 0 : v;
      const int64_t excl_m = WarpExclusiveScan(vm, &total_m);
      if (l < ws.max_lanes) ws.max_lane_offsets[l] = excl_m;
    }
    if (threadIdx.x == 0) {
      if (step && ws.max_known) ws.max_lane_offsets[ws.max_lanes] = total_m;
      ws.lane_arc_offsets[ws.max_lanes] = total;
      *ws.scan_done = 0;
      *ws.scan_ticket = 0;
    }
    return;
  }
  bool fits = ws.pooled && !ws.pool_at_max ? PooledHandOut(ws, false) : true;
  if (step && !ws.pooled && *ws.arena_guard != 0ull) fits = ArenaStepFits(ws);
  int64_t carry = 0, carry_m = 0;
  const bool known = step && ws.max_known;  // MaxKernel's slot space too (Workspace::max_known)
  for (int32_t base = 0; base < ws.max_lanes; base += 32) {
    const int32_t l = base + threadIdx.x;
    // (volatile: the lanes' CTAs wrote these; this SM's L1 may hold old lines)
    const int64_t v = l < ws.max_lanes && fits ? *reinterpret_cast<volatile int32_t*>(&ws.lanes[l].total_arcs) : 0;
    int64_t step_total;
    const int64_t excl = WarpExclusiveScan(v, &step_total);
    if (l < ws.max_lanes) ws.lane_arc_offsets[l] = carry + excl;
    carry += step_total;
    if (known) {
      const int64_t vm = l < ws.max_lanes && *reinterpret_cast<volatile int32_t*>(&ws.lanes[l].max_known) ? 0 : v;
      int64_t step_m;
      const int64_t excl_m = WarpExclusiveScan(vm, &step_m);
      if (l < ws.max_lanes) ws.max_lane_offsets[l] = carry_m + excl_m;
      carry_m += step_m;
    }
  }
  if (threadIdx.x == 0) {
    if (known) ws.max_lane_offsets[ws.max_lanes] = carry_m;
    ws.lane_arc_offsets[ws.max_lanes] = carry;
    *ws.scan_done = 0;
    *ws.scan_ticket = 0;  // ScanSplitKernel's (every CTA took its ticket before counting)
  }
}

// step: an emitting step's scan (ScanKernel, ScanSplitKernel), not a closure pass's (EpsScanKernel)
__device__ __forceinline__ void LaneScanLastBlock(Workspace& ws, bool step) {
  if (ScanGridLast(ws) && threadIdx.x < 32) LaneScanTail(ws, step);
}

// Pooled layout: a lane whose previous step's claims list overflowed has keys in its table
// that no claim lists (FindOrClaim), so the targeted clears missed them: one CTA of the lane
// wipes the whole table before this step's last block hands the pool's tables out again
// (that block starts after every CTA, this one included, is done). ScanKernel's CTA, or
// ScanSplitKernel's chunk-0 CTA (the lane's other CTAs read neither claims nor the table).
__device__ __forceinline__ void WipeOverflowedTable(const Workspace& ws, LaneCounters& lc) {
  if (!(ws.pooled && lc.claims > lc.claim_cap)) return;  // (uniform over the CTA)
  uint32_t* keys = ws.hash_key + lc.hash_off;
  unsigned long long* payload = ws.hash_payload + lc.hash_off;
  for (int32_t i = threadIdx.x; i < lc.hash_cap; i += blockDim.x) {
    keys[i] = kEmptyKey;
    payload[i] = 0ull;
  }
  __syncthreads();
  if (threadIdx.x == 0) lc.claims = 0;
  __syncthreads();
}

// The bins bound (Workspace::pool_bins, pool_bins.h): a scan CTA's histogram of its tokens'
// slots by bin, turned into suffix sums (entry b: the slots in bins >= b) by a block scan
// over the bins in reverse, and published into the lane's bin_slots: stored (ScanKernel, the
// lane's only CTA) or added (ScanSplitKernel, one CTA per chunk; ExpandKernel zeroes them
// for the next step). Every thread of the CTA calls it; `tmp` is the scans' block-scan storage.
template <typename TempStorage>
__device__ __forceinline__ void PublishBins(const Workspace& ws, int32_t lane, const int32_t* hist,
                                            TempStorage& tmp, bool add) {
  using BlockScan = cub::BlockScan<int64_t, kScanThreads>;
  static_assert(kPoolBins <= kScanThreads, "one bin a thread");
  __syncthreads();  // the histogram is complete, and tmp is free
  const int32_t b = kPoolBins - 1 - static_cast<int32_t>(threadIdx.x);
  const int64_t v = b >= 0 ? hist[b] : 0;
  int64_t incl;
  BlockScan(tmp).InclusiveSum(v, incl);
  if (b >= 0 && incl > 0) {
    // (at most the lane's slots; a lane past 2^31 loses its step: kOverflowSlots)
    const int32_t c = incl > INT32_MAX ? INT32_MAX : static_cast<int32_t>(incl);
    int32_t* dst = ws.bin_slots + static_cast<int64_t>(lane) * kPoolBins + b;
    if (add) atomicAdd(dst, c);
    else *dst = c;
  } else if (b >= 0 && !add) {
    ws.bin_slots[static_cast<int64_t>(lane) * kPoolBins + b] = 0;
  }
  __syncthreads();  // tmp is reused
}

// Workspace::lat_log_scan: where the step's n tokens of S_t go in the lane's log (its frontier_total
// before the step; the counters as every CTA of the lane reads them before the step is applied), or
// -1: no log, or the lane's region full (as LatLogJobFor: the host grows the log and decodes again)
__device__ __forceinline__ long long LatScanLogOff(const Workspace& ws, const LaneCounters& lc, int32_t lane, int32_t n) {
  if (!ws.lat_log_scan || n <= 0) return -1;
  const long long before = lc.frontier_total;
  return before + n > ws.lat_log_lane ? -1 : static_cast<long long>(lane) * ws.lat_log_lane + before;
}

// The frontier a lane's step reads this launch (as ScanKernel decides): 0 with *idle for a lane
// without a step (unused, finished, waiting for frames, held back since an earlier step of the
// sequence found no room in the winners log (arena_pause), or the pooled batch paused).
__device__ __forceinline__ int32_t ScanLaneSize(const Workspace& ws, const LaneCounters& lc, bool* idle) {
  const int32_t T = lc.length, t = lc.t;
  const bool arena_short = t < T && *ws.arena_pause != 0ull;
  const bool paused = ws.pooled && ws.pool_need[kPoolPauseSlot] != 0ull;
  *idle = T < 0 || t > T || (t < T && t >= lc.avail) || arena_short || paused;
  return *idle ? 0 : min(lc.next_size, lc.tok_cap[lc.buf]);
}

// One thread: a lane's counters after its split scan, from the step `o` its last CTA found
// (ScanKernel's thread 0 writes the same). The frontier's region, the hints' capacity and the
// previous max come from the counters, which no CTA has written since the step began.
__device__ __forceinline__ void ApplyLaneStep(const DeviceGraph& g, const Workspace& ws, int32_t lane,
                                              LaneCounters& lc, const StepParams& p, const LaneStepOut& o, bool fused) {
  if (ws.lat_log_scan) LatLogPending(g, ws, lane, lc);  // (the step before's scalars, before any counter changes)
  if (lc.late_undo == 1) lc.late_undo = 0;  // (the step before's Finalize has read it; a 2 is the host's)
  if (o.idle) {
    lc.phase = kPhaseIdle;
    lc.step_phase = kPhaseIdle;
    lc.total_arcs = 0;
    return;
  }
  const int32_t T = lc.length, t = lc.t, cur = lc.buf, n = o.n;
  const int32_t hshift = LaneHintShift(ws, lc, cur, n);  // as the scan wrote the hints
  const int64_t hint_slots = static_cast<int64_t>(HintCap(ws, lc, cur)) << hshift;
  const int32_t prev_max = ws.pooled ? lc.max_ord : 0;
  int64_t total = o.total;
  if (total > INT32_MAX) {  // cannot index this step's slots in int32: drop the lane's step
    lc.overflow |= kOverflowSlots;
    total = 0;
  }
  // the sentinel, only where the frontier has a region (HasTokenRegion, as ScanKernel)
  if (HasTokenRegion(ws, lc, cur)) ws.arc_offsets[lc.tok_off[cur] + n] = static_cast<int32_t>(total);
  lc.frontier_size = n;
  lc.next_size = 0;
  lc.phase = o.phase;
  lc.total_arcs = static_cast<int32_t>(total);
  if (total > 0) atomicAdd(ws.slot_total, static_cast<unsigned long long>(total));
  lc.max_known = ws.max_known && o.known && total > 0 ? 1 : 0;
  if (lc.max_known) atomicAdd(ws.slot_total + 1, static_cast<unsigned long long>(total));
  lc.prev_beam = lc.beam;  // (a paused step puts it back: PooledUndoStep)
  lc.beam = UpdateBeam(lc.beam, n, t, T + 1, p.search_beam, p.min_active, p.max_active, lc.online != 0);
  lc.t = t + 1;
  lc.buf = cur ^ 1;
  if (ws.pooled) lc.prev_max_ord = prev_max;  // (a paused step puts it back)
  lc.max_ord = FloatToOrderedInt((fused || AnchorStartsMax(ws)) && total > 0 ? o.lower : -INFINITY);
  lc.max_lp = o.max_lp;
  lc.hint_ok = total <= hint_slots ? hshift : 0;  // the shift itself (>= kHintShift > 0), or 0
  lc.step_phase = o.phase;  // kept for the lattice walk, as ScanKernel does
  lc.step_size = n;
  lc.step_hint_ok = lc.hint_ok;
  lc.claims = 0;
  lc.admit = 0;
  lc.eps_list_n[0] = 0;
  lc.eps_touched_n[0] = 0;
  lc.max_frontier = max(lc.max_frontier, n);
  lc.frontier_total += n;
  lc.lp_row_f32 = o.row32;
  lc.lp_row_f16 = o.row16;
  if (ws.lat_log_scan) lc.lat_log_pending = 1;
}

template <bool kFused>
__global__ void __launch_bounds__(kScanThreads)
ScanKernel(DeviceGraph g, Workspace ws, StepParams p) {
  StepKernelEntry();
  using BlockScan = cub::BlockScan<int64_t, kScanThreads>;
  using BlockReduce = cub::BlockReduce<float, kScanThreads>;
  using BlockKey = cub::BlockReduce<unsigned long long, kScanThreads>;
  __shared__ union {
    typename BlockScan::TempStorage scan;
    typename BlockReduce::TempStorage reduce;
    typename BlockKey::TempStorage key;
  } tmp;
  __shared__ int64_t running;
  __shared__ unsigned long long best_key;
  __shared__ int32_t hist[kPoolBins];  // the bins bound (pool_bins): this lane's slots by bin
  const int32_t lane = blockIdx.x;
  LaneCounters& lc = ws.lanes[lane];
  WipeOverflowedTable(ws, lc);
  const int32_t T = lc.length;
  const int32_t t = lc.t;
  // The arena guard (streams): an earlier step of this sequence found no room in the log for
  // its worst case (ArenaStepFits, in the last scan CTA: it put every lane back), so every lane
  // waits, keeping t and its frontier, until the host has collected garbage and grown the log.
  const bool arena_short = t < T && *ws.arena_pause != 0ull;
  // A pooled batch paused by an earlier step of this sequence (LaneScanLastBlock): every
  // lane keeps t and its frontier until the host grows the pools and resumes the batch.
  const bool paused = ws.pooled && ws.pool_need[kPoolPauseSlot] != 0ull;
  if (T < 0 || t > T || (t < T && t >= lc.avail) || arena_short || paused) {
    if (threadIdx.x == 0) {
      if (ws.lat_log_scan) LatLogPending(g, ws, lane, lc);  // (as ApplyLaneStep)
      lc.phase = kPhaseIdle;
      lc.step_phase = kPhaseIdle;
      lc.total_arcs = 0;
      if (lc.late_undo == 1) lc.late_undo = 0;
    }
    LaneScanLastBlock(ws, true);
    return;
  }
  // The frontier the previous step (and its epsilon closure) built; at t = 0 the start
  // token and its closure. The step's scratch shares the frontier's region (tok_off).
  const int32_t cur = lc.buf;
  const int32_t n = min(lc.next_size, lc.tok_cap[cur]);
  const int64_t q = lc.tok_off[cur];
  const int32_t* state = ws.tok_state[cur] + q;
  const float* score = ws.tok_score[cur] + q;
  int32_t* begin = ws.tok_begin + q;
  float* ub = ws.tok_ub + q;
  int32_t* offsets = ws.arc_offsets + q;
  int32_t* hint = ws.tok_hint + HintBase(ws, lc, lane, cur);
  const int32_t hshift = LaneHintShift(ws, lc, cur, n);  // every 32nd slot, or coarser (pool_hints)
  const int64_t hint_slots = static_cast<int64_t>(HintCap(ws, lc, cur)) << hshift;
  // pooled: the max as the step finds it (the previous step's; read before thread 0 rewrites it)
  const int32_t prev_max = ws.pooled ? lc.max_ord : 0;
  const long long log_off = LatScanLogOff(ws, lc, lane, n);

  int32_t phase = kPhaseReal;
  if (t == T) {
    int any_final = 0;
    for (int32_t i = threadIdx.x; i < n && !any_final; i += blockDim.x)
      any_final |= g.final_count[state[i]] > 0;
    any_final = __syncthreads_or(any_final);
    phase = (any_final || !p.allow_partial) ? kPhaseFinal : kPhaseRedirect;
  }
  // the bins bound: a real step's tokens binned by their upper bound against prev_max
  const bool bins = ws.pool_bins && phase == kPhaseReal;
  const float bin_ref = OrderedIntToFloat(prev_max);
  if (bins)
    for (int32_t i = threadIdx.x; i < kPoolBins; i += blockDim.x) hist[i] = 0;
  if (threadIdx.x == 0) running = 0;
  // The row of a real step and its maxima: the bounds' acoustic ingredient (the walkers' skip,
  // and the trim's, which needs them before the degrees).
  float max_lp = 0.f;
  const float* row32 = nullptr;
  const uint16_t* row16 = nullptr;
  LaneTrim trim;  // (low = -inf: the full degrees)
  if (phase == kPhaseReal) {
    trim = RowAndTrim(g, ws, lane, t, p, ws.trim && n > 0, lc.best_key, state, score, n,
                      UpdateBeam(lc.beam, n, t, T + 1, p.search_beam, p.min_active, p.max_active, lc.online != 0),
                      &row32, &row16);
    max_lp = trim.lp_all;
  }
  const bool trimmed = trim.low > -INFINITY;
  __syncthreads();
  constexpr bool fused = kFused;  // ws.fused_max, as a template argument: the other variants compile as before
  unsigned long long best = 0ull;  // fused_max: this thread's best token with arcs
  float umax = -INFINITY;          // max_known: this thread's largest bound of a token with slots
  constexpr int kPerRound = kScanThreads * kScanItems;
  for (int32_t base = 0; base < n; base += kPerRound) {
    const int32_t first = base + threadIdx.x * kScanItems;
    int64_t deg[kScanItems];
    TokenSlots<fused>(g, state, score, begin, ub, first, n, phase, trimmed, trim, trim.lb, bins ? hist : nullptr, bin_ref, best,
                      deg, ws, log_off);
    if (ws.max_known)  // U over the tokens with slots (this thread wrote their ub just now)
#pragma unroll
      for (int k = 0; k < kScanItems; ++k)
        if (first + k < n && deg[k] > 0) umax = fmaxf(umax, ub[first + k]);
    int64_t excl[kScanItems], total;
    BlockScan(tmp.scan).ExclusiveSum(deg, excl, total);
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      const int32_t i = first + k;
      const int64_t off = running + excl[k];
      if (i < n) offsets[i] = off > INT32_MAX ? INT32_MAX : static_cast<int32_t>(off);
      // every sampled slot m << kHintShift inside [off, off + deg) names token i
      const int64_t last = min(off + deg[k], hint_slots);
      for (int64_t m = (off + (1 << hshift) - 1) >> hshift; (m << hshift) < last; ++m)
        hint[m] = i;
    }
    __syncthreads();
    if (threadIdx.x == 0) running += total;
    __syncthreads();
  }
  if (bins) PublishBins(ws, lane, hist, tmp.scan, false);
  if (fused) {
    const unsigned long long k = BlockKey(tmp.key).Reduce(best, MaxKey);
    if (threadIdx.x == 0) best_key = k;
    __syncthreads();  // also frees tmp for the reduce below
  }
  // fused_max: L, the lower bound FusedExpandKernel starts from; pool_anchor / max_anchor: the trim's anchor
  float lower = AnchorStartsMax(ws) ? trim.anchor : -INFINITY;
  if (fused && threadIdx.x < 32) lower = BestTokenEnd(g, best_key, state, score, phase, row32, row16);
  int32_t known = 0;  // max_known: every token with slots bounded by the anchor (Workspace::max_known)
  if (ws.max_known) {
    const float u = BlockReduce(tmp.reduce).Reduce(umax, [](float a, float b) { return fmaxf(a, b); });  // (thread 0)
    known = lower > -INFINITY && u <= lower ? 1 : 0;  // (u: tok_ub's, max_lp inside)
  }
  // the lane's counters (the step's slots, phase and beams; the sentinel after the offsets where
  // the frontier has a region; the step's max starts at -inf, MaxKernel raises it, or at L)
  if (threadIdx.x == 0)
    ApplyLaneStep(g, ws, lane, lc, p, LaneStepOut{0, phase, n, known, running, max_lp, lower, row32, row16}, fused);
  LaneScanLastBlock(ws, true);
}

// The phase trace (Workspace::scan_trace, CUWFST_SCAN_TRACE): thread 0 of each CTA writes the
// %globaltimer (ns) at these marks of its first item, into the step's ring entry. 0 = never
// reached (an idle or empty item skips the marks of the work it has none of).
enum ScanTraceMark : int {
  kTrEntry = 0,    // after StepKernelEntry (the previous kernel is done)
  kTrPlan,         // the plan in shared memory (the lanes' counters read)
  kTrTicket,       // the first item's ticket known
  kTrTrim,         // the row, its maxima and the trim (RowAndTrim) done
  kTrDegrees,      // the item's degrees and their block scan or sum done (before the look-back)
  kTrLookBack,     // the look-back done (the chunk's prefix known)
  kTrEmit,         // the offsets and hints written (the item's work done)
  kTrLaneDone,     // counted done on the lane (and, the lane's last CTA, its step out)
  kTrGridLast,     // the grid's last CTA: every CTA counted (PersistLastBlock)
  kTrTail,         // the grid's last CTA: the lanes' steps and the slot space written
  kTrInfo,         // lane | chunk << 16 | one_round << 28 | lane_last << 29 | grid_last << 30
  kTrTokens,       // the item's tokens (hi - lo)
  kScanTraceWords
};
// This CTA's words of the current step's ring entry (nullptr: the trace is off).
__device__ __forceinline__ unsigned long long* ScanTraceRow(const Workspace& ws) {
  if (ws.scan_trace == nullptr) return nullptr;
  const int32_t step = *reinterpret_cast<volatile int32_t*>(ws.scan_trace_step);
  return ws.scan_trace + (static_cast<int64_t>(step % ws.scan_trace_cap) * gridDim.x + blockIdx.x) * kScanTraceWords;
}
__device__ __forceinline__ void ScanTraceAt(unsigned long long* row, int mark) {
  if (row != nullptr && threadIdx.x == 0) row[mark] = GlobalTimer();
}

// The persistent split scan (scan_order 2): its grid is at most one wave of CTAs, each taking
// (lane, chunk) items until none is left, the items being the lanes' non-empty chunks only;
// max_lanes is at most kPersistMaxLanes (one lane a thread in the plan).
constexpr int32_t kPersistMaxLanes = kScanThreads;

// The persistent scan's end: every CTA counts itself done; the last applies every lane's step
// (its threads over the lanes; no CTA reads the counters any more), then warp 0 hands the
// pooled regions out and builds the flattened slot space (LaneScanTail).
__device__ __forceinline__ void PersistLastBlock(const DeviceGraph& g, Workspace& ws, const StepParams& p, bool fused,
                                                 unsigned long long* trace = nullptr) {
  if (!ScanGridLast(ws)) return;
  ScanTraceAt(trace, kTrGridLast);
  for (int32_t l = threadIdx.x; l < ws.max_lanes; l += blockDim.x) {
    // (volatile: other CTAs wrote it; this SM's L1 may hold old lines)
    const volatile LaneStepOut* v = ws.scan_out + l;
    LaneStepOut o;
    o.idle = v->idle;
    o.phase = v->phase;
    o.n = v->n;
    o.known = v->known;
    o.total = v->total;
    o.max_lp = v->max_lp;
    o.lower = v->lower;
    o.row32 = v->row32;
    o.row16 = v->row16;
    ApplyLaneStep(g, ws, l, ws.lanes[l], p, o, fused);
  }
  __syncthreads();  // (the tail reads what the other threads wrote)
  if (threadIdx.x < 32) LaneScanTail(ws, true);
  if (trace != nullptr && threadIdx.x == 0) {
    trace[kTrInfo] |= 1ull << 30;
    trace[kTrTail] = GlobalTimer();
    __threadfence();
    *ws.scan_trace_step += 1;  // (every CTA read the step on entry; the next launch sees the new one)
  }
}

// ScanSplitKernel — ScanKernel over several CTAs per lane (scan_split > 1), so that the
// largest frontier no longer sets the step's time alone (one CTA walked a 118,893-token lane
// while the others waited, docs/benchmarks.md). Grid = max_lanes * scan_split blocks of
// kScanThreads; a CTA takes a ticket (an atomic counter, so a CTA only ever waits on CTAs
// that already run: no deadlock whatever order the blocks are scheduled in) and with it
// chunk c = ticket % scan_split of lane ticket / scan_split (lane-major), or with
// scan_chunk_major chunk ticket / max_lanes of lane ticket % max_lanes: a contiguous run of
// whole scan_round-token granules of the lane's frontier (empty chunks, all after the
// non-empty ones, exit at once).
// Pass A: each token's first arc, upper bound and degree (parked in arc_offsets), the
// chunk's degree sum. Then a decoupled look-back over the lane's earlier chunks
// (scan_status: {kStatusAgg | sum} or {kStatusIncl | inclusive prefix}) gives the chunk's
// exclusive prefix. Pass B: the exclusive scan into arc_offsets and the slot hints.
// The lane's last CTA to finish (scan_lane_done) writes the lane's counters exactly as
// ScanKernel's thread 0 does and zeroes the lane's status words; the last CTA of the grid
// builds lane_arc_offsets (LaneScanLastBlock). Every CTA of a lane reads the lane's
// counters before counting itself done, so the last one's writes cannot race them.
// Reads and writes: as ScanKernel; same results bit for bit (integer sums). The layout
// rules are ScanKernel's too: the lane's frontier and scratch at tok_off[buf] (tok_cap[buf]
// tokens), the hints at HintBase / HintCap, the sentinel only with a region
// (HasTokenRegion), the pooled claims-overflow wipe (chunk 0's CTA), the pooled pause, the
// arena guard against *arena_limit; the pooled regions of the step are handed out (or the
// batch paused) by the grid's last CTA (LaneScanLastBlock, shared with ScanKernel), after
// every lane's last CTA has written its phase, slots, buf and beams.
// fused_max: each CTA reduces its chunk's best token (a warp reduction per round into shared
// memory) and atomicMaxes it into scan_best[lane] before counting itself done; the lane's
// last CTA computes L from it, over the lane's frontier region (tok_off[buf]), and zeroes it.
constexpr unsigned long long kStatusAgg = 1ull << 62;
constexpr unsigned long long kStatusIncl = 1ull << 63;
constexpr unsigned long long kStatusValue = kStatusAgg - 1;

template <bool kFused, bool kPersist, bool kTrace = false>
__global__ void __launch_bounds__(kScanThreads)
ScanSplitKernel(DeviceGraph g, Workspace ws, StepParams p) {
  StepKernelEntry();
  // the phase trace (CUWFST_SCAN_TRACE; the host sizes it by the persistent grid only). kTrace
  // false: tr is a constant nullptr and every mark below folds away (the kernel as before)
  unsigned long long* const tr = kPersist && kTrace ? ScanTraceRow(ws) : nullptr;
  if (tr != nullptr && threadIdx.x == 0) {
    for (int w = 0; w < kScanTraceWords; ++w) tr[w] = 0ull;
    tr[kTrEntry] = GlobalTimer();
  }
  using BlockScan = cub::BlockScan<int64_t, kScanThreads>;
  using BlockReduce = cub::BlockReduce<float, kScanThreads>;
  using BlockSum = cub::BlockReduce<int64_t, kScanThreads>;
  using PlanScan = cub::BlockScan<int32_t, kScanThreads>;
  __shared__ union {
    typename BlockScan::TempStorage scan;
    typename BlockReduce::TempStorage reduce;
    typename BlockSum::TempStorage sum;
    typename PlanScan::TempStorage plan;
  } tmp;
  // kPersist: the first item (ticket) of each lane and, at [max_lanes], the items in all
  __shared__ int32_t s_first[kPersist ? kPersistMaxLanes + 1 : 1];
  __shared__ int32_t s_ticket;
  __shared__ unsigned long long s_best;  // fused_max: the chunk's best token
  __shared__ int64_t running;
  __shared__ bool lane_last;
  __shared__ int32_t hist[kPoolBins];  // the bins bound (pool_bins): this chunk's slots by bin
  // a one-round chunk's slots, striped (token lo + k * kScanThreads + thread at k * kScanThreads +
  // thread) in, blocked (thread x's kScanItems tokens at kScanItems * x) out
  __shared__ __align__(16) int32_t s_deg[kScanThreads * kScanItems];
  const int32_t C = ws.scan_split;
  constexpr bool fused = kFused;  // ws.fused_max, as a template argument: the other variants compile as before
  if (kPersist) {
    // The plan, the same in every CTA: a lane's items are its non-empty chunks (at least chunk
    // 0, which writes an idle or empty lane's step), from counters no CTA writes before the
    // grid's last one applies the lanes' steps (PersistLastBlock). One lane a thread
    // (max_lanes <= kPersistMaxLanes = kScanThreads, the host's condition).
    const int32_t l = threadIdx.x;
    // scan_preload: the first ticket, taken while the plan reads the lanes' counters (the tickets
    // only order the items; every CTA of the grid takes a first one)
    if (l == 0 && ws.scan_preload) s_ticket = atomicAdd(ws.scan_ticket, 1);
    int32_t parts = 0;
    if (l < ws.max_lanes) {
      bool lidle;
      const int32_t ln = ScanLaneSize(ws, ws.lanes[l], &lidle);
      parts = max(1, LastScanChunk(ln, ScanChunkOf(ln, C, 0, ws.scan_round).per) + 1);
    }
    int32_t first, items;
    PlanScan(tmp.plan).ExclusiveSum(parts, first, items);
    if (l < ws.max_lanes) s_first[l] = first;
    if (l == 0) s_first[ws.max_lanes] = items;
    __syncthreads();  // (tmp is reused below)
    ScanTraceAt(tr, kTrPlan);
  }
  // One item (ScanSplitKernel: this CTA's only one), or, persistent, items until none is left.
  for (bool first_item = true;; first_item = false) {
  if (threadIdx.x == 0) {
    if (!(kPersist && first_item && ws.scan_preload)) s_ticket = atomicAdd(ws.scan_ticket, 1);
    s_best = 0ull;
  }
  if (ws.pool_bins)
    for (int32_t i = threadIdx.x; i < kPoolBins; i += blockDim.x) hist[i] = 0;
  __syncthreads();
  if (kPersist && s_ticket >= s_first[ws.max_lanes]) break;  // (uniform: every item is taken)
  // (the trace follows a CTA's first item only)
  unsigned long long* const itr = first_item ? tr : nullptr;
  ScanTraceAt(itr, kTrTicket);
  // the ticket's item: lane-major (chunk ticket % C of lane ticket / C) or, scan_chunk_major,
  // chunk-major (chunk ticket / L of lane ticket % L: every lane's first chunk is taken before
  // any lane's second, so the lanes' real chunks take the first CTAs and the empty ones come
  // last, when the real ones already run). Either way a chunk's predecessors in its lane have
  // lower tickets, so the look-back only waits on CTAs that already run.
  // Persistent: the items are lane-major over the lanes' non-empty chunks only.
  const int32_t lane = kPersist ? UpperBound(s_first, ws.max_lanes + 1, s_ticket) - 1
                       : ws.scan_chunk_major ? s_ticket % ws.max_lanes : s_ticket / C;
  const int32_t chunk = kPersist ? s_ticket - s_first[lane]
                        : ws.scan_chunk_major ? s_ticket / ws.max_lanes : s_ticket % C;
  // the CTAs that count themselves done on this lane
  const int32_t parts = kPersist ? s_first[lane + 1] - s_first[lane] : C;
  LaneCounters& lc = ws.lanes[lane];
  if (chunk == 0) WipeOverflowedTable(ws, lc);  // pooled, as ScanKernel (one CTA of the lane)
  const int32_t T = lc.length;
  const int32_t t = lc.t;
  // The lane's frontier and the step scratch sharing its region (tok_off / tok_cap: the static
  // layout's slice, or the pooled region the previous step's last block handed out; 0 tokens
  // for a pooled lane that got none), as ScanKernel; 0 for a lane without a step.
  bool idle;
  const int32_t n = ScanLaneSize(ws, lc, &idle);
  const int32_t cur = lc.buf;
  const int64_t q = lc.tok_off[cur];
  unsigned long long* status = ws.scan_status + static_cast<int64_t>(lane) * C;
  int32_t* offsets = ws.arc_offsets + q;
  const int32_t hshift = LaneHintShift(ws, lc, cur, n);  // as ScanKernel (the same n and region in every CTA)
  const int64_t hint_slots = static_cast<int64_t>(HintCap(ws, lc, cur)) << hshift;
  // pooled: the max as the step finds it, read by every CTA before counting itself done (so
  // before the lane's last CTA rewrites it)
  const int32_t prev_max = ws.pooled ? lc.max_ord : 0;
  const float bin_ref = OrderedIntToFloat(prev_max);
  const long long log_off = LatScanLogOff(ws, lc, lane, n);  // (read before the lane's last CTA applies the step)
  int32_t phase = kPhaseReal;
  constexpr int kPerRound = kScanThreads * kScanItems;
  // Chunks are contiguous runs of `per` tokens, whole granules of ws.scan_round tokens (a
  // chunk of at most kPerRound tokens takes the one-round path below): the non-empty ones
  // are chunks 0 .. last (types.cuh ScanChunkOf, which the host model of the layout replays).
  const ScanChunk cut = ScanChunkOf(n, C, chunk, ws.scan_round);
  const int32_t per = cut.per, lo = cut.lo, hi = cut.hi;
  if (itr != nullptr && threadIdx.x == 0) {
    itr[kTrInfo] = static_cast<unsigned long long>(lane) | (static_cast<unsigned long long>(chunk) << 16);
    itr[kTrTokens] = static_cast<unsigned long long>(hi - lo);
  }
  // a real step's row and its maxima (every CTA of the lane: the trim needs them before the
  // degrees; the lane's last CTA publishes them)
  float max_lp = 0.f;
  const float* row32 = nullptr;
  const uint16_t* row16 = nullptr;
  bool have_row = false;  // this CTA read the row (a non-empty chunk of a real step)
  if (!idle) {
    const int32_t* state = ws.tok_state[cur] + q;
    const float* score = ws.tok_score[cur] + q;
    int32_t* begin = ws.tok_begin + q;
    float* ub = ws.tok_ub + q;
    int32_t* hint = ws.tok_hint + HintBase(ws, lc, lane, cur);
    if (t == T) {  // the final step's phase needs the whole frontier: every CTA looks (one step a row)
      int any_final = 0;
      for (int32_t i = threadIdx.x; i < n && !any_final; i += blockDim.x)
        any_final |= g.final_count[state[i]] > 0;
      any_final = __syncthreads_or(any_final);
      phase = (any_final || !p.allow_partial) ? kPhaseFinal : kPhaseRedirect;
    }
    // the row, its maxima and the trim over the lane's whole frontier (the same in every CTA
    // of the lane; RowAndTrim), in the chunks that have tokens: an empty chunk's CTA leaves at
    // once, as it always did (a lane of up to 2,048 tokens has one chunk and scan_split - 1
    // empty ones; making them read the row and walk the anchor put that latency, a wave of
    // CTAs at a time, into every step). If one of them is the lane's last CTA it reads the
    // row's maxima there, for the lane's counters.
    // A one-round chunk (the usual one) reads its tokens first, so that their reads overlap the
    // trim's anchor walk (RowAndTrim's last warp) instead of following it; the trim comes after.
    // The tokens are read and trimmed striped: a thread's k-th token is lo + k * kScanThreads +
    // thread (stripe0 + k * kScanThreads), so a chunk of 512 tokens (the default granule) gives
    // every thread one token and the trim's dependent round trips run in all 16 warps at once,
    // not four tokens after one another in the first 128 threads. The scan and the offsets
    // take them blocked (first0: a thread's kScanItems consecutive tokens), through s_deg (the
    // one-round path) or offsets (pass A, read back in pass B).
    const bool one_round = lo < hi && hi - lo <= kPerRound;
    const int32_t first0 = lo + static_cast<int32_t>(threadIdx.x) * kScanItems;
    const int32_t stripe0 = lo + static_cast<int32_t>(threadIdx.x);
    TokenRound r0;
    unsigned long long best0 = 0ull;  // fused_max: the best of this thread's tokens with arcs
    float umax = -INFINITY;           // max_known: this thread's largest bound of a token with slots
    const bool preload = one_round && ws.scan_preload;  // (off: the order before, for A/B runs)
    // the label bound's heavy indices (LabelBitLoads), read with the tokens where a real step may trim
    const bool lb = ws.label_bound != 0 && ws.trim != 0 && phase == kPhaseReal;
    // the weights-only search's label-0 counts, under RowAndTrim's LaneTrim::tw exactly: a trimmed
    // step is a real one whose RowAndTrim wanted the trim (ws.trim), so tw there is ws.trim_weights
    const bool tw = ws.trim_weights != 0 && ws.trim != 0 && phase == kPhaseReal;
    if (preload)
      TokenLoad<fused>(g, state, score, begin, stripe0, kScanThreads, hi, phase, lb, tw, best0, r0, ws, log_off);
    LaneTrim trim;
    if (phase == kPhaseReal && lo < hi) {
      trim = RowAndTrim(g, ws, lane, t, p, ws.trim && n > 0, lc.best_key, state, score, n,
                        UpdateBeam(lc.beam, n, t, T + 1, p.search_beam, p.min_active, p.max_active, lc.online != 0),
                        &row32, &row16);
      max_lp = trim.lp_all;
      have_row = true;
      // pool_anchor / max_anchor: every CTA with tokens found the same anchor (one key, the same arcs and
      // reduction); the lane's last CTA, maybe an empty chunk's, reads it from scan_best
      if (AnchorStartsMax(ws) && threadIdx.x == 0 && trim.anchor > -INFINITY) s_best = AnchorKey(trim.anchor);
      ScanTraceAt(itr, kTrTrim);
    }
    const bool trimmed = trim.low > -INFINITY;
    const bool bins = ws.pool_bins && phase == kPhaseReal;  // (uniform over the CTA)
    // The degrees of tokens first + k * kScanThreads of a round (striped; first arc and bound
    // written as ScanKernel does; the bins bound's histogram, once per token: pass A).
    // finish: a round's trim from its TokenLoad (its best key in `best`)
    auto finish = [&](TokenRound& r, int32_t first, unsigned long long best, int64_t (&deg)[kScanItems]) {
      TokenTrim(g, trimmed, trim, bins ? hist : nullptr, bin_ref, ub, first, kScanThreads, hi, phase, r, deg);
      if (ws.max_known)  // U over the tokens with slots (a token past the chunk has none)
#pragma unroll
        for (int k = 0; k < kScanItems; ++k)
          if (deg[k] > 0) umax = fmaxf(umax, RoundBound(r, k, phase, trim.lp_all));
      if (fused) {  // per round, so that no register holds it across the scan (it spilled)
#pragma unroll
        for (int d = 16; d >= 1; d >>= 1) best = MaxKey(best, __shfl_xor_sync(0xFFFFFFFFu, best, d));
        if ((threadIdx.x & 31) == 0 && best != 0ull) atomicMax(&s_best, best);
      }
    };
    auto degrees = [&](int32_t first, int64_t (&deg)[kScanItems]) {
      TokenRound r;
      unsigned long long best = 0ull;
      TokenLoad<fused>(g, state, score, begin, first, kScanThreads, hi, phase, lb, tw, best, r, ws, log_off);
      finish(r, first, best, deg);
    };
    // Thread 0: publish the chunk's sum, look back over the lane's earlier chunks for its
    // exclusive prefix (chunk 0: none), publish the inclusive prefix; `running` = the prefix.
    auto look_back = [&](int64_t agg) {
      if (threadIdx.x != 0) return;
      int64_t prefix = 0;
      volatile unsigned long long* vs = status;
      if (chunk == 0) {
        vs[0] = kStatusIncl | static_cast<unsigned long long>(agg);
      } else {
        vs[chunk] = kStatusAgg | static_cast<unsigned long long>(agg);
        for (int32_t c = chunk - 1; c >= 0; --c) {
          unsigned long long w;
          while ((w = vs[c]) == 0ull) {
          }
          prefix += static_cast<int64_t>(w & kStatusValue);
          if (w & kStatusIncl) break;
        }
        vs[chunk] = kStatusIncl | static_cast<unsigned long long>(prefix + agg);
      }
      running = prefix;
    };
    // The offsets of a round from its exclusive scan on top of `running`, and the slot hints.
    auto emit = [&](int32_t first, const int64_t (&deg)[kScanItems], const int64_t (&excl)[kScanItems]) {
#pragma unroll
      for (int k = 0; k < kScanItems; ++k) {
        const int32_t i = first + k;
        const int64_t off = running + excl[k];
        if (i < hi) offsets[i] = off > INT32_MAX ? INT32_MAX : static_cast<int32_t>(off);
        const int64_t last = min(off + deg[k], hint_slots);
        for (int64_t m = (off + (1 << hshift) - 1) >> hshift; (m << hshift) < last; ++m)
          hint[m] = i;
      }
    };
    if (lo >= hi) {
      // An empty chunk: every later chunk is empty too, so nobody looks back at it (it
      // publishes nothing and leaves its multiprocessor at once).
    } else if (one_round) {
      // One round (every chunk of a frontier up to 2,048 tokens): the degrees stay in
      // registers and one block scan gives both the chunk's sum and the offsets.
      const int32_t first = first0;
      int64_t deg[kScanItems], excl[kScanItems], agg;
      {
        int64_t sdeg[kScanItems];  // striped
        if (preload) finish(r0, stripe0, best0, sdeg);
        else degrees(stripe0, sdeg);
        // (a token's slots are at most its arcs of one state: int32)
#pragma unroll
        for (int k = 0; k < kScanItems; ++k) s_deg[k * kScanThreads + threadIdx.x] = static_cast<int32_t>(sdeg[k]);
        __syncthreads();
        static_assert(kScanItems == 4, "one int4 a thread");
        const int4 v = reinterpret_cast<const int4*>(s_deg)[threadIdx.x];
        deg[0] = v.x;
        deg[1] = v.y;
        deg[2] = v.z;
        deg[3] = v.w;
      }
      BlockScan(tmp.scan).ExclusiveSum(deg, excl, agg);
      ScanTraceAt(itr, kTrDegrees);
      if (itr != nullptr && threadIdx.x == 0) itr[kTrInfo] |= 1ull << 28;
      look_back(agg);
      __syncthreads();
      ScanTraceAt(itr, kTrLookBack);
      emit(first, deg, excl);
      ScanTraceAt(itr, kTrEmit);
    } else {
      // Pass A: first arcs, bounds and degrees (parked in offsets[i], read back by the same
      // thread in pass B), the chunk's sum.
      int64_t mine = 0;
      for (int32_t base = lo; base < hi; base += kPerRound) {
        const int32_t first = base + threadIdx.x;  // striped
        int64_t deg[kScanItems];
        degrees(first, deg);
#pragma unroll
        for (int k = 0; k < kScanItems; ++k) {
          if (first + k * kScanThreads < hi) offsets[first + k * kScanThreads] = static_cast<int32_t>(deg[k]);
          mine += deg[k];
        }
      }
      const int64_t agg = BlockSum(tmp.sum).Sum(mine);  // valid in thread 0
      ScanTraceAt(itr, kTrDegrees);
      look_back(agg);
      __syncthreads();
      ScanTraceAt(itr, kTrLookBack);
      // Pass B: the exclusive scan of the chunk on top of its prefix, and the slot hints (each
      // thread reads its blocked tokens' degrees, which other threads parked: after the barrier).
      for (int32_t base = lo; base < hi; base += kPerRound) {
        const int32_t first = base + threadIdx.x * kScanItems;
        int64_t deg[kScanItems];
#pragma unroll
        for (int k = 0; k < kScanItems; ++k) deg[k] = first + k < hi ? offsets[first + k] : 0;
        int64_t excl[kScanItems], total;
        BlockScan(tmp.scan).ExclusiveSum(deg, excl, total);
        emit(first, deg, excl);
        __syncthreads();
        if (threadIdx.x == 0) running += total;
        __syncthreads();
      }
      ScanTraceAt(itr, kTrEmit);
    }
    // the chunk's slots by bin into the lane's suffix sums (before it counts itself done)
    if (bins && lo < hi) PublishBins(ws, lane, hist, tmp.scan, true);
    // max_known: the chunk's largest bound into the lane's (before it counts itself done)
    if (ws.max_known && lo < hi) {
#pragma unroll
      for (int d = 16; d >= 1; d >>= 1) umax = fmaxf(umax, __shfl_xor_sync(0xFFFFFFFFu, umax, d));
      if ((threadIdx.x & 31) == 0 && umax > -INFINITY) atomicMax(&ws.scan_umax[lane], FloatToOrderedU32(umax));
    }
  }
  // This CTA is done with the lane: the last of the lane's CTAs writes its counters.
  __syncthreads();
  if (threadIdx.x == 0) {
    // fused_max: the chunk's best token meets the other chunks' before the CTA counts itself done
    if ((fused || AnchorStartsMax(ws)) && s_best != 0ull) atomicMax(&ws.scan_best[lane], s_best);
    __threadfence();
    lane_last = atomicAdd(&ws.scan_lane_done[lane], 1) == parts - 1;
  }
  __syncthreads();
  if (lane_last) {
    __threadfence();
    LaneStepOut o{idle ? 1 : 0, phase, n, 0, 0, max_lp, -INFINITY, row32, row16};
    if (!idle) {
      if (phase == kPhaseReal && !have_row) {  // an empty chunk is the lane's last CTA (see above)
        const LaneTrim r = RowAndTrim(g, ws, lane, t, p, false, 0ull, nullptr, nullptr, 0, 0.f, &o.row32, &o.row16);
        o.max_lp = r.lp_all;
      }
      if (fused && threadIdx.x < 32) {  // L, the lower bound FusedExpandKernel starts from
        const unsigned long long key = *reinterpret_cast<volatile unsigned long long*>(&ws.scan_best[lane]);
        // over the lane's frontier region (q = tok_off[cur], either layout), as the chunks named it
        o.lower = BestTokenEnd(g, key, ws.tok_state[cur] + q, ws.tok_score[cur] + q, phase, o.row32, o.row16);
      } else if (AnchorStartsMax(ws) && threadIdx.x == 0) {
        o.lower = AnchorOf(*reinterpret_cast<volatile unsigned long long*>(&ws.scan_best[lane]));
        if (ws.max_known) {  // every chunk's largest bound is in (each added it before counting itself done)
          const uint32_t u = *reinterpret_cast<volatile uint32_t*>(&ws.scan_umax[lane]);
          o.known = u != 0u && o.lower > -INFINITY && OrderedU32ToFloat(u) <= o.lower ? 1 : 0;
        }
      }
      // the last non-empty chunk published the lane's inclusive sum before counting itself done
      const int32_t last = LastScanChunk(n, per);
      if (threadIdx.x == 0 && last >= 0)
        o.total = static_cast<int64_t>(*reinterpret_cast<volatile unsigned long long*>(&status[last]) & kStatusValue);
    }
    if (threadIdx.x == 0) {
      // at once, or (persistent) when every CTA is done reading the lanes' counters
      if (kPersist) ws.scan_out[lane] = o;
      else ApplyLaneStep(g, ws, lane, lc, p, o, fused);
      // after warp 0 read scan_best (BestTokenEnd's shuffles join the warp)
      for (int32_t c = 0; c < C; ++c) status[c] = 0ull;
      ws.scan_lane_done[lane] = 0;
      ws.scan_best[lane] = 0ull;
      if (ws.max_known) ws.scan_umax[lane] = 0u;
      if (itr != nullptr) itr[kTrInfo] |= 1ull << 29;
    }
  }
  ScanTraceAt(itr, kTrLaneDone);
  if (!kPersist) break;
  // scan_preload: with no more items than CTAs the first tickets (one a CTA, all of them taken)
  // cover every item, so no CTA asks for another (uniform: the plan is the same in every CTA)
  if (ws.scan_preload && s_first[ws.max_lanes] <= static_cast<int32_t>(gridDim.x)) break;
  __syncthreads();  // (the next item rewrites the shared ticket, best key, histogram and storage)
  }
  if (kPersist) PersistLastBlock(g, ws, p, fused, tr);
  else LaneScanLastBlock(ws, true);
}

}  // namespace cuwfst
