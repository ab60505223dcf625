// The host half of the GPU output-beam pruning (gpu_lattice_prune.cu): each row's kept states,
// numbered by (time, rank), and its kept arcs, sorted by (source, arc id) -- the CPU
// reference's RowLattice arrays. Pure C++ (no CUDA), so the native test
// (tests/native/lattice_number_test.cc) runs it against the first implementation (kept there as
// the reference) on the CPU.
//
// Input: what the pruning's output kernels wrote, in any order (an atomic cursor's), lanes
// mixed: PrunedArcOut and PrunedStateOut records. An arc names its endpoints one of two ways:
//  * PrunedEndpoints::kToken (PruneLattice): src and dst are global token indices, matched
//    against the states' `tok`;
//  * PrunedEndpoints::kTimeRank (the bounded path, IncFinish): src is the rank of a state of
//    time t, dst the rank of a state of time t + 1 (-1: none), matched against (tau, rank).
// Output, per row b that is not skipped (T = lengths[b] + 1):
//  * states sorted by (tau, rank), numbered 0 .. n - 1 in that order; states [3, S] =
//    {tau, graph state, level = tau}; when no kept state has tau == T a final state
//    {T, -1, T + 1} is appended (S = n + 1);
//  * arcs sorted by (source number, code without the redirect bit), ties (never in a valid
//    lattice: a source token records each arc once) in input order; arcs [4, A] = {src, dst, t,
//    code}, scores [3, A] = {acoustic, graph, score}.
// Errors (decoder bugs): a kept arc whose endpoint is not a kept state of its row, two kept
// states of a row with one (tau, rank) or, under kToken, one token, an arc or state whose lane
// is not a row. The first implementation found endpoints by binary search over a sorted
// (token, id) table and used std::sort for states and arcs, allocating per row; this one sorts
// states by a counting sort on tau and small sorts on rank, finds endpoints in a hash table,
// sorts arcs by a counting sort on the source and small sorts on the code, and keeps its
// scratch and the rows' arrays from call to call (same arrays, bit for bit: the test).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace cuwfst {

// A kept arc and a kept state as gpu_lattice_prune.cu's output kernels write them.
struct PrunedArcOut {
  int32_t lane, t, src, dst, code;
  float acoustic, graph, score;
};
struct PrunedStateOut {
  int32_t lane, tau, rank, state, tok;
};

// One row's lattice in the CPU reference's RowLattice arrays: states [3, S] = {time, graph
// state, level}, arcs [4, A] = {src, dst, frame, image arc | redirect bit}, scores [3, A] =
// {acoustic, graph, score}. `recorded` is the caller's (not set here).
struct PrunedRow {
  int32_t num_states = 0, num_arcs = 0;
  int64_t recorded = 0;
  std::vector<int32_t> states, arcs;
  std::vector<float> scores;
};

enum class PrunedEndpoints : int32_t { kToken = 0, kTimeRank = 1 };

// types.cuh kRedirectArcBit (gpu_lattice_prune.cu checks they agree).
constexpr int32_t kLatticeNumberRedirectBit = 1 << 30;

