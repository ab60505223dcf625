// Device-side types shared by every stage of the GPU decoder. Framework-free: raw
// pointers and sizes only. Naming follows k2: a lane is a compute slot (one utterance of
// the batch), a token is one frontier entry (state, score, winner), a slot is one
// (token, arc) pair of a step's flattened arc space.
#pragma once

#include <cstdint>

#include "cuwfst/pool_bins.h"

namespace cuwfst {

// Phases of a lane's step (the CPU reference uses the same values).
// kPhaseEps: the lane is in an epsilon-closure pass after a real step (epsilon.cuh).
enum : int32_t { kPhaseReal = 0, kPhaseFinal = 1, kPhaseRedirect = 2, kPhaseEps = 3, kPhaseIdle = 4 };

// Overflow bits (DecodeResult::overflow), as in the design spec §7.
enum : int32_t {
  kOverflowCand = 1,     // unused by this decoder (no candidate buffer), kept for the layout
  kOverflowHash = 2,     // probe bound exceeded
  kOverflowArena = 4,    // winners arena full
  kOverflowClaims = 8,   // distinct-state claims list full
  kOverflowKept = 16,    // surviving frontier > main_q
  kOverflowPath = 32,    // best path longer than path_cap
  kOverflowSlots = 64,   // ONE lane's arcs of one step exceeded 2^31 slots (its local,
                         // int32 slot space); the batch's total is int64 and never drops a step
  kOverflowPool = 128,   // the lane pools could not hold this lane's step (pooled layout): not
                         // set since a step that does not fit pauses the whole batch (ScanKernel's
                         // last block) until the host grows the pools; kept as the guard's bit
                         // should a lane ever be refused a region, and never reported
};

constexpr int32_t kRedirectArcBit = 1 << 30;
constexpr uint32_t kEmptyKey = 0xFFFFFFFFu;
constexpr int32_t kMaxProbes = 256;
constexpr uint16_t kFinalIlabel = 0xFFFF;
constexpr uint16_t kEpsIlabel = 0xFFFE;
constexpr int32_t kHintShift = 5;  // tok_hint samples every 32nd slot

// The graph, structure-of-arrays, on the device (uploaded once per graph and device).
struct DeviceGraph {
  int32_t num_states;
  int32_t num_arcs;
  int32_t vocab_size;
  int32_t start_state;
  int32_t finals_at_end;     // 1: final arcs are the last final_count[s] arcs of s
  const int32_t* row_splits;   // [num_states + 1]
  // [num_states] final arcs of each state, one byte a state: kBigCount (255) stands for 255
  // or more, whose true count is in the big-count table below (StateCount)
  const uint8_t* final_count;
  // [num_states] epsilon arcs of each state, which sit right after its finals-at-start
  // (or at the start of its range with finals at end), one byte a state as final_count;
  // nullptr on epsilon-free graphs
  const uint8_t* eps_count;
  // The states whose final or epsilon count is kBigCount or more, ascending, and their true
  // counts (big_final, big_eps; big_eps nullptr on epsilon-free graphs): num_big entries
  // (0 on every graph seen so far: a state with 255 final or epsilon arcs is rare).
  const int32_t* big_state;
  const int32_t* big_final;
  const int32_t* big_eps;
  int32_t num_big;
  // An arc's destination and label, read through ArcDest / ArcLabel: either one uint32 an
  // arc (arc_packed: the destination in the low dest_bits bits, the label's code above them;
  // arc_dest and arc_ilabel nullptr) where both fit, or two arrays (arc_packed nullptr).
  const int32_t* arc_dest;     // [num_arcs]
  const uint16_t* arc_ilabel;  // [num_arcs], 0xFFFF = -1
  const uint32_t* arc_packed;  // [num_arcs]
  int32_t dest_bits;           // packed: 32 - the label's bits
  uint32_t label_special;      // packed: the first special code (epsilon); the next is final
  const float* arc_weight;     // [num_arcs]
  const float* emit_maxw;      // [num_states] max weight over a state's emitting arcs
  // [num_states] max weight over a state's epsilon arcs, -inf for a state without any
  // (nullptr on epsilon-free graphs): token score + eps_maxw <= cutoff means no epsilon arc
  // of the token can pass (fp32 addition is monotone), so the closure lists skip it
  const float* eps_maxw;
  int32_t max_eps_degree;      // the most epsilon arcs of one state (0 on epsilon-free graphs)
  // 1: every state's emitting arcs are its label-0 arcs first, then the others by weight,
  // best first, none NaN (cuwfst/graph/graph.py builds them so; the upload checks it):
  // the scans may trim a token's slots to the prefix that can pass (scan.cuh TrimDegrees)
  int32_t emit_sorted;
  // max |weight| over all arcs (inf when a weight is infinite): the lattice records' filter
  // bounds its float rounding with it (lattice.cuh LatFilterFor)
  float max_abs_weight;
  // The label bound (scan.cuh LabelBitLoads, LabelBound; docs/design.md "The label bound"): the states with more
  // than kHeavyLabels distinct non-blank labels on their emitting arcs ("heavy"), a bit a state
  // (heavy_bits, 32 states a word) with the number of heavy states before each word (heavy_rank),
  // so a heavy state's index is heavy_rank[s / 32] + the set bits below its own; and each heavy
  // state's labels folded into label_words x 32 bits (bit label % (32 label_words), a word of it
  // at heavy_labels[index * label_words + bit / 32]). nullptr (label_words 0): no tables.
  const uint32_t* heavy_bits;    // [ceil(num_states / 32)]
  const int32_t* heavy_rank;     // [ceil(num_states / 32)]
  const uint32_t* heavy_labels;  // [heavy states * label_words]
  int32_t label_words;
  // [num_states] the label-0 arcs at the front of each state's emitting arcs (emit_sorted
  // graphs whose every count is below 255; nullptr otherwise): the trim's search starts past
  // them and probes weights only (scan.cuh TrimDegrees; Workspace::trim_weights)
  const uint8_t* emit_blank;
  // [num_arcs] each image arc's place among its state's arcs in the source graph's order (k2's:
  // the order that numbers a lattice's states by first admission and lists their arcs), and the
  // bits of a place (2^place_bits > the most arcs of a state); nullptr / 0 where the image kept
  // the source order or a state has 32,768 arcs or more (then the image's order numbers them).
  // The GPU pruning packs both places in a record's code (gpu_lattice_prune.cu PrKeyCode).
  const uint16_t* arc_src_place;
  int32_t place_bits;
};
// A state is heavy (DeviceGraph::heavy_bits) with more distinct non-blank emitting labels than this
constexpr int32_t kHeavyLabels = 8;
// The heavy states' label bitmaps' width in 32-bit words (DeviceGraph::label_words): the
// vocabulary's, folded to at most this many (a fold only loosens the bound)
constexpr int32_t kMaxLabelWords = 16;

// The packed arcs (DeviceGraph::arc_packed): a label's code is the label itself below
// label_special = 2^(32 - dest_bits) - 2, which stands for kEpsIlabel and the one after it for
// kFinalIlabel (0xFFFE, 0xFFFF: code + (0xFFFF - the last code)).
__host__ __device__ inline uint16_t LabelOfCode(const DeviceGraph& g, uint32_t code) {
  return static_cast<uint16_t>(code >= g.label_special ? code + (0xFFFEu - g.label_special) : code);
}
__host__ __device__ inline uint16_t ArcLabel(const DeviceGraph& g, int32_t arc) {
  return g.arc_packed ? LabelOfCode(g, g.arc_packed[arc] >> g.dest_bits) : g.arc_ilabel[arc];
}
__host__ __device__ inline int32_t ArcDest(const DeviceGraph& g, int32_t arc) {
  return g.arc_packed ? static_cast<int32_t>(g.arc_packed[arc] & ((1u << g.dest_bits) - 1u)) : g.arc_dest[arc];
}
// Both at once: one load of the packed word (ArcLabel and ArcDest each load it), or the two arrays'
// loads issued together.
struct ArcDestLabel {
  int32_t dest;
  uint16_t label;
};
// (ArcDestAndLabelPacked: where the arcs are known to be packed, g.arc_packed not null)
__host__ __device__ inline ArcDestLabel ArcDestAndLabelPacked(const DeviceGraph& g, int32_t arc) {
  const uint32_t w = g.arc_packed[arc];
  return {static_cast<int32_t>(w & ((1u << g.dest_bits) - 1u)), LabelOfCode(g, w >> g.dest_bits)};
}
__host__ __device__ inline ArcDestLabel ArcDestAndLabel(const DeviceGraph& g, int32_t arc) {
  if (g.arc_packed) return ArcDestAndLabelPacked(g, arc);
  return {g.arc_dest[arc], g.arc_ilabel[arc]};
}

// A count byte's value (DeviceGraph::final_count / eps_count): itself below kBigCount, else
// looked up (binary search) in the big-count table.
constexpr int32_t kBigCount = 255;
__host__ __device__ inline int32_t StateCount(const DeviceGraph& g, int32_t s, int32_t byte, const int32_t* big) {
  if (byte < kBigCount) return byte;
  int32_t lo = 0, hi = g.num_big;  // big_state[lo..hi) holds s
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) / 2;
    if (g.big_state[mid] <= s) lo = mid;
    else hi = mid;
  }
  return big[lo];
}

