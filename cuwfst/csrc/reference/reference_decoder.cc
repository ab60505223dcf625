#include "reference_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cuwfst {
namespace reference {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

// Collects candidates keyed by destination, keeping the max end (first one wins a tie).
class Recombiner {
 public:
  // `buf`: the candidates' storage, kept by the caller between steps (cleared here)
  Recombiner(std::vector<int32_t>* slot, std::vector<Candidate>* buf) : slot_(*slot), cands_(*buf) {
    cands_.clear();
  }
  // An admitted arc of token `tok` (offered in frontier order: tok never decreases) whose source
  // arc id is `src` (its order among the token's arcs)
  void Offer(int32_t state, float end, int32_t prev_winner, int32_t arc, int32_t tok = 0, int32_t src = 0) {
    int32_t& s = slot_[state];
    if (s < 0) {
      s = static_cast<int32_t>(cands_.size());
      cands_.push_back({state, end, prev_winner, arc, tok, src});
      return;
    }
    Candidate& c = cands_[s];
    if (end > c.end) {
      c.end = end;
      c.prev_winner = prev_winner;
      c.arc = arc;
    }
    if (tok == c.first_tok && src < c.first_src) c.first_src = src;
  }
  // The candidates in first-admission order: created in token order, so each token's run is
  // sorted by the first admitting arc's source id (the image order differs where it sorted the
  // token's arcs)
  std::vector<Candidate>& Take() {
    for (const Candidate& c : cands_) slot_[c.state] = -1;
    auto by_src = [](const Candidate& x, const Candidate& y) { return x.first_src < y.first_src; };
    for (size_t b = 0; b < cands_.size();) {
      size_t e = b + 1;
      while (e < cands_.size() && cands_[e].first_tok == cands_[b].first_tok) ++e;
      if (e - b > 1 && !std::is_sorted(cands_.begin() + b, cands_.begin() + e, by_src))
        std::sort(cands_.begin() + b, cands_.begin() + e, by_src);
      b = e;
    }
    return cands_;
  }
  void Clear() { cands_.clear(); }

