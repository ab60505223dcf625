// NumberPrunedRows (cuwfst/lattice_number.h), the host half of the GPU lattice pruning, against
// its first implementation (gpu_lattice_prune.cu before 2025-xx, kept below as Reference*):
// the same rows, array for array, on random inputs shaped like the pruning's output (kept
// states per time with ranks dense per (row, time) and tokens laid out time-major as the
// pruning's; arcs between consecutive times, same-time arcs under kToken, redirected arcs
// into the final state; rows skipped, empty, of 0 frames, without a kept final state; lanes
// mixed in a random order as an atomic cursor leaves them), and the same errors on broken
// inputs. Then both timed on a batch shaped like the H200's (32 rows, T ~227, ~122 kept
// arcs per frame). Built and run by tests/test_cuda_resources.py; `--bench` times longer.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuwfst/lattice_number.h"

using namespace cuwfst;

#include "check.h"

// ---------------------------------------------------------------- the first implementation
// PruneLattice's (kToken) and IncFinish's (kTimeRank) host blocks as they were, per row on
// hardware_concurrency() threads, rows round-robin, serial under 20,000 arcs.
static std::string Reference(const PrunedArcOut* ha, int64_t A, const PrunedStateOut* hs, int64_t S, int32_t B,
                             const int32_t* lengths, const uint8_t* skip_in, PrunedEndpoints mode, int32_t threads,
                             std::vector<PrunedRow>* rows_out) {
  std::vector<PrunedRow>& pr_rows_ = *rows_out;
  const int32_t kRedirectArcBit = kLatticeNumberRedirectBit;
  std::vector<int64_t> a_at(B + 1, 0), s_at(B + 1, 0);
  for (int64_t i = 0; i < A; ++i) ++a_at[ha[i].lane + 1];
  for (int64_t i = 0; i < S; ++i) ++s_at[hs[i].lane + 1];
  for (int32_t b = 0; b < B; ++b) {
    a_at[b + 1] += a_at[b];
    s_at[b + 1] += s_at[b];
  }
  std::vector<int64_t> a_idx(A), s_idx(S);
  {
    std::vector<int64_t> na(a_at.begin(), a_at.end() - 1), ns(s_at.begin(), s_at.end() - 1);
    for (int64_t i = 0; i < A; ++i) a_idx[na[ha[i].lane]++] = i;
    for (int64_t i = 0; i < S; ++i) s_idx[ns[hs[i].lane]++] = i;
  }
  pr_rows_.assign(B, PrunedRow());
  std::vector<std::string> errors(B);
  auto build_token = [&](int32_t b) {
    PrunedRow& row = pr_rows_[b];
    if (skip_in[b]) return;
    const int32_t T = lengths[b] + 1;
    std::vector<int32_t> st(s_idx.begin() + s_at[b], s_idx.begin() + s_at[b + 1]);
    std::sort(st.begin(), st.end(), [&](int32_t x, int32_t y) {
      return hs[x].tau != hs[y].tau ? hs[x].tau < hs[y].tau : hs[x].rank < hs[y].rank;
    });
    const bool has_final = !st.empty() && hs[st.back()].tau == T;
    const int32_t ns = static_cast<int32_t>(st.size()) + (has_final ? 0 : 1);
    row.num_states = ns;
    row.states.assign(3 * static_cast<size_t>(ns), 0);
    std::vector<std::pair<int32_t, int32_t>> id_of(st.size());  // (global token, state id)
    for (size_t k = 0; k < st.size(); ++k) {
      const PrunedStateOut& x = hs[st[k]];
      row.states[k] = x.tau;
      row.states[ns + k] = x.state;
      row.states[2 * ns + k] = x.tau;  // epsilon-free: level = time
      id_of[k] = {x.tok, static_cast<int32_t>(k)};
    }
    if (!has_final) {
      row.states[ns - 1] = T;
      row.states[2 * ns - 1] = -1;
      row.states[3 * ns - 1] = T + 1;
    }
    std::sort(id_of.begin(), id_of.end());
    auto lookup = [&](int32_t tok) -> int32_t {
      auto it = std::lower_bound(id_of.begin(), id_of.end(), std::make_pair(tok, -1));
      return it != id_of.end() && it->first == tok ? it->second : -1;
    };
    struct Arc { int32_t src, dst, key; int64_t i; };
    std::vector<Arc> arcs;
    arcs.reserve(a_at[b + 1] - a_at[b]);
    for (int64_t k = a_at[b]; k < a_at[b + 1]; ++k) {
      const PrunedArcOut& x = ha[a_idx[k]];
      const int32_t s_id = lookup(x.src), d_id = lookup(x.dst);
      if (s_id < 0 || d_id < 0) {
        errors[b] = "GPU lattice pruning: a kept arc leaves or enters a pruned state (a decoder bug)";
        return;
      }
      arcs.push_back({s_id, d_id, x.code & ~kRedirectArcBit, a_idx[k]});
    }
    std::sort(arcs.begin(), arcs.end(), [](const Arc& x, const Arc& y) {
      return x.src != y.src ? x.src < y.src : x.key < y.key;
    });
    const int32_t na = static_cast<int32_t>(arcs.size());
    row.num_arcs = na;
    row.arcs.resize(4 * static_cast<size_t>(na));
    row.scores.resize(3 * static_cast<size_t>(na));
    for (int32_t k = 0; k < na; ++k) {
      const PrunedArcOut& x = ha[arcs[k].i];
      row.arcs[k] = arcs[k].src;
      row.arcs[na + k] = arcs[k].dst;
      row.arcs[2 * na + k] = x.t;
      row.arcs[3 * na + k] = x.code;
      row.scores[k] = x.acoustic;
      row.scores[na + k] = x.graph;
      row.scores[2 * na + k] = x.score;
    }
  };
  auto build_rank = [&](int32_t b) {
    PrunedRow& row = pr_rows_[b];
    if (skip_in[b]) return;
    const int32_t T = lengths[b] + 1;
    auto key_of = [](int32_t tau, int32_t rank) {
      return (static_cast<int64_t>(tau) << 32) | static_cast<uint32_t>(rank);
    };
    std::vector<std::pair<int64_t, int64_t>> st;  // ((tau, rank), index)
    st.reserve(s_at[b + 1] - s_at[b]);
    for (int64_t k = s_at[b]; k < s_at[b + 1]; ++k) st.push_back({key_of(hs[s_idx[k]].tau, hs[s_idx[k]].rank), s_idx[k]});
    std::sort(st.begin(), st.end());
    for (size_t k = 1; k < st.size(); ++k)
      if (st[k].first == st[k - 1].first) {
        errors[b] = "GPU lattice pruning: two kept states share a time and rank (a decoder bug)";
        return;
      }
    const bool has_final = !st.empty() && hs[st.back().second].tau == T;
    const int32_t ns = static_cast<int32_t>(st.size()) + (has_final ? 0 : 1);
    row.num_states = ns;
    row.states.assign(3 * static_cast<size_t>(ns), 0);
    for (size_t k = 0; k < st.size(); ++k) {
      const PrunedStateOut& x = hs[st[k].second];
      row.states[k] = x.tau;
      row.states[ns + k] = x.state;
      row.states[2 * ns + k] = x.tau;  // epsilon-free: level = time
    }
    if (!has_final) {
      row.states[ns - 1] = T;
      row.states[2 * ns - 1] = -1;
      row.states[3 * ns - 1] = T + 1;
    }
    auto lookup = [&](int32_t tau, int32_t rank) -> int32_t {
      if (rank < 0) return -1;
      const int64_t key = key_of(tau, rank);
      auto it = std::lower_bound(st.begin(), st.end(), std::make_pair(key, int64_t{-1}));
      return it != st.end() && it->first == key ? static_cast<int32_t>(it - st.begin()) : -1;
    };
    struct Arc { int32_t src, dst, key; int64_t i; };
    std::vector<Arc> arcs;
    arcs.reserve(a_at[b + 1] - a_at[b]);
    for (int64_t k = a_at[b]; k < a_at[b + 1]; ++k) {
      const PrunedArcOut& x = ha[a_idx[k]];
      const int32_t s_id = lookup(x.t, x.src), d_id = lookup(x.t + 1, x.dst);
      if (s_id < 0 || d_id < 0) {
        errors[b] = "GPU lattice pruning: a kept arc leaves or enters a pruned state (a decoder bug)";
        return;
      }
      arcs.push_back({s_id, d_id, x.code & ~kRedirectArcBit, a_idx[k]});
    }
    std::sort(arcs.begin(), arcs.end(), [](const Arc& x, const Arc& y) {
      return x.src != y.src ? x.src < y.src : x.key < y.key;
    });
    const int32_t na = static_cast<int32_t>(arcs.size());
    row.num_arcs = na;
    row.arcs.resize(4 * static_cast<size_t>(na));
    row.scores.resize(3 * static_cast<size_t>(na));
    for (int32_t k = 0; k < na; ++k) {
      const PrunedArcOut& x = ha[arcs[k].i];
      row.arcs[k] = arcs[k].src;
      row.arcs[na + k] = arcs[k].dst;
      row.arcs[2 * na + k] = x.t;
      row.arcs[3 * na + k] = x.code;
      row.scores[k] = x.acoustic;
      row.scores[na + k] = x.graph;
      row.scores[2 * na + k] = x.score;
    }
  };
  auto build = [&](int32_t b) { mode == PrunedEndpoints::kToken ? build_token(b) : build_rank(b); };
  const int32_t workers = std::max<int32_t>(1, std::min<int32_t>(B, threads));
  if (workers <= 1 || A < 20000) {
    for (int32_t b = 0; b < B; ++b) build(b);
  } else {
    std::vector<std::thread> pool;
    for (int32_t w = 0; w < workers; ++w)
      pool.emplace_back([&, w] {
        for (int32_t b = w; b < B; b += workers) build(b);
      });
    for (auto& th : pool) th.join();
  }
  for (int32_t b = 0; b < B; ++b)
    if (!errors[b].empty()) return errors[b];
  return std::string();
}