// A state's arc ranges in the image layout
// [finals if at start][epsilons][emitting][finals if at end] (cuwfst/graph/image.py).
struct StateArcs {
  int32_t begin, end, final_count, eps_count;
  bool finals_at_end;
  __host__ __device__ int32_t EpsBegin() const { return finals_at_end ? begin : begin + final_count; }
  __host__ __device__ int32_t EmitBegin() const { return EpsBegin() + eps_count; }
  __host__ __device__ int32_t EmitEnd() const { return finals_at_end ? end - final_count : end; }
  __host__ __device__ int32_t FinalBegin() const { return finals_at_end ? end - final_count : begin; }
};

__host__ __device__ inline StateArcs ArcsOf(const DeviceGraph& g, int32_t s) {
  return {g.row_splits[s], g.row_splits[s + 1], StateCount(g, s, g.final_count[s], g.big_final),
          g.eps_count ? StateCount(g, s, g.eps_count[s], g.big_eps) : 0,
          g.finals_at_end != 0};
}

// The decode's settings every step reads (kernel argument).
struct StepParams {
  float search_beam;
  int32_t min_active;
  int32_t max_active;
  int32_t allow_partial;
  int32_t lp_is_f16;
};

// Where the caller's packed log-probs live: rewritten (24 B H2D) before every decode so
// that captured graphs read the new tensor in place.
// Where a lane reads its log-probs (lanes are slots: each holds its own utterance or
// stream at its own step): the row of the lane's step t is base + (t - t0) * stride_t
// elements. Rewritten by the host before a launch sequence; captured graphs read it.
struct LaneInput {
  const void* base;
  int64_t stride_t;  // elements
  int32_t t0;        // the step whose row sits at base
  int32_t pad;
};
// Row `row` of a [rows, T, V] input at byte address `base` (rows stride_b elements apart, frames
// stride_t, `elem` bytes an element), its first frame being step t0 of the lane.
inline LaneInput RowInput(const char* base, int64_t row, int64_t stride_b, int64_t stride_t, int64_t elem,
                          int32_t t0 = 0) {
  return LaneInput{base + row * stride_b * elem, stride_t, t0, 0};
}

// What LaneSetupKernel does to a lane before a launch sequence (ops are bits).
enum : int32_t {
  kCmdInit = 1,       // a new row or stream: length, avail, online as given; start token
  kCmdSetLength = 2,  // the length becomes known (a stream is finalized): length as given
  kCmdRelease = 4,    // the lane holds nothing (length -1): its steps and results stop
  kCmdAvail = 8,      // frames available: real steps run while t < avail
  kCmdPartial = 16,   // PartialKernel reads this lane's best path (gc.cuh)
};
// The device-side refill of continuous batching (continuous batching with refill; scan.cuh
// RefillKernel): the rows the host queued for this segment, taken in order by the lanes whose
// row ends inside it, and what each of those rows left (its result, backtracked at the
// segment's end by RefillBacktrackKernel).
struct RefillEntry {
  LaneInput input;  // the row's log-prob rows (t0 = 0)
  int32_t row;
  int32_t length;
};
struct RefillDone {
  int32_t row, lane, final_winner, reached_final;
  int32_t redirected, overflow, max_frontier, pad;
  float final_score;
  long long frontier_total, closure_added;
};
// RefillControl words (Workspace::refill_ctl): the queue's next entry and its size, the done
// records written and their capacity. Entries [0, done) of the queue were taken, in the order
// of the records; the fused refill's head counts every try and may pass done (the host reads
// done).
enum : int32_t { kRefillHead = 0, kRefillQueued = 1, kRefillDone = 2, kRefillDoneCap = 3, kRefillCtl = 4 };
// Workspace::refill: where a kSegmentRefill sequence's refill runs (0: no refill): RefillKernel
// after every step's FinalizeKernel, or inside FinalizeKernel, by the last of an ended lane's
// CTAs (finalize.cuh; DecoderConfig::refill_kernel 0, the default).
enum : int32_t { kRefillOff = 0, kRefillByKernel = 1, kRefillInFinalize = 2 };

struct LaneCommand {
  int32_t op;
  int32_t length;  // kUnknownLength while a stream's length is not known
  int32_t avail;
  int32_t online;  // k2's online beam mode (streams)
};
constexpr int32_t kUnknownLength = 1 << 30;
// Lanes of one decoder at most: a stream server's every channel in one launch sequence. No
// kernel holds per-lane arrays on chip past kMaxSharedLanes (ExpandKernel falls back to
// global memory), and the flattened slot space is int64.
constexpr int32_t kMaxLanes = 4096;

// Per-lane loop state; device-resident so a whole decode can be captured.
struct LaneCounters {
  int32_t length;        // T of this lane's row; -1 for an unused lane; kUnknownLength for
                         // a stream until it is finalized
  int32_t t;             // steps the lane has taken (the final step makes it length + 1)
  int32_t buf;           // frontier buffer holding the lane's current frontier (during a
                         // step: the one the step builds)
  int32_t avail;         // real steps run while t < avail (frames fed so far)
  int32_t online;        // k2's online beam mode: the last-5-frames rules are off
  int32_t phase;         // this step's phase
  int32_t frontier_size; // tokens the step's walkers visit: the frontier (an epsilon pass:
                         // the tokens the previous pass changed)
  int32_t next_size;     // tokens the step's FinalizeKernel blocks appended (may exceed main_q)
  int32_t total_arcs;    // slots of this step
  float beam;            // k2's dynamic beam
  int32_t max_ord;       // exact maximum end score of this step (ordered int); with fused_max
                         // the scan sets it to a lower bound (one arc's end) and
                         // FusedExpandKernel raises it: exact once that kernel has finished
  float max_lp;          // max log-prob of this step's row (0 for final/redirect)
  // tok_hint covers all of this step's slots: the hints' sampling shift (LaneHintShift, as the
  // scan or the closure pass wrote them; always > 0), or 0 where they do not cover the step
  // (lookups binary-search). The walkers read the shift here rather than recompute it.
  int32_t hint_ok;
  int32_t claims;        // distinct destination states claimed this step
  int32_t overflow;      // overflow bits
  int32_t max_frontier;  // largest frontier seen
  int32_t final_winner;  // winners-log entry of the final token (-2: none yet)
  int32_t eps_changed;   // epsilon closure: tokens the last pass changed (the next pass's list)
  int32_t eps_touched;   // epsilon closure: hash slots this pass claimed or improved
  int32_t eps_base;      // epsilon closure: frontier size before it (statistics, snapshots)
  // closure = lists (epsilon.cuh, EpsListExpandKernel): entries of the two pass lists (pass p
  // reads list p & 1 and its Resolve fills list (p + 1) & 1; Finalize fills list 0), and the
  // hash slots each parity's pass lifted off their baseline
  int32_t eps_list_n[2];
  int32_t eps_touched_n[2];
  float final_score;
  int32_t reached_final;
  int32_t redirected;
  long long frontier_total;  // sum over steps of the frontier each step expanded
  long long closure_added;   // tokens the epsilon closures added
  float partial_score;       // PartialKernel: the best current token's score
  const float* lp_row_f32;   // this step's log-prob row (fp32 input)
  const uint16_t* lp_row_f16;  // this step's log-prob row (fp16 input, raw bits)
  float prev_beam;           // the beam before this step's UpdateBeam (a paused step puts it back)
  // Where the lane's per-token, claims and hash arrays are (elements of the pools; see
  // Workspace::pooled). tok_off[b]/tok_cap[b]: the lane's frontier in buffer b holds at most
  // tok_cap[b] tokens from tok_off[b]; the step scratch indexed by those tokens (tok_begin,
  // tok_ub, eps_tok, eps_list1, eps_winner; arc_offsets with its one extra entry) shares the offset,
  // tok_hint sits at HintBase. claim_off/claim_cap: this step's claims list (and the
  // closure's touched list); hash_off/hash_cap: its hash table, a power of two (0: none).
  long long tok_off[2];
  int32_t tok_cap[2];
  int32_t claim_cap;
  long long claim_off;
  long long hash_off;
  int32_t hash_cap;
  // The step's own phase, frontier size and hint flag as ScanKernel set them: an epsilon
  // closure overwrites phase/frontier_size/hint_ok, and the lattice walk after it
  // (lattice.cuh) walks the step's slots again.
  int32_t step_phase;
  int32_t step_size;
  int32_t step_hint_ok;
  // Pooled layout with the hand-out after the max (Workspace::pool_at_max): the arcs of this
  // step that MaxKernel found admissible against a lower bound of the cutoff (a superset of
  // the admitted arcs, so at least the step's claims); the step's regions are sized by it.
  int32_t admit;
  // Pooled layout: max_ord as the step found it (the previous step's exact max; 0 before the
  // first step), which the scans overwrite and a paused step puts back (PooledUndoStep); under
  // the bins bound (Workspace::pool_bins) the reference the step's tokens are binned against.
  int32_t prev_max_ord;
  // The trimmed slots' anchor (scan.cuh RowAndTrim): {kBestKeyValid | t << 32 | index} of a
  // token of the frontier built for step t whose score is that step's exact max, kept by
  // FinalizeKernel (atomicMax: the largest index among ties) and by LaneSetupKernel (the start
  // token); a scan at step t takes it only with its t (an older key names an older frontier).
  unsigned long long best_key;
  // The lattice records' filter (lattice.cuh LatFilterFor; lattice decodes pruned on the GPU):
  // lat_mag bounds |score| of every token of the lane's current frontier, lat_drift how far
  // the search's scores may be from k2's forward scores of the same tokens (float rounding,
  // accumulated); lat_filter_last is the last step the filter dropped arcs on, lat_guard 1
  // when a step within a pruning window of it left the magnitudes the filter's pads cover
  // (the host then decodes the batch again without the filter).
  float lat_mag;
  float lat_drift;
  int32_t lat_filter_last;
  int32_t lat_guard;
  // Workspace::lat_log_scan: 1 from the scan that applied a step (ApplyLaneStep) until its scalars
  // are written (lattice_log.cuh LatLogPending: at the next step's scan, before it changes the
  // counters, or after the sequence); 0 after InitLane and after a step undone (PooledUndoStep)
  int32_t lat_log_pending;
  // 1 when some of this step's lattice candidates (common.cuh LatCandOn) did not fit the
  // candidate buffer: LatPersistKernel then records the lane by its walk, not from the
  // candidates (LatCandRecords skips it); LatStepEndKernel clears it
  int32_t lat_cand_over;
  // Workspace::pool_late 1: 1 when this step's claims did not fit the token pool and the step was
  // put back after its expansion (PooledLateHandOut): FinalizeKernel only clears its claims;
  // the next scan clears it (ApplyLaneStep). pool_late 2: 2 when FinalizeLate found the step
  // does not fit: the lane is still as the step left it, and the host puts it back and clears
  // the mark before it resumes (the scans leave a 2 alone).
  int32_t late_undo;
  // Workspace::max_known: 1 when this step's max is already the trim's anchor (every token with
  // slots has ub <= the anchor; ApplyLaneStep), so MaxKernel leaves the lane out
  int32_t max_known;
};
constexpr int32_t kLatFilterNever = -(1 << 20);  // LaneCounters::lat_filter_last before any filtered step
constexpr unsigned long long kBestKeyValid = 1ull << 63;
__host__ __device__ inline unsigned long long BestKeyOf(int32_t t, int32_t index) {
  return kBestKeyValid | (static_cast<unsigned long long>(static_cast<uint32_t>(t)) << 32) |
         static_cast<uint32_t>(index);
}