// One worker's scratch, reused from row to row and call to call.
class LatticeNumberer {
 public:
  // A row's arrays from its `na` arcs ar[0 .. na) and `ns` states st[0 .. ns), each in the
  // order they came. False (and *error) on a decoder bug.
  // src_place: each image arc's place in its state's source order (DeviceGraph::arc_src_place's host
  // copy), by which a state's arcs are sorted (k2's order); nullptr: by the image arc id.
  bool Row(const PrunedArcOut* ar, int64_t na, const PrunedStateOut* st, int64_t ns, int32_t T, PrunedEndpoints mode,
           PrunedRow* row, std::string* error, const uint16_t* src_place = nullptr) {
    const int32_t n = static_cast<int32_t>(ns);
    // ---- states by (tau, rank): a stable counting sort on tau, then each time's states by rank
    st_tau_.resize(n);
    st_key_.resize(n);
    order_.resize(n);
    int32_t tmin = 0, tmax = -1;
    for (int32_t k = 0; k < n; ++k) {
      const PrunedStateOut& x = st[k];
      st_tau_[k] = x.tau;
      // (rank, k): rank's sign bit flipped so that unsigned order is signed order
      st_key_[k] = (static_cast<uint64_t>(static_cast<uint32_t>(x.rank) ^ 0x80000000u) << 32) |
                   static_cast<uint32_t>(k);
      if (k == 0 || x.tau < tmin) tmin = x.tau;
      if (k == 0 || x.tau > tmax) tmax = x.tau;
    }
    const int64_t span = n > 0 ? static_cast<int64_t>(tmax) - tmin + 1 : 0;
    if (n > 0 && span <= 4 * static_cast<int64_t>(n) + 1024) {
      cnt_.assign(span + 1, 0);
      for (int32_t k = 0; k < n; ++k) ++cnt_[st_tau_[k] - tmin + 1];
      for (int64_t i = 0; i < span; ++i) cnt_[i + 1] += cnt_[i];
      // cnt_[i] = first slot of time tmin + i; scatter, then sort each time's slots by rank
      sorted_.resize(n);
      cur_.assign(cnt_.begin(), cnt_.end() - 1);
      for (int32_t k = 0; k < n; ++k) sorted_[cur_[st_tau_[k] - tmin]++] = st_key_[k];
      for (int64_t i = 0; i < span; ++i) SmallSort(sorted_.data() + cnt_[i], sorted_.data() + cnt_[i + 1]);
      for (int32_t j = 0; j < n; ++j) order_[j] = static_cast<int32_t>(sorted_[j] & 0xffffffffu);
    } else if (n > 0) {  // times too spread for a count (never from the kernels): a comparison sort
      for (int32_t k = 0; k < n; ++k) order_[k] = k;
      std::sort(order_.begin(), order_.end(), [&](int32_t x, int32_t y) {
        return st_tau_[x] != st_tau_[y] ? st_tau_[x] < st_tau_[y] : st_key_[x] < st_key_[y];
      });
    }
    for (int32_t j = 1; j < n; ++j)
      if (st_tau_[order_[j]] == st_tau_[order_[j - 1]] && (st_key_[order_[j]] >> 32) == (st_key_[order_[j - 1]] >> 32)) {
        *error = "GPU lattice pruning: two kept states share a time and rank (a decoder bug)";
        return false;
      }
    const bool has_final = n > 0 && st_tau_[order_[n - 1]] == T;
    const int32_t S = n + (has_final ? 0 : 1);
    row->num_states = S;
    row->states.resize(3 * static_cast<size_t>(S));
    int32_t* rs = row->states.data();
    // ---- the endpoint table: key -> number (open addressing, linear probing)
    int32_t bits = 4;
    while ((int64_t{1} << bits) < 2 * static_cast<int64_t>(n)) ++bits;
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    const int shift = 64 - bits;
    h_key_.resize(mask + 1);
    h_val_.assign(mask + 1, -1);
    for (int32_t j = 0; j < n; ++j) {
      const PrunedStateOut& x = st[order_[j]];
      rs[j] = x.tau;
      rs[S + j] = x.state;
      rs[2 * S + j] = x.tau;  // epsilon-free: level = time
      const uint64_t key = mode == PrunedEndpoints::kToken ? TokKey(x.tok) : TimeRankKey(x.tau, x.rank);
      uint64_t h = Hash(key, shift);
      while (h_val_[h] >= 0) {
        if (h_key_[h] == key) {  // under kTimeRank the (tau, rank) check above has caught it
          *error = "GPU lattice pruning: two kept states share a token (a decoder bug)";
          return false;
        }
        h = (h + 1) & mask;
      }
      h_key_[h] = key;
      h_val_[h] = j;
    }
    if (!has_final) {
      rs[S - 1] = T;
      rs[2 * S - 1] = -1;
      rs[3 * S - 1] = T + 1;
    }
    auto lookup = [&](uint64_t key) -> int32_t {
      for (uint64_t h = Hash(key, shift);; h = (h + 1) & mask) {
        const int32_t v = h_val_[h];
        if (v < 0 || h_key_[h] == key) return v;
      }
    };
    // ---- arcs: endpoints, then a stable counting sort on the source, each source's arcs by code
    const int32_t m = static_cast<int32_t>(na);
    a_dst_.resize(m);
    a_src_.resize(m);
    cnt_.assign(static_cast<size_t>(n) + 1, 0);
    for (int32_t k = 0; k < m; ++k) {
      const PrunedArcOut& x = ar[k];
      int32_t s_id, d_id;
      if (mode == PrunedEndpoints::kToken) {
        s_id = lookup(TokKey(x.src));
        d_id = lookup(TokKey(x.dst));
      } else {
        s_id = x.src < 0 ? -1 : lookup(TimeRankKey(x.t, x.src));
        d_id = x.dst < 0 ? -1 : lookup(TimeRankKey(x.t + 1, x.dst));
      }
      if (s_id < 0 || d_id < 0) {
        *error = "GPU lattice pruning: a kept arc leaves or enters a pruned state (a decoder bug)";
        return false;
      }
      a_src_[k] = s_id;
      a_dst_[k] = d_id;
      ++cnt_[s_id + 1];
    }
    for (int32_t i = 0; i < n; ++i) cnt_[i + 1] += cnt_[i];
    sorted_.resize(m);
    cur_.assign(cnt_.begin(), cnt_.end() - 1);
    for (int32_t k = 0; k < m; ++k) {
      const int32_t arc = ar[k].code & ~kLatticeNumberRedirectBit;
      const int32_t key = src_place != nullptr ? src_place[arc] : arc;  // (a kept state's arcs leave one graph state)
      sorted_[cur_[a_src_[k]]++] =
          (static_cast<uint64_t>(static_cast<uint32_t>(key) ^ 0x80000000u) << 32) | static_cast<uint32_t>(k);
    }
    row->num_arcs = m;
    row->arcs.resize(4 * static_cast<size_t>(m));
    row->scores.resize(3 * static_cast<size_t>(m));
    int32_t* ra = row->arcs.data();
    float* sc = row->scores.data();
    for (int32_t s = 0; s < n; ++s) {
      const int64_t j0 = cnt_[s], j1 = cnt_[s + 1];
      SmallSort(sorted_.data() + j0, sorted_.data() + j1);
      for (int64_t j = j0; j < j1; ++j) {
        const int32_t k = static_cast<int32_t>(sorted_[j] & 0xffffffffu);
        const PrunedArcOut& x = ar[k];
        ra[j] = s;
        ra[m + j] = a_dst_[k];
        ra[2 * m + j] = x.t;
        ra[3 * m + j] = x.code;
        sc[j] = x.acoustic;
        sc[m + j] = x.graph;
        sc[2 * m + j] = x.score;
      }
    }
    return true;
  }

