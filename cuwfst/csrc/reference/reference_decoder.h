// The exact-semantics CPU decoder: the executable definition of k2's
// intersect_dense_pruned (1-best) that the GPU decoder is tested against.
//
// Semantics (k2 >= 1.24, see docs/design.md "Decoding semantics"):
//   * step t of a row of length T reads log_probs[t] for t < T; step T is the final step,
//     which expands only ilabel -1 arcs with acoustic 0 and beam 1e10;
//   * before each step the dynamic beam is updated from the frontier size (k2's formula,
//     in k2's double-then-float arithmetic), cutoff = exact_max - beam over all arcs of
//     the step, and an arc is admitted iff end > cutoff;
//   * end = (score[src] + weight) + log_prob[t][ilabel], float32, in that order;
//   * a state's score is the max over its admitted incoming arcs (first one wins a tie);
//   * allow_partial: when no frontier state has a final arc at the final step, every arc
//     of every frontier state is redirected to the final state (acoustic 0, weight kept);
//   * epsilon arcs (ilabel -2): after each emitting step, up to eps_iterations closure
//     passes against the step's cutoff (see ExpandEpsilon).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace cuwfst {
namespace reference {

struct GraphView {
  int32_t num_states = 0;
  int32_t num_arcs = 0;
  int32_t vocab_size = 0;
  int32_t start_state = 0;
  bool finals_at_end = true;
  const int32_t* row_splits = nullptr;   // [num_states + 1]
  const int32_t* final_count = nullptr;  // [num_states]
  const int32_t* eps_count = nullptr;    // [num_states] or nullptr
  const int32_t* dest = nullptr;         // [num_arcs]
  const int32_t* ilabel = nullptr;       // [num_arcs]
  const float* weight = nullptr;         // [num_arcs]
  // [num_arcs] each image arc's source arc id (the image sorts each state's emitting arcs; the
  // source graph's order is k2's), nullptr where the image kept the source order: the order in
  // which a token's arcs number the states they reach first and in which a lattice lists a
  // state's arcs (k2's)
  const int32_t* source_arc = nullptr;

  int32_t SourceArc(int32_t a) const { return source_arc ? source_arc[a] : a; }