// A lattice candidate (ExpandKernel, candidate mode): an arc of the step that ends at or above
// the prefilter's bound, with the token that expanded it, its acoustic score and its lane.
struct LatCand {
  int32_t tok;
  int32_t arc;
  float acoustic;
  int32_t lane;
};
// One lattice record (lattice.cuh): an arc of a step whose destination is in the step's
// new frontier (after its epsilon closure), admitted by the beam or not.
struct LatRecord {
  int32_t src_state;  // the arc's source state (a token of the frontier the step expanded)
  int32_t arc;        // image arc id, kRedirectArcBit on allow_partial's redirected arcs
  float acoustic;     // the log-prob the step added to the arc (0 on final and redirected arcs)
  int32_t lane;
};

// What the GPU's own output-beam pruning (lattice_prune.cuh) needs beyond a LatRecord,
// written beside it (same index) when Workspace::lattice == 2: the step, the source token
// (its index in the frontier the step expanded), the destination token (its index in the
// new frontier; 0 on final and redirected arcs, whose destination is the final token) and
// whether the beam admitted the arc (end > cutoff in the search's arithmetic).
struct LatRecordExt {
  int32_t t;
  int32_t src_tok;
  int32_t dst_tok;
  int32_t admitted;
};

// The records after the search (Workspace::lat_after, lattice_after.cuh): what LatLogKernel logs
// of each step of a lane, at [lane][step] (the step's index, lc.t - 1): where the frontier the step
// expanded (S_t) was copied in the frontier log, and the step's scalars the records' rule reads.
// LatPlanKernel adds the global table of a real step whose S_{t+1} is too large for shared memory.
struct LatStepLog {
  long long src_off;        // S_t in lat_log_state / lat_log_score (lane * lat_log_lane + frontier_total before it)
  const float* row32;       // the step's log-prob row (fp32 input; nullptr off real steps or fp16)
  const uint16_t* row16;    // (fp16 input, raw bits)
  long long tab_off;        // LatPlanKernel: S_{t+1}'s table in lat_tab_keys / lat_tab_pos (tab_bits > 0)
  int32_t src_n;            // |S_t|
  int32_t phase;            // kPhaseReal, kPhaseFinal or kPhaseRedirect
  float cutoff;             // the step's exact max - beam (admission)
  float pre_low;            // the filter's bound (end below it: dropped unprobed), -inf where unfiltered
  float slack;              // the filter's slack (lattice.cuh LatFilterFor)
  int32_t filter_on;
  int32_t final_alive;      // a final or redirect step: the lane has a final token
  int32_t tab_bits;         // LatPlanKernel: 0, or the global table's log2 size
};

// A lane's copy of S_t into its frontier log region (Workspace::lat_log_fold 2): written by the
// step's FinalizeKernel (its lane's last CTA), read and emptied (n = 0) by the LatLogSideKernel
// launched after it, before the next step's FinalizeKernel writes the next job. n = 0: nothing to
// copy (an idle step, or the lane's region full).
struct LatLogJob {
  long long dst;   // lat_log_state / lat_log_score index of S_t's first token
  long long src;   // tok_state[buf] / tok_score[buf] index of S_t's first token
  int32_t buf;     // S_t's buffer
  int32_t n;       // |S_t|
};

struct alignas(8) WinnerEntry {  // 8-aligned: one 8-byte load an entry
  int32_t prev;  // previous entry, -1 for the start token
  int32_t arc;   // graph arc, kRedirectArcBit set on a redirect
};

// Pools: the frontier buffers, the step scratch, the claims lists and the hash tables of
// all lanes. Two layouts of the same arrays:
//  * static (pooled = 0): lane l owns [l * (main_q + 1), ...) of each per-token array,
//    [l * claims_cap, ...) of the claims and [l * hash_cap, ...) of the hash, for the
//    decoder's life (LaneSetupKernel writes the offsets);
//  * pooled (pooled = 1, offline batches on epsilon-free graphs): regions are handed out
//    every step from the pools' committed capacity (pool_cap) by prefix sums over lanes,
//    once the step's slots are known (ScanKernel's last block; see pool_at_max below): the claims list and the
//    hash table (claims <= slots) and the next frontier (survivors <= claims). A step whose
//    asks do not fit pauses the batch (every lane put back before the step, later steps
//    idle); the host commits what the step asked (pool_need) and resumes the batch from
//    that step. Every lane of an offline batch steps in lockstep until it finishes (a pause
//    stops them all), so all live frontiers sit in the same buffer and the new ones never
//    overwrite a live one.
//    Where MaxKernel runs (pool_at_max: pooled and not fused_max) the hand-out waits for it:
//    MaxKernel counts each lane's arcs whose end passes (a lower bound of the max) - beam,
//    which every admitted arc does (LaneCounters::admit), and its last block hands out the
//    regions sized by that count instead of the slots. On an HLG a step admits ~1% of its
//    slots (benchmarks/pool_accounting.py), so the pools hold what steps write, not their
//    arcs. With fused_max (no MaxKernel) ScanKernel's last block hands them out by the slots.
enum : int32_t { kPoolTokens = 0, kPoolClaims = 1, kPoolHash = 2, kPools = 3 };
// What the pooled regions are sized by (DecoderConfig::pool_bound, CUWFST_POOL_BOUND).
// kPoolBoundAnchor: the admissible count as kPoolBoundAdmit, against the trim's anchor (scan.cuh
// RowAndTrim, LaneTrim::anchor) instead of the scans' best token (BestTokenEnd); on graphs the
// step does not trim, as kPoolBoundAdmit.
// kPoolBoundClaims: the claims lists and tables as kPoolBoundSlots, and each lane's next frontier
// sized by its claims after the expansion instead of by its slots (Workspace::pool_late).
// kPoolBoundClaimsFinalize: the same sizes, the next frontiers handed out by FinalizeKernel's CTAs
// (Workspace::pool_late 2). kPoolBoundClaimsFinalizeAhead: the same, the prefix computed beside
// the first round's claim loads (Workspace::pool_late 3).
enum : int32_t { kPoolBoundAdmit = 0, kPoolBoundSlots = 1, kPoolBoundBins = 2, kPoolBoundAnchor = 3,
                 kPoolBoundClaims = 4, kPoolBoundClaimsFinalize = 5, kPoolBoundClaimsFinalizeAhead = 6 };