// ---------------------------------------------------------------- inputs
struct Batch {
  int32_t B = 0;
  std::vector<int32_t> lengths;
  std::vector<uint8_t> skip;
  std::vector<PrunedArcOut> arcs;      // kToken form
  std::vector<PrunedStateOut> states;  // tok set
  std::vector<PrunedArcOut> arcs_tr;   // kTimeRank form (src/dst = ranks), no same-time arcs
};

struct Shape {
  int32_t B = 4, max_len = 12;
  int32_t max_tokens = 40;   // tokens per (row, time)
  double keep = 0.3;         // fraction of tokens kept
  int32_t arcs_per_state = 3;
  double same_time = 0.1;    // share of same-time arcs (kToken only)
  double p_skip = 0.1, p_empty = 0.1, p_zero = 0.1, p_no_final = 0.3;
  int32_t num_graph_arcs = 1000;
};

static Batch MakeBatch(std::mt19937_64& rng, const Shape& sh) {
  Batch bt;
  bt.B = sh.B;
  std::uniform_real_distribution<double> u01(0, 1);
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  bt.lengths.resize(sh.B);
  bt.skip.resize(sh.B);
  for (int32_t b = 0; b < sh.B; ++b) {
    bt.lengths[b] = u01(rng) < sh.p_zero ? 0 : static_cast<int32_t>(uni(1, sh.max_len));
    bt.skip[b] = u01(rng) < sh.p_skip;
  }
  int32_t Tmax = 0;
  for (int32_t b = 0; b < sh.B; ++b) Tmax = std::max(Tmax, bt.lengths[b] + 1);
  // tokens per (time, lane), laid out time-major as the pruning's tok_off
  std::vector<int32_t> count(static_cast<size_t>(Tmax + 1) * sh.B, 0);
  for (int32_t tau = 0; tau <= Tmax; ++tau)
    for (int32_t b = 0; b < sh.B; ++b)
      if (tau <= bt.lengths[b] + 1) count[static_cast<size_t>(tau) * sh.B + b] = tau == 0 ? 1 : static_cast<int32_t>(uni(1, sh.max_tokens));
  std::vector<int64_t> tok_off(count.size() + 1, 0);
  for (size_t i = 0; i < count.size(); ++i) tok_off[i + 1] = tok_off[i] + count[i];
  for (int32_t b = 0; b < sh.B; ++b) {
    const int32_t T = bt.lengths[b] + 1;
    const bool empty = u01(rng) < sh.p_empty;
    const bool no_final = u01(rng) < sh.p_no_final;
    // kept tokens per time: (position, rank); ranks a permutation of the time's positions
    std::vector<std::vector<std::pair<int32_t, int32_t>>> kept(T + 1);
    for (int32_t tau = 0; tau <= T && !empty; ++tau) {
      const int32_t m = count[static_cast<size_t>(tau) * sh.B + b];
      std::vector<int32_t> rank(m);
      for (int32_t i = 0; i < m; ++i) rank[i] = i;
      std::shuffle(rank.begin(), rank.end(), rng);
      for (int32_t i = 0; i < m; ++i) {
        const bool keep = tau == 0 || u01(rng) < sh.keep;
        if (tau == T && (no_final || !kept[tau].empty())) continue;  // at most one final token
        if (keep) kept[tau].push_back({i, rank[i]});
      }
      if (tau > 0 && tau < T && kept[tau].empty() && m > 0) kept[tau].push_back({0, rank[0]});
    }
    auto tok = [&](int32_t tau, int32_t pos) {
      return static_cast<int32_t>(tok_off[static_cast<size_t>(tau) * sh.B + b] + pos);
    };
    for (int32_t tau = 0; tau <= T; ++tau)
      for (auto [pos, r] : kept[tau])
        bt.states.push_back({b, tau, r, static_cast<int32_t>(uni(0, 1 << 22)), tok(tau, pos)});
    if (empty) continue;
    // arcs from each kept state of t < T to kept states of t + 1 (or t): distinct codes per source
    for (int32_t t = 0; t < T; ++t) {
      const auto& nxt = kept[t + 1];
      for (auto [pos, r] : kept[t]) {
        const int32_t k = static_cast<int32_t>(uni(0, sh.arcs_per_state));
        std::vector<int32_t> codes;
        while (static_cast<int32_t>(codes.size()) < k) {
          const int32_t c = static_cast<int32_t>(uni(0, sh.num_graph_arcs - 1));
          if (std::find(codes.begin(), codes.end(), c) == codes.end()) codes.push_back(c);
        }
        for (int32_t c : codes) {
          const bool same = !bt.skip[b] && u01(rng) < sh.same_time && kept[t].size() > 1;
          const auto& to = same ? kept[t] : nxt;
          if (to.empty()) continue;
          const auto [dpos, dr] = to[uni(0, to.size() - 1)];
          const bool redirect = t == T - 1 && !same && u01(rng) < 0.5;
          const int32_t code = redirect ? (c | kLatticeNumberRedirectBit) : c;
          const float ac = static_cast<float>(u01(rng) * -10), gr = static_cast<float>(u01(rng) * -5);
          // skipped rows' arcs never come back from the kernels (PrBucketKernel skips them)
          if (bt.skip[b]) continue;
          bt.arcs.push_back({b, t, tok(t, pos), tok(same ? t : t + 1, dpos), code, ac, gr, ac + gr});
          if (!same) bt.arcs_tr.push_back({b, t, r, dr, code, ac, gr, ac + gr});
        }
      }
    }
  }
  // an atomic cursor's order: lanes and times mixed
  std::shuffle(bt.states.begin(), bt.states.end(), rng);
  std::shuffle(bt.arcs.begin(), bt.arcs.end(), rng);
  std::shuffle(bt.arcs_tr.begin(), bt.arcs_tr.end(), rng);
  return bt;
}

