#include "lattice_posteriors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cuwfst {
namespace reference {

namespace {
constexpr double kNegInfD = -std::numeric_limits<double>::infinity();

// LatticeWordRests' per-thread scratch, kept between calls (a batch's threads each pass over
// several lattices): between calls every entry of av is -inf, of masked 0 and of word_slot -1
// (each call puts back what it wrote); vals is written before it is read. A call that throws
// frees them (Release), so the next call starts afresh; so does one that leaves more than
// kKeepBytes (a long lattice's scratch is not held by the thread for good).
struct RestScratch {
  static constexpr size_t kKeepBytes = size_t{256} << 20;
  std::vector<double> vals, av;
  std::vector<char> masked;
  std::vector<int32_t> word_slot;
  void Release() { *this = RestScratch(); }
  void Done() {
    const size_t bytes = 8 * (vals.capacity() + av.capacity()) + masked.capacity() + 4 * word_slot.capacity();
    if (bytes > kKeepBytes) Release();
  }
};
}  // namespace

void LatticeWordRests(const LatticeView& L, bool have_scores, double* alpha, double* beta, int64_t num_spans,
                      const int64_t* spans, double* out_rest, int32_t* out_hit) {
  const int64_t S = L.num_states, A = L.num_arcs;
  // the level groups: the arcs stably sorted by their source state's level (Lattice._layout).
  // The decoders' lattices have their arcs in level order already (states in time order, arcs
  // by source): then the layout is the arcs' own order and their arrays are read in place
  std::vector<int64_t> bounds{0};
  bool in_order = true;
  for (int64_t i = 1; i < A && in_order; ++i) {
    const int32_t a = L.state_level[L.src[i - 1]], b = L.state_level[L.src[i]];
    if (b < a) in_order = false;
    else if (b != a) bounds.push_back(i);
  }
  std::vector<int64_t> order;  // layout position -> arc (empty: the identity)
  std::vector<int32_t> ps_v, pd_v;
  std::vector<float> pw_v;
  if (!in_order) {
    std::vector<int32_t> lev(A);
    for (int64_t i = 0; i < A; ++i) lev[i] = L.state_level[L.src[i]];
    order.resize(A);
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return lev[x] < lev[y]; });
    bounds.assign(1, 0);
    for (int64_t i = 1; i < A; ++i)
      if (lev[order[i]] != lev[order[i - 1]]) bounds.push_back(i);
    ps_v.resize(A);
    pd_v.resize(A);
    pw_v.resize(A);
    for (int64_t i = 0; i < A; ++i) {
      ps_v[i] = L.src[order[i]];
      pd_v[i] = L.dst[order[i]];
      pw_v[i] = L.score[order[i]];
    }
  }
  if (A) bounds.push_back(A);
  const int64_t G = static_cast<int64_t>(bounds.size()) - 1;
  // per layout position: src, dst, score (float64 where it is added: exact)
  const int32_t* ps = in_order ? L.src : ps_v.data();
  const int32_t* pd = in_order ? L.dst : pd_v.data();
  const float* pw = in_order ? L.score : pw_v.data();
  thread_local RestScratch scratch;
  struct Guard {  // an exception mid-span would leave av, masked or word_slot dirty
    RestScratch* s;
    bool clean = false;
    ~Guard() {
      if (clean) s->Done();
      else s->Release();
    }
  } guard{&scratch};
  if (static_cast<int64_t>(scratch.vals.size()) < A) scratch.vals.resize(A);
  double* const vals = scratch.vals.data();
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
      for (int64_t i = a; i < b; ++i) vals[i] = alpha[ps[i]] + static_cast<double>(pw[i]);
      for (int64_t i = a; i < b; ++i) alpha[pd[i]] = NpyLogAddExp(alpha[pd[i]], vals[i]);
    }
    for (int64_t k = G - 1; k >= 0; --k) {
      const int64_t a = bounds[k], b = bounds[k + 1];
      for (int64_t i = a; i < b; ++i) vals[i] = beta[pd[i]] + static_cast<double>(pw[i]);
      for (int64_t i = a; i < b; ++i) beta[ps[i]] = NpyLogAddExp(beta[ps[i]], vals[i]);
    }
  }
  if (num_spans == 0) {
    guard.clean = true;
    return;
  }
  // group times (the first arc's source state time), the distinct state times
  std::vector<int64_t> gtime(G);
  for (int64_t k = 0; k < G; ++k) gtime[k] = L.state_frame[ps[bounds[k]]];
  // with the states in time order (the lattices the decoders build), a time's states are one run
  const bool time_sorted = std::is_sorted(L.state_frame, L.state_frame + S);
  std::vector<int32_t> times;  // the distinct state times, ascending
  if (time_sorted) {
    for (int64_t i = 0; i < S; ++i)
      if (i == 0 || L.state_frame[i] != L.state_frame[i - 1]) times.push_back(L.state_frame[i]);
  } else {
    times.assign(L.state_frame, L.state_frame + S);
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
  }
  const int64_t nt = static_cast<int64_t>(times.size());
  // the arcs of each word some span asks for (the spans' distinct words, sorted), ascending, an
  // arc once for each time it carries the word: no sort of the lattice's every (word, arc)
  std::vector<int32_t> sw;
  for (int64_t n = 0; n < num_spans; ++n)
    if (spans[3 * n] == static_cast<int32_t>(spans[3 * n])) sw.push_back(static_cast<int32_t>(spans[3 * n]));
  std::sort(sw.begin(), sw.end());
  sw.erase(std::unique(sw.begin(), sw.end()), sw.end());
  // word -> its index in sw, -1 where no span asks for it: called for every word on the
  // lattice's arcs (most of which no span asks for), so a small open-addressing table whose
  // first probe is usually an empty slot, not a binary search
  int bits = 4;
  while ((int64_t{1} << bits) < 4 * static_cast<int64_t>(sw.size())) ++bits;
  const uint32_t mask = (1u << bits) - 1u;
  auto slot_of = [&](int32_t w) { return (static_cast<uint32_t>(w) * 2654435761u) >> (32 - bits); };
  std::vector<int32_t> tab_word(mask + 1), tab_index(mask + 1, -1);
  for (size_t k = 0; k < sw.size(); ++k) {
    uint32_t h = slot_of(sw[k]);
    while (tab_index[h] >= 0) h = (h + 1) & mask;
    tab_word[h] = sw[k];
    tab_index[h] = static_cast<int32_t>(k);
  }
  auto hashed_index = [&](int32_t w) -> int64_t {
    for (uint32_t h = slot_of(w);; h = (h + 1) & mask) {
      if (tab_index[h] < 0) return -1;
      if (tab_word[h] == w) return tab_index[h];
    }
  };
  // where the asked-for words are small non-negative ids (a vocabulary's), a direct table
  const bool direct = !sw.empty() && sw.front() >= 0 && sw.back() < (int32_t{1} << 22);
  if (direct && static_cast<int64_t>(scratch.word_slot.size()) <= sw.back()) scratch.word_slot.resize(sw.back() + 1, -1);
  int32_t* const slot = direct ? scratch.word_slot.data() : nullptr;
  const uint32_t slots = direct ? static_cast<uint32_t>(scratch.word_slot.size()) : 0;
  if (direct)
    for (size_t k = 0; k < sw.size(); ++k) slot[sw[k]] = static_cast<int32_t>(k);
  auto word_index = [&](int32_t w) -> int64_t {
    if (direct) return static_cast<uint32_t>(w) < slots ? slot[w] : -1;
    return hashed_index(w);
  };
  // (word index, arc) for the words some span asks for, in arc order: the words in their own
  // order, each asked-for word's arc found by walking an arc cursor forward (word_splits does
  // not decrease: the arc whose range holds word j is the last i with word_splits[i] <= j)
  std::vector<std::pair<int32_t, int32_t>> wanted;
  {
    int64_t i = 0;
    for (int64_t j = 0; j < L.num_words; ++j) {
      const int64_t k = word_index(L.word_ids[j]);
      if (k < 0) continue;
      while (L.word_splits[i + 1] <= j) ++i;
      wanted.emplace_back(static_cast<int32_t>(k), static_cast<int32_t>(i));
    }
  }
  std::vector<int64_t> w_first(sw.size() + 1, 0);  // [word index] -> first entry in w_arcs
  for (const auto& [k, i] : wanted) ++w_first[k + 1];
  std::partial_sum(w_first.begin(), w_first.end(), w_first.begin());
  std::vector<int32_t> w_arcs(w_first.back());
  {
    std::vector<int64_t> fill(w_first.begin(), w_first.end() - 1);
    for (const auto& [k, i] : wanted) w_arcs[fill[k]++] = i;
  }
  std::vector<int64_t> pos(order.size());  // an arc's layout position (empty: the identity)
  for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i) pos[order[i]] = i;
  auto pos_of = [&](int64_t arc) { return in_order ? arc : pos[arc]; };
  if (static_cast<int64_t>(scratch.masked.size()) < A) scratch.masked.resize(A, 0);
  char* const masked = scratch.masked.data();
  // av: -inf everywhere between spans; a span writes only the states its groups reach, listed in
  // `touched` and put back to -inf after it, so a span costs its own arcs, not the lattice's
  // states (the same values: every entry a span reads starts at -inf either way)
  if (static_cast<int64_t>(scratch.av.size()) < S) scratch.av.resize(S, kNegInfD);
  double* const av = scratch.av.data();
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
    for (int64_t h : hit) masked[pos_of(h)] = 1;
    for (int64_t k = 0; k < G; ++k) {
      const bool is_before = has_before && gtime[k] == before;
      if (!is_before && !(gtime[k] >= first && gtime[k] <= last)) continue;
      const int64_t a = bounds[k], b = bounds[k + 1];
      if (is_before) {  // the arcs that enter the span, from the full forward scores
        for (int64_t i = a; i < b; ++i)
          if (L.state_frame[pd[i]] >= first) add(pd[i], alpha[ps[i]] + static_cast<double>(pw[i]));
      } else {  // without the word's arcs
        for (int64_t i = a; i < b; ++i) vals[i] = av[ps[i]] + static_cast<double>(pw[i]);
        for (int64_t i = a; i < b; ++i)
          if (!masked[i]) add(pd[i], vals[i]);
      }
    }
    for (int64_t h : hit) masked[pos_of(h)] = 0;
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
  if (direct)
    for (int32_t w : sw) slot[w] = -1;
  guard.clean = true;
}