// pool_need's entries: the pools' demands, then the pause flag (nonzero: a step of this
// sequence did not fit and the batch is paused; LaneSetupKernel clears it)
constexpr int32_t kPoolPauseSlot = kPools;
constexpr int32_t kPoolNeedSlots = kPools + 1;

// closure_lists (DecoderConfig, Workspace) past 1: kClosureChain, the passes' fixpoint by
// following each listed token's epsilon chain (epsilon.cuh "closure = chain").
constexpr int32_t kClosureChain = 2;

// A lane's step as its scan found it: ScanSplitKernel's lane-last CTA applies it to the lane's
// counters at once; the persistent scan (scan_order 2) keeps it in Workspace::scan_out until
// the grid's last CTA applies it (scan.cuh ApplyLaneStep).
struct LaneStepOut {
  int32_t idle;   // no step this launch (unused, finished, waiting, arena guard, paused)
  int32_t phase;  // the step's phase
  int32_t n;      // the frontier the step reads
  int32_t known;  // Workspace::max_known: the step's max is the anchor (LaneCounters::max_known)
  int64_t total;  // the step's slots (before the int32 check)
  float max_lp;   // the row's max (0 unless a real step)
  float lower;    // fused_max: L, the lower bound of the step's max
  const float* row32;
  const uint16_t* row16;
};