static int32_t TimeOf(const PrunedArcOut& x) { return x.t; }
static int32_t TimeOf(const PrunedStateOut& x) { return x.tau; }

static bool SameRows(const std::vector<PrunedRow>& x, const std::vector<PrunedRow>& y) {
  if (x.size() != y.size()) return false;
  for (size_t b = 0; b < x.size(); ++b) {
    const PrunedRow &p = x[b], &q = y[b];
    if (p.num_states != q.num_states || p.num_arcs != q.num_arcs || p.states != q.states || p.arcs != q.arcs ||
        p.scores.size() != q.scores.size() ||
        (!p.scores.empty() && std::memcmp(p.scores.data(), q.scores.data(), 4 * p.scores.size()) != 0))
      return false;
  }
  return true;
}

static void Compare(const Batch& bt, PrunedEndpoints mode, const std::vector<PrunedArcOut>& arcs,
                    const std::vector<PrunedStateOut>& states, int32_t threads, LatticeNumberScratch* z,
                    std::vector<PrunedRow>* rows, const char* what) {
  std::vector<PrunedRow> ref;
  const std::string e0 = Reference(arcs.data(), arcs.size(), states.data(), states.size(), bt.B, bt.lengths.data(),
                                   bt.skip.data(), mode, threads, &ref);
  const std::string e1 = NumberPrunedRows(arcs.data(), arcs.size(), states.data(), states.size(), bt.B,
                                          bt.lengths.data(), bt.skip.data(), mode, threads, z, rows);
  if (e0 != e1) {
    std::printf("FAIL %s: errors differ: '%s' vs '%s'\n", what, e0.c_str(), e1.c_str());
    ++failures;
    return;
  }
  if (e0.empty() && !SameRows(ref, *rows)) {
    std::printf("FAIL %s: rows differ\n", what);
    ++failures;
  }
}