 private:
  static uint64_t TokKey(int32_t tok) { return static_cast<uint32_t>(tok); }
  static uint64_t TimeRankKey(int32_t tau, int32_t rank) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(tau)) << 32) | static_cast<uint32_t>(rank);
  }
  static uint64_t Hash(uint64_t key, int shift) { return (key * 0x9E3779B97F4A7C15ull) >> shift; }
  // Ascending; the keys are distinct (their low half is an index), so any sort is this one.
  static void SmallSort(uint64_t* b, uint64_t* e) {
    if (e - b <= 24) {
      for (uint64_t* i = b + 1; i < e; ++i) {
        const uint64_t v = *i;
        uint64_t* j = i;
        for (; j > b && *(j - 1) > v; --j) *j = *(j - 1);
        *j = v;
      }
    } else {
      std::sort(b, e);
    }
  }
  std::vector<int32_t> st_tau_, order_, a_src_, a_dst_, h_val_;
  std::vector<int64_t> cnt_, cur_;
  std::vector<uint64_t> st_key_, sorted_, h_key_;
};

// Scratch of NumberPrunedRows, kept by the caller from call to call.
struct LatticeNumberScratch {
  std::vector<LatticeNumberer> workers;
  std::vector<int64_t> a_at, s_at, part;  // part: [workers][2][B] counts, then cursors
  std::vector<PrunedArcOut> arcs;         // the arcs by row, each row's in the order they came
  std::vector<PrunedStateOut> states;     // the states likewise
  std::vector<int32_t> row_order;
  std::vector<std::string> errors;
  const uint16_t* src_place = nullptr;  // the arcs' source-order places (LatticeNumberer::Row), set by the caller
};