// The per-decoder workspace (capacities are fixed at construction).
struct Workspace {
  int32_t max_lanes;
  int32_t main_q;       // frontier capacity per lane
  int32_t claims_cap;   // distinct states per lane per step
  int32_t hash_cap;     // power of two, per lane (the most a pooled step takes too)
  int32_t pooled;       // 1: per-step regions from the pools (see above)
  int32_t pool_at_max;  // 1 (pooled, MaxKernel runs): MaxKernel's last block hands the regions out
  // 1 (pool_at_max, CUWFST_POOL_HANDOUT=kernel): PoolHandOutKernel, launched right after
  // MaxKernel, hands them out instead (the same PooledHandOut), and MaxKernel has no last
  // block (no counter, fence or tail of one warp behind its grid); 0: MaxLastBlock does.
  int32_t pool_handout_kernel;
  // 1 (pool_at_max, CUWFST_POOL_BOUND=bins): the regions are sized by the bins bound
  // (pool_bins.h) instead of MaxKernel's count: the scans add each real step's token slots
  // into bin_slots by their upper bound (suffix sums: bin_slots[l * kPoolBins + b] = the slots
  // of lane l's tokens in bins >= b), MaxKernel only finds the max (as in the static layout,
  // no arc read for the count and no lower bound from the scans) and its last block reads one
  // entry a lane at the exact cutoff's bin; ExpandKernel zeroes bin_slots for the next step.
  int32_t pool_bins;
  // 1 (pool_at_max, CUWFST_POOL_BOUND=anchor, a trimming step): the step's max starts at the
  // trim's anchor, the best end over the first arcs of the frontier's best token, which every
  // CTA of the lane already walks for the trim (scan.cuh RowAndTrim), so the scans name no best
  // token and the lane's last CTA walks none (BestTokenEnd); MaxKernel counts against it as
  // against L. The anchor is an arc end of the step that the trim keeps, so it is <= the max
  // and the max stays exact; where the lane has no anchor the max starts at -inf (the count
  // then takes every slot of the tokens it reads).
  int32_t pool_anchor;
  // 1 (the static layout's MaxKernel, not fused_max nor pool_at_max; on unless
  // CUWFST_MAX_ANCHOR=off): the step's max starts at the trim's anchor as under pool_anchor
  // (the scans carry it the same way, common.cuh AnchorStartsMax), and MaxKernel's threads
  // start their running max at the lane's max_ord, so a token whose upper bound cannot pass the
  // anchor is not read. The anchor is an arc end of the step, so the max stays exact.
  int32_t max_anchor;
  // 1 (with max_anchor, either layout; on unless CUWFST_MAX_KNOWN=off): the scans also take
  // each lane's largest token bound U = max(ub) over its tokens with slots (scan_umax in the
  // split scans; ub has max_lp inside), and a lane whose U is at most the anchor is flagged max_known: every
  // token MaxKernel would visit there is skipped from its first slot (its bound is at most the
  // anchor, where the running max starts), so the lane's max is the anchor. The scans' last block
  // builds max_lane_offsets, the slot offsets with the flagged lanes' slots as 0, and MaxKernel
  // walks that space: the flagged lanes cost it nothing. Bit-exact by construction.
  int32_t max_known;
  // 1 (the graph has label tables, DeviceGraph::heavy_bits; on unless CUWFST_LABEL_BOUND=off at
  // construction): a trimmed step bounds each heavy token's non-blank acoustic by the frame's two
  // best non-blank labels tested against its state's label bitmap (scan.cuh LabelBitLoads, LabelBound) instead
  // of the row's best alone, so the trims keep shorter prefixes. Bit-exact by construction.
  int32_t label_bound;
  // 1 (the graph has DeviceGraph::emit_blank; on unless CUWFST_TRIM_WEIGHTS=off at
  // construction): the trim's search starts each token past its label-0 arcs and loads only
  // the probes' weights, two tokens' probes in one round trip a round (scan.cuh
  // TrimSearchWeights). The same prefix as the labelled search (it is unique): bit-exact.
  int32_t trim_weights;
  int64_t* max_lane_offsets;  // [max_lanes + 1] (max_known)
  uint32_t* scan_umax;        // [max_lanes] {ordered U} (0: none), zero between steps (max_known)
  int32_t* bin_slots;   // [max_lanes * kPoolBins], zero between steps
  // 1 (pooled, ScanKernel's last block handing out by the slots, no lattice; kPoolBoundClaims,
  // CUWFST_POOL_BOUND=claims): the scan's hand-out gives each lane its claims list and table
  // only; ExpandKernel's last CTA gives each lane its next frontier's region by the claims the
  // expansion made (a survivor is a claim), every live lane one, in lane order
  // (PooledLateHandOut). A step whose claims do not fit the token pool pauses there: every
  // lane that stepped is put back (PooledUndoStep) and marked LaneCounters::late_undo, its
  // FinalizeKernel CTAs clear the claimed slots (the whole table where the claims overflowed
  // their list) and write nothing else, and the host grows the pool and resumes the batch from
  // that step, as after a pause before the step. expand_done: ExpandKernel's last-CTA counter
  // (0 between launches).
  // 2 (kPoolBoundClaimsFinalize): the same regions, handed out by FinalizeKernel<true> instead,
  // with no last CTA: each of its CTAs that needs the lane's region (those with claims to
  // finalize, a stepping lane's first, the grid's first, which reports the ask and the pause,
  // and every CTA of a lane whose claims overflowed their list) computes the same prefix over
  // the lanes' claims (FinalizeLate); the kernel boundary orders it after the expansion, so no
  // fence is needed. A step that does not fit writes nothing: the CTAs clear the lane's claims
  // (or wipe its table), its first CTA marks it late_undo 2, and the host puts such lanes back
  // (PooledUndoStep on its copy of the counters) before it resumes the batch.
  // 3 (kPoolBoundClaimsFinalizeAhead): as 2, but with at most 32 lanes a CTA with claims issues
  // the prefix's loads with its first round's claim loads and reads the result after that
  // round's block scan, before its first side effect (finalize.cuh FinalizeClaims<true>),
  // instead of before its first load; the same offsets.
  int32_t pool_late;
  int32_t* expand_done;
  // 1 (pooled, CUWFST_POOL_HINTS=adaptive): the slot hints of a lane's step are sampled every
  // 2^HintShiftOf slots, coarser where the frontier's region is small, so that they cover
  // kHintSlotsPerToken slots a frontier token (the region holds 4 hint entries a token: at
  // every 32nd slot that is 128 slots a region token, which 41% of the full tier's steps pass
  // under the admissible-arc sizing, and those steps fall back to binary searches); 0: every
  // 32nd slot (kHintShift), as the static layout always does.
  int32_t pool_hints;
  int32_t* max_done;    // MaxKernel's last-block-done counter (0 between launches)
  const long long* pool_cap;     // [kPools] committed entries of each pool (device)
  unsigned long long* pool_need;  // [kPoolNeedSlots] the most a step of this batch asked of each
                                  // pool, and the pause flag
  int32_t path_cap;     // best-path arcs per lane
  int32_t eps_iterations;  // closure passes per real step (0: an epsilon-free decode)
  // frontier double buffer: per-token pool [2] (a lane's tokens at LaneCounters::tok_off)
  int32_t* tok_state[2];
  float* tok_score[2];
  int32_t* tok_winner[2];
  // per step, per token of the frontier being expanded (same offsets)
  int32_t* tok_begin;    // first arc of each token for this phase
  float* tok_ub;         // a real step's bound on a token's ends, score + (max_lp + max emitting weight); +inf on other steps
  int32_t* arc_offsets;  // exclusive degree prefix sums (a region's tok_cap + 1 entries)
  int32_t* tok_hint;     // the token holding slot k * kHintStride (HintBase / HintCap)
  int32_t hint_cap;      // static layout: entries per lane
  // [max_lanes + 1] the flattened slot space: lane l owns global slots
  // [lane_arc_offsets[l], lane_arc_offsets[l + 1]). int64 because the batch's total can pass
  // 2^31 (1024 lanes x 2^21 slots) while each lane's own span stays below 2^31.
  int64_t* lane_arc_offsets;
  int32_t* scan_done;         // ScanKernel's last-block-done counter (0 between launches)
  // recombination (a lane's table at hash_off, its claims at claim_off)
  uint32_t* hash_key;
  unsigned long long* hash_payload;  // {ordered end : slot}
  int2* claims;              // {state, hash slot}; {-1, -1}: a claim that lost its slot's race
  // epsilon closure only (nullptr otherwise; epsilon.cuh)
  int32_t* hash_pos;         // frontier index of a claimed slot's state, -1 (hash offsets)
  int32_t* eps_tok;          // a pass's changed tokens (frontier indices; token offsets)
  int32_t* eps_winner;       // their winners at the start of the pass (token offsets)
  int32_t* eps_touched;      // hash slots claimed or improved by a pass (claims offsets)
  // closure = lists: the second pass list (token offsets, as eps_tok, the first), the slot
  // stride of a pass entry (payload slot = entry * eps_stride + k for its k-th epsilon arc,
  // the graph's max_eps_degree) and the switch itself
  int32_t* eps_list1;
  int32_t eps_stride;
  int32_t closure_lists;     // 1: Finalize/Resolve list the next pass's tokens (no EpsScan)
  // The low word of an emitting step's hash payloads (expand.cuh PayloadLow, Recombine; read by
  // finalize.cuh FinalizeClaims): 0, the lane's local slot, whose token Finalize finds by a
  // search over the offsets; else {token << payload_tok | the arc's index among the token's
  // slots} (CUWFST_PAYLOAD=token, GpuDecoder::Allocate), which names the token without a search.
  // Both order a lane's candidates as their slots do (slot = offsets[token] + index, and an
  // index is below its token's slot count), so a tie on the end keeps the same winner. Set only
  // where every such word is below 2^31 (under kBaselineSlot, as the closure needs): the graph's
  // max degree at most 2^payload_tok and main_q << payload_tok at most 2^31.
  int32_t payload_tok;
  // A diagnostic of the pooled layout (CUWFST_POOL_FULL; 0 in normal use): a mask of the region
  // kinds a stepping lane is handed at the static layout's size instead of its step's bound
  // (kPoolFullClaims: claims_cap entries of claims list, kPoolFullHash: a hash_cap table,
  // kPoolFullTokens: a main_q frontier region and with it the hints a main_q region has). The
  // regions still come from the pools in lane order, so the batch pauses and grows them to the
  // static sizes on its first steps. A lane's claims cap stays its step's bound, so every kept
  // token, score and arc is the same; only where the regions lie and how large they are
  // changes (same-run A/B of what the small regions cost: docs/speed-notes.md).
  // kPoolHash2x / kPoolHash4x: the hash tables at the power of two >= 4 x / 8 x the bound
  // instead of 2 x (still at most hash_cap): what the tables' load costs ExpandKernel.
  int32_t pool_full;
  // ScanSplitKernel (scan_split > 1 CTAs per lane): look-back status words [max_lanes][scan_split]
  // ({flag : value}, 0 = not yet published), per-lane done counters and the CTA ticket counter;
  // all zero between launches
  int32_t scan_split;
  // ScanSplitKernel's granule (DecoderConfig::scan_round): a lane's chunks are whole runs of
  // this many tokens (ScanChunkOf), kScanRoundTokens by default; a smaller granule spreads a
  // lane of a few thousand tokens over more CTAs (a chunk below kScanRoundTokens takes the
  // kernel's one-round path with the threads past its end idle)
  int32_t scan_round;
  // 1: ScanSplitKernel hands its tickets out chunk-major (every lane's chunk 0, then every
  // lane's chunk 1, ...), 0: lane-major (DecoderConfig::scan_order)
  int32_t scan_chunk_major;
  // [max_lanes]: the persistent split scan's per-lane step (scan.cuh ApplyLaneStep), which its
  // grid's last CTA writes into the lanes' counters once every CTA is done reading them
  LaneStepOut* scan_out;
  // The claim-split kernels (Finalize, the closure's Resolve / Link / ClearClaims, LatStepEnd;
  // grid finalize_split x max_lanes): the fewest items a CTA takes (SplitRange). 1: even chunks
  // over the grid (an explicit finalize_split); the auto grid: one Finalize round
  // (kFinalizeThreads x kFinalizeItems), so a lane with few claims runs in few full CTAs.
  int32_t split_min;
  unsigned long long* scan_status;
  int32_t* scan_lane_done;
  int32_t* scan_ticket;
  // fused_max (1: FusedExpandKernel computes the step's max while it admits arcs, no
  // MaxKernel; expand.cuh): scan_best [max_lanes] is where the CTAs of a lane's split scan
  // meet to name its best token {ordered score : index} (0 = none), zero between launches
  int32_t fused_max;
  unsigned long long* scan_best;
  // 1 (DecoderConfig::trim_arcs on a graph with emit_sorted): a real step's scan gives each
  // token only the prefix of its sorted emitting arcs whose bound passes L - beam, L an arc
  // end of the step (scan.cuh LaneTrim); the arcs left out can be neither admitted nor the max
  int32_t trim;
  // 1: the warp walker enters lanes by binary searches (DecoderConfig::walker kWalkWarpSearch, for
  // A/B runs); 0: by WarpLaneOf and the slot hint alone (expand.cuh WarpWalk)
  int32_t walk_search;
  // 1: ScanSplitKernel fetches ahead (scan.cuh): a one-round chunk's tokens before the trim's
  // anchor walk, which the CTA's last warp does; persistent, the first ticket during the plan,
  // and no second ticket when the items are no more than the CTAs. 0: the order before (the
  // anchor by warp 0, then the tokens; every ticket its own atomic), kept for A/B runs:
  // DecoderConfig::scan_order 3
  int32_t scan_preload;
  unsigned long long* slot_total;  // [2] the slots every step gave the walkers, summed, and of them the
                                   // max_known lanes' (MaxKernel left them out) (mem stats)
  // winners log and cursor. Entries [0, *arena_limit) may be written: the capacity the host
  // publishes in device memory, so a lazily committed log grows (the host commits more and
  // raises the limit) without re-capturing any graph (spec §6.2); an append at or past it
  // is dropped and flags kOverflowArena. The cursor counts every append, so after an
  // overflow it is what the batch needed.
  WinnerEntry* arena;
  const long long* arena_limit;
  unsigned long long* arena_cursor;
  // Streams' arena guard (device scalar; 0: off, else on: a stream advance). With it set, the
  // emitting step's last scan CTA (scan.cuh ArenaStepFits) adds up the entries the step can
  // append at most, each stepping lane's min(claims_cap, its slots) plus eps_iterations x
  // main_q, and unless 2 (cursor + that) <= *arena_limit puts every stepping lane back before
  // anything of the step appends, so a step never overflows the log (and the GC round after
  // it finds its free tail): it waits, and the host collects garbage, grows the log and runs
  // the rest of the chunk (an advance cannot be re-run, so it must never drop an entry).
  const unsigned long long* arena_guard;
  // The entries of the step the guard held back (0: none): sticky for the sequence's later
  // steps, which idle (ScanLaneSize); LaneSetupKernel zeroes it; the host reads it after the
  // round and grows the log for it.
  unsigned long long* arena_pause;
  LaneCounters* lanes;
  const LaneCommand* commands;  // [max_lanes] LaneSetupKernel's orders for this sequence
  const LaneInput* inputs;      // [max_lanes] each lane's log-prob rows
  int32_t* out_path;         // [max_lanes][path_cap] arcs of the best path
  int32_t* out_path_len;     // [max_lanes]
  // the device-side refill (kRefillByKernel or kRefillInFinalize only in a SeqKind::kSegmentRefill
  // sequence, else kRefillOff)
  int32_t refill;
  int32_t* refill_arrive;    // [max_lanes] kRefillInFinalize: an ended lane's Finalize CTAs done (0 between steps)
  LaneInput* refill_inputs;  // = inputs, writable: a refilled lane's new row
  const RefillEntry* refill_queue;  // [kRefillQueued] the rows queued for this segment
  int32_t* refill_ctl;       // [kRefillCtl]
  RefillDone* refill_done;   // [done cap]
  int32_t* refill_row;       // [max_lanes] the row each lane holds now (host-set rows included)
  int32_t* refill_path;      // [done cap][path_cap] the done rows' best paths
  int32_t* refill_path_len;  // [done cap]
  // winners-log GC of lanes that live across launch sequences (gc.cuh; nullptr until used)
  long long* gc_tag;         // [arena limit] {round : value}
  unsigned long long* gc_live;  // live entries numbered by the round
  int32_t* gc_conv;          // [max_lanes] each lane's convergence entry
  int32_t* drain;            // [max_lanes][path_cap] final arcs a round cut off, root first
  int32_t* drain_len;        // [max_lanes]
  // lattice records (lattice.cuh): set only for a decode with lattice = 1
  int32_t lattice;           // 1: FinalizeKernel keeps the step's claims, LatPersistKernel records;
                             // 2: as 1, and LatPersistKernel also writes lat_ext (GPU pruning)
  int32_t lat_keys_only;     // a lattice decode on an epsilon-free graph (unless CUWFST_LAT_CLEAR=full):
                             // FinalizeKernel leaves a real step's claimed payloads 0 and
                             // LatStepEndKernel clears only the keys (hash_pos is rewritten by
                             // each step's FinalizeKernel before the lattice stage reads it)
  int32_t seg_cap;           // steps per lane the per-step arrays hold (max_frames + 2)
  LatRecord* lat;            // [lat_cap] the batch's records, lanes interleaved, each lane's in step order
  LatRecordExt* lat_ext;     // [lat_cap] beside lat when lattice == 2 (else unused)
  int64_t lat_cap;
  unsigned long long* lat_cursor;  // records this decode made; past lat_cap: grow and decode again
  int32_t* lat_count;        // [max_lanes][seg_cap] records of each step of each lane
  float* lat_cutoff;         // [max_lanes][seg_cap] each step's cutoff (exact max - beam)
  int32_t* lat_size;         // [max_lanes][seg_cap] the frontier after each step (and its closure)
  // lattice == 2: every arc of each step whose destination survived, before the records'
  // filter (k2's recorded arcs; lat_count counts what the filter kept) [max_lanes][seg_cap],
  // and the filter's settings {on (1/0), output_beam, pad}, device data the host writes
  // before each run (lattice.cuh LatFilterFor); with lattice == 1 lat_all holds instead each step's
  // A of the records' filter on epsilon graphs as float bits (common.cuh LatEpsFilterFor; 0 where
  // the step was not filtered)
  int32_t* lat_all;
  // {on, output_beam, pad, prefilter, candidates, per-CTA appends, final candidates, the records'
  // filter on epsilon graphs, its lattice trim and prefilter (lattice == 2: common.cuh LatEpsTrimOn)}
  const float* lat_filter;
  // lattice == 2 candidate mode (common.cuh LatCandOn): ExpandKernel's candidates of the step,
  // [lat_cand_cap] at the cursor lat_cand_n[0] (LatStepEndKernel zeroes it); lat_cand_n[1] and
  // [2] count the real lane-steps recorded from candidates and those whose candidates overflowed
  // (walked instead), [3] the final lane-steps recorded from candidates (LatCandFinalOn), over a
  // decode; nullptr: off
  LatCand* lat_cand;
  unsigned long long* lat_cand_n;
  int64_t lat_cand_cap;
  // The records after the search (lattice_after.cuh; GpuDecoder::EnsureLatticeAfter): with
  // lat_after (a GPU-pruned lattice decode of whole rows on an epsilon-free graph, when the decoder
  // was not made with CUWFST_LATTICE_RECORDS=step) the step's kernels run as the 1-best's, LatLogKernel
  // copies each step's expanded frontier into the log and its scalars into lat_steps, and after the
  // sequence's steps one pass (LatPlanKernel .. LatTailKernel) writes every step's records into
  // lat / lat_ext and lat_count, the same records the in-step stage writes (their order aside).
  int32_t lat_after;
  // the logged frontiers, lane l's at [l * lat_log_lane, (l + 1) * lat_log_lane): a step's at the
  // lane's frontier_total before it (a lane whose frontier_total passes lat_log_lane logs no more:
  // the host grows the log to the batch's largest and decodes again)
  int32_t* lat_log_state;          // [max_lanes * lat_log_lane] states
  float* lat_log_score;            // [max_lanes * lat_log_lane] and scores
  int64_t lat_log_lane;
  LatStepLog* lat_steps;           // [max_lanes][seg_cap]
  int2* lat_items;                 // [kAfterLists][lat_items_cap] work items {lane * seg_cap + step, first token}
  int64_t lat_items_cap;
  unsigned long long* lat_plan;    // [16]: items a list, [6] the global tables' entries (past lat_tab_cap: grow),
                                   // [8 + list] the records kernels' claimed items (lat_claims), [12] the
                                   // one grid's (lat_one_grid)
  // 1: a LatRecordsKernel CTA claims its next work item from lat_plan[8 + list] when it is done
  // with one (the items differ ~100-fold in work); 0: item blockIdx.x + k gridDim.x
  // (CUWFST_LATTICE_CLAIMS=stride, a measurement switch)
  int32_t lat_claims;
  // 1: a LatRecordsKernel warp takes its records' slots kAfterReserve at a time at lat_cursor
  // (lattice_after.cuh AfterWriteChunk; the slots it leaves unfilled are holes, lane -1, so the
  // cursor counts slots, not records); 0: an atomicAdd a round with a kept record
  // (CUWFST_LATTICE_RESERVE=chunk / round; chunk the default)
  int32_t lat_reserve;
  // 1: the records pass's items in one LatRecordsKernel<-1> launch, claimed from lat_plan[12] longest
  // class first (global, c14, c13, c11); 0: a launch a table class on four streams
  // (CUWFST_LATTICE_AFTER_GRID=one / classes; one the default)
  int32_t lat_one_grid;
  // the one grid's c14 steps: 1, a 2^14-slot shared table of indices alone (state_table.cuh
  // StateIndexFind); 0, global tables (CUWFST_LATTICE_AFTER_C14=index / global; index the default)
  int32_t lat_c14_index;
  // S_t's tokens a records (or tail) work item of the pass: kAfterChunk (1,024), or
  // CUWFST_LATTICE_AFTER_CHUNK (256, 512, 1,024, 2,048 or 4,096) at construction
  int32_t lat_chunk;
  // 1: the step's log (its scalars, S_t's copy) is written by the step's FinalizeKernel
  // (lattice_log.cuh LatLogInFinalize, its lane's last CTA to arrive at lat_log_arrive[lane], 0
  // between steps, writes the scalars) in place of a LatLogKernel launch a step
  // (CUWFST_LATTICE_LOG=finalize / kernel; kernel the default). 2 (CUWFST_LATTICE_LOG=side): the
  // same last CTA writes the scalars and the lane's copy job (lat_log_job), and LatLogSideKernel
  // copies S_t on a side stream beside the next step's scan, max and expand (joined before its
  // FinalizeKernel, the first launch to write into S_t's buffer)
  int32_t lat_log_fold;
  // 1 (set by EnqueueStep on the step's Workspace under lat_log_fold 3, CUWFST_LATTICE_LOG=scan, where the
  // fold's conditions hold): the step's scan copies S_t into the log as it reads the tokens (scan.cuh
  // TokenLoad's log_off), and the next step's scan writes the step's scalars before it applies its own
  // step (LaneCounters::lat_log_pending; the sequence's last ones LatLogPendingKernel, before the
  // records pass): no log launch on the step's chain
  int32_t lat_log_scan;
  // a measurement (CUWFST_LATTICE_AFTER_PROF=on at construction; nullptr otherwise): the records
  // kernels' clock64 and %globaltimer sums a pass, kAfterProfWords (lattice_after.cuh AfterProf*)
  unsigned long long* lat_prof;
  int32_t* lat_log_arrive;         // [max_lanes]
  LatLogJob* lat_log_job;          // [max_lanes] (lat_log_fold 2) each lane's pending copy of S_t
  int32_t* lat_tab_keys;           // [lat_tab_cap] the global tables (states, -1 empty)
  int32_t* lat_tab_pos;            // [lat_tab_cap] and their frontier indices
  // or (CUWFST_LATTICE_TABLES=packed; then the two above are nullptr) [lat_tab_cap] 16-byte slots of
  // state, index and score (state_table.cuh StateTableFindPacked: a hit's index and score in the
  // probe's own load); else nullptr
  ulonglong2* lat_tab_slots;
  int64_t lat_tab_cap;
  // The persistent split scan's phase trace (CUWFST_SCAN_TRACE=N, off by default: nullptr):
  // for each of the last N steps (a ring, scan_trace_cap = N), for each CTA of the scan's grid,
  // kScanTraceWords words: the %globaltimer at the phases scan.cuh ScanTraceMark names, then
  // the CTA's first item (lane, chunk, flags) and its tokens. scan_trace_step counts the
  // traced launches (the grid's last CTA adds one). Diagnostics only: nothing reads it back
  // on the device, and the results are the same with it on or off. (Last in the struct, and the
  // trace a template argument of the scan, so that the untraced kernels compile as before.)
  unsigned long long* scan_trace;
  int32_t* scan_trace_step;
  int32_t scan_trace_cap;
};