 private:
  std::vector<int32_t>& slot_;
  std::vector<Candidate>& cands_;
};

float UpdateBeam(float beam, int32_t active_states, int32_t t, int32_t final_t,
                 const Options& opt) {
  // Mirrors k2's lambda_set_beam_and_cutoffs: `dynamic_beam` and `default_beam` are
  // floats, the constants double, so each update is computed in double and stored as float.
  float default_beam = opt.search_beam, max_active = static_cast<float>(opt.max_active),
        min_active = static_cast<float>(opt.min_active);
  float dynamic_beam = beam;
  float current_min_active = min_active;
  if (!opt.online && t + 5 >= final_t) current_min_active = std::max(min_active, max_active / 2);
  if (active_states <= max_active) {
    if (active_states >= current_min_active || active_states == 0) {
      dynamic_beam = 0.8 * dynamic_beam + 0.2 * default_beam;
    } else {
      if (dynamic_beam < default_beam) dynamic_beam = default_beam;
      dynamic_beam *= 1.25;
    }
  } else {
    if (opt.online || t + 5 < final_t) {
      if (dynamic_beam > default_beam) dynamic_beam = default_beam;
      dynamic_beam *= 0.8;
    }
  }
  if (t == final_t - 1) dynamic_beam = 1.0e+10;  // the final step (armed in online mode too)
  return dynamic_beam;
}

namespace {

// Epsilon closure of `frontier` (all of it new on this step) against `cutoff`: each pass
// relaxes the epsilon arcs of the tokens that changed in the previous pass, reading the
// scores as they were at the start of the pass (Jacobi order, as the GPU passes do).
void ExpandEpsilon(const GraphView& g, float cutoff, int32_t passes, std::vector<Token>* frontier,
                   std::vector<Winner>* winners, std::vector<int32_t>* slot,
                   std::vector<int32_t>* token_of_state, StepObserver* observer, SearchScratch* scratch) {
  std::vector<int32_t>& changed = scratch->changed;
  changed.resize(frontier->size());
  for (size_t i = 0; i < changed.size(); ++i) changed[i] = static_cast<int32_t>(i);
  for (const Token& tok : *frontier) (*token_of_state)[tok.state] = &tok - frontier->data();
  Recombiner rec(slot, &scratch->eps_cands);
  std::vector<float>& snap_score = scratch->snap_score;
  for (int32_t pass = 0; pass < passes && !changed.empty(); ++pass) {
    snap_score.resize(frontier->size());
    for (size_t i = 0; i < frontier->size(); ++i) snap_score[i] = (*frontier)[i].score;
    rec.Clear();
    for (int32_t ti : changed) {
      const Token tok = (*frontier)[ti];
      for (int32_t a = g.EpsBegin(tok.state); a < g.EpsEnd(tok.state); ++a) {
        if (observer) observer->OnArc(ti, g.dest[a], a, 0.0f);
        float end = snap_score[ti] + g.weight[a];
        if (!(end > cutoff)) continue;
        int32_t d = g.dest[a];
        int32_t existing = (*token_of_state)[d];
        if (existing >= 0 && !(end > snap_score[existing])) continue;
        rec.Offer(d, end, tok.winner, a);
      }
    }
    changed.clear();
    for (const Candidate& c : rec.Take()) {
      int32_t w = static_cast<int32_t>(winners->size());
      winners->push_back({c.prev_winner, c.arc});
      int32_t existing = (*token_of_state)[c.state];
      if (existing >= 0) {
        (*frontier)[existing].score = c.end;
        (*frontier)[existing].winner = w;
        changed.push_back(existing);
      } else {
        int32_t ti = static_cast<int32_t>(frontier->size());
        frontier->push_back({c.state, c.end, w});
        (*token_of_state)[c.state] = ti;
        changed.push_back(ti);
      }
    }
  }
  for (const Token& tok : *frontier) (*token_of_state)[tok.state] = -1;
}

}  // namespace

RowSearch::RowSearch(const GraphView& g, const Options& opt, std::vector<int32_t>* slot,
                     std::vector<StepSnapshot>* snapshots, StepObserver* observer)
    : g_(g), opt_(opt), slot_(slot), snapshots_(snapshots), observer_(observer) {
  frontier_.push_back({g.start_state, 0.0f, -1});
  token_of_state_.assign(g.eps_count ? g.num_states : 0, -1);
  has_eps_ = g.eps_count != nullptr && opt.eps_iterations > 0;
  beam_ = opt.search_beam;
  if (has_eps_) {  // the start state's closure, as if the start's score 0 were a step maximum
    ExpandEpsilon(g, 0.0f - beam_, opt.eps_iterations, &frontier_, &winners_, slot_, &token_of_state_,
                  observer_, &scratch_);
    res_.closure_added += static_cast<int64_t>(frontier_.size()) - 1;
  }
  if (observer_) observer_->OnStepEnd(frontier_, 0.0f - beam_);
  Snapshot(kPhaseReal, 0.0f - beam_);
}

void RowSearch::Snapshot(int32_t phase, float cutoff) {
  if (!snapshots_) return;
  StepSnapshot s{phase, beam_, cutoff, frontier_, {}, before_closure_};
  for (const Token& tok : frontier_) s.arcs.push_back(tok.winner < 0 ? -1 : winners_[tok.winner].arc);
  snapshots_->push_back(std::move(s));
}

int32_t RowSearch::NextPhase(bool final_step) const {
  if (!final_step) return kPhaseReal;
  if (opt_.allow_partial) {
    bool any_final = false;
    for (const Token& tok : frontier_) any_final |= g_.final_count[tok.state] > 0;
    if (!any_final) return kPhaseRedirect;
  }
  return kPhaseFinal;
}

void RowSearch::CountFrontier() {
  res_.max_frontier = std::max<int32_t>(res_.max_frontier, static_cast<int32_t>(frontier_.size()));
  res_.frontier_total += static_cast<int64_t>(frontier_.size());
}

void RowSearch::Step(const float* lp, int32_t final_t) {
  // One step of k2's intersect: the frontier's arcs of this phase, the exact maximum, the
  // beam update, admission against max - beam and recombination by destination; real
  // steps are followed by the epsilon closure. lp == nullptr marks the final step.
  const bool final_step = lp == nullptr;
  const int32_t phase = NextPhase(final_step);
  CountFrontier();
  const GraphView& g = g_;
  auto range = [&](int32_t s, int32_t* b, int32_t* e) { g.StepRange(phase, s, b, e); };
  // k2's order: an arc's end is forward + (acoustic + weight), acoustic 0 off real steps
  // (intersect_dense_pruned's arc_loglike = acoustic + arc score, end_loglike = forward +
  // arc_loglike)
  // Pass 1: the exact maximum over every arc of the step; each arc's end score kept, in walk
  // order, for pass 2 (the same float, not computed twice)
  float exact_max = kNegInf;
  size_t m = 0;  // ends written (step_end_ only grows: its size is a capacity)
  // the tokens' states are scattered over the graph: a later token's row start and first arcs
  // are asked for ahead (prefetches only: the values and their order are the same)
  constexpr size_t kRowAhead = 16, kArcsAhead = 8;
  const size_t nf = frontier_.size();
  step_tok_.resize(nf);
  for (size_t i = 0; i < nf; ++i) {
    if (i + kRowAhead < nf) {  // the row and the counts StepRange reads
      const int32_t s2 = frontier_[i + kRowAhead].state;
      __builtin_prefetch(g.row_splits + s2);
      __builtin_prefetch(g.final_count + s2);
      if (g.eps_count) __builtin_prefetch(g.eps_count + s2);
    }
    if (i + kArcsAhead < nf) {
      const int32_t first = g.row_splits[frontier_[i + kArcsAhead].state];
      __builtin_prefetch(g.ilabel + first);
      __builtin_prefetch(g.weight + first);
    }
    const Token& tok = frontier_[i];
    int32_t b, e;
    range(tok.state, &b, &e);
    step_tok_[i] = {b, e, kNegInf};
    if (e <= b) continue;
    if (step_end_.size() < m + (e - b)) step_end_.resize(std::max<size_t>(2 * (m + (e - b)), 4096));
    // the arrays in locals and the ends through a pointer: the compiler cannot otherwise tell
    // that the ends' stores leave the graph's arrays alone
    float* out = step_end_.data() + m;
    const float score = tok.score;
    const float* w = g.weight;
    float mx = kNegInf;  // this token's
    if (phase == kPhaseReal) {
      const int32_t* il = g.ilabel;
      // four running maxima (a max is exact in any order; only its value is used: the cutoff)
      float mx2 = kNegInf, mx3 = kNegInf, mx4 = kNegInf;
      int32_t a = b;
      for (; a + 3 < e; a += 4) {
        const float e0 = score + (lp[il[a]] + w[a]);
        const float e1 = score + (lp[il[a + 1]] + w[a + 1]);
        const float e2 = score + (lp[il[a + 2]] + w[a + 2]);
        const float e3 = score + (lp[il[a + 3]] + w[a + 3]);
        out[0] = e0;
        out[1] = e1;
        out[2] = e2;
        out[3] = e3;
        out += 4;
        mx = std::max(mx, e0);
        mx2 = std::max(mx2, e1);
        mx3 = std::max(mx3, e2);
        mx4 = std::max(mx4, e3);
      }
      for (; a < e; ++a) {
        const float e0 = score + (lp[il[a]] + w[a]);
        *out++ = e0;
        mx = std::max(mx, e0);
      }
      mx2 = std::max(mx2, std::max(mx3, mx4));
      mx = std::max(mx, mx2);
    } else {
      for (int32_t a = b; a < e; ++a) {
        const float end = score + (0.0f + w[a]);
        *out++ = end;
        mx = std::max(mx, end);
      }
    }
    step_tok_[i].max = mx;
    exact_max = std::max(exact_max, mx);
    m += static_cast<size_t>(e - b);
  }
  beam_ = UpdateBeam(beam_, static_cast<int32_t>(frontier_.size()), t_, final_t, opt_);
  const float cutoff = exact_max - beam_;
  // Pass 2: admit and recombine by destination.
  Recombiner rec(slot_, &scratch_.step_cands);
  const int32_t final_state = g.num_states - 1;
  // an observer that walks the step's arcs itself after it (LatticeBuilder) takes the frontier
  // now; one that does not, each arc
  StepObserver* const each_arc = observer_ && !observer_->WalksSteps() ? observer_ : nullptr;
  if (observer_ && !each_arc) observer_->OnStepBegin(frontier_, phase, lp, step_tok_.data(), step_end_.data());
  const float* next_end = step_end_.data();
  // (pass 2 reads an admitted arc's destination and source arc id, which pass 1 did not: a
  // later admitting token's first ones asked for ahead, prefetches only)
  constexpr size_t kAdmitAhead = 4;
  const StepTokenArcs* ranges = step_tok_.data();
  for (size_t i = 0; i < nf; ++i) {
    const int32_t b = ranges[i].begin, e = ranges[i].end;
    // a token none of whose arcs passes the cutoff offers nothing (unless an observer sees
    // every arc)
    if (!each_arc && !(ranges[i].max > cutoff)) {
      next_end += e - b;
      continue;
    }
    if (i + kAdmitAhead < nf) {
      const int32_t first = ranges[i + kAdmitAhead].begin;
      __builtin_prefetch(g.dest + first);
      if (g.source_arc) __builtin_prefetch(g.source_arc + first);
    }
    const Token& tok = frontier_[i];
    const int32_t ti = static_cast<int32_t>(i);
    for (int32_t a = b; a < e; ++a) {
      if (each_arc)
        each_arc->OnArc(ti, phase == kPhaseRedirect ? final_state : g.dest[a],
                        phase == kPhaseRedirect ? (a | kRedirectArcBit) : a,
                        phase == kPhaseReal ? lp[g.ilabel[a]] : 0.0f);
      const float end = *next_end++;
      if (!(end > cutoff)) continue;
      if (phase == kPhaseRedirect)
        rec.Offer(final_state, end, tok.winner, a | kRedirectArcBit, ti, g.SourceArc(a));
      else
        rec.Offer(g.dest[a], end, tok.winner, a, ti, g.SourceArc(a));
    }
  }
  Commit(&rec, phase, cutoff, final_step);
}

void RowSearch::ReplayStep(const std::vector<StepArc>& arcs, float cutoff, bool final_step) {
  // Step()'s pass 2 over the given arcs, in the same arithmetic: end = score + (acoustic +
  // weight), acoustic 0 off real steps.
  const int32_t phase = NextPhase(final_step);
  CountFrontier();
  const GraphView& g = g_;
  Recombiner rec(slot_, &scratch_.step_cands);
  const int32_t final_state = g.num_states - 1;
  StepObserver* const each_arc = observer_ && !observer_->WalksSteps() ? observer_ : nullptr;
  if (observer_ && !each_arc) observer_->OnReplayStep(arcs, phase);
  for (const StepArc& x : arcs) {
    const Token& tok = frontier_[x.src_tok];
    const int32_t a = x.arc & ~kRedirectArcBit;
    const int32_t dest = phase == kPhaseRedirect ? final_state : g.dest[a];
    const int32_t code = phase == kPhaseRedirect ? (a | kRedirectArcBit) : a;
    const float acoustic = phase == kPhaseReal ? x.acoustic : 0.0f;
    if (each_arc) each_arc->OnArc(x.src_tok, dest, code, acoustic);
    const float end = tok.score + (acoustic + g.weight[a]);
    if (!(end > cutoff)) continue;
    rec.Offer(dest, end, tok.winner, code, x.src_tok, g.SourceArc(a));
  }
  Commit(&rec, phase, cutoff, final_step);
}

void RowSearch::Commit(Recombiner* rec, int32_t phase, float cutoff, bool final_step) {
  next_.clear();
  for (const Candidate& c : rec->Take()) {
    int32_t w = static_cast<int32_t>(winners_.size());
    winners_.push_back({c.prev_winner, c.arc});
    next_.push_back({c.state, c.end, w});
  }
  frontier_.swap(next_);
  before_closure_ = static_cast<int32_t>(frontier_.size());
  if (has_eps_ && phase == kPhaseReal) {
    ExpandEpsilon(g_, cutoff, opt_.eps_iterations, &frontier_, &winners_, slot_, &token_of_state_,
                  observer_, &scratch_);
    res_.closure_added += static_cast<int64_t>(frontier_.size()) - before_closure_;
  }
  if (observer_) observer_->OnStepEnd(frontier_, cutoff);
  Snapshot(phase, cutoff);
  if (final_step) finished_ = true;
  else ++t_;
}

void RowSearch::Final() { Step(nullptr, t_ + 1); }

RowResult RowSearch::Result() const {
  RowResult res = res_;
  // After the final step the frontier holds at most the final state.
  if (!finished_ || frontier_.empty()) return res;
  const Token& tok = frontier_[0];
  res.score = tok.score;
  std::vector<int32_t> tail;
  for (int32_t w = tok.winner; w >= 0; w = winners_[w].prev) {
    int32_t arc = winners_[w].arc;
    if (arc & kRedirectArcBit) {
      res.redirected = true;
      res.redirect_arc = arc & ~kRedirectArcBit;
    } else {
      tail.push_back(arc);
    }
  }
  res.arcs = prefix_arcs_;
  res.arcs.insert(res.arcs.end(), tail.rbegin(), tail.rend());
  res.reached_final = !res.redirected;
  return res;
}

// The deepest winners entry on every current token's chain: chains are trees rooted at -1
// whose indices strictly decrease towards the root, so the meeting point of two chains is
// found by stepping back whichever index is larger.
int32_t RowSearch::ConvergencePoint() const {
  if (frontier_.empty()) return -1;
  int32_t c = frontier_[0].winner;
  for (size_t i = 1; i < frontier_.size() && c >= 0; ++i) {
    int32_t w = frontier_[i].winner;
    while (w != c) {
      if (w > c) w = winners_[w].prev;
      else c = winners_[c].prev;
    }
  }
  return c;
}

bool RowSearch::Partial(std::vector<int32_t>* arcs, int32_t* committed_arcs, float* score) const {
  arcs->clear();
  *committed_arcs = 0;
  if (frontier_.empty()) return false;
  size_t best = 0;
  for (size_t i = 1; i < frontier_.size(); ++i)
    if (frontier_[i].score > frontier_[best].score) best = i;  // the first best on a tie
  *score = frontier_[best].score;
  std::vector<int32_t> tail;
  for (int32_t w = frontier_[best].winner; w >= 0; w = winners_[w].prev) tail.push_back(winners_[w].arc);
  int32_t conv_depth = 0;
  for (int32_t w = ConvergencePoint(); w >= 0; w = winners_[w].prev) ++conv_depth;
  *arcs = prefix_arcs_;
  arcs->insert(arcs->end(), tail.rbegin(), tail.rend());
  *committed_arcs = static_cast<int32_t>(prefix_arcs_.size()) + conv_depth;
  return true;
}

void RowSearch::Compact() {
  if (finished_) return;
  const int32_t conv = ConvergencePoint();
  // The committed chain (root .. conv) leaves the log for the prefix.
  std::vector<int32_t> chain;
  for (int32_t w = conv; w >= 0; w = winners_[w].prev) chain.push_back(winners_[w].arc);
  prefix_arcs_.insert(prefix_arcs_.end(), chain.rbegin(), chain.rend());
  // Keep the entries above conv that some current token reaches, renumbered in their
  // order (so chains still decrease); conv itself becomes the root (-1).
  std::vector<int32_t> remap(winners_.size(), -2);  // -2: not kept
  for (const Token& tok : frontier_) {
    for (int32_t w = tok.winner; w >= 0 && w != conv && remap[w] == -2; w = winners_[w].prev) remap[w] = -3;
  }
  std::vector<Winner> kept;
  for (size_t w = 0; w < winners_.size(); ++w) {
    if (remap[w] != -3) continue;
    int32_t prev = winners_[w].prev;
    int32_t np = (prev < 0 || prev == conv) ? -1 : remap[prev];
    remap[w] = static_cast<int32_t>(kept.size());
    kept.push_back({np, winners_[w].arc});
  }
  for (Token& tok : frontier_) tok.winner = (tok.winner < 0 || tok.winner == conv) ? -1 : remap[tok.winner];
  winners_.swap(kept);
}

RowResult DecodeRow(const GraphView& g, const float* log_probs, int64_t row_stride, int32_t T,
                    const Options& opt, std::vector<int32_t>* slot,
                    std::vector<StepSnapshot>* snapshots) {
  RowSearch search(g, opt, slot, snapshots);
  // k2's number of rows of the row's dense FSA; unknown to an online search until Final
  const int32_t final_t = opt.online ? RowSearch::kUnknownLength : T + 1;
  for (int32_t t = 0; t < T; ++t) search.Step(log_probs + static_cast<int64_t>(t) * row_stride, final_t);
  search.Final();
  return search.Result();
}

}  // namespace reference
}  // namespace cuwfst
