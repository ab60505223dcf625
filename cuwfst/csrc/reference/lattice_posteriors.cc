#include "lattice_posteriors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace cuwfst {
namespace reference {

namespace {
constexpr double kNegInfD = -std::numeric_limits<double>::infinity();
}  // namespace

void LatticeWordRests(const LatticeView& L, bool have_scores, double* alpha, double* beta, int64_t num_spans,
                      const int64_t* spans, double* out_rest, int32_t* out_hit) {
  const int64_t S = L.num_states, A = L.num_arcs;
  // the level groups: the arcs stably sorted by their source state's level (Lattice._layout)
  std::vector<int64_t> order(A);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::vector<int32_t> lev(A);
  for (int64_t i = 0; i < A; ++i) lev[i] = L.state_level[L.src[i]];
  if (!std::is_sorted(lev.begin(), lev.end()))
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return lev[x] < lev[y]; });
  std::vector<int64_t> bounds{0};
  for (int64_t i = 1; i < A; ++i)
    if (lev[order[i]] != lev[order[i - 1]]) bounds.push_back(i);
  if (A) bounds.push_back(A);
  const int64_t G = static_cast<int64_t>(bounds.size()) - 1;
  // per layout position: src, dst, float64 score
  std::vector<int32_t> ps(A), pd(A);
  std::vector<double> pw(A), vals(A);
  for (int64_t i = 0; i < A; ++i) {
    ps[i] = L.src[order[i]];
    pd[i] = L.dst[order[i]];
    pw[i] = static_cast<double>(L.score[order[i]]);
  }
  if (!have_scores) {
    // forward: per group, every value from the scores before the group, then the group's
    // logaddexp.at in order (np.logaddexp.at(alpha, dst, alpha[src] + score))
    std::fill(alpha, alpha + S, kNegInfD);
    std::fill(beta, beta + S, kNegInfD);
    if (S) {
      alpha[0] = 0.0;
      beta[S - 1] = 0.0;
    }
    for (int64_t k = 0; k < G; ++k) {
      const int64_t a = bounds[k], b = bounds[k + 1];
      for (int64_t i = a; i < b; ++i) vals[i] = alpha[ps[i]] + pw[i];
      for (int64_t i = a; i < b; ++i) alpha[pd[i]] = NpyLogAddExp(alpha[pd[i]], vals[i]);
    }
    for (int64_t k = G - 1; k >= 0; --k) {
      const int64_t a = bounds[k], b = bounds[k + 1];
      for (int64_t i = a; i < b; ++i) vals[i] = beta[pd[i]] + pw[i];
      for (int64_t i = a; i < b; ++i) beta[ps[i]] = NpyLogAddExp(beta[ps[i]], vals[i]);
    }
  }
  if (num_spans == 0) return;
  // group times (the first arc's source state time), the distinct state times
  std::vector<int64_t> gtime(G);
  for (int64_t k = 0; k < G; ++k) gtime[k] = L.state_frame[ps[bounds[k]]];
  // with the states in time order (the lattices the decoders build), a time's states are one run
  const bool time_sorted = std::is_sorted(L.state_frame, L.state_frame + S);
  std::vector<int32_t> times(L.state_frame, L.state_frame + S);
  if (!time_sorted) std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const int64_t nt = static_cast<int64_t>(times.size());
  // the arcs of each word some span asks for (the spans' distinct words, sorted), ascending, an
  // arc once for each time it carries the word: no sort of the lattice's every (word, arc)
  std::vector<int32_t> sw;
  for (int64_t n = 0; n < num_spans; ++n)
    if (spans[3 * n] == static_cast<int32_t>(spans[3 * n])) sw.push_back(static_cast<int32_t>(spans[3 * n]));
  std::sort(sw.begin(), sw.end());
  sw.erase(std::unique(sw.begin(), sw.end()), sw.end());
  auto word_index = [&](int32_t w) -> int64_t {  // -1: no span asks for w
    const auto it = std::lower_bound(sw.begin(), sw.end(), w);
    return it != sw.end() && *it == w ? it - sw.begin() : -1;
  };
  std::vector<int64_t> w_first(sw.size() + 1, 0);  // [word index] -> first entry in w_arcs
  for (int64_t j = 0; j < L.num_words; ++j) {
    const int64_t k = word_index(L.word_ids[j]);
    if (k >= 0) ++w_first[k + 1];
  }
  std::partial_sum(w_first.begin(), w_first.end(), w_first.begin());
  std::vector<int32_t> w_arcs(w_first.back());
  {
    std::vector<int64_t> fill(w_first.begin(), w_first.end() - 1);
    for (int64_t i = 0; i < A; ++i)
      for (int32_t j = L.word_splits[i]; j < L.word_splits[i + 1]; ++j) {
        const int64_t k = word_index(L.word_ids[j]);
        if (k >= 0) w_arcs[fill[k]++] = static_cast<int32_t>(i);
      }
  }
  std::vector<int64_t> pos(A);  // an arc's layout position
  for (int64_t i = 0; i < A; ++i) pos[order[i]] = i;
  std::vector<char> masked(A, 0);
  // av: -inf everywhere between spans; a span writes only the states its groups reach, listed in
  // `touched` and put back to -inf after it, so a span costs its own arcs, not the lattice's
  // states (the same values: every entry a span reads starts at -inf either way)
  std::vector<double> av(S, kNegInfD);
  std::vector<int64_t> touched;
  auto add = [&](int64_t s, double v) {
    if (av[s] == kNegInfD) touched.push_back(s);
    av[s] = NpyLogAddExp(av[s], v);
  };
  std::vector<int64_t> hit;
  for (int64_t n = 0; n < num_spans; ++n) {
    const int32_t word = static_cast<int32_t>(spans[3 * n]);
    const int64_t first = spans[3 * n + 1], last = spans[3 * n + 2];
    hit.clear();
    if (spans[3 * n] == word) {  // a word id outside int32 carries no arc
      const int64_t k = word_index(word);
      for (int64_t e = k >= 0 ? w_first[k] : 0; k >= 0 && e < w_first[k + 1]; ++e)
        if (L.frame[w_arcs[e]] >= first && L.frame[w_arcs[e]] <= last) hit.push_back(w_arcs[e]);
    }
    out_hit[n] = hit.empty() ? 0 : 1;
    out_rest[n] = kNegInfD;
    if (hit.empty()) continue;
    touched.clear();
    if (first == 0 && S) {
      av[0] = 0.0;
      touched.push_back(0);
    }
    const int64_t ii = std::lower_bound(times.begin(), times.end(), first) - times.begin();
    const int64_t jj = std::upper_bound(times.begin(), times.end(), last) - times.begin();
    const bool has_before = ii > 0, has_after = jj < nt;
    const int64_t before = has_before ? times[ii - 1] : 0, after = has_after ? times[jj] : 0;
    for (int64_t h : hit) masked[pos[h]] = 1;
    for (int64_t k = 0; k < G; ++k) {
      const bool is_before = has_before && gtime[k] == before;
      if (!is_before && !(gtime[k] >= first && gtime[k] <= last)) continue;
      const int64_t a = bounds[k], b = bounds[k + 1];
      if (is_before) {  // the arcs that enter the span, from the full forward scores
        for (int64_t i = a; i < b; ++i)
          if (L.state_frame[pd[i]] >= first) add(pd[i], alpha[ps[i]] + pw[i]);
      } else {  // without the word's arcs
        for (int64_t i = a; i < b; ++i) vals[i] = av[ps[i]] + pw[i];
        for (int64_t i = a; i < b; ++i)
          if (!masked[i]) add(pd[i], vals[i]);
      }
    }
    for (int64_t h : hit) masked[pos[h]] = 0;
    if (has_after) {
      // np.logaddexp.reduce over the states of time `after`, in state order
      int64_t s0 = 0, s1 = S;
      if (time_sorted) {
        s0 = std::lower_bound(L.state_frame, L.state_frame + S, static_cast<int32_t>(after)) - L.state_frame;
        s1 = std::upper_bound(L.state_frame, L.state_frame + S, static_cast<int32_t>(after)) - L.state_frame;
      }
      bool any = false;
      double acc = kNegInfD;
      for (int64_t s = s0; s < s1; ++s) {
        if (L.state_frame[s] != after) continue;
        const double v = av[s] + beta[s];
        acc = any ? NpyLogAddExp(acc, v) : v;
        any = true;
      }
      out_rest[n] = acc;
    }
    for (int64_t s : touched) av[s] = kNegInfD;
  }
}

}  // namespace reference
}  // namespace cuwfst