  int32_t FinalBegin(int32_t s) const {
    return finals_at_end ? row_splits[s + 1] - final_count[s] : row_splits[s];
  }
  int32_t FinalEnd(int32_t s) const { return FinalBegin(s) + final_count[s]; }
  int32_t EpsBegin(int32_t s) const {
    return finals_at_end ? row_splits[s] : row_splits[s] + final_count[s];
  }
  int32_t EpsEnd(int32_t s) const { return EpsBegin(s) + (eps_count ? eps_count[s] : 0); }
  int32_t EmitBegin(int32_t s) const { return EpsEnd(s); }
  int32_t EmitEnd(int32_t s) const {
    return finals_at_end ? row_splits[s + 1] - final_count[s] : row_splits[s + 1];
  }
  // The arcs a step of `phase` walks from state s: its emitting arcs (a real step), its final
  // arcs (the final step), or every arc (allow_partial's redirect).
  void StepRange(int32_t phase, int32_t s, int32_t* b, int32_t* e) const;
};

struct Options {
  float search_beam = 20.0f;
  float output_beam = 8.0f;  // lattice pruning only; never read by the forward pass
  int32_t min_active = 30;
  int32_t max_active = 10000;
  bool allow_partial = true;
  int32_t eps_iterations = 0;
  bool online = false;  // k2 online beam mode: the row length is unknown until the final step
};

// Phases of a step (shared with the GPU decoder and the debug snapshots).
enum Phase : int32_t { kPhaseReal = 0, kPhaseFinal = 1, kPhaseRedirect = 2, kPhaseEps = 3 };

inline void GraphView::StepRange(int32_t phase, int32_t s, int32_t* b, int32_t* e) const {
  if (phase == kPhaseReal) {
    *b = EmitBegin(s);
    *e = EmitEnd(s);
  } else if (phase == kPhaseFinal) {
    *b = FinalBegin(s);
    *e = FinalEnd(s);
  } else {  // redirect: every arc
    *b = row_splits[s];
    *e = row_splits[s + 1];
  }
}

// A winners-log entry: the token's predecessor entry (-1 = the start token) and the arc.
struct Winner {
  int32_t prev;
  int32_t arc;  // kRedirectArcBit set on an allow_partial redirect
};
constexpr int32_t kRedirectArcBit = 1 << 30;

struct Token {
  int32_t state;
  float score;
  int32_t winner;  // index into the winners log, -1 for the start token
};

struct StepSnapshot {
  int32_t phase = kPhaseReal;
  float beam = 0.f;
  float cutoff = 0.f;
  std::vector<Token> frontier;  // after the step (and its epsilon closure)
  std::vector<int32_t> arcs;    // each frontier token's winning arc (-1: the start token)
  int32_t before_closure = 0;   // frontier size before the epsilon closure (= size without one)
};

struct RowResult {
  bool reached_final = false;  // the final state was reached through a real final arc
  bool redirected = false;     // allow_partial redirect produced the path
  float score = -INFINITY;
  int32_t redirect_arc = -1;   // the graph arc redirected to the final state, if any
  std::vector<int32_t> arcs;   // graph arc ids of the best path (redirected arc excluded)
  int32_t max_frontier = 0;    // the largest frontier seen
  int64_t frontier_total = 0;  // sum over steps of the frontier each step expanded
  int64_t closure_added = 0;   // tokens the epsilon closures added (start and every step)
};

// A token's arcs in a step (RowSearch::Step's pass 1): its arc range in the step's phase and the
// largest end among them.
struct StepTokenArcs {
  int32_t begin, end;
  float max;
};

// An arc of a step handed to RowSearch::ReplayStep from outside the search (the GPU
// decoder's lattice records, reference_lattice.h): the frontier token it leaves, its image
// arc id (kRedirectArcBit on allow_partial's redirected arcs) and its acoustic score.
struct StepArc {
  int32_t src_tok;
  int32_t arc;
  float acoustic;
};

// Sees every arc a step expands, for lattices (reference_lattice.h): the lattice keeps an
// arc of the step whenever its destination survives, admitted or not (k2's rule), so the
// observer must see more than the winners. Arcs are reported in expansion order.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // An arc expanded from token `src_tok` towards graph state `dest`: a real, final or
  // redirect arc (src_tok indexes the frontier the step expands; a redirect arc carries
  // kRedirectArcBit and dest = the final state), or an epsilon arc of the closure
  // (src_tok indexes the frontier being closed). `acoustic` is the log-prob the step
  // added to the arc (log_probs[t][ilabel] on a real step's arcs; 0 on final, redirected
  // and epsilon arcs).
  virtual void OnArc(int32_t src_tok, int32_t dest, int32_t arc, float acoustic) = 0;
  // An observer that walks a step's arcs itself once the step is done (true) gets, instead
  // of an OnArc call for each arc of RowSearch::Step, one OnStepBegin call before the step
  // with the frontier it expands, the step's phase, its log-probs (nullptr on the final step),
  // each token's arc range and each walked arc's end score (forward + (acoustic + weight), in
  // walk order: token by token, each range in order; both valid until the next step), and,
  // for RowSearch::ReplayStep,
  // one OnReplayStep call with the step's arcs (valid until the step's OnStepEnd); the
  // closure's epsilon arcs still come through OnArc.
  virtual bool WalksSteps() const { return false; }
  virtual void OnStepBegin(const std::vector<Token>& /*frontier*/, int32_t /*phase*/, const float* /*lp*/,
                           const StepTokenArcs* /*ranges*/, const float* /*ends*/) {}
  virtual void OnReplayStep(const std::vector<StepArc>& /*arcs*/, int32_t /*phase*/) {}
  // The start closure or a step (and its closure) is done: `frontier` is the new frontier,
  // `cutoff` the step's admission cutoff (0 - search_beam for the start closure).
  virtual void OnStepEnd(const std::vector<Token>& frontier, float cutoff) = 0;
};

class Recombiner;  // reference_decoder.cc

// The best admitted candidate per destination state of one step, and its first admission:
// the token (frontier index) and the source arc id of the first admitted arc into it in k2's
// order (the token's rank, then its arcs in the source graph's order), which numbers the new
// frontier.
struct Candidate {
  int32_t state;
  float end;
  int32_t prev_winner;
  int32_t arc;  // may carry kRedirectArcBit
  int32_t first_tok;
  int32_t first_src;
};

// A RowSearch's storage kept between steps (its contents are a step's scratch only): the
// candidates of a step and of the closure's passes, the closure's changed tokens and scores.
struct SearchScratch {
  std::vector<Candidate> step_cands, eps_cands;
  std::vector<int32_t> changed;
  std::vector<float> snap_score;
};