namespace {

// A position of the n-best search: a state (>= 0), or inside arc a past its word k
// (Lattice._nbest_python's (a, k) tuples), encoded -1 - (a * kInArc + k).
constexpr int64_t kInArc = int64_t{1} << 16;
inline int64_t InArc(int64_t a, int64_t k) { return -1 - (a * kInArc + k); }

// positions -> best value, in insertion order (a Python dict's iteration order)
struct Positions {
  std::vector<std::pair<int64_t, double>> items;
  std::unordered_map<int64_t, size_t> at;
  void Offer(int64_t pos, double val) {  // e[pos] = val where val > e.get(pos, -inf)
    const auto it = at.find(pos);
    if (it == at.end()) {
      if (val > kNegInfD) {
        at.emplace(pos, items.size());
        items.emplace_back(pos, val);
      }
    } else if (val > items[it->second].second) {
      items[it->second].second = val;
    }
  }
};

struct Prefix {
  double neg_priority;
  int kind;  // 0: a complete sequence, 1: an open prefix
  std::vector<int32_t> words;
  Positions positions;
};

}  // namespace

void LatticeNBest(const LatticeView& L, const double* beta, int64_t n, std::vector<int32_t>* words_out,
                  std::vector<int64_t>* splits_out, std::vector<double>* scores_out) {
  const int64_t S = L.num_states, A = L.num_arcs;
  splits_out->assign(1, 0);
  words_out->clear();
  scores_out->clear();
  if (S == 0 || !std::isfinite(beta[0]) || n < 1) return;
  const int64_t final_state = S - 1;
  for (int64_t i = 0; i < A; ++i)
    if (L.word_splits[i + 1] - L.word_splits[i] >= kInArc) throw std::invalid_argument("an arc carries too many words");
  std::vector<int64_t> out_begin(S + 1, 0);  // arcs leaving each state (grouped by source)
  for (int64_t i = 0; i < A; ++i) ++out_begin[L.src[i] + 1];
  std::partial_sum(out_begin.begin(), out_begin.end(), out_begin.begin());
  auto pos_beta = [&](int64_t pos) { return pos >= 0 ? beta[pos] : beta[L.dst[(-1 - pos) / kInArc]]; };
  // expand's scratch: best value a state (-inf: not in `best`), the states it set
  std::vector<double> best(S, kNegInfD);
  std::vector<char> in_best(S, 0);
  std::vector<int64_t> touched;
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<int64_t>> states;
  std::vector<int32_t> emit_words;  // the words offered, in first-offer order
  std::unordered_map<int32_t, Positions> emit;

  auto offer = [&](int32_t word, int64_t pos, double val) {
    if (!std::isfinite(pos_beta(pos))) return;  // a dead end: no path to the final state
    auto it = emit.find(word);
    if (it == emit.end()) {
      it = emit.emplace(word, Positions()).first;
      emit_words.push_back(word);
    }
    it->second.Offer(pos, val);
  };
  auto reach = [&](int64_t t, double v) {  // best[t] = v where v beats it, t queued once
    if (v > best[t]) {
      if (!in_best[t]) {
        in_best[t] = 1;
        touched.push_back(t);
        states.push(t);
      }
      best[t] = v;
    }
  };
  // Lattice._nbest_python's expand: the closure over word-less arcs from the positions, the
  // complete score and, per next word, the positions right after it
  auto expand = [&](const Positions& d) {
    emit.clear();
    emit_words.clear();
    double complete = kNegInfD;
    for (const auto& [p, v] : d.items) {
      if (p >= 0) {
        reach(p, v);
      } else {
        const int64_t a = (-1 - p) / kInArc, k = (-1 - p) % kInArc;
        const int64_t nxt = L.word_splits[a] + k + 1 < L.word_splits[a + 1] ? InArc(a, k + 1) : L.dst[a];
        offer(L.word_ids[L.word_splits[a] + k], nxt, v);
      }
    }
    while (!states.empty()) {  // states in increasing id are in topological order
      const int64_t s = states.top();
      states.pop();
      const double v = best[s];
      if (s == final_state) complete = std::max(complete, v);
      for (int64_t a = out_begin[s]; a < out_begin[s + 1]; ++a) {
        const double nv = v + static_cast<double>(L.score[a]);
        if (L.word_splits[a] == L.word_splits[a + 1]) {
          const int64_t t = L.dst[a];
          if (!std::isfinite(beta[t])) continue;
          reach(t, nv);
        } else {
          const int64_t nxt = L.word_splits[a] + 1 < L.word_splits[a + 1] ? InArc(a, 1) : L.dst[a];
          offer(L.word_ids[L.word_splits[a]], nxt, nv);
        }
      }
    }
    for (int64_t t : touched) {
      best[t] = kNegInfD;
      in_best[t] = 0;
    }
    touched.clear();
    return complete;
  };
  // the heap of Python's (-priority, kind, words, positions) tuples: the least first
  std::vector<Prefix> entries;
  auto later = [&](int64_t x, int64_t y) {  // x comes off the heap after y
    const Prefix& a = entries[x];
    const Prefix& b = entries[y];
    if (a.neg_priority != b.neg_priority) return a.neg_priority > b.neg_priority;
    if (a.kind != b.kind) return a.kind > b.kind;
    return a.words > b.words;
  };
  std::vector<int64_t> heap;
  auto push = [&](Prefix&& e) {
    entries.push_back(std::move(e));
    heap.push_back(static_cast<int64_t>(entries.size()) - 1);
    std::push_heap(heap.begin(), heap.end(), later);
  };
  {
    Prefix first{-beta[0], 1, {}, {}};
    first.positions.Offer(0, 0.0);
    push(std::move(first));
  }
  int64_t found = 0;
  while (!heap.empty() && found < n) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const int64_t top = heap.back();
    heap.pop_back();
    if (entries[top].kind == 0) {
      words_out->insert(words_out->end(), entries[top].words.begin(), entries[top].words.end());
      splits_out->push_back(static_cast<int64_t>(words_out->size()));
      scores_out->push_back(-entries[top].neg_priority);
      ++found;
      continue;
    }
    Positions d = std::move(entries[top].positions);
    const std::vector<int32_t> words = entries[top].words;
    const double complete = expand(d);
    if (std::isfinite(complete)) push(Prefix{-complete, 0, words, {}});
    for (int32_t w : emit_words) {
      Positions& nd = emit[w];
      double pr = kNegInfD;  // max(v + pos_beta(p) for p, v in nd.items()), the first maximal
      bool any = false;
      for (const auto& [p, v] : nd.items) {
        const double x = v + pos_beta(p);
        if (!any || x > pr) pr = x;
        any = true;
      }
      std::vector<int32_t> w2 = words;
      w2.push_back(w);
      push(Prefix{-pr, 1, std::move(w2), std::move(nd)});
    }
  }
}

}  // namespace reference
}  // namespace cuwfst
