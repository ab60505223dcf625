#include "reference_lattice.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

namespace cuwfst {
namespace reference {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Sorts *v by (src_tok, arc): a counting sort on src_tok through *tmp, then each token's few
// items by arc (start: scratch). The order one sort by that key gives. False (nothing moved)
// when a src_tok is outside [0, n).
template <typename T>
bool SortByTokenThenArc(std::vector<T>* v, int32_t n, std::vector<T>* tmp, std::vector<int32_t>* start) {
  for (const T& x : *v)
    if (x.src_tok < 0 || x.src_tok >= n) return false;
  start->assign(n + 1, 0);
  int32_t* st = start->data();
  for (const T& x : *v) ++st[x.src_tok + 1];
  for (int32_t i = 0; i < n; ++i) st[i + 1] += st[i];
  tmp->resize(v->size());
  for (const T& x : *v) (*tmp)[st[x.src_tok]++] = x;
  for (int32_t i = 0, lo = 0; i < n; lo = st[i++])
    if (st[i] - lo > 1)
      std::sort(tmp->begin() + lo, tmp->begin() + st[i], [](const T& x, const T& y) { return x.arc < y.arc; });
  v->swap(*tmp);
  return true;
}
}  // namespace

std::vector<std::pair<int32_t, int32_t>> PruneWindows(int32_t T) {
  // k2 (Intersect in intersect_dense_pruned.cu) prunes 30 frames at a time, shifted by 20
  // (10 frames of overlap); the first window starts 10 frames early so the first
  // un-pruned stretch is no longer than the others.
  std::vector<std::pair<int32_t, int32_t>> w;
  for (int32_t b = -10;; b += 20) {
    int32_t end = b + 30;
    const bool last = end >= T;
    if (last) end = T;
    w.push_back({std::max(0, b), end});
    if (last) break;
  }
  return w;
}

LatticeFilter LatticeFilter::FromEnv() {
  LatticeFilter f;
  const char* on = std::getenv("CUWFST_CPU_LATTICE_FILTER");
  if (on != nullptr && (std::strcmp(on, "off") == 0 || std::strcmp(on, "0") == 0)) f.on = false;
  const char* pad = std::getenv("CUWFST_CPU_LATTICE_FILTER_PAD");
  if (pad != nullptr && *pad) f.pad = std::strtof(pad, nullptr);
  const char* layers = std::getenv("CUWFST_CPU_LATTICE_FILTER_LAYERS");
  if (layers != nullptr && *layers) f.layers = static_cast<int32_t>(std::strtol(layers, nullptr, 10));
  return f;
}

LatticeBuilder::LatticeBuilder(const GraphView& g, std::vector<int32_t>* slot, float output_beam,
                               LatticeFilter filter, int32_t eps_iterations)
    : g_(g), slot_(*slot), output_beam_(output_beam), filter_(filter),
      epsilon_free_(g.eps_count == nullptr || eps_iterations == 0),
      eps_layers_(std::max(0, filter.layers >= 0 ? filter.layers : eps_iterations)),
      producer_layers_(epsilon_free_ ? 0 : std::max(0, eps_iterations)) {}

bool RecordsFilterOffset(double A, double B, int32_t L, float pad, float* c) {
  if (!std::isfinite(A) || A + B >= 4194304.0) return false;  // 2^22: the bound's rounding argument needs less
  const double H = 6.0 * A + B + 1.0;
  const double K = 29.0 + 30.0 * L;
  *c = static_cast<float>(B + (2.0 * K + 22.0) * 5.9604644775390625e-08 * H + pad);
  return true;
}

// The records filter's bound for the step from `prev_time` into `frontier` (reference_lattice.h,
// the records filter), noted in *prev_time when the step is filtered: the magnitude it assumes
// for the windows that will test the step's arcs, A = 2 m + 4096 (m: the largest |score| of
// the frontier it expands and of the new one), the
// epsilon layers L it assumes a later time has, and the offset c = output_beam + (2 K + 22)
// u H + pad, K = 29 + 30 L, H = 6 A + output_beam + 1 ((2 K + 3) u H is what the bound needs;
// the rest covers the rounding of c and of s(dst) - c; without epsilon arcs, 80 u H).
bool LatticeBuilder::FilterStep(const std::vector<Token>& frontier, Time* prev_time, float* c) const {
  const Time& prev = *prev_time;
  if (!filter_.on || !(output_beam_ >= 0.0f)) return false;
  float m = prev.fmag;
  for (const Token& tok : frontier) m = std::max(m, std::fabs(tok.score));
  if (!std::isfinite(m)) return false;
  const double A = 2.0 * m + 4096.0;
  // the chain's arcs: at most 29 real ones and, on a graph with epsilon arcs, each of the 30
  // times' epsilon layers, assumed at most eps_iterations (the graph's longest epsilon chain
  // unless the caller chose fewer) or the most any time of the row has had so far; checked by
  // the windows
  const int32_t L = epsilon_free_ ? 0 : std::max(eps_layers_, max_layer_);
  if (!RecordsFilterOffset(A, output_beam_, L, filter_.pad, c)) return false;
  prev_time->filter_a = static_cast<float>(A);
  prev_time->filter_layers = L;
  return true;
}

bool LatticeBuilder::IsEpsilon(int32_t arc) const {
  return !(arc & kRedirectArcBit) && g_.ilabel[arc] == -2;
}

void LatticeBuilder::OnArc(int32_t src_tok, int32_t dest, int32_t arc, float acoustic) {
  // (a step's own arcs come through OnStepBegin or OnReplayStep: the builder walks steps)
  if (!IsEpsilon(arc)) {
    if (error_.empty()) error_ = "the lattice builder was handed a step's arc one by one";
    return;
  }
  eps_arcs_.push_back({src_tok, dest, arc, acoustic});
}

void LatticeBuilder::OnStepBegin(const std::vector<Token>& frontier, int32_t phase, const float* lp,
                                 const StepTokenArcs* ranges, const float* ends) {
  walk_ranges_ = ranges;
  walk_ends_ = ends;
  walk_score_.resize(frontier.size());
  for (size_t i = 0; i < frontier.size(); ++i) walk_score_[i] = frontier[i].score;
  walk_tokens_ = static_cast<int32_t>(frontier.size());
  walk_phase_ = phase;
  walk_lp_ = lp;
}

void LatticeBuilder::OnReplayStep(const std::vector<StepArc>& arcs, int32_t phase) {
  replay_arcs_ = &arcs;
  replay_phase_ = phase;
}

void LatticeBuilder::OnStepEnd(const std::vector<Token>& frontier, float /*cutoff*/) {
  AddTime(frontier);
  // A window runs once the frontier at its end time exists (k2 signals its pruning thread
  // after the forward step that creates it).
  const int32_t now = static_cast<int32_t>(times_.size()) - 1;
  if (error_.empty() && now == next_window_ + 30) {
    PruneWindow(std::max(0, next_window_), now);
    last_window_end_ = now;
    next_window_ += 20;
  }
}

// Records S_now (the new frontier), the arcs of the step that enter it, the closure's
// epsilon arcs inside it, its epsilon layers and its forward scores.
void LatticeBuilder::AddTime(const std::vector<Token>& frontier) {
  const int32_t nt = static_cast<int32_t>(frontier.size());
  for (int32_t i = 0; i < nt; ++i) slot_[frontier[i].state] = i;
  // The arcs of the previous time's step that reach the new frontier (k2 keeps every arc
  // whose destination survived, admitted or not).
  if (!times_.empty()) {
    Time& prev = times_.back();
    // acoustic: the step's log-prob on emitting arcs; final arcs and allow_partial's
    // redirected arcs read k2's final row (0); then k2's order: acoustic + graph
    if (walk_phase_ >= 0) {  // the step's arcs walked as RowSearch::Step walked them (OnStepBegin)
      const int32_t phase = walk_phase_, final_state = g_.num_states - 1;
      float c = 0.0f;
      if (phase == kPhaseReal && FilterStep(frontier, &prev, &c)) {
        // the records filter (reference_lattice.h): end = fwd[src] + score below s(dst) - c
        // is not stored
        thr_.resize(nt);
        float lo = std::numeric_limits<float>::infinity();  // the lowest bound of any token
        for (int32_t i = 0; i < nt; ++i) {
          thr_[i] = frontier[i].score - c;
          lo = std::min(lo, thr_[i]);
        }
        // the new frontier's states as bits (a 3.4 M-state graph's 425 kB stay in cache where
        // the slots' 13.6 MB do not): most walked arcs enter no surviving state, and of those
        // that do, most end below every token's bound; only the rest read their token's slot
        if (bits_.empty()) bits_.assign((static_cast<size_t>(g_.num_states) + 63) / 64, 0);
        uint64_t* bits = bits_.data();
        for (int32_t i = 0; i < nt; ++i) {
          const uint32_t st = static_cast<uint32_t>(frontier[i].state);
          bits[st >> 6] |= uint64_t{1} << (st & 63);
        }
        const int32_t* dest = g_.dest;
        const int32_t* ilabel = g_.ilabel;
        const float* weight = g_.weight;
        const int32_t* slot = slot_.data();
        const float* thr = thr_.data();
        const float* lp = walk_lp_;
        int64_t entered = 0;  // arcs into a surviving state: recorded, stored or not
        const size_t stored_before = prev.arcs.size();
        const int32_t nw = walk_tokens_;
        constexpr int32_t kAhead = 4;  // a later token's arcs asked for early (scattered states)
        const StepTokenArcs* ranges = walk_ranges_;
        const float* ends = walk_ends_;  // the search's, in walk order
        // One token's arcs. kEnds: its forward is its search score, so end = f + (acoustic +
        // weight) is the search's own end of the arc, read rather than added up again, and the
        // acoustic and score are loaded only for an arc that is stored. Otherwise computed, without
        // branches until an arc enters a surviving state at or above the lowest bound (whether
        // its state survives is a coin toss on these graphs).
        auto walk = [&](auto ends_known, int32_t ti, int32_t b, int32_t e, float f) {
          constexpr bool kEnds = decltype(ends_known)::value;
          if (ti + kAhead < nw) {
            const int32_t b2 = ranges[ti + kAhead].begin;
            __builtin_prefetch(dest + b2);
            if (!kEnds) {
              __builtin_prefetch(weight + b2);
              __builtin_prefetch(ilabel + b2);
            }
          }
          for (int32_t a = b; a < e; ++a) {
            const uint32_t to = static_cast<uint32_t>(dest[a]);
            const uint32_t in = static_cast<uint32_t>(bits[to >> 6] >> (to & 63)) & 1u;
            float acoustic = 0.0f, score = 0.0f, end;
            if constexpr (kEnds) {
              end = ends[a - b];
            } else {
              acoustic = lp[ilabel[a]];
              score = acoustic + weight[a];
              end = f + score;
            }
            entered += in;
            if (!(in & static_cast<uint32_t>(end >= lo))) continue;
            const int32_t d = slot[to];
            if (end < thr[d]) continue;
            if constexpr (kEnds) {
              acoustic = lp[ilabel[a]];
              score = acoustic + weight[a];
            }
            prev.arcs.push_back({ti, d, a, acoustic, score});
          }
        };
        for (int32_t ti = 0; ti < nw; ++ti) {
          const int32_t b = ranges[ti].begin, e = ranges[ti].end;
          if (e <= b) continue;
          const float f = prev.fwd[ti];
          if (f == walk_score_[ti]) walk(std::true_type{}, ti, b, e, f);
          else walk(std::false_type{}, ti, b, e, f);
          ends += e - b;
        }
        for (int32_t i = 0; i < nt; ++i) {
          const uint32_t st = static_cast<uint32_t>(frontier[i].state);
          bits[st >> 6] = 0;
        }
        const int64_t dropped = entered - static_cast<int64_t>(prev.arcs.size() - stored_before);
        dropped_ += dropped;
        recorded_ += dropped;
      } else {
        for (int32_t ti = 0; ti < walk_tokens_; ++ti) {
          const int32_t b = walk_ranges_[ti].begin, e = walk_ranges_[ti].end;
          for (int32_t a = b; a < e; ++a) {
            const int32_t d = slot_[phase == kPhaseRedirect ? final_state : g_.dest[a]];
            if (d < 0) continue;
            const float acoustic = phase == kPhaseReal ? walk_lp_[g_.ilabel[a]] : 0.0f;
            prev.arcs.push_back({ti, d, phase == kPhaseRedirect ? (a | kRedirectArcBit) : a, acoustic,
                                 acoustic + g_.weight[a]});
          }
        }
      }
    }
    if (replay_arcs_ != nullptr) {  // ReplayStep's arcs: a real step's are filtered as the walk's are
      const int32_t phase = replay_phase_, final_state = g_.num_states - 1;
      float c = 0.0f;
      const bool filtered = phase == kPhaseReal && FilterStep(frontier, &prev, &c);
      // the producer's records filter (SetProducerFilter): its drops are checked as the
      // builder's own are, by the windows (the magnitude it assumed, the epsilon layers it
      // assumed: the search's eps_iterations) and by the forward (>= the search's score on the
      // new time, below; <= on this step's sources, whose search scores the producer's ends
      // used); where both filtered, the windows check the smaller assumptions
      if (phase == kPhaseReal && producer_a_ > 0.0f) {
        producer_filtered_ = true;
        if (prev.fwd_above) broken_ = true;
        if (filtered) {
          prev.filter_a = std::min(prev.filter_a, producer_a_);
          prev.filter_layers = std::min(prev.filter_layers, producer_layers_);
        } else {
          prev.filter_a = producer_a_;
          prev.filter_layers = producer_layers_;
        }
      }
      int64_t dropped = 0;
      for (const StepArc& x : *replay_arcs_) {
        const int32_t a = x.arc & ~kRedirectArcBit;
        const int32_t d = slot_[phase == kPhaseRedirect ? final_state : g_.dest[a]];
        if (d < 0) continue;
        const int32_t code = phase == kPhaseRedirect ? (a | kRedirectArcBit) : a;
        const float acoustic = phase == kPhaseReal ? x.acoustic : 0.0f;
        const float score = acoustic + g_.weight[a];
        // (the same end the forward computes, and the walk's test)
        if (filtered && prev.fwd[x.src_tok] + score < frontier[d].score - c) {
          ++dropped;
          continue;
        }
        prev.arcs.push_back({x.src_tok, d, code, acoustic, score});
      }
      dropped_ += dropped;
      recorded_ += dropped;
    }
  }
  replay_arcs_ = nullptr;
  producer_a_ = 0.0f;
  walk_phase_ = -1;
  Time cur;
  cur.state.resize(nt);
  for (int32_t i = 0; i < nt; ++i) cur.state[i] = frontier[i].state;
  // Epsilon arcs: a token relaxed in several passes reports its arcs each time; keep one.
  if (!SortByTokenThenArc(&eps_arcs_, nt, &eps_sorted_, &eps_begin_)) {
    if (error_.empty()) error_ = "an epsilon arc of the closure leaves no token of its time";
    eps_arcs_.clear();
  }
  for (size_t k = 0; k < eps_arcs_.size(); ++k) {
    const Pending& p = eps_arcs_[k];
    if (k > 0 && p.src_tok == eps_arcs_[k - 1].src_tok && p.arc == eps_arcs_[k - 1].arc) continue;
    const int32_t d = slot_[p.dest];
    if (d >= 0) cur.arcs.push_back({p.src_tok, d, p.arc, 0.0f, 0.0f + g_.weight[p.arc]});
  }
  cur.num_eps = static_cast<int32_t>(cur.arcs.size());
  for (int32_t i = 0; i < nt; ++i) slot_[frontier[i].state] = -1;
  eps_arcs_.clear();

  // Epsilon layers (longest epsilon path from a token no epsilon arc enters), by Kahn's
  // algorithm; tokens left unplaced sit on an epsilon cycle.
  cur.layer.assign(nt, 0);
  cur.order.resize(nt);
  for (int32_t i = 0; i < nt; ++i) cur.order[i] = i;
  if (!cur.arcs.empty()) {  // (no epsilon arc at this time: every token on layer 0, in token order)
    // the epsilon arcs are grouped by source token (sorted above): their CSR in eps_begin_
    eps_begin_.assign(nt + 1, 0);
    indeg_.assign(nt, 0);
    for (const LatticeRecord& r : cur.arcs) {
      ++eps_begin_[r.src_tok + 1];
      ++indeg_[r.dst_tok];
    }
    for (int32_t i = 0; i < nt; ++i) eps_begin_[i + 1] += eps_begin_[i];
    queue_.clear();
    for (int32_t i = 0; i < nt; ++i)
      if (indeg_[i] == 0) queue_.push_back(i);
    int32_t top = 0;
    for (size_t q = 0; q < queue_.size(); ++q) {
      const int32_t i = queue_[q];
      for (int32_t k = eps_begin_[i]; k < eps_begin_[i + 1]; ++k) {
        const int32_t d = cur.arcs[k].dst_tok;
        cur.layer[d] = std::max(cur.layer[d], cur.layer[i] + 1);
        top = std::max(top, cur.layer[d]);
        if (--indeg_[d] == 0) queue_.push_back(d);
      }
    }
    if (static_cast<int32_t>(queue_.size()) < nt && error_.empty())
      error_ = "the lattice has an epsilon cycle at time " + std::to_string(times_.size()) +
               " (lattices need graphs whose epsilon arcs are acyclic)";
    // tokens by layer, in token order inside a layer (a counting sort: stable)
    indeg_.assign(top + 2, 0);
    for (int32_t i = 0; i < nt; ++i) ++indeg_[cur.layer[i] + 1];
    for (int32_t l = 0; l <= top; ++l) indeg_[l + 1] += indeg_[l];
    for (int32_t i = 0; i < nt; ++i) cur.order[indeg_[cur.layer[i]]++] = i;
  }

  // Forward scores, k2's Viterbi forward: the max over incoming arcs of fwd[src] + score.
  cur.fwd.assign(nt, kNegInf);
  if (times_.empty()) {
    cur.fwd[0] = 0.0f;  // the start token (closures append, so it stays token 0)
  } else {
    const Time& prev = times_.back();
    for (const LatticeRecord& r : prev.arcs)
      if (!IsEpsilon(r.arc)) cur.fwd[r.dst_tok] = std::max(cur.fwd[r.dst_tok], prev.fwd[r.src_tok] + r.score);
  }
  if (!cur.arcs.empty() && error_.empty()) {
    // epsilon arcs in the sources' topological order, so each source is complete (a source's
    // arcs in their order in cur.arcs)
    for (int32_t i : cur.order)
      for (int32_t k = eps_begin_[i]; k < eps_begin_[i + 1]; ++k) {
        const LatticeRecord& r = cur.arcs[k];
        cur.fwd[r.dst_tok] = std::max(cur.fwd[r.dst_tok], cur.fwd[i] + r.score);
      }
  }
  // the filter's guard: the arcs it kept (and the time's epsilon arcs) give every token at
  // least the search's score, so each max is the unfiltered one: a dropped arc ends below it
  if (!times_.empty() && times_.back().filter_a > 0.0f)
    for (int32_t i = 0; i < nt; ++i)
      if (!(cur.fwd[i] >= frontier[i].score)) broken_ = true;
  for (int32_t i = 0; i < nt; ++i)
    if (cur.fwd[i] > frontier[i].score) cur.fwd_above = true;
  for (int32_t i = 0; i < nt; ++i)
    if (std::isfinite(cur.fwd[i])) cur.fmag = std::max(cur.fmag, std::fabs(cur.fwd[i]));
  for (int32_t i = 0; i < nt; ++i) cur.max_layer = std::max(cur.max_layer, cur.layer[i]);
  max_layer_ = std::max(max_layer_, cur.max_layer);
  cur.bwd.assign(nt, kNegInf);
  cur.alive.assign(nt, 1);
  times_.push_back(std::move(cur));
  // The previous time's arcs are complete now (its step's arcs came in above): group them
  // by source token for the backward passes.
  if (times_.size() >= 2) {
    Time& prev = times_[times_.size() - 2];
    // (a token's arcs in the image's order here: the windows read them in any order; Finish
    // lists the kept ones in the source graph's order, k2's)
    auto by_src = [](const LatticeRecord& x, const LatticeRecord& y) {
      return x.src_tok != y.src_tok ? x.src_tok < y.src_tok : (x.arc & ~kRedirectArcBit) < (y.arc & ~kRedirectArcBit);
    };
    // Two sorted runs: the epsilon arcs (sorted when the time was made) and the step's arcs
    // (a step walks its frontier in order and each token's arcs in order).
    const auto mid = prev.arcs.begin() + prev.num_eps;
    if (std::is_sorted(mid, prev.arcs.end(), by_src))
      std::inplace_merge(prev.arcs.begin(), mid, prev.arcs.end(), by_src);
    else
      std::stable_sort(prev.arcs.begin(), prev.arcs.end(), by_src);
    recorded_ += static_cast<int64_t>(prev.arcs.size());
    const int32_t pn = static_cast<int32_t>(prev.state.size());
    prev.arc_begin.assign(pn + 1, 0);
    for (const LatticeRecord& r : prev.arcs) ++prev.arc_begin[r.src_tok + 1];
    for (int32_t i = 0; i < pn; ++i) prev.arc_begin[i + 1] += prev.arc_begin[i];
  }
}

// k2's PruneTimeRange(begin, end) on what earlier windows kept: backward = -forward at
// `end`, then times end-1 .. begin in reverse topological order.
void LatticeBuilder::PruneWindow(int32_t begin, int32_t end) {
  Time& last = times_[end];
  for (size_t i = 0; i < last.state.size(); ++i) last.bwd[i] = last.alive[i] ? -last.fwd[i] : kNegInf;
  const float neg_beam = -output_beam_;
  float bmag = 0.0f;  // max |bwd| over the window's tokens (the filter's guard)
  for (int32_t t = end - 1; t >= begin; --t) {
    Time& cur = times_[t];
    const Time& next = times_[t + 1];
    std::fill(cur.bwd.begin(), cur.bwd.end(), kNegInf);
    for (auto it = cur.order.rbegin(); it != cur.order.rend(); ++it) {
      const int32_t i = *it;
      if (!cur.alive[i]) continue;
      for (int32_t k = cur.arc_begin[i]; k < cur.arc_begin[i + 1]; ++k) {
        LatticeRecord& r = cur.arcs[k];
        if (r.dst_tok < 0) continue;  // dropped by an earlier window
        const float dst_bwd = IsEpsilon(r.arc) ? cur.bwd[r.dst_tok] : next.bwd[r.dst_tok];
        const float arc_bwd = r.score + dst_bwd;  // k2: arc_loglike + backward[dest]
        if (arc_bwd + cur.fwd[i] >= neg_beam) {
          cur.bwd[i] = std::max(cur.bwd[i], arc_bwd);
        } else {
          r.dst_tok = -1;
        }
      }
    }
    // k2 keeps every state of the window's first time: renumbering them would touch the
    // arcs of the time before, which belong to the previous window.
    if (t != begin)
      for (size_t i = 0; i < cur.state.size(); ++i)
        if (cur.bwd[i] == kNegInf) cur.alive[i] = 0;
    for (float b : cur.bwd)
      if (std::isfinite(b)) bmag = std::max(bmag, std::fabs(b));
  }
  // the records filter's guard: the magnitudes this window saw against those its filtered
  // steps assumed (reference_lattice.h)
  for (int32_t t = begin; t <= end; ++t) bmag = std::max(bmag, times_[t].fmag);
  // and the epsilon layers of the times a filtered step's chains can pass (t + 1 .. end)
  int32_t layers = 0;
  for (int32_t t = end; t >= begin; --t) {
    if (times_[t].filter_a > 0.0f && (!(bmag <= times_[t].filter_a) || layers > times_[t].filter_layers))
      broken_ = true;
    layers = std::max(layers, times_[t].max_layer);
  }
  for (int32_t t = begin; t < end; ++t) Compact(t);
}

// Drops the arcs of time t that a window pruned (dst_tok = -1), keeping the CSR.
void LatticeBuilder::Compact(int32_t t) {
  Time& cur = times_[t];
  const int32_t nt = static_cast<int32_t>(cur.state.size());
  size_t w = 0;
  std::vector<int32_t> begin(nt + 1, 0);
  for (int32_t i = 0; i < nt; ++i) {
    begin[i] = static_cast<int32_t>(w);
    for (int32_t k = cur.arc_begin[i]; k < cur.arc_begin[i + 1]; ++k)
      if (cur.arcs[k].dst_tok >= 0) cur.arcs[w++] = cur.arcs[k];
  }
  begin[nt] = static_cast<int32_t>(w);
  cur.arcs.resize(w);
  cur.arcs.shrink_to_fit();
  cur.arc_begin.swap(begin);
}

bool LatticeBuilder::Finish(RowLattice* out, std::string* error) {
  *out = RowLattice();
  if (!error_.empty()) {
    *error = error_;
    return false;
  }
  const int32_t T = static_cast<int32_t>(times_.size()) - 1;  // = n + 1
  if (T < 1 || !eps_arcs_.empty()) {
    *error = "lattice builder: the search has not finished";
    return false;
  }
  // The arcs of the final step were grouped when S_T arrived; S_T has none.
  times_[T].arc_begin.assign(times_[T].state.size() + 1, 0);
  if (last_window_end_ != T) {
    for (const auto& w : PruneWindows(T))
      if (w.second > last_window_end_) PruneWindow(w.first, w.second);
  }
  // Lattice states: by time, then topological order; the final state last (the only state
  // of S_T), or an extra final state when S_T is empty, as k2's FormatOutput adds.
  // The kept tokens of each time in their numbering order: topological (layer, token), and on a
  // graph with epsilon arcs (layer, graph state), an order the time's states and epsilon arcs fix
  // whatever order the search (or the GPU) found them in (the windows above need only the layers)
  std::vector<std::vector<int32_t>> kept(T + 1);
  for (int32_t t = 0; t <= T; ++t) {
    const Time& cur = times_[t];
    for (int32_t i : cur.order)
      if (cur.alive[i]) kept[t].push_back(i);
    if (g_.eps_count != nullptr)
      std::sort(kept[t].begin(), kept[t].end(), [&cur](int32_t x, int32_t y) {
        return cur.layer[x] != cur.layer[y] ? cur.layer[x] < cur.layer[y] : cur.state[x] < cur.state[y];
      });
  }
  std::vector<std::vector<int32_t>> id(T + 1);
  int32_t level = 0;
  for (int32_t t = 0; t <= T; ++t) {
    const Time& cur = times_[t];
    id[t].assign(cur.state.size(), -1);
    int32_t top = 0;
    for (int32_t i : kept[t]) {
      id[t][i] = out->num_states++;
      out->state_time.push_back(t);
      out->state_graph.push_back(cur.state[i]);
      out->state_level.push_back(level + cur.layer[i]);
      top = std::max(top, cur.layer[i]);
    }
    level += top + 1;
  }
  if (times_[T].state.empty()) {
    out->num_states++;
    out->state_time.push_back(T);
    out->state_graph.push_back(-1);
    out->state_level.push_back(level);
  }
  for (int32_t t = 0; t <= T; ++t) {
    const Time& cur = times_[t];
    for (int32_t i : kept[t]) {
      // the token's kept arcs in the source graph's order (k2's): by source arc id where the image
      // reordered the graph (a state's arcs, so a run of a few), else as recorded (image = source)
      run_keys_.clear();
      bool in_order = true;
      for (int32_t k = cur.arc_begin[i]; k < cur.arc_begin[i + 1]; ++k) {
        const int32_t key = g_.SourceArc(cur.arcs[k].arc & ~kRedirectArcBit);
        in_order &= run_keys_.empty() || run_keys_.back().first < key;
        run_keys_.push_back({key, k});
      }
      if (!in_order) std::sort(run_keys_.begin(), run_keys_.end());
      for (const auto& rk : run_keys_) {
        const int32_t k = rk.second;
        const LatticeRecord& r = cur.arcs[k];
        const bool eps = IsEpsilon(r.arc);
        const int32_t a = r.arc & ~kRedirectArcBit;
        const int32_t dst = id[eps ? t : t + 1][r.dst_tok];
        if (dst < 0) {  // a kept arc always enters a kept state (windows overlap)
          *error = "lattice builder: a kept arc enters a pruned state";
          return false;
        }
        out->src.push_back(id[t][i]);
        out->dst.push_back(dst);
        out->frame.push_back(t);
        out->arc.push_back(r.arc);
        out->graph.push_back(g_.weight[a]);
        out->acoustic.push_back(r.acoustic);
        out->score.push_back(r.score);
      }
    }
  }
  out->recorded_arcs = recorded_;
  out->stored_arcs = recorded_ - dropped_;
  return true;
}

bool DecodeRowLattice(const GraphView& g, const float* log_probs, int64_t row_stride, int32_t T,
                      const Options& opt, std::vector<int32_t>* slot, RowResult* result,
                      RowLattice* lattice, std::string* error) {
  // the records filter (reference_lattice.h); a row whose magnitudes or epsilon layers broke
  // its guard is decoded again without it
  const LatticeFilter filter = LatticeFilter::FromEnv();
  for (int pass = 0;; ++pass) {
    LatticeBuilder builder(g, slot, opt.output_beam, pass == 0 ? filter : LatticeFilter{false, 0.0f},
                           opt.eps_iterations);
    RowSearch search(g, opt, slot, nullptr, &builder);
    const int32_t final_t = opt.online ? RowSearch::kUnknownLength : T + 1;
    for (int32_t t = 0; t < T; ++t) search.Step(log_probs + static_cast<int64_t>(t) * row_stride, final_t);
    search.Final();
    *result = search.Result();
    const bool ok = builder.Finish(lattice, error);
    if (!builder.FilterBroken()) {
      lattice->filter_redone = pass > 0;
      return ok;
    }
    error->clear();
  }
}

// ---------------------------------------------------------------- lattice records
// One replay of a row's records (LatticeFromRecords) with the records filter or without it.
// sort_always: SortByTokenThenArc at every step (CUWFST_REPLAY_SORT=1, tests only).
static bool ReplayRecords(const GraphView& g, const Options& opt, const RecordedRow& row, LatticeFilter filter,
                          bool sort_always, std::vector<int32_t>* scratch, RowResult* result, RowLattice* lattice,
                          std::string* error, bool* filter_broken, bool* producer_filtered) {
  const int32_t N = g.num_states;
  // The search and the builder index the first half of the scratch by state (RowSearch's
  // `slot`); the replay maps graph states to the current frontier's tokens in the second.
  int32_t* tok_of = scratch->data() + N;
  LatticeBuilder builder(g, scratch, opt.output_beam, filter, opt.eps_iterations);
  RowSearch search(g, opt, scratch, nullptr, &builder);
  std::vector<StepArc> arcs, got;  // (got, start: the sort's scratch)
  std::vector<int32_t> start;
  // Step() offers arcs in frontier order, each token's in arc order. A token's arcs of the
  // step's phase are one range of the graph's arcs, so (token, arc) orders the step's arcs as
  // their place in the frontier's concatenated ranges: place_base[i] + (arc - arc_begin[i]).
  // Where those ranges are at most ~32 times as long as the step's records (a place costs a
  // store and a load, a sorted record tens of ns), the records are put at their places (a
  // second one at a place is a duplicate) and read back in order; otherwise they are sorted
  // (SortByTokenThenArc).
  std::vector<int64_t> place_base;
  std::vector<int32_t> arc_begin, placed;
  const int32_t* rec = row.records;
  std::string err;
  for (int32_t t = 0; t <= row.length && err.empty(); ++t) {
    const bool final_step = t == row.length;
    const int32_t phase = search.NextPhase(final_step);
    const std::vector<Token>& fr = search.frontier();
    const int32_t nt = static_cast<int32_t>(fr.size());
    place_base.resize(nt + 1);
    arc_begin.resize(nt);
    int64_t places = 0;
    for (int32_t i = 0; i < nt; ++i) {
      tok_of[fr[i].state] = i;
      int32_t b, e;
      g.StepRange(phase, fr[i].state, &b, &e);
      arc_begin[i] = b;
      place_base[i] = places;
      places += e - b;
    }
    place_base[nt] = places;
    const int32_t n = row.counts[t];
    arcs.clear();
    arcs.reserve(n);
    for (int32_t k = 0; k < n && err.empty(); ++k, rec += kRecordInts) {
      const int32_t s = rec[0], code = rec[1];
      const int32_t a = code & ~kRedirectArcBit;
      float acoustic;
      std::memcpy(&acoustic, &rec[2], sizeof(acoustic));
      const bool redirect = (code & kRedirectArcBit) != 0;
      // every index the replay follows is checked: a bad record is an error, not a crash
      if (s < 0 || s >= N || tok_of[s] < 0 || a < 0 || a >= g.num_arcs || code < 0 ||
          redirect != (phase == kPhaseRedirect)) {
        err = "a record names a state, arc or phase the search does not have";
        break;
      }
      const int32_t i = tok_of[s];
      if (a < arc_begin[i] || a - arc_begin[i] >= place_base[i + 1] - place_base[i]) {
        err = "a record's arc does not leave its state in the step's phase";
        break;
      }
      arcs.push_back({i, code, acoustic});
    }
    for (const Token& tok : fr) tok_of[tok.state] = -1;
    if (!err.empty()) {
      err = "step " + std::to_string(t) + ": " + err;
      break;
    }
    if (!sort_always && places <= 32ll * n + 65536) {
      placed.assign(places, -1);
      for (int32_t k = 0; k < n; ++k) {
        const StepArc& x = arcs[k];
        const int64_t p = place_base[x.src_tok] + ((x.arc & ~kRedirectArcBit) - arc_begin[x.src_tok]);
        if (placed[p] >= 0) err = "step " + std::to_string(t) + ": an arc is recorded twice";
        placed[p] = k;
      }
      got.clear();
      for (int32_t k : placed)
        if (k >= 0) got.push_back(arcs[k]);
      arcs.swap(got);
    } else {
      SortByTokenThenArc(&arcs, nt, &got, &start);  // (every source token checked above)
      for (size_t k = 1; k < arcs.size(); ++k)
        if (arcs[k].src_tok == arcs[k - 1].src_tok && arcs[k].arc == arcs[k - 1].arc)
          err = "step " + std::to_string(t) + ": an arc is recorded twice";
    }
    if (!err.empty()) break;
    builder.SetProducerFilter(row.producer_a != nullptr ? row.producer_a[t] : 0.0f);
    search.ReplayStep(arcs, row.cutoffs[t], final_step);
    if (static_cast<int32_t>(search.frontier().size()) != row.sizes[t])
      err = "step " + std::to_string(t) + ": the replayed frontier has " +
            std::to_string(search.frontier().size()) + " tokens, the recorded one " + std::to_string(row.sizes[t]);
  }
  if (!err.empty()) {
    *error = "lattice records: " + err;
    return false;
  }
  *result = search.Result();
  const bool ok = builder.Finish(lattice, error);
  *filter_broken = builder.FilterBroken();
  *producer_filtered = builder.ProducerFiltered();
  if (*producer_filtered) lattice->recorded_arcs = -1;  // (arcs the producer dropped were never seen)
  return ok;
}

bool LatticeFromRecords(const GraphView& g, const Options& opt, const RecordedRow& row,
                        std::vector<int32_t>* scratch, RowResult* result, RowLattice* lattice,
                        std::string* error) {
  if (static_cast<int64_t>(scratch->size()) < 2ll * g.num_states) {
    *error = "lattice records: scratch too small";
    return false;
  }
  // the records filter (reference_lattice.h), as DecodeRowLattice has it: a row whose
  // magnitudes or epsilon layers broke its guard is replayed again without it
  const LatticeFilter filter = LatticeFilter::FromEnv();
  const char* sort = std::getenv("CUWFST_REPLAY_SORT");
  const bool sort_always = sort != nullptr && std::strcmp(sort, "1") == 0;
  bool broken = false, producer = false;
  bool ok = ReplayRecords(g, opt, row, filter, sort_always, scratch, result, lattice, error, &broken, &producer);
  if (ok && broken && filter.on) {  // again without the builder's own filter
    error->clear();
    ok = ReplayRecords(g, opt, row, LatticeFilter{false, 0.0f}, sort_always, scratch, result, lattice, error,
                       &broken, &producer);
    lattice->filter_redone = true;
  }
  if (ok && broken && producer) {  // the producer's filter broke: the records may lack kept arcs
    *lattice = RowLattice{};
    lattice->producer_redo = true;
  }
  return ok;
}

void RecordingObserver::OnArc(int32_t src_tok, int32_t dest, int32_t arc, float acoustic) {
  if (!(arc & kRedirectArcBit) && g_.ilabel[arc] == -2) return;  // the replay runs the closure
  int32_t bits;
  std::memcpy(&bits, &acoustic, sizeof(bits));
  pending_.insert(pending_.end(), {src_tok, dest, arc, bits});
}

// The trim's reach on a trimmed step (counts only, for tests and docs/speed-notes.md; the records
// do not depend on them): every walked arc against the low and the cutoff by its end and by the
// bounds of the walks the GPU could take (the row's best non-blank log-prob, the state's own, the
// scan's top-3 label bound), a walk by labels' lookups, and the records pass's rounds of 32 arcs
// (lattice_after.cuh LatRecordsKernel) with the row's bound and the label bound. One pass over
// each token's arcs (pending_ holds them token by token).
void RecordingObserver::CountTrimReach(float low, float cutoff) {
  float rest = -INFINITY;                 // the row's best non-blank log-prob
  int32_t top[3] = {-1, -1, -1};          // its three best non-blank labels (ties to the smaller)
  std::vector<float> desc;                // its non-blank log-probs, best first
  for (int32_t v = 1; row != nullptr && v < g_.vocab_size; ++v) {
    rest = std::max(rest, row[v]);
    desc.push_back(row[v]);
    if (top[0] < 0 || row[v] > row[top[0]]) {
      top[2] = top[1], top[1] = top[0], top[0] = v;
    } else if (top[1] < 0 || row[v] > row[top[1]]) {
      top[2] = top[1], top[1] = v;
    } else if (top[2] < 0 || row[v] > row[top[2]]) {
      top[2] = v;
    }
  }
  std::sort(desc.begin(), desc.end(), std::greater<float>());
  auto labels_at = [&](float need) {  // how many non-blank log-probs are >= need
    return static_cast<int64_t>(std::upper_bound(desc.begin(), desc.end(), need, std::greater<float>()) -
                                desc.begin());
  };
  std::vector<int32_t> labs;
  for (size_t k = 0; k < pending_.size();) {
    const int32_t tok = pending_[k];
    const float s = frontier_scores_[tok];
    float wmax = -INFINITY, srest = -INFINITY;  // the token's best non-blank weight and log-prob
    int64_t deg = 0;                            // its non-blank arcs
    bool has[3] = {false, false, false};        // whether its state has the row's top labels
    const size_t k0 = k;
    labs.clear();
    for (; k < pending_.size() && pending_[k] == tok; k += 4) {
      const int32_t arc = pending_[k + 2], lab = g_.ilabel[arc];
      float ac;
      std::memcpy(&ac, &pending_[k + 3], sizeof(ac));
      const float end = s + (ac + g_.weight[arc]), bound = s + (rest + g_.weight[arc]);
      trim_kept += !(end < low);
      trim_best += !(end < cutoff);
      trim_bound_low += lab == 0 || !(bound < low);
      trim_bound_cut += lab == 0 || !(bound < cutoff);
      labs.push_back(lab);
      if (lab > 0) {
        for (int q = 0; q < 3; ++q) has[q] |= lab == top[q];
        wmax = std::max(wmax, g_.weight[arc]);
        srest = std::max(srest, ac);
        ++deg;
      }
    }
    const int64_t n = static_cast<int64_t>((k - k0) / 4);
    trim_walked += n;
    const float r3 = top[2] < 0 ? rest : has[0] ? row[top[0]] : has[1] ? row[top[1]] : row[top[2]];
    for (size_t j = k0; j < k; j += 4) {  // the walks by the state's own bound and the top-3 bound
      const int32_t arc = pending_[j + 2];
      const bool blank = g_.ilabel[arc] == 0;
      const float bound = s + (srest + g_.weight[arc]), b3 = s + (r3 + g_.weight[arc]);
      trim_sbound_low += blank || !(bound < low);
      trim_sbound_cut += blank || !(bound < cutoff);
      trim_top3_low += blank || !(b3 < low);
      trim_top3_cut += blank || !(b3 < cutoff);
    }
    // the records pass's reads: from the token's first arc, through the round of 32 holding the first
    // non-blank arc whose bound misses the low; the label bound on states of more than 8 labels
    std::sort(labs.begin(), labs.end());
    const int64_t distinct =
        std::unique(labs.begin(), labs.end()) - labs.begin() - (labs.empty() || labs[0] != 0 ? 0 : 1);
    auto reads = [&](float r) {
      for (int64_t i = 0; i < n; ++i) {
        const int32_t arc = pending_[k0 + 4 * i + 2];
        if (g_.ilabel[arc] != 0 && s + (r + g_.weight[arc]) < low) return std::min(n, (i / 32 + 1) * 32);
      }
      return n;
    };
    const int64_t r_row = reads(rest);
    pass_row += (r_row + 31) / 32;
    pass_lb += (reads(distinct > 8 ? r3 : rest) + 31) / 32;
    if (n <= 32) {  // a token of at most 32 arcs, and its arcs
      ++pass_small_tokens;
      pass_small_arcs += r_row;
    }
    if (wmax == -INFINITY) continue;
    // a walk by labels: score + (lp + wmax) >= bar <=> lp >= about bar - score - wmax (counted in
    // double); a token looks up no more labels than it has arcs
    trim_label_low += std::min(deg, labels_at(static_cast<float>(static_cast<double>(low) - s - wmax)));
    trim_label_cut += std::min(deg, labels_at(static_cast<float>(static_cast<double>(cutoff) - s - wmax)));
  }
}

void RecordingObserver::OnStepEnd(const std::vector<Token>& frontier, float cutoff) {
  if (started_) {  // the start closure is not a step
    const int32_t nt = static_cast<int32_t>(frontier.size());
    for (int32_t i = 0; i < nt; ++i) slot_[frontier[i].state] = i;
    // the filter (the GPU's twin): a real step (no redirect arc, not the final step) whose two
    // frontiers' scores are finite and whose offset exists
    float c = 0.0f, A = 0.0f;
    bool redirect = false;
    for (size_t k = 0; k < pending_.size(); k += 4) redirect |= (pending_[k + 2] & kRedirectArcBit) != 0;
    if (filter_ && !final_step_) {
      float m = 0.0f;
      for (float x : frontier_scores_) m = std::max(m, std::fabs(x));
      for (const Token& tok : frontier) m = std::max(m, std::fabs(tok.score));
      const double a = 2.0 * m + 4096.0;
      if (!redirect && RecordsFilterOffset(a, output_beam_, eps_iterations_, pad_, &c)) A = static_cast<float>(a);
    }
    // the trim's twin: a real step whose expanded frontier is within kEpsTrimMag leaves out the
    // arcs ending below low; its guard, where the step's own offset may exceed the cap's
    float low = -INFINITY;
    if (trim_ && !final_step_ && !redirect && prev_mag_ <= kEpsTrimMag) {
      constexpr double kCapA = 2.0 * kEpsTrimCap + 4096.0;
      float c_cap = 0.0f;
      // (the GPU's conditions: the cap's offset exists and is >= 0, else no trim; the guard
      // compares the step's own offset with it)
      if (RecordsFilterOffset(kCapA, output_beam_, eps_iterations_, pad_, &c_cap) && c_cap >= 0.0f) {
        low = std::nextafter(cutoff - c_cap, -INFINITY);
        if (!(A > 0.0f && c <= c_cap)) trim_guard = true;
      }
    }
    if (low > -INFINITY) CountTrimReach(low, cutoff);
    int32_t n = 0;
    for (size_t k = 0; k < pending_.size(); k += 4) {
      const int32_t d = slot_[pending_[k + 1]];
      if (d < 0) continue;
      if (A > 0.0f || low > -INFINITY) {
        const int32_t arc = pending_[k + 2];
        float acoustic;
        std::memcpy(&acoustic, &pending_[k + 3], sizeof(acoustic));
        const float end = frontier_scores_[pending_[k]] + (acoustic + g_.weight[arc]);
        if (end < low) {  // never walked (the GPU leaves its slot out)
          ++trimmed;
          continue;
        }
        if (A > 0.0f && !(end > cutoff) && end < frontier[d].score - c) continue;  // not admitted, below the bound
      }
      records.insert(records.end(), {frontier_states_[pending_[k]], pending_[k + 2], pending_[k + 3]});
      ++n;
    }
    for (const Token& tok : frontier) slot_[tok.state] = -1;
    counts.push_back(n);
    cutoffs.push_back(cutoff);
    sizes.push_back(static_cast<int32_t>(frontier.size()));
    producer_a.push_back(A);
  } else {
    start_size = static_cast<int32_t>(frontier.size());
  }
  for (const Token& tok : frontier) frontiers.push_back(tok.state);
  started_ = true;
  pending_.clear();
  prev_mag_ = 0.0f;
  for (const Token& tok : frontier) prev_mag_ = std::max(prev_mag_, std::fabs(tok.score));
  frontier_states_.resize(frontier.size());
  frontier_scores_.resize(frontier.size());
  for (size_t i = 0; i < frontier.size(); ++i) {
    frontier_states_[i] = frontier[i].state;
    frontier_scores_[i] = frontier[i].score;
  }
}

void DecodeRowRecords(const GraphView& g, const float* log_probs, int64_t row_stride, int32_t T,
                      const Options& opt, std::vector<int32_t>* slot, RecordingObserver* rec) {
  RowSearch search(g, opt, slot, nullptr, rec);
  const int32_t final_t = opt.online ? RowSearch::kUnknownLength : T + 1;
  for (int32_t t = 0; t < T; ++t) {
    rec->row = log_probs + static_cast<int64_t>(t) * row_stride;
    search.Step(rec->row, final_t);
  }
  rec->row = nullptr;
  rec->SetFinalStep();
  search.Final();
}

}  // namespace reference
}  // namespace cuwfst
