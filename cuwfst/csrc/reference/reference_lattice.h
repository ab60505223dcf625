// The exact-semantics CPU lattice: what k2's intersect_dense_pruned returns as a lattice,
// built from a RowSearch through its StepObserver hook. The GPU lattice reproduces it.
//
// Semantics (established against k2 1.23.4, docs/k2-lattice-facts.md):
//   * time tau = 0..n+1 holds the frontier after tau steps (and the step's epsilon
//     closure): S_0 = the start closure, S_{n+1} = {final state} or empty;
//   * an arc of step t (leaving S_t) is recorded iff its destination is in the next
//     frontier, whether or not the arc itself passed the cutoff (k2 keeps every arc
//     whose destination state survived); an epsilon arc of the closure of S_tau is
//     recorded iff the closure relaxed it (its source changed in some pass) and its
//     destination is in S_tau, once however often it was relaxed;
//   * scores in k2's arithmetic: score = acoustic + graph (float); forward = max over
//     recorded incoming arcs of (forward[src] + score), in time order and, inside a time,
//     in epsilon-topological order;
//   * k2's pruning windows over the arc times [B, E): for b = -10, 10, 30, ...,
//     B = max(0, b), E = min(b + 30, n + 1), the last one the first with b + 30 >= n + 1
//     (PruneWindows). In a window: backward = -forward on
//     S_E; for t = E-1 .. B, states in reverse topological order, an arc is kept iff
//     (score + backward[dst]) + forward[src] >= -output_beam (float), a state's backward is
//     the max over its kept arcs of score + backward[dst]; states of S_t with B < t < E and
//     no kept arc are dropped (states of S_B are all kept). Windows run in order, each on
//     what the previous ones kept;
//   * lattice states: by time, inside a time by (epsilon layer, token index) on epsilon-free
//     graphs (k2's order) and by (epsilon layer, graph state) on graphs with epsilon arcs (an
//     order the time's states and arcs fix, which a GPU can form without the CPU's token
//     order); the last state is the final state, an extra one (no arcs) when S_{n+1} is empty,
//     as k2 adds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference_decoder.h"