// Where a lane's tok_hint region for frontier buffer b starts and how many entries it has:
// static, the lane's fixed slice; pooled, four entries per token of the region.
__host__ __device__ inline int64_t HintBase(const Workspace& ws, const LaneCounters& lc, int32_t lane, int32_t b) {
  return ws.pooled ? 4 * lc.tok_off[b] : static_cast<int64_t>(lane) * ws.hint_cap;
}
__host__ __device__ inline int32_t HintCap(const Workspace& ws, const LaneCounters& lc, int32_t b) {
  const int64_t c = 4 * (static_cast<int64_t>(lc.tok_cap[b]) + 1);
  return ws.pooled ? static_cast<int32_t>(c < ws.hint_cap ? c : ws.hint_cap) : ws.hint_cap;
}

// The sampling shift of a lane's slot hints for a step expanding an n-token frontier whose
// hint region holds hint_cap entries (HintCap): kHintShift (every 32nd slot), or with
// Workspace::pool_hints the smallest shift from it, at most kMaxHintShift, at which the hints
// cover n x kHintSlotsPerToken slots. A function of the frontier's size and region only, so
// the scan that writes the hints and every kernel that reads them (the walkers' lane entry,
// FinalizeKernel, the lattice walk) compute the same shift; the hints cover the step where
// its slots are at most hint_cap << shift (the lanes' hint_ok), else lookups binary-search.
constexpr int32_t kHintSlotsPerToken = 512;
constexpr int32_t kMaxHintShift = 10;
__host__ __device__ inline int32_t HintShiftOf(const Workspace& ws, int32_t hint_cap, int32_t n) {
  int32_t s = kHintShift;
  if (!(ws.pooled && ws.pool_hints)) return s;
  const int64_t want = static_cast<int64_t>(n) * kHintSlotsPerToken;
  while (s < kMaxHintShift && (static_cast<int64_t>(hint_cap) << s) < want) ++s;
  return s;
}
__host__ __device__ inline int32_t LaneHintShift(const Workspace& ws, const LaneCounters& lc, int32_t b, int32_t n) {
  return HintShiftOf(ws, HintCap(ws, lc, b), n);
}

