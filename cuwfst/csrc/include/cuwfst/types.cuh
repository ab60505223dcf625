// Device-side types shared by every stage of the GPU decoder. Framework-free: raw
// pointers and sizes only. Naming follows k2: a lane is a compute slot (one utterance of
// the batch), a token is one frontier entry (state, score, winner), a slot is one
// (token, arc) pair of a step's flattened arc space.
#pragma once

#include <cstdint>

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
  const int32_t* final_count;  // [num_states]
  // [num_states] epsilon arcs of each state, which sit right after its finals-at-start
  // (or at the start of its range with finals at end); nullptr on epsilon-free graphs
  const int32_t* eps_count;
  const int32_t* arc_dest;     // [num_arcs]
  const uint16_t* arc_ilabel;  // [num_arcs], 0xFFFF = -1
  const float* arc_weight;     // [num_arcs]
  const float* emit_maxw;      // [num_states] max weight over a state's emitting arcs
  // [num_states] max weight over a state's epsilon arcs, -inf for a state without any
  // (nullptr on epsilon-free graphs): token score + eps_maxw <= cutoff means no epsilon arc
  // of the token can pass (fp32 addition is monotone), so the closure lists skip it
  const float* eps_maxw;
  int32_t max_eps_degree;      // the most epsilon arcs of one state (0 on epsilon-free graphs)
};

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
  return {g.row_splits[s], g.row_splits[s + 1], g.final_count[s], g.eps_count ? g.eps_count[s] : 0,
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

// What LaneSetupKernel does to a lane before a launch sequence (ops are bits).
enum : int32_t {
  kCmdInit = 1,       // a new row or stream: length, avail, online as given; start token
  kCmdSetLength = 2,  // the length becomes known (a stream is finalized): length as given
  kCmdRelease = 4,    // the lane holds nothing (length -1): its steps and results stop
  kCmdAvail = 8,      // frames available: real steps run while t < avail
  kCmdPartial = 16,   // PartialKernel reads this lane's best path (gc.cuh)
};
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
  int32_t hint_ok;       // tok_hint covers all of this step's slots
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
};

struct WinnerEntry {
  int32_t prev;  // previous entry, -1 for the start token
  int32_t arc;   // graph arc, kRedirectArcBit set on a redirect
};

// The per-decoder workspace (capacities are fixed at construction).
struct Workspace {
  int32_t max_lanes;
  int32_t main_q;       // frontier capacity per lane
  int32_t claims_cap;   // distinct states per lane per step
  int32_t hash_cap;     // power of two, per lane
  int64_t arena_cap;    // winners entries (shared)
  int32_t path_cap;     // best-path arcs per lane
  int32_t eps_iterations;  // closure passes per real step (0: an epsilon-free decode)
  // frontier double buffer [2][max_lanes][main_q]
  int32_t* tok_state[2];
  float* tok_score[2];
  int32_t* tok_winner[2];
  // per step, per lane [max_lanes][main_q (+1)]
  int32_t* tok_begin;    // first arc of each token for this phase
  float* tok_ub;         // score + max emitting weight (upper-bound ingredient)
  int32_t* arc_offsets;  // exclusive degree prefix sums, [max_lanes][main_q + 1]
  int32_t* tok_hint;     // [max_lanes][hint_cap]: the token holding slot k * kHintStride
  int32_t hint_cap;
  // [max_lanes + 1] the flattened slot space: lane l owns global slots
  // [lane_arc_offsets[l], lane_arc_offsets[l + 1]). int64 because the batch's total can pass
  // 2^31 (1024 lanes x 2^21 slots) while each lane's own span stays below 2^31.
  int64_t* lane_arc_offsets;
  int32_t* scan_done;         // ScanKernel's last-block-done counter (0 between launches)
  // recombination
  uint32_t* hash_key;        // [max_lanes][hash_cap]
  unsigned long long* hash_payload;  // {ordered end : slot}
  int2* claims;              // [max_lanes][claims_cap] {state, hash slot}
  // epsilon closure only (nullptr otherwise; epsilon.cuh)
  int32_t* hash_pos;         // [max_lanes][hash_cap] frontier index of a claimed slot's state, -1
  int32_t* eps_tok;          // [max_lanes][main_q] a pass's changed tokens (frontier indices)
  int32_t* eps_winner;       // [max_lanes][main_q] their winners at the start of the pass
  int32_t* eps_touched;      // [max_lanes][claims_cap] hash slots claimed or improved by a pass
  // closure = lists: the second pass list ([max_lanes][main_q]; eps_tok is the first), the
  // slot stride of a pass entry (payload slot = entry * eps_stride + k for its k-th epsilon arc,
  // the graph's max_eps_degree) and the switch itself
  int32_t* eps_list1;
  int32_t eps_stride;
  int32_t closure_lists;     // 1: Finalize/Resolve list the next pass's tokens (no EpsScan)
  // ScanSplitKernel (scan_split > 1 CTAs per lane): look-back status words [max_lanes][scan_split]
  // ({flag : value}, 0 = not yet published), per-lane done counters and the CTA ticket counter;
  // all zero between launches
  int32_t scan_split;
  unsigned long long* scan_status;
  int32_t* scan_lane_done;
  int32_t* scan_ticket;
  // fused_max (1: FusedExpandKernel computes the step's max while it admits arcs, no
  // MaxKernel; expand.cuh): scan_best [max_lanes] is where the CTAs of a lane's split scan
  // meet to name its best token {ordered score : index} (0 = none), zero between launches
  int32_t fused_max;
  unsigned long long* scan_best;
  // winners log and cursor
  WinnerEntry* arena;
  unsigned long long* arena_cursor;
  // Streams' arena guard (device scalar; 0: off): the winners entries one step of every lane
  // the sequence moves may append at most. With it set, ScanKernel idles a lane's real step
  // unless 2 (cursor + guard) <= arena_cap, so a step never overflows the arena (and the GC
  // round after it finds its free tail): it waits, and the
  // host collects garbage, grows the arena and runs the rest of the chunk (an advance cannot
  // be re-run, so it must never drop an entry).
  const unsigned long long* arena_guard;
  LaneCounters* lanes;
  const LaneCommand* commands;  // [max_lanes] LaneSetupKernel's orders for this sequence
  const LaneInput* inputs;      // [max_lanes] each lane's log-prob rows
  int32_t* out_path;         // [max_lanes][path_cap] arcs of the best path
  int32_t* out_path_len;     // [max_lanes]
  // winners-log GC of lanes that live across launch sequences (gc.cuh; nullptr until used)
  long long* gc_tag;         // [arena_cap] {round : value}
  unsigned long long* gc_live;  // live entries numbered by the round
  int32_t* gc_conv;          // [max_lanes] each lane's convergence entry
  int32_t* drain;            // [max_lanes][path_cap] final arcs a round cut off, root first
  int32_t* drain_len;        // [max_lanes]
};

}  // namespace cuwfst