namespace lattice_number_detail {

// A reusable barrier for the few phases of NumberPrunedRows.
class Barrier {
 public:
  explicit Barrier(int32_t n) : n_(n) {}
  void Reset(int32_t n) { n_ = n; }  // (only while no thread waits)
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int32_t n_, arrived_ = 0;
  int64_t gen_ = 0;
};

// Tests only (tests/native/lattice_number_test.cc): how many threads a call may start before
// the next start fails as std::thread's constructor does when the system has none to give
// (std::system_error); -1: no limit.
inline std::atomic<int32_t> spawn_limit{-1};

}  // namespace lattice_number_detail

// Every row's arrays into (*rows)[0 .. B) (resized to B; a row's arrays keep their capacity
// from call to call). Rows with skip[b] get no states and no arcs. `workers` threads (1: this
// one; where a thread cannot be started, the ones that could do the work). Returns "" or the
// error of the first row (by index) that has one.
inline std::string NumberPrunedRows(const PrunedArcOut* ha, int64_t A, const PrunedStateOut* hs, int64_t S,
                                    int32_t B, const int32_t* lengths, const uint8_t* skip, PrunedEndpoints mode,
                                    int32_t workers, LatticeNumberScratch* scratch, std::vector<PrunedRow>* rows) {
  LatticeNumberScratch& Z = *scratch;
  // W: the workers planned; it becomes the workers started before any of them reads it
  int32_t W = std::max<int32_t>(1, std::min<int32_t>(workers, std::max<int32_t>(B, 1)));
  if (static_cast<int32_t>(Z.workers.size()) < W) Z.workers.resize(W);
  rows->resize(B);
  Z.a_at.assign(B + 1, 0);
  Z.s_at.assign(B + 1, 0);
  Z.arcs.resize(A);
  Z.states.resize(S);
  Z.part.assign(static_cast<size_t>(W) * 2 * B, 0);
  Z.errors.assign(B, std::string());
  std::atomic<int32_t> next_row{0};
  std::atomic<bool> bad_lane{false};
  lattice_number_detail::Barrier barrier(W);
  auto work = [&](int32_t w) {
    // 1. each worker counts the lanes of its slice of the arcs and of the states
    const int64_t a0 = A * w / W, a1 = A * (w + 1) / W, s0 = S * w / W, s1 = S * (w + 1) / W;
    int64_t* ca = Z.part.data() + static_cast<size_t>(w) * 2 * B;
    int64_t* cs = ca + B;
    bool bad = false;
    for (int64_t i = a0; i < a1; ++i) {
      const int32_t l = ha[i].lane;
      if (l < 0 || l >= B) bad = true; else ++ca[l];
    }
    for (int64_t i = s0; i < s1; ++i) {
      const int32_t l = hs[i].lane;
      if (l < 0 || l >= B) bad = true; else ++cs[l];
    }
    if (bad) bad_lane = true;
    barrier.Wait();
    // 2. worker 0: the rows' offsets, each worker's cursor per lane (slices in order: the
    // serial scatter's order), the rows by decreasing size
    if (w == 0 && !bad_lane) {
      for (int32_t b = 0; b < B; ++b) {
        int64_t at = 0, st = 0;
        for (int32_t v = 0; v < W; ++v) {
          int64_t* pa = Z.part.data() + static_cast<size_t>(v) * 2 * B;
          const int64_t x = pa[b], y = pa[B + b];
          pa[b] = at;
          pa[B + b] = st;
          at += x;
          st += y;
        }
        Z.a_at[b + 1] = Z.a_at[b] + at;
        Z.s_at[b + 1] = Z.s_at[b] + st;
      }
      for (int32_t v = 0; v < W; ++v) {
        int64_t* pa = Z.part.data() + static_cast<size_t>(v) * 2 * B;
        for (int32_t b = 0; b < B; ++b) {
          pa[b] += Z.a_at[b];
          pa[B + b] += Z.s_at[b];
        }
      }
      Z.row_order.resize(B);
      for (int32_t b = 0; b < B; ++b) Z.row_order[b] = b;
      std::stable_sort(Z.row_order.begin(), Z.row_order.end(), [&](int32_t x, int32_t y) {
        return Z.a_at[x + 1] - Z.a_at[x] > Z.a_at[y + 1] - Z.a_at[y];
      });
    }
    barrier.Wait();
    if (bad_lane) return;
    // 3. copy the slices into the rows (reads in order, one write stream per row)
    for (int64_t i = a0; i < a1; ++i) Z.arcs[ca[ha[i].lane]++] = ha[i];
    for (int64_t i = s0; i < s1; ++i) Z.states[cs[hs[i].lane]++] = hs[i];
    barrier.Wait();
    // 4. rows, largest first, to whichever worker is free
    LatticeNumberer& N = Z.workers[w];
    for (int32_t r; (r = next_row.fetch_add(1)) < B;) {
      const int32_t b = Z.row_order[r];
      PrunedRow& row = (*rows)[b];
      row.num_states = row.num_arcs = 0;
      if (skip[b]) {
        row.states.clear();
        row.arcs.clear();
        row.scores.clear();
        continue;
      }
      N.Row(Z.arcs.data() + Z.a_at[b], Z.a_at[b + 1] - Z.a_at[b], Z.states.data() + Z.s_at[b],
            Z.s_at[b + 1] - Z.s_at[b], lengths[b] + 1, mode, &row, &Z.errors[b], Z.src_place);
    }
  };
  if (W == 1) {
    work(0);
  } else {
    // The threads wait at a gate until every start has been tried: where one cannot be started
    // (std::system_error), W and the barrier become the workers that were, and these run the
    // slices of W; no thread is left joinable, so a failed start never terminates the process.
    std::atomic<bool> open{false};
    std::vector<std::thread> pool;
    pool.reserve(W - 1);
    for (int32_t w = 1; w < W; ++w) {
      try {
        const int32_t limit = lattice_number_detail::spawn_limit.load();
        if (limit >= 0 && w > limit)
          throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
        pool.emplace_back([&, w] {
          while (!open.load(std::memory_order_acquire)) std::this_thread::yield();
          work(w);
        });
      } catch (const std::system_error&) {
        break;
      }
    }
    W = 1 + static_cast<int32_t>(pool.size());
    barrier.Reset(W);
    open.store(true, std::memory_order_release);
    work(0);
    for (auto& th : pool) th.join();
  }
  // the copies by row are kept for the next call up to 64 MiB (a batch's, ~2 M arcs); a long
  // bounded decode's (hundreds of MiB) go back now
  if (Z.arcs.capacity() * sizeof(PrunedArcOut) + Z.states.capacity() * sizeof(PrunedStateOut) > (size_t{64} << 20)) {
    std::vector<PrunedArcOut>().swap(Z.arcs);
    std::vector<PrunedStateOut>().swap(Z.states);
  }
  if (bad_lane) return "GPU lattice pruning: a kept arc or state of no row (a decoder bug)";
  for (int32_t b = 0; b < B; ++b)
    if (!Z.errors[b].empty()) return Z.errors[b];
  return std::string();
}

}  // namespace cuwfst