// The static layout's regions of lane l (LaneSetupKernel; the host's copies, snapshots).
__host__ __device__ inline void StaticLayout(const Workspace& ws, int32_t lane, LaneCounters& lc) {
  const int64_t q = static_cast<int64_t>(lane) * (ws.main_q + 1);
  lc.tok_off[0] = lc.tok_off[1] = q;
  lc.tok_cap[0] = lc.tok_cap[1] = ws.main_q;
  lc.claim_off = static_cast<int64_t>(lane) * ws.claims_cap;
  lc.claim_cap = ws.claims_cap;
  lc.hash_off = static_cast<int64_t>(lane) * ws.hash_cap;
  lc.hash_cap = ws.hash_cap;
}

// A pooled step's claims bound and hash size for a lane (the hand-out: MaxKernel's last block
// with `slots` = the lane's admissible arcs, LaneCounters::admit, or ScanKernel's under
// fused_max with the step's slots): every claim is a distinct destination of an admitted arc,
// so at most either count, and at most one (the final state) on a final or redirect step;
// the table keeps its load <= 1/2.
// The static layout's per-lane capacities cap both, as they do there.
__host__ __device__ inline int32_t PooledClaimsBound(const Workspace& ws, int32_t phase, int32_t slots) {
  if (phase == kPhaseIdle || slots <= 0) return 0;
  if (phase != kPhaseReal) return 1;
  return slots < ws.claims_cap ? slots : ws.claims_cap;
}
// Regions start on 32-entry boundaries (128 bytes of an int32 array), so a warp's 32
// consecutive entries are one transaction, as in a fresh allocation: token regions are
// rounded up to it, tables are at least that large (powers of two), claims lists are
// rounded up to 16 entries (128 bytes of int2).
constexpr int32_t kPoolAlign = 32;
constexpr int32_t kPoolFullClaims = 1, kPoolFullHash = 2, kPoolFullTokens = 4;  // Workspace::pool_full
constexpr int32_t kPoolHash2x = 8, kPoolHash4x = 16;                             // (the same mask)
constexpr int32_t kPoolFullMask = 31;
__host__ __device__ inline int32_t PooledHashSize(const Workspace& ws, int32_t claims_bound) {
  if (claims_bound <= 0) return 0;
  int64_t h = kPoolAlign;
  const int64_t load = (ws.pool_full & kPoolHash4x) ? 8 : (ws.pool_full & kPoolHash2x) ? 4 : 2;
  while (h < load * static_cast<int64_t>(claims_bound)) h <<= 1;
  return static_cast<int32_t>(h < ws.hash_cap ? h : ws.hash_cap);
}
// The next frontier's region: at most main_q tokens, plus arc_offsets' sentinel, aligned.
__host__ __device__ inline int32_t PooledTokenRegion(const Workspace& ws, int32_t claims_bound) {
  const int64_t t = static_cast<int64_t>(claims_bound < ws.main_q ? claims_bound : ws.main_q) + 1;
  return static_cast<int32_t>((t + kPoolAlign - 1) / kPoolAlign * kPoolAlign);
}
__host__ __device__ inline int32_t PooledClaimsRegion(int32_t claims_bound) { return (claims_bound + 15) & ~15; }

// The records pass's slots a chunk a warp at a time (Workspace::lat_reserve; lattice_after.cuh
// AfterWriteChunk, AfterReleaseChunk): a warp holds a chunk of kAfterReserve consecutive slots of
// the records, `used` of them filled (kAfterReserve: none left, as before its first). A round that
// keeps n records (at most 32), the keeping lane of rank `rank` among them: its slot is at `offset`
// in the warp's chunk, or (fresh) in the new chunk the round takes when n passes the room left;
// the chunk then holds AfterChunkUsed(used, n) filled slots. The holes are a chunk's slots past its
// `used` when the kernel ends. Host model: tests/native/after_chunk_test.cc.
constexpr int32_t kAfterReserve = 32;
struct AfterChunkSlot {
  int32_t offset;
  bool fresh;
};
__host__ __device__ constexpr AfterChunkSlot AfterChunkSlotOf(int32_t used, int32_t n, int32_t rank) {
  return n > kAfterReserve - used && rank >= kAfterReserve - used ? AfterChunkSlot{rank - (kAfterReserve - used), true}
                                                                  : AfterChunkSlot{used + rank, false};
}
__host__ __device__ constexpr int32_t AfterChunkUsed(int32_t used, int32_t n) {
  return n > kAfterReserve - used ? n - (kAfterReserve - used) : used + n;
}