namespace cuwfst {
namespace reference {

// One arc of the unpruned lattice, recorded at the time of its source state.
struct LatticeRecord {
  int32_t src_tok;  // token of S_time
  int32_t dst_tok;  // token of S_{time+1}, or of S_time for an epsilon arc
  int32_t arc;      // image arc id; kRedirectArcBit on allow_partial's redirected arcs
  float acoustic;   // log-prob of the arc's token (0 on final, redirected and epsilon arcs)
  float score;      // acoustic + graph weight, float, in k2's order
};

// A row's pruned lattice as flat arrays (k2's numbering; see the header comment).
struct RowLattice {
  int32_t num_states = 0;             // the start is state 0, the final state num_states - 1
  std::vector<int32_t> state_time;    // [num_states] the time (frames consumed) of each state
  std::vector<int32_t> state_graph;   // [num_states] graph state (-1 for k2's extra final)
  std::vector<int32_t> state_level;   // [num_states] topological level: every arc goes up
  std::vector<int32_t> src, dst;      // [num_arcs] lattice states
  std::vector<int32_t> frame;         // [num_arcs] the time of the arc's source state
  std::vector<int32_t> arc;           // [num_arcs] image arc id, kRedirectArcBit on redirects
  std::vector<float> acoustic, graph, score;  // [num_arcs] score = acoustic + graph (float)
  int64_t recorded_arcs = 0;          // arcs recorded before any output-beam pruning (-1: not
                                      // known, the producer's records filter dropped some)
  // the records filter (LatticeBuilder): arcs stored before the windows (recorded_arcs less
  // those the filter dropped), and whether the row was decoded again without the filter
  int64_t stored_arcs = 0;
  bool filter_redone = false;
  // LatticeFromRecords: the producer's records filter (RecordedRow::producer_a) broke its guard,
  // so the records may lack arcs the lattice keeps: the row has no lattice and must be decoded
  // again without that filter
  bool producer_redo = false;
};

// The records filter's offset c (an arc whose end is below s(dst) - c is dropped: the
// LatticeBuilder's bound below) for an assumed magnitude A, output beam B, epsilon layers L and
// pad: c = B + (2 K + 22) u H + pad, K = 29 + 30 L, H = 6 A + B + 1, in double rounded to float.
// False where the bound's rounding argument does not hold (A + B >= 2^22, or A not finite).
// The GPU's records filter on epsilon graphs (lattice.cuh LatEpsFilterFor) computes the same.
bool RecordsFilterOffset(double A, double B, int32_t L, float pad, float* c);

// The records filter of the CPU lattice (LatticeBuilder): on by default; "off" in the
// environment variable CUWFST_CPU_LATTICE_FILTER turns it off (A/B runs, tests), and
// CUWFST_CPU_LATTICE_FILTER_PAD (a float, tests only) is added to its bound: a negative pad
// makes it drop arcs the windows keep, which the tests use to show they can see that;
// CUWFST_CPU_LATTICE_FILTER_LAYERS (an int, tests only) replaces the epsilon layers a time is
// assumed to have (the search's eps_iterations), so that the windows' layer guard can be seen.
struct LatticeFilter {
  bool on = true;
  float pad = 0.0f;
  int32_t layers = -1;
  static LatticeFilter FromEnv();
};

// Builds one row's lattice while a RowSearch runs (it is the search's StepObserver): the
// driver calls Finish() after Final (or after the replay's final step). Each pruning window runs as soon as the frontier at its end time exists and
// compacts the arcs it drops, so an unpruned arc lives at most 30 times: memory follows
// the pruned lattice, not the input's length. The result is the same as pruning at the end
// with k2's windows, which are part of k2's semantics (they are looser than one exact
// pass: docs/k2-lattice-facts.md).
class LatticeBuilder : public StepObserver {
 public:
  // `slot` must hold num_states entries, all -1 (restored after every call). `filter`: the
  // records filter (below); `eps_iterations`: the search's (0: no epsilon arc is followed;
  // else the epsilon layers a time is expected to have at most, unless filter.layers says).
  LatticeBuilder(const GraphView& g, std::vector<int32_t>* slot, float output_beam,
                 LatticeFilter filter = LatticeFilter{false, 0.0f}, int32_t eps_iterations = 0);
  // The closure's epsilon arcs (any other arc handed over this way is an error: Finish fails)
  void OnArc(int32_t src_tok, int32_t dest, int32_t arc, float acoustic) override;
  // A step's arcs are walked once its new frontier is known (AddTime), not stored as they
  // come: of the ~37 M arcs a model row's steps walk, only those entering a surviving state
  // are recorded, so storing each one first cost a third of a CPU lattice decode.
  bool WalksSteps() const override { return true; }
  void OnStepBegin(const std::vector<Token>& frontier, int32_t phase, const float* lp,
                   const StepTokenArcs* ranges, const float* ends) override;
  // ReplayStep's arcs (the records of a GPU decode), read in AddTime as a walked step's are
  void OnReplayStep(const std::vector<StepArc>& arcs, int32_t phase) override;
  // Before a replayed step: > 0 when the records' producer filtered the step's arcs with its
  // own records filter (RecordedRow::producer_a), assuming magnitude `a` and the search's
  // eps_iterations as the epsilon layers; the windows then check both as for the builder's own
  // filter, and AddTime checks that the forward equals the search's score on the step's
  // tokens (the producer tested the search's scores). 0: the producer kept every arc.
  void SetProducerFilter(float a) { producer_a_ = a; }
  // Whether some replayed step was filtered by the producer (SetProducerFilter)
  bool ProducerFiltered() const { return producer_filtered_; }
  void OnStepEnd(const std::vector<Token>& frontier, float cutoff) override;
  // Runs the last window and writes the lattice. False (with `error`) when a time's
  // epsilon arcs formed a cycle, which no lattice in k2's sense can hold.
  bool Finish(RowLattice* out, std::string* error);
  // The records filter's guard: true when a magnitude the filter's bound assumed was exceeded
  // (or a forward score fell below the search's), so the lattice may differ from the
  // unfiltered one: the row must be decoded again without the filter.
  bool FilterBroken() const { return broken_; }

