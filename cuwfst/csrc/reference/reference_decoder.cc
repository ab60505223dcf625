#include "reference_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cuwfst {
namespace reference {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The best admitted candidate per destination state of one step.
struct Candidate {
  int32_t state;
  float end;
  int32_t prev_winner;
  int32_t arc;  // may carry kRedirectArcBit
};

// Collects candidates keyed by destination, keeping the max end (first one wins a tie).
class Recombiner {
 public:
  explicit Recombiner(std::vector<int32_t>* slot) : slot_(*slot) {}
  void Offer(int32_t state, float end, int32_t prev_winner, int32_t arc) {
    int32_t& s = slot_[state];
    if (s < 0) {
      s = static_cast<int32_t>(cands_.size());
      cands_.push_back({state, end, prev_winner, arc});
    } else if (end > cands_[s].end) {
      cands_[s] = {state, end, prev_winner, arc};
    }
  }
  std::vector<Candidate>& Take() {
    for (const Candidate& c : cands_) slot_[c.state] = -1;
    return cands_;
  }
  void Clear() { cands_.clear(); }

 private:
  std::vector<int32_t>& slot_;
  std::vector<Candidate> cands_;
};

}  // namespace

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
                   std::vector<int32_t>* token_of_state) {
  std::vector<int32_t> changed(frontier->size());
  for (size_t i = 0; i < changed.size(); ++i) changed[i] = static_cast<int32_t>(i);
  for (const Token& tok : *frontier) (*token_of_state)[tok.state] = &tok - frontier->data();
  Recombiner rec(slot);
  std::vector<float> snap_score(frontier->size());
  for (int32_t pass = 0; pass < passes && !changed.empty(); ++pass) {
    snap_score.resize(frontier->size());
    for (size_t i = 0; i < frontier->size(); ++i) snap_score[i] = (*frontier)[i].score;
    rec.Clear();
    for (int32_t ti : changed) {
      const Token tok = (*frontier)[ti];
      for (int32_t a = g.EpsBegin(tok.state); a < g.EpsEnd(tok.state); ++a) {
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

RowResult DecodeRow(const GraphView& g, const float* log_probs, int64_t row_stride, int32_t T,
                    const Options& opt, std::vector<int32_t>* slot,
                    std::vector<StepSnapshot>* snapshots) {
  RowResult res;
  std::vector<Winner> winners;
  std::vector<Token> frontier{{g.start_state, 0.0f, -1}}, next;
  std::vector<int32_t> token_of_state(g.eps_count ? g.num_states : 0, -1);
  const bool has_eps = g.eps_count != nullptr && opt.eps_iterations > 0;
  float beam = opt.search_beam;
  int32_t before_closure = 1;
  if (has_eps) {  // the start state's closure, as if the start's score 0 were a step maximum
    ExpandEpsilon(g, 0.0f - beam, opt.eps_iterations, &frontier, &winners, slot, &token_of_state);
    res.closure_added += static_cast<int64_t>(frontier.size()) - 1;
  }
  auto snapshot = [&](int32_t phase, float cutoff) {
    if (!snapshots) return;
    StepSnapshot s{phase, beam, cutoff, frontier, {}, before_closure};
    for (const Token& tok : frontier) s.arcs.push_back(tok.winner < 0 ? -1 : winners[tok.winner].arc);
    snapshots->push_back(std::move(s));
  };
  snapshot(kPhaseReal, 0.0f - beam);
  const int32_t final_t = T + 1;  // k2's number of rows of the row's dense FSA
  Recombiner rec(slot);
  for (int32_t t = 0; t <= T; ++t) {
    const bool final_step = (t == T);
    int32_t phase = kPhaseReal;
    if (final_step) {
      phase = kPhaseFinal;
      if (opt.allow_partial) {
        bool any_final = false;
        for (const Token& tok : frontier) any_final |= g.final_count[tok.state] > 0;
        if (!any_final) phase = kPhaseRedirect;
      }
    }
    res.max_frontier = std::max<int32_t>(res.max_frontier, static_cast<int32_t>(frontier.size()));
    res.frontier_total += static_cast<int64_t>(frontier.size());
    const float* lp = final_step ? nullptr : log_probs + static_cast<int64_t>(t) * row_stride;
    // Arc range of a token for this phase.
    auto range = [&](int32_t s, int32_t* b, int32_t* e) {
      if (phase == kPhaseReal) { *b = g.EmitBegin(s); *e = g.EmitEnd(s); }
      else if (phase == kPhaseFinal) { *b = g.FinalBegin(s); *e = g.FinalEnd(s); }
      else { *b = g.row_splits[s]; *e = g.row_splits[s + 1]; }  // redirect: every arc
    };
    auto end_of = [&](const Token& tok, int32_t a) -> float {
      float sw = tok.score + g.weight[a];
      return phase == kPhaseReal ? sw + lp[g.ilabel[a]] : sw + 0.0f;
    };
    // Pass 1: the exact maximum over every arc of the step.
    float exact_max = kNegInf;
    for (const Token& tok : frontier) {
      int32_t b, e;
      range(tok.state, &b, &e);
      for (int32_t a = b; a < e; ++a) exact_max = std::max(exact_max, end_of(tok, a));
    }
    beam = UpdateBeam(beam, static_cast<int32_t>(frontier.size()), t, final_t, opt);
    const float cutoff = exact_max - beam;
    // Pass 2: admit and recombine by destination.
    rec.Clear();
    const int32_t final_state = g.num_states - 1;
    for (const Token& tok : frontier) {
      int32_t b, e;
      range(tok.state, &b, &e);
      for (int32_t a = b; a < e; ++a) {
        float end = end_of(tok, a);
        if (!(end > cutoff)) continue;
        if (phase == kPhaseRedirect)
          rec.Offer(final_state, end, tok.winner, a | kRedirectArcBit);
        else
          rec.Offer(g.dest[a], end, tok.winner, a);
      }
    }
    next.clear();
    for (const Candidate& c : rec.Take()) {
      int32_t w = static_cast<int32_t>(winners.size());
      winners.push_back({c.prev_winner, c.arc});
      next.push_back({c.state, c.end, w});
    }
    frontier.swap(next);
    before_closure = static_cast<int32_t>(frontier.size());
    if (has_eps && phase == kPhaseReal) {
      ExpandEpsilon(g, cutoff, opt.eps_iterations, &frontier, &winners, slot, &token_of_state);
      res.closure_added += static_cast<int64_t>(frontier.size()) - before_closure;
    }
    snapshot(phase, cutoff);
  }
  // After the final step the frontier holds at most the final state.
  if (!frontier.empty()) {
    const Token& tok = frontier[0];
    res.score = tok.score;
    for (int32_t w = tok.winner; w >= 0; w = winners[w].prev) {
      int32_t arc = winners[w].arc;
      if (arc & kRedirectArcBit) {
        res.redirected = true;
        res.redirect_arc = arc & ~kRedirectArcBit;
      } else {
        res.arcs.push_back(arc);
      }
    }
    std::reverse(res.arcs.begin(), res.arcs.end());
    res.reached_final = !res.redirected;
  }
  return res;
}

}  // namespace reference
}  // namespace cuwfst