// What one lane asks of the pools for a step (pooled layout; the hand-out's last block hands
// the regions out in lane order by prefix sums of these): its claims bound, and the entries
// its claims list, hash table and next frontier take from each pool (0: none).
struct PooledAsk {
  int32_t bound, claims, hash, tokens;
};
__host__ __device__ inline PooledAsk PooledAskOf(const Workspace& ws, int32_t phase, int32_t slots) {
  PooledAsk a;
  a.bound = PooledClaimsBound(ws, phase, slots);
  a.claims = PooledClaimsRegion(a.bound);
  a.hash = PooledHashSize(ws, a.bound);
  a.tokens = phase == kPhaseIdle ? 0 : PooledTokenRegion(ws, a.bound);
  if (ws.pool_full) {  // the diagnostic (Workspace::pool_full): the static sizes, the same bound
    if ((ws.pool_full & kPoolFullClaims) && a.bound > 0) a.claims = PooledClaimsRegion(ws.claims_cap);
    if ((ws.pool_full & kPoolFullHash) && a.hash > 0) a.hash = ws.hash_cap;
    if ((ws.pool_full & kPoolFullTokens) && a.tokens > 0) a.tokens = PooledTokenRegion(ws, ws.main_q);
  }
  return a;
}
// Whether a step's asks, summed over the batch's lanes, fit the pools' committed capacities
// (then every lane's prefix fits and PooledAssign gives every lane its regions).
__host__ __device__ inline bool PooledStepFits(int64_t claims, int64_t hash, int64_t tokens, int64_t c_cap,
                                               int64_t h_cap, int64_t t_cap) {
  return claims <= c_cap && hash <= h_cap && tokens <= t_cap;
}
// Gives lane `lc` the regions at these pool offsets if every one fits its pool's committed
// capacity; else none: capacities 0 and offsets 0, so no kernel that indexes through them can
// reach past what is committed (the step claims and keeps nothing; the caller flags the lane
// kOverflowPool). The last block calls it only for a step that fits as a whole
// (PooledStepFits), so every lane gets its regions; the refusal stays as the guard. dst: the
// frontier buffer the step builds. Returns whether it fitted.
__host__ __device__ inline bool PooledAssign(const Workspace& ws, LaneCounters& lc, int32_t dst, const PooledAsk& a,
                                             int64_t c_off, int64_t h_off, int64_t t_off, int64_t c_cap,
                                             int64_t h_cap, int64_t t_cap) {
  const bool fits = (a.bound == 0 || c_off + a.bound <= c_cap) && (a.hash == 0 || h_off + a.hash <= h_cap) &&
                    (a.tokens == 0 || t_off + a.tokens <= t_cap);
  lc.claim_off = fits ? c_off : 0;
  lc.claim_cap = fits ? a.bound : 0;
  lc.hash_off = fits ? h_off : 0;
  lc.hash_cap = fits ? a.hash : 0;
  if (a.tokens > 0) {
    lc.tok_off[dst] = fits ? t_off : 0;
    // at most main_q survivors, as in the static layout (FinalizeKernel flags kOverflowKept
    // past it): the region's rounding to kPoolAlign adds room, not capacity
    lc.tok_cap[dst] = fits ? (a.tokens - 1 < ws.main_q ? a.tokens - 1 : ws.main_q) : 0;
  }
  return fits;
}
// What a pool grows to when a paused step asked `need` of it (GpuDecoder::Decode; the host
// model replays it): 1.125 x the need, at least 1.25 x the capacity `cap` (a first big
// batch's steps grow a few at a time), at most the static layout's size `most` (which holds
// any step); `cap` where the need fits. Growth maps pieces in place (VMM): headroom is what
// stays committed, so it is kept small (benchmarks/pool_accounting.py: at batch 32 on the
// full tier 96 MiB committed for a 80 MiB peak, against 124 MiB with 1.25 x / doubling).
__host__ __device__ inline int64_t PoolGrowth(int64_t need, int64_t cap, int64_t most) {
  if (need <= cap) return cap;
  int64_t w = need + need / 8;
  if (w < cap + cap / 4) w = cap + cap / 4;
  return w < most ? w : most;
}
// What a lattice run that overflowed the records made and needs (GpuDecoder::Decode and
// RunBoundedLattice; the host grows the records to `need` plus a quarter and runs again). Read
// from the per-step counts, count[b * seg + t] for lanes b < B and the run's steps
// t0 <= t < t1 (LatPersistKernel adds each record to its lane's step count as it adds it to
// the cursor, also past the capacity), not from the cursor alone: `made` (the records of the
// run, which the caller checks against the cursor: the same number unless the cursor is
// wrong), `most` (the most one step made, over all lanes), and `need` = what a run of
// `steps` steps holds if each is as large as the largest seen: at least `made`, and never
// more than that worst case for one run (steps 0: the whole batch, `made`). A bounded run
// scaled by its average step undershoots when later frames make more records than the first
// ones (a restart then re-decodes from frame 0); by the cursor over the steps taken it would
// trust one number the counts can check.
struct LatticeRunNeed {
  int64_t made, most, need;
};
__host__ inline LatticeRunNeed LatticeNeedOfRun(const int32_t* count, int32_t B, int64_t seg, int32_t t0, int32_t t1,
                                                int32_t steps) {
  LatticeRunNeed r{0, 0, 0};
  if (t0 < 0) t0 = 0;
  if (t1 > seg) t1 = static_cast<int32_t>(seg);
  for (int32_t t = t0; t < t1; ++t) {
    int64_t step = 0;
    for (int32_t b = 0; b < B; ++b) step += count[static_cast<int64_t>(b) * seg + t] > 0 ? count[static_cast<int64_t>(b) * seg + t] : 0;
    r.made += step;
    if (step > r.most) r.most = step;
  }
  r.need = steps > 0 && r.most * steps > r.made ? r.most * steps : r.made;
  return r;
}
// A paused step undone (pooled layout, the hand-out's last block; the host model replays it):
// the lane's ScanKernel (or ScanSplitKernel's last CTA of the lane) has advanced it — t + 1,
// buf flipped, next_size 0, the beam updated, frontier_total + n — and the step's asks did
// not fit the pools, so nothing of the step may run: the lane goes back to where the step
// found it (its frontier, in buffer buf, untouched; max_ord, which the scan and MaxKernel
// overwrote) and idles this step; the resumed batch
// takes the step again from the same state, so it is decoded once. The rest of what Scan
// wrote is rewritten by that step (max_frontier is a max, so taking n again changes
// nothing). Volatile: other CTAs wrote these fields and the caller's L1 may hold old lines.
__host__ __device__ inline void PooledUndoStep(LaneCounters* p) {
  volatile LaneCounters* v = p;
  const int32_t n = v->frontier_size;  // min(next_size, tok_cap[buf]) of the step
  v->t = v->t - 1;
  v->buf = v->buf ^ 1;
  v->next_size = n;  // the frontier the step read (re-read as min(next_size, tok_cap))
  v->beam = v->prev_beam;
  v->max_ord = v->prev_max_ord;  // (the bins bound's reference for the step taken again)
  v->frontier_total = v->frontier_total - n;
  v->phase = kPhaseIdle;
  // the lattice stage (lattice.cuh) reads the step's own phase: idle, so LatStepEndKernel
  // writes no cutoff or size for this step (at t - 1 it would overwrite the previous step's,
  // at t = 0 land before the lane's row) and the resumed step records once
  v->step_phase = kPhaseIdle;
  v->total_arcs = 0;
  v->lat_log_pending = 0;  // (the step before's scalars were written by this step's scan)
}

// ScanSplitKernel's cut of a lane's n-token frontier (its region's first n tokens, either
// layout) over `chunks` CTAs: contiguous runs of `per` tokens, whole rounds of `round` tokens
// each; chunk c covers [lo, hi), empty for every chunk after the last non-empty one,
// LastScanChunk(n, per) (-1: none), whose status word holds the lane's total. A host
// function too, so that tests/native/pool_layout_test.cc replays the kernel's cut.
constexpr int32_t kScanRoundTokens = 2048;  // kScanThreads x kScanItems (scan.cuh)
struct ScanChunk {
  int32_t lo, hi, per;
};
__host__ __device__ inline ScanChunk ScanChunkOf(int32_t n, int32_t chunks, int32_t chunk, int32_t round) {
  const int32_t rounds = (n + round - 1) / round;
  ScanChunk c;
  c.per = (rounds + chunks - 1) / chunks * round;
  const int64_t lo = static_cast<int64_t>(chunk) * c.per;
  c.lo = static_cast<int32_t>(lo < n ? lo : n);
  c.hi = static_cast<int32_t>(c.lo + static_cast<int64_t>(c.per) < n ? c.lo + c.per : n);
  return c;
}
__host__ __device__ inline int32_t LastScanChunk(int32_t n, int32_t per) { return n > 0 ? (n - 1) / per : -1; }

// Whether frontier buffer b of a lane has a region, i.e. room for its tok_cap tokens and the
// arc_offsets sentinel after them. Static: always. Pooled: unless the pools could not hold
// the step that built it (tok_cap 0; a region always has kPoolAlign - 1 >= 1 tokens, and the
// start token's has 1).
__host__ __device__ inline bool HasTokenRegion(const Workspace& ws, const LaneCounters& lc, int32_t b) {
  return !ws.pooled || lc.tok_cap[b] > 0;
}

}  // namespace cuwfst