int main(int argc, char** argv) {
  const bool bench = argc > 1 && std::strcmp(argv[1], "--bench") == 0;
  std::mt19937_64 rng(12345);
  LatticeNumberScratch z;  // reused across every call: stale capacity must not leak into results
  std::vector<PrunedRow> rows;
  int64_t compared = 0, errors_seen = 0;
  for (int it = 0; it < 600; ++it) {
    Shape sh;
    sh.B = static_cast<int32_t>(std::uniform_int_distribution<int>(1, 9)(rng));
    sh.max_len = static_cast<int32_t>(std::uniform_int_distribution<int>(1, 30)(rng));
    sh.max_tokens = static_cast<int32_t>(std::uniform_int_distribution<int>(1, 60)(rng));
    sh.keep = std::uniform_real_distribution<double>(0.05, 0.9)(rng);
    sh.arcs_per_state = static_cast<int32_t>(std::uniform_int_distribution<int>(0, 6)(rng));
    sh.num_graph_arcs = it % 3 == 0 ? 8 : 100000;  // few codes: many arcs of one source share none
    const Batch bt = MakeBatch(rng, sh);
    const int32_t threads = 1 + it % 3;
    Compare(bt, PrunedEndpoints::kToken, bt.arcs, bt.states, threads, &z, &rows, "kToken");
    Compare(bt, PrunedEndpoints::kTimeRank, bt.arcs_tr, bt.states, threads, &z, &rows, "kTimeRank");
    compared += 2;
    // broken inputs: an arc into a pruned state; a state sharing another's time and rank
    if (!bt.arcs.empty()) {
      std::vector<PrunedArcOut> a = bt.arcs;
      a[it % a.size()].dst = -7;
      Compare(bt, PrunedEndpoints::kToken, a, bt.states, threads, &z, &rows, "kToken, pruned endpoint");
      ++errors_seen;
    }
    if (!bt.arcs_tr.empty()) {
      std::vector<PrunedArcOut> a = bt.arcs_tr;
      a[it % a.size()].src += 100000;
      Compare(bt, PrunedEndpoints::kTimeRank, a, bt.states, threads, &z, &rows, "kTimeRank, pruned endpoint");
      a = bt.arcs_tr;
      a[it % a.size()].dst = -1;  // IncEmitArcs: a destination not alive
      Compare(bt, PrunedEndpoints::kTimeRank, a, bt.states, threads, &z, &rows, "kTimeRank, dead destination");
      errors_seen += 2;
    }
    for (size_t i = 0; i + 1 < bt.states.size(); ++i)
      if (bt.states[i].lane == bt.states[i + 1].lane && !bt.skip[bt.states[i].lane]) {
        std::vector<PrunedStateOut> s = bt.states;
        s[i + 1].tau = s[i].tau;
        s[i + 1].rank = s[i].rank;
        Compare(bt, PrunedEndpoints::kTimeRank, bt.arcs_tr, s, threads, &z, &rows, "kTimeRank, shared rank");
        ++errors_seen;
        break;
      }
  }
  {  // no rows, no arcs, no states
    Batch bt;
    Compare(bt, PrunedEndpoints::kToken, bt.arcs, bt.states, 2, &z, &rows, "B = 0");
  }
  // threads that cannot be started (lattice_number_detail::spawn_limit): the workers that could
  // be started do the work, with the same rows and errors (before, a failed start left the
  // started threads joinable and the process terminated)
  int64_t limited = 0;
  for (int it = 0; it < 60; ++it) {
    Shape sh;
    sh.B = static_cast<int32_t>(std::uniform_int_distribution<int>(2, 9)(rng));
    sh.max_len = static_cast<int32_t>(std::uniform_int_distribution<int>(1, 30)(rng));
    sh.max_tokens = static_cast<int32_t>(std::uniform_int_distribution<int>(1, 60)(rng));
    sh.keep = std::uniform_real_distribution<double>(0.05, 0.9)(rng);
    sh.arcs_per_state = static_cast<int32_t>(std::uniform_int_distribution<int>(0, 6)(rng));
    const Batch bt = MakeBatch(rng, sh);
    const int32_t threads = 2 + it % 7;
    lattice_number_detail::spawn_limit = it % threads;  // 0 .. threads - 1 started
    Compare(bt, PrunedEndpoints::kToken, bt.arcs, bt.states, threads, &z, &rows, "kToken, threads refused");
    Compare(bt, PrunedEndpoints::kTimeRank, bt.arcs_tr, bt.states, threads, &z, &rows, "kTimeRank, threads refused");
    if (!bt.arcs.empty()) {
      std::vector<PrunedArcOut> a = bt.arcs;
      a[it % a.size()].dst = -7;
      Compare(bt, PrunedEndpoints::kToken, a, bt.states, threads, &z, &rows, "kToken, pruned endpoint, threads refused");
    }
    lattice_number_detail::spawn_limit = -1;
    limited += 2;
  }
  std::printf("compared %lld batches with thread starts refused\n", static_cast<long long>(limited));
  std::printf("compared %lld batches (+%lld broken ones)\n", static_cast<long long>(compared),
              static_cast<long long>(errors_seen));

  // ---- timing: a batch shaped like the H200's (32 rows, T ~227, ~122 kept arcs per frame)
  {
    Shape sh;
    sh.B = 32;
    sh.max_len = 2 * 227 - 1;  // mean T 227
    sh.max_tokens = 3000;
    sh.keep = 60.0 / 1500;  // ~60 kept states per frame
    sh.arcs_per_state = 4;  // ~2 arcs a state: ~120 kept arcs per frame
    sh.same_time = 0;
    sh.p_skip = sh.p_empty = sh.p_zero = 0;
    std::mt19937_64 r2(7);
    Batch bt = MakeBatch(r2, sh);
    // the output kernels' order: an atomic cursor over records bucketed (time, lane), so
    // roughly time-major, lanes interleaved; shuffled within runs of 4,096
    auto near_order = [&](auto& v) {
      std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) {
        const int32_t tx = TimeOf(x), ty = TimeOf(y);
        return tx != ty ? tx < ty : x.lane < y.lane;
      });
      for (size_t i = 0; i < v.size(); i += 4096) std::shuffle(v.begin() + i, v.begin() + std::min(v.size(), i + 4096), r2);
    };
    near_order(bt.arcs);
    near_order(bt.arcs_tr);
    near_order(bt.states);
    int64_t frames = 0;
    for (int32_t b = 0; b < bt.B; ++b) frames += bt.lengths[b];
    std::printf("timing batch: %d rows, %lld frames, %zu kept arcs (%.1f a frame), %zu kept states\n", bt.B,
                static_cast<long long>(frames), bt.arcs.size(), double(bt.arcs.size()) / frames, bt.states.size());
    const int reps = bench ? 20 : 3;
    const int32_t hw = std::max<int32_t>(1, static_cast<int32_t>(std::thread::hardware_concurrency()));
    for (PrunedEndpoints mode : {PrunedEndpoints::kToken, PrunedEndpoints::kTimeRank}) {
      const auto& arcs = mode == PrunedEndpoints::kToken ? bt.arcs : bt.arcs_tr;
      for (int32_t threads : {1, hw}) {
        double best_old = 1e30, best_new = 1e30;
        std::vector<PrunedRow> ref;
        for (int r = 0; r < reps; ++r) {
          auto t0 = std::chrono::steady_clock::now();
          Reference(arcs.data(), arcs.size(), bt.states.data(), bt.states.size(), bt.B, bt.lengths.data(),
                    bt.skip.data(), mode, threads, &ref);
          auto t1 = std::chrono::steady_clock::now();
          NumberPrunedRows(arcs.data(), arcs.size(), bt.states.data(), bt.states.size(), bt.B, bt.lengths.data(),
                           bt.skip.data(), mode, threads, &z, &rows);
          auto t2 = std::chrono::steady_clock::now();
          best_old = std::min(best_old, std::chrono::duration<double, std::milli>(t1 - t0).count());
          best_new = std::min(best_new, std::chrono::duration<double, std::milli>(t2 - t1).count());
        }
        CHECK(SameRows(ref, rows));
        std::printf("%s, %d thread(s): old %.2f ms, new %.2f ms (best of %d): %.2fx\n",
                    mode == PrunedEndpoints::kToken ? "kToken   " : "kTimeRank", threads, best_old, best_new, reps,
                    best_old / best_new);
      }
    }
  }
  if (failures == 0) std::printf("ALL OK\n");
  return failures == 0 ? 0 : 1;
}