// The search state of one row, advanced step by step: the executable spec of every mode.
// Offline decoding is Step() over the row's frames, then Final(); streaming is the same
// calls spread over chunks (online beam mode: the row's length is unknown until Final,
// so k2's last-5-frames rule is off), with Compact() between chunks to bound memory.
// `slot` must hold num_states entries, all -1 (restored to -1 after every call).
class RowSearch {
 public:
  RowSearch(const GraphView& g, const Options& opt, std::vector<int32_t>* slot,
            std::vector<StepSnapshot>* snapshots, StepObserver* observer = nullptr);
  // A real step on one row of log-probs (vocab floats). final_t is k2's number of rows of
  // the dense FSA (T + 1) when the length is known, else kUnknownLength.
  void Step(const float* lp, int32_t final_t);
  // The final step at t = frames(): ilabel -1 arcs (or allow_partial's redirect), beam 1e10.
  void Final();
  // The phase the next step takes: kPhaseReal, or on the final step kPhaseFinal (or
  // kPhaseRedirect under allow_partial when no frontier token has a final arc).
  int32_t NextPhase(bool final_step) const;
  // A step whose arcs and cutoff come from outside (the GPU's lattice records) instead of
  // the full expansion: `arcs` are every arc of the step that the search must see, sorted
  // by (src_tok, arc id), which is the order Step() offers them in; they are admitted
  // against `cutoff` and recombined exactly as Step() does, then the epsilon closure runs.
  // Given every arc of the step whose destination survives (all admitted arcs among
  // them) and Step()'s cutoff, the new frontier, its order and the observer's events are
  // Step()'s, less the arcs whose destination did not survive.
  void ReplayStep(const std::vector<StepArc>& arcs, float cutoff, bool final_step);
  const std::vector<Token>& frontier() const { return frontier_; }
  int32_t frames() const { return t_; }
  bool finished() const { return finished_; }
  // The result after Final().
  RowResult Result() const;
  // The best path so far (the best current token's chain; redirect never applies), and
  // how many of its leading arcs can no longer change: those up to the convergence point
  // of every current token's chain. Returns false when the frontier is empty.
  bool Partial(std::vector<int32_t>* arcs, int32_t* committed_arcs, float* score) const;
  // Moves the arcs below the convergence point out of the winners log into the committed
  // prefix and drops every entry no current token reaches: the log then holds only the
  // live window. Results are unchanged.
  void Compact();
  size_t winners_size() const { return winners_.size(); }
  int32_t vocab_size() const { return g_.vocab_size; }
  static constexpr int32_t kUnknownLength = 2147483647;

 private:
  void Snapshot(int32_t phase, float cutoff);
  void CountFrontier();
  // The tail every step shares: the recombined candidates become the new frontier (with
  // winners entries), the epsilon closure of a real step, the observer, the snapshot.
  void Commit(Recombiner* rec, int32_t phase, float cutoff, bool final_step);
  int32_t ConvergencePoint() const;  // winners entry all current chains share (-1: none)
  const GraphView& g_;
  Options opt_;
  std::vector<int32_t>* slot_;
  std::vector<StepSnapshot>* snapshots_;
  StepObserver* observer_;
  std::vector<Winner> winners_;
  std::vector<Token> frontier_, next_;
  std::vector<float> step_end_;  // Step's pass 1: each walked arc's end score, read again by pass 2
  // Step's pass 1: each token's arc range and the largest end among its arcs (pass 2 reads the
  // ranges in order instead of the graph's scattered rows, and skips the tokens none of whose
  // arcs passes the cutoff)
  std::vector<StepTokenArcs> step_tok_;
  std::vector<int32_t> token_of_state_;
  std::vector<int32_t> prefix_arcs_;  // committed arcs moved out of the log by Compact()
  SearchScratch scratch_;
  bool has_eps_ = false;
  bool finished_ = false;
  float beam_ = 0.f;
  int32_t t_ = 0;
  int32_t before_closure_ = 1;
  RowResult res_;
};

// Decodes one row offline (or in online beam mode with opt.online): log_probs points at
// [T, row_stride] floats (row t at t * row_stride). `scratch_state_slot` must hold
// num_states entries, all -1 (it is restored to -1).
RowResult DecodeRow(const GraphView& g, const float* log_probs, int64_t row_stride, int32_t T,
                    const Options& opt, std::vector<int32_t>* scratch_state_slot,
                    std::vector<StepSnapshot>* snapshots);

// k2's dynamic-beam update (GetPruningCutoffs), in k2's arithmetic: float variables,
// double-precision constants. `t`, `final_t` as k2 has them (final_t = T + 1).
float UpdateBeam(float beam, int32_t active_states, int32_t t, int32_t final_t,
                 const Options& opt);

}  // namespace reference
}  // namespace cuwfst