  // The records filter. A walked arc of a real step whose destination survived, with
  // end = fwd[src] + score < s(dst) - output_beam - slack (s: the search's score of the
  // destination token), is not stored: no window can keep it. Why: let a window [B, E) test
  // it at time t, and x_0 = dst, ..., x_K (at E) the chain of the arcs that give each backward
  // score its max: real arcs to the next time (at most 29) and, on a graph with epsilon arcs,
  // the epsilon arcs of each time the chain passes (at most that time's epsilon layers, the
  // longest epsilon path among its tokens), so K <= 29 + 30 L with L the most layers of a time
  // in t + 1 .. E. Along the chain, bwd(x_{k-1}) = fl(score_k + bwd(x_k)) and fwd(x_k) >=
  // fl(fwd(x_{k-1}) + score_k) (the forward is a max over every stored arc, the chain's among
  // them; epsilon arcs in topological order, so each source is complete first), bwd(x_K) =
  // -fwd(x_K); with every value involved of magnitude at most H (each rounding at most u H, u =
  // 2^-24), bwd(dst) <= -fwd(dst) + 2 K u H; with fwd(dst) >= s(dst) (checked once the time's
  // epsilon arcs are in: the filter keeps the arcs that give the max), the arc's test (score +
  // bwd(dst)) + fwd(src) is at most -output_beam - slack + (2K + 3) u H < -output_beam for
  // slack >= (2K + 3) u H. H = 6A + output_beam + 1 bounds them when every forward and
  // backward score of the window's tokens is within A (kept chain arcs then have |score| <=
  // 2A + output_beam + 1; an arc whose end is below -H1 = -(3A + output_beam + 1) fails by
  // monotone rounding, given A + output_beam < 2^22). A is assumed when the step is filtered
  // (twice the magnitude then, plus 4096), and so is L (0 without epsilon arcs, else the
  // search's eps_iterations or the most layers the row has had so far, whichever is more:
  // eps_iterations is the graph's longest epsilon chain unless the caller chose fewer); every
  // window that tests the step checks both, and one that sees more breaks the filter
  // (FilterBroken). Dropped arcs are never kept and never give a max, so every forward,
  // backward, kept arc and surviving state is the unfiltered one's; recorded_arcs counts them.

 private:
  struct Pending {
    int32_t src_tok, dest, arc;
    float acoustic;
  };
  struct Time {                          // S_tau and the arcs leaving it
    std::vector<int32_t> state;          // graph state per token
    std::vector<int32_t> layer;          // epsilon layer per token
    std::vector<int32_t> order;          // tokens in topological order (layer, token)
    std::vector<float> fwd, bwd;         // k2's forward / backward per token
    std::vector<char> alive;             // token survives the windows so far
    std::vector<LatticeRecord> arcs;     // grouped by source token, then arc id
    int32_t num_eps = 0;                 // epsilon arcs (the first ones until grouped)
    std::vector<int32_t> arc_begin;      // [tokens + 1] CSR of `arcs` by source token
    float fmag = 0.0f;                   // max |fwd| over the tokens
    bool fwd_above = false;              // some token's forward exceeds its search score
    float filter_a = 0.0f;               // > 0: the step's arcs were filtered assuming magnitude A
    int32_t filter_layers = 0;           // and at most this many epsilon layers a later time
    int32_t max_layer = 0;               // the most epsilon layers a token of this time has
  };
  // Whether the step from *prev into `frontier` is filtered; if so, its assumed magnitude A and
  // epsilon layers go into *prev (filter_a, filter_layers) and the bound's offset into c (an arc
  // is dropped when end < s(dst) - c)
  bool FilterStep(const std::vector<Token>& frontier, Time* prev, float* c) const;
  void AddTime(const std::vector<Token>& frontier);
  void PruneWindow(int32_t begin, int32_t end);
  void Compact(int32_t t);
  bool IsEpsilon(int32_t arc) const;
  const GraphView& g_;
  std::vector<int32_t>& slot_;
  float output_beam_;
  // the step under way as OnStepBegin gave it (walk_phase_ -1: none, e.g. a replayed step):
  // the size of the frontier it expands, the search's arc range of each of its tokens, its
  // phase and its log-probs
  int32_t walk_tokens_ = 0;
  const StepTokenArcs* walk_ranges_ = nullptr;
  int32_t walk_phase_ = -1;
  const float* walk_lp_ = nullptr;
  // the search's end score of each walked arc (walk order) and its tokens' scores: where a
  // token's forward is its search score (every token of an epsilon-free graph's time), the
  // filter reads its arcs' ends instead of adding them up again (the same floats)
  const float* walk_ends_ = nullptr;
  std::vector<float> walk_score_;
  const std::vector<StepArc>* replay_arcs_ = nullptr;  // ReplayStep's arcs of the step under way
  int32_t replay_phase_ = -1;
  float producer_a_ = 0.0f;          // SetProducerFilter's, for the step under way
  bool producer_filtered_ = false;
  int32_t producer_layers_ = 0;      // the layers the producer assumes: the search's eps_iterations
  std::vector<Pending> eps_arcs_;   // epsilon arcs of the closure under way
  // Finish's scratch: a token's kept arcs keyed by their source arc ids
  std::vector<std::pair<int32_t, int32_t>> run_keys_;
  std::vector<Time> times_;
  int32_t next_window_ = -10;       // k2's begin_t of the next window (may be negative)
  int32_t last_window_end_ = -1;
  int64_t recorded_ = 0;
  int64_t dropped_ = 0;             // arcs the records filter did not store
  LatticeFilter filter_;
  bool epsilon_free_ = false;
  int32_t eps_layers_ = 0;
  bool broken_ = false;
  int32_t max_layer_ = 0;           // the most epsilon layers of any time so far
  std::vector<float> thr_;          // the filter's bound per token of the new frontier
  std::vector<uint64_t> bits_;      // the new frontier's states as bits (the filtered walk), all 0 between steps
  std::vector<int32_t> eps_begin_, indeg_, queue_;  // AddTime's scratch: epsilon CSR, Kahn's algorithm
  std::vector<Pending> eps_sorted_;                   // and the epsilon arcs' sort
  std::string error_;
};

// k2's pruning windows [B, E) for a row whose dense FSA has T = n + 1 rows: 30 times each,
// shifted by 20, the first starting at -10 (clipped to 0), the last ending at T.
std::vector<std::pair<int32_t, int32_t>> PruneWindows(int32_t T);

// DecodeRow with a lattice: the 1-best result and the pruned lattice of the row (false
// and `error` when the lattice cannot be formed; the 1-best result is still valid).
bool DecodeRowLattice(const GraphView& g, const float* log_probs, int64_t row_stride, int32_t T,
                      const Options& opt, std::vector<int32_t>* slot, RowResult* result,
                      RowLattice* lattice, std::string* error);

// ---------------------------------------------------------------- lattice records
// What a lattice needs from a search that ran elsewhere (the GPU decoder): per step t =
// 0..n of a row of n frames (step n is the final step), every arc of the step whose
// destination is in the step's new frontier (after its epsilon closure), admitted or not,
// as {source graph state, image arc id | kRedirectArcBit, acoustic score bits}, in any
// order; the step's cutoff (exact max - beam); and the new frontier's size (a check).
// Epsilon arcs are not recorded: the replay runs the closure itself.
struct RecordedRow {
  int32_t length = 0;                // n
  const int32_t* records = nullptr;  // [sum(counts), 3], step by step
  const int32_t* counts = nullptr;   // [n + 1] records of each step
  const float* cutoffs = nullptr;    // [n + 1]
  const int32_t* sizes = nullptr;    // [n + 1] frontier size after each step and its closure
  // [n + 1] or null: > 0 where the producer dropped some of the step's arcs with its records
  // filter (the GPU's on epsilon graphs, lattice.cuh), the magnitude A it assumed; the filter's
  // offset is RecordsFilterOffset(A, output_beam, eps_iterations, 0) and it drops only
  // non-admitted arcs of real steps with (s(src) + (acoustic + weight)) < s(dst) - c, s the
  // search's scores
  const float* producer_a = nullptr;
};
constexpr int32_t kRecordInts = 3;

// The row's lattice from its records, by the same search and builder the CPU decoder
// runs: RowSearch::ReplayStep admits and recombines the recorded arcs in the CPU's order
// (so tokens are numbered as the CPU numbers them), runs the epsilon closure, and the
// LatticeBuilder observes it. `scratch` holds 2 x num_states entries, all -1 (restored).
// False with `error` when the records are inconsistent (a source state not in the
// frontier, an arc its state does not have in that phase, a frontier whose size differs
// from the recorded one) or the lattice cannot be formed. `result`: the replay's 1-best.
// Where the producer filtered (row.producer_a) and the filter's guard broke, the result is
// true with lattice->producer_redo set and no lattice: the row needs unfiltered records.
bool LatticeFromRecords(const GraphView& g, const Options& opt, const RecordedRow& row,
                        std::vector<int32_t>* scratch, RowResult* result, RowLattice* lattice,
                        std::string* error);

// Records a search as the GPU decoder records it (a StepObserver): the CPU's half of the
// proof that the records hold everything the lattice needs (tests/test_lattice_records.py).
// With `filter` (the CPU twin of the GPU's records filter on epsilon graphs, lattice.cuh), a
// real step's non-admitted arcs ending below s(dst) - c are not recorded, c =
// RecordsFilterOffset(A, output_beam, eps_iterations, pad) with A = 2 m + 4096, m the largest
// |score| of the step's two frontiers (the GPU bounds m from the scores' max and the beam), and
// producer_a gets A for such a step (0 for the others).
// With `trim` too (the CPU twin of the GPU's lattice trim on epsilon graphs, common.cuh
// LatTrimLow): a real step whose expanded frontier lies within kEpsTrimMag leaves out every
// arc ending below nextafter(cutoff - c_cap), c_cap = RecordsFilterOffset(2 kEpsTrimCap + 4096,
// ...), whether or not its destination survived (the GPU trims at (L - beam) - c_cap, L <= the
// step's max, so it leaves out a subset of these). Such arcs are ones the filter drops when the
// step's own offset is at most c_cap; a trimmed step whose offset is not (or that is not filtered)
// raises trim_guard, and the caller records the row again without the trim, as the GPU's host
// decodes the batch again (GpuDecoder::LatticeFilterGuard).
constexpr float kEpsTrimMag = 7168.0f, kEpsTrimCap = 8192.0f;  // common.cuh kLatTrimMag, kLatFilterMag
class RecordingObserver : public StepObserver {
 public:
  explicit RecordingObserver(const GraphView& g, std::vector<int32_t>* slot, bool filter = false,
                             float output_beam = 0.0f, int32_t eps_iterations = 0, float pad = 0.0f,
                             bool trim = false)
      : g_(g), slot_(*slot), filter_(filter), output_beam_(output_beam), eps_iterations_(eps_iterations), pad_(pad),
        trim_(filter && trim) {}
  void OnArc(int32_t src_tok, int32_t dest, int32_t arc, float acoustic) override;
  void OnStepEnd(const std::vector<Token>& frontier, float cutoff) override;
  void SetFinalStep() { final_step_ = true; }  // the next step is the final one
  std::vector<int32_t> records;  // [n, 3]
  std::vector<int32_t> counts, sizes;
  std::vector<float> cutoffs, producer_a;
  // the graph states of S_0 (the start closure), then of each step's new frontier in turn
  // (S_1 .. S_{n+1}: sizes), each in the search's order: what the GPU's hash holds after a step
  // (tests: the twin of the GPU pruning on epsilon graphs, tests/eps_prune_twin.py)
  std::vector<int32_t> frontiers;
  int32_t start_size = 0;
  bool trim_guard = false;  // a trimmed step's A exceeded the cap's, or the step was not filtered
  int64_t trimmed = 0;      // arcs into surviving states the trim left out (each one the filter drops)
  int64_t trim_walked = 0;  // arcs of the trimmed steps (every arc the search walked), and of those
  int64_t trim_kept = 0;    // the ones at or above the trim's low (what the GPU's trim would walk at most)
  int64_t trim_best = 0;    // and those at or above the cutoff (the 1-best trim's reach at most)
  // what a walk of each token's sorted arcs reads (label-0 arcs, then the others while
  // score + (the row's best non-blank log-prob + weight) reaches the bound): to the trim's low,
  // and to the cutoff (the 1-best's, without the label bound); needs `row` (DecodeRowRecords)
  int64_t trim_bound_low = 0, trim_bound_cut = 0;
  // a walk by the row's labels instead (each token looks up the labels v >= 1 whose
  // score + (log-prob + the state's best non-blank weight) reaches the bar, or reads its arcs
  // where it has fewer): its lookups, to the low and to the cutoff
  int64_t trim_label_low = 0, trim_label_cut = 0;
  // the sorted walk by a bound with the state's own best non-blank log-prob (the max over the
  // labels it has) in place of the row's: its reads to the low and to the cutoff
  int64_t trim_sbound_low = 0, trim_sbound_cut = 0;
  // ... and by the row's top-3 labels' bound (the GPU scan's label bound: the best of the row's
  // three best non-blank labels the state has, else the third's log-prob)
  int64_t trim_top3_low = 0, trim_top3_cut = 0;
  // the records pass after the search (lattice_after.cuh LatRecordsKernel) modelled: a warp a
  // token reads its arcs 32 at a time from the first and stops after the round holding the first
  // arc of label >= 1 whose bound misses the low; its reads with the row's bound (as built), and
  // with the scan's label bound on heavy states (more than 8 distinct labels >= 1: the row's two
  // best labels, else the third's log-prob; scan.cuh LabelBound); counted in rounds of 32 arcs
  int64_t pass_row = 0, pass_lb = 0;
  int64_t pass_small_tokens = 0, pass_small_arcs = 0;  // tokens of at most 32 arcs, and their arcs
  const float* row = nullptr;  // the step's log-probs (DecodeRowRecords sets it before each step)

 private:
  const GraphView& g_;
  std::vector<int32_t>& slot_;
  bool filter_;
  float output_beam_;
  int32_t eps_iterations_;
  float pad_;
  bool trim_;
  float prev_mag_ = 0.0f;  // the expanded frontier's largest |score| (the trim's gate)
  bool final_step_ = false;
  void CountTrimReach(float low, float cutoff);  // the trim_* and pass_* counts of a trimmed step
  std::vector<int32_t> pending_;  // {src token, dest, arc, acoustic bits} of the step under way
  std::vector<int32_t> frontier_states_;
  std::vector<float> frontier_scores_;
  bool started_ = false;
};

// Decodes one row on the CPU and records it (RecordingObserver).
void DecodeRowRecords(const GraphView& g, const float* log_probs, int64_t row_stride, int32_t T,
                      const Options& opt, std::vector<int32_t>* slot, RecordingObserver* rec);

}  // namespace reference
}  // namespace cuwfst
