// Host-logic test of GpuDecoder (cuwfst/csrc/gpu_decoder.cu) with no GPU: the decoder is
// compiled into this file and linked against the stub CUDA runtime of cuda_stub_runtime.cc,
// whose "device" memory is host memory and whose kernels do nothing except BacktrackKernel,
// simulated to write each lane's path and an arena-overflow bit when the batch needs more
// winners entries than ws.arena_cap (`g_need`), and to flag any buffer it touches that is
// freed or smaller than the workspace claims. Checks: a constructor that fails at any
// acquisition frees everything; a decode whose growth fails at any acquisition keeps the
// decoder's buffers, frees the half-made ones and decodes correctly next time; only B rows
// of the longest path are copied back; the CUDA-graph cache is an LRU with plain launches
// past graph_max_steps; profiling events fail cleanly; a sticky fault names the decode's
// shape and the decoder refuses later calls. Lattice decodes (gpu_lattice.cu): their buffers
// are allocated by the first lattice decode, never by 1-best decodes (either layout); the records
// come back row by row in step order whatever their interleaving, the records grow and the
// batch runs again, every acquisition of a lattice decode fails cleanly, and the lattice
// stage is off again for the next 1-best decode. closure = lists falls back to scan above
// kEpsListMaxLanes lanes, and a lattice decode under lists doubles only tok_begin of the slot
// space. Continuous batching a segment at a time (gpu_lanes.cu: ManyBegin, ManyLaunch,
// ManyWait, ManyAbort; the simulated BacktrackKernel ends every row in the segment that
// starts it): every row reported by exactly one wait with its own result, every acquisition
// of a run failing cleanly, a run abandoned with a segment in flight or begun again, the
// calls out of order refused. Stream opens on an epsilon graph reserve one stream's worst case
// at a time (groups), and a failed open frees its lanes. Built and run by tests/test_cuda_resources.py.
#include "gpu_decoder.cu"
#include "gpu_lattice.cu"
// (gpu_lanes.cu, continuous batching and streams, is its own translation unit of the test's
// build, as of the module's: tests/test_cuda_resources.py)

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_stub.h"

using namespace cuwfst;

// The bounded lattice path's pruning (gpu_lattice_prune.cu: cub sorts and its kernels) is
// not part of this host test, which runs gpu_decoder.cu against a stub runtime; the
// RunBoundedLattice calls into it are only linked here, never reached (no mode-2 decode).
void GpuDecoder::IncReset(int32_t, const int32_t*, float) {
  std::fprintf(stderr, "IncReset is not part of the host test\n");
  std::abort();
}
void GpuDecoder::IncPass(int32_t, unsigned long long) {
  std::fprintf(stderr, "IncPass is not part of the host test\n");
  std::abort();
}

extern "C" const void* cuwfst_test_backtrack_kernel() { return reinterpret_cast<const void*>(&BacktrackKernel); }


// ---------------------------------------------------------------- checks
#include "check.h"

static bool Nothing() {
  return live::device_bytes.load() == 0 && live::pinned_bytes.load() == 0 && live::handles.load() == 0 &&
         stub::device_mem.empty() && stub::pinned_mem.empty() && stub::vmm_reserved.empty() && stub::vmm_pieces == 0;
}

static std::shared_ptr<GpuGraph> Graph() {
  auto g = std::make_shared<GpuGraph>();
  g->view.num_states = 5;
  g->view.vocab_size = 10;
  return g;
}

static bool g_lazy = true;  // the mode Config() asks for

static DecoderConfig Config() {
  DecoderConfig c;
  c.lazy = g_lazy;
  c.max_lanes = 4;
  c.max_frames = 16;
  c.main_q = 64;
  c.claims_cap = 128;
  c.hash_cap = 256;
  c.arena_cap = 64;
  c.arena_max = 1 << 16;
  return c;
}

struct Out {
  std::vector<int32_t> arcs, len, meta;
  std::vector<int64_t> stats;
  std::vector<float> score;
  int64_t cap;
  explicit Out(int B, int64_t cap) : arcs(B * cap), len(B), meta(B * 4), stats(B * 2), score(B), cap(cap) {}
  DecodeOutputs view() { return {arcs.data(), cap, len.data(), score.data(), meta.data(), stats.data()}; }
};

// Decodes `lens` (T = the longest) and checks the simulated result row by row.
static bool DecodeOk(GpuDecoder& d, std::vector<int32_t> lens) {
  int32_t T = 0;
  for (int32_t l : lens) T = std::max(T, l);
  Out o(static_cast<int>(lens.size()), T + 2);
  const int32_t steps = stub::steps_per_run;  // a batch runs every step in one run
  stub::steps_per_run = 0;
  try {
    d.Decode(reinterpret_cast<const void*>(0x100), false, 0, 0, static_cast<int32_t>(lens.size()), T, 10,
             lens.data(), /*online=*/false, 0, o.view());
  } catch (...) {
    stub::steps_per_run = steps;
    throw;
  }
  stub::steps_per_run = steps;
  bool ok = true;
  for (size_t b = 0; b < lens.size(); ++b) {
    ok &= o.len[b] == lens[b] + 1 && o.meta[b * 4 + 2] == 0 && o.score[b] == -static_cast<float>(lens[b]);
    for (int32_t k = 0; k <= lens[b]; ++k) ok &= o.arcs[b * o.cap + k] == static_cast<int32_t>(1000 * b + k);
  }
  return ok;
}

// A lattice decode of `lens`: the 1-best as DecodeOk checks it, and the records, counts,
// cutoffs and sizes the simulated lattice stage wrote (cuda_stub_runtime.cc), row by row.
static bool LatticeDecodeOk(GpuDecoder& d, std::vector<int32_t> lens) {
  int32_t T = 0;
  for (int32_t l : lens) T = std::max(T, l);
  const int B = static_cast<int>(lens.size());
  Out o(B, T + 2);
  const int64_t S = T + 1;
  std::vector<int32_t> counts(B * S, -7), sizes(B * S, -7);
  std::vector<float> cutoffs(B * S, -7.f);
  int64_t total = -1;
  LatticeOutputs lat{S, counts.data(), cutoffs.data(), sizes.data(), &total};
  d.Decode(reinterpret_cast<const void*>(0x100), false, 0, 0, B, T, 10, lens.data(), false, 0, o.view(), &lat);
  bool ok = o.meta[2] == 0;
  int64_t want = 0;
  for (int b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t) {
      const bool in = t <= lens[b];
      const int32_t n = in ? static_cast<int32_t>((t + b) % 3 + stub::lat_extra) : 0;
      ok &= counts[b * S + t] == n && sizes[b * S + t] == (in ? n + 1 : 0);
      ok &= cutoffs[b * S + t] == (in ? static_cast<float>(t) - 0.5f : 0.f);
      want += n;
    }
  ok &= total == want;
  if (!ok) return false;
  std::vector<int32_t> rec(3 * total, -1);
  d.TakeLatticeRecords(rec.data(), total);
  int64_t i = 0;
  for (int b = 0; b < B; ++b)
    for (int32_t t = 0; t <= lens[b]; ++t)
      for (int32_t k = 0; k < (t + b) % 3 + stub::lat_extra; ++k, ++i) {
        float ac;
        std::memcpy(&ac, &rec[3 * i + 2], sizeof(ac));
        ok &= rec[3 * i] == t && rec[3 * i + 1] == 1000 * b + 10 * t + k && ac == static_cast<float>(k);
      }
  bool threw = false;
  try {
    d.TakeLatticeRecords(rec.data(), total + 1);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  return ok && threw && i == total;
}

static int64_t Stat(GpuDecoder& d, int i) {
  int64_t s[GpuDecoder::kMemStats];
  d.MemStats(s);
  return s[i];
}

// Construction and growth fault walks in one memory mode (lazy: the winners log is a VMM
// region of the stub driver; eager: a buffer replaced on growth).
static void Walks(bool lazy) {
  g_lazy = lazy;
  std::printf("walks, %s winners log\n", lazy ? "lazy" : "eager");
  {  // every constructor acquisition fails cleanly
    fault::Arm(1 << 30);
    {
      GpuDecoder d(Graph(), Config());
      CHECK(Stat(d, 12) == (lazy ? 1 : 0));  // the mode in effect
      CHECK(lazy ? Stat(d, 0) > Stat(d, 1) : Stat(d, 0) == Stat(d, 1));  // lazy: reserved past committed
    }
    const int64_t sites = fault::Arm(0);
    CHECK(sites >= 25 && Nothing());
    for (int64_t i = 1; i <= sites; ++i) {
      fault::Arm(i);
      bool oom = false;
      try {
        GpuDecoder d(Graph(), Config());
      } catch (const CudaOutOfMemory& e) {
        oom = std::strstr(e.what(), "cannot") != nullptr;
      }
      fault::Arm(0);
      CHECK(oom);
      CHECK(Nothing());
      CHECK(stub::pending == cudaSuccess);  // nothing left for the next check to trip on
    }
  }

  const std::vector<int32_t> lens = {60, 10, 0};
  {  // every growth acquisition fails cleanly, and the decoder works afterwards
    stub::g_need = 1000;
    int64_t sites = 0;
    {
      GpuDecoder d(Graph(), Config());
      const int64_t reserved0 = Stat(d, 10), committed0 = Stat(d, 9);
      fault::Arm(1 << 30);
      CHECK(DecodeOk(d, lens));
      sites = fault::Arm(0);
      // eager: captured before and after the log moved; lazy: the log grew in place, the
      // published limit let the same graph run again
      CHECK(Stat(d, 6) == (lazy ? 1 : 2));
      CHECK(Stat(d, 11) >= 1000 && Stat(d, 15) == 1);  // the capacity covers the need; one growth
      CHECK(Stat(d, 9) > committed0);
      if (lazy) CHECK(Stat(d, 10) == reserved0);  // the reservation never changes
    }
    // path (device, GC drain, pinned), instantiate, log growth, and (eager) instantiate again
    CHECK(sites == (lazy ? 5 : 6));
    int raised = 0;
    for (int64_t i = 1; i <= sites; ++i) {
      GpuDecoder d(Graph(), Config());
      const int64_t held0 = Stat(d, 1), pinned0 = Stat(d, 4);
      fault::Arm(i);
      bool threw = false, ok = false;
      try {
        ok = DecodeOk(d, lens);
      } catch (const CudaOutOfMemory& e) {
        threw = std::strstr(e.what(), "stays usable") != nullptr;
        ++raised;
      }
      fault::Arm(0);
      CHECK(threw || ok);
      CHECK(stub::pending == cudaSuccess);
      // nothing orphaned: the module holds exactly what the decoder says it holds
      CHECK(live::device_bytes.load() == Stat(d, 1) && live::pinned_bytes.load() == Stat(d, 4));
      if (i <= 3) CHECK(Stat(d, 1) == held0 && Stat(d, 4) == pinned0);  // a failed path growth keeps the old buffers
      CHECK(DecodeOk(d, lens));
      CHECK(!stub::bad_access);  // the next decode's kernels only touch live, large enough buffers
    }
    CHECK(raised == 4);  // the instantiations fall back to plain launches
    CHECK(Nothing());
  }
}

// A continuous-batching run over `lens` (more rows than lanes), segment by segment: each row
// is reported by exactly one ManyWait and written with the simulated result of the lane it
// ended in (path 1000 * lane + k, k = 0..length; score -length); `stop_after` > 0 abandons the
// run with ManyAbort after that many launches, a segment in flight. Exceptions propagate.
static bool ManyOk(GpuDecoder& d, const std::vector<int32_t>& lens, bool refill, int stop_after = 0,
                   bool arena_bit_ok = false) {
  int32_t T = 0;
  for (int32_t l : lens) T = std::max(T, l);
  const int N = static_cast<int>(lens.size());
  Out o(N, T + 2);
  std::vector<int32_t> rows(N, -1), seen(N, 0);
  d.ManyBegin(reinterpret_cast<const void*>(0x100), false, 0, 0, N, T, 10, lens.data(), false, 8, false, 0,
              o.view(), refill);
  int launches = 0;
  while (d.ManyLaunch()) {
    if (++launches == stop_after) {
      d.ManyAbort();
      return !d.ManyActive();
    }
    const int32_t n = d.ManyWait(rows.data());
    for (int32_t i = 0; i < n; ++i) ++seen[rows[i]];
  }
  bool ok = !d.ManyActive() && stop_after == 0;
  for (int b = 0; b < N; ++b) {
    const int32_t bits = o.meta[b * 4 + 2];  // (a segment past the log's capacity flags its rows for the rescue)
    ok &= bits == 0 || (arena_bit_ok && bits == kOverflowArena);
    ok &= seen[b] == 1 && o.len[b] == lens[b] + 1 && o.score[b] == -static_cast<float>(lens[b]);
    for (int32_t k = 0; k <= lens[b]; ++k) ok &= o.arcs[b * o.cap + k] % 1000 == k;
  }
  return ok;
}

// Every lane of the 4-lane decoder is free: streams can open on all of them.
static bool LanesFree(GpuDecoder& d) {
  try {
    const int32_t all[4] = {0, 1, 2, 3};
    d.StreamOpen(all, 4);
    d.StreamRelease(all, 4);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

// Stream opens on an epsilon graph (gpu_lanes.cu StreamOpen): an open cannot be re-run, so it
// reserves 1 + eps_iterations x main_q entries a stream before it launches, in groups of as many
// streams as the log holds at the time (at least one). The stub's kernels append nothing, so
// opening 4 streams grows the log to one stream's worst case (129 entries), not to four's (the
// open before 2026-12-03 reserved all at once). Every acquisition of an open failing cleanly
// leaves every lane free and the decoder usable. (Here every failure comes in the first group,
// before it marks its lanes: a later group's growth, whose failure StreamOpen's catch undoes by
// freeing the earlier groups' lanes, needs kernels that fill the log, which the stub's do not.)
static void StreamOpens(bool lazy) {
  g_lazy = lazy;
  std::printf("stream opens in groups, %s winners log\n", lazy ? "lazy" : "eager");
  DecoderConfig c = Config();
  c.eps_iterations = 2;
  const int64_t per = 1 + 2 * static_cast<int64_t>(c.main_q);  // 129 entries, past arena_cap (64)
  const int32_t all[4] = {0, 1, 2, 3};
  int64_t sites = 0;
  {
    GpuDecoder d(Graph(), c);
    fault::Arm(1 << 30);
    d.StreamOpen(all, 4);
    sites = fault::Arm(0);
    CHECK(Stat(d, 11) == per);  // the log's capacity: one stream's worst case
    CHECK(!LanesFree(d));       // all four open
    d.StreamRelease(all, 4);
    CHECK(LanesFree(d));
  }
  CHECK(sites >= 1);
  for (int64_t i = 1; i <= sites; ++i) {
    GpuDecoder d(Graph(), c);
    fault::Arm(i);
    bool threw = false;
    try {
      d.StreamOpen(all, 4);
    } catch (const CudaOutOfMemory&) {
      threw = true;
    }
    fault::Arm(0);
    CHECK(stub::pending == cudaSuccess);
    if (!threw) d.StreamRelease(all, 4);
    CHECK(LanesFree(d));  // a failed open freed every lane it marked
    CHECK(DecodeOk(d, {5, 3}));
    CHECK(!stub::bad_access);
  }
  CHECK(Nothing());
}

static void ManyRuns(bool refill) {
  std::printf("continuous batching, %s refill\n", refill ? "device" : "host");
  g_lazy = true;
  stub::g_need = 10;
  stub::steps_per_run = 8;  // ManyOk's segment: rows longer than 7 frames span segments
  // 11 rows through 4 lanes; the longest (40) passes max_frames (16): the path buffers grow
  const std::vector<int32_t> many = {5, 40, 0, 7, 12, 3, 9, 1, 30, 2, 6}, lens = {60, 10, 0};
  // every acquisition of a run fails cleanly: g_need 10 (the log holds every segment) and
  // 1,000 entries a segment (64 at first: the run grows the log between segments, GcMark and
  // the growth inside ManyLaunch)
  for (int64_t need : {int64_t{10}, int64_t{1000}}) {
    stub::g_need = need;
    const bool grows = need > Config().arena_cap;
    int64_t sites = 0;
    {
      GpuDecoder d(Graph(), Config());
      fault::Arm(1 << 30);
      CHECK(ManyOk(d, many, refill, 0, grows));
      sites = fault::Arm(0);
      CHECK(ManyOk(d, many, refill, 0, grows));  // and again on the same decoder
      CHECK(DecodeOk(d, lens) || grows);
      if (grows) CHECK(Stat(d, 15) >= 1);  // the log grew
    }
    CHECK(sites >= 3);
    int raised = 0;
    for (int64_t i = 1; i <= sites; ++i) {
      GpuDecoder d(Graph(), Config());
      fault::Arm(i);
      bool threw = false, ok = false;
      try {
        ok = ManyOk(d, many, refill, 0, grows);
      } catch (const CudaOutOfMemory&) {
        threw = true;
        ++raised;
      }
      fault::Arm(0);
      CHECK(threw || ok);
      CHECK(!d.ManyActive() && stub::pending == cudaSuccess);
      CHECK(live::device_bytes.load() == Stat(d, 1) && live::pinned_bytes.load() == Stat(d, 4));
      CHECK(LanesFree(d));  // the failed run released its lanes
      CHECK(ManyOk(d, many, refill, 0, grows));
      CHECK(!stub::bad_access);
    }
    std::printf("  g_need %lld: %lld acquisition sites, %d raised\n", static_cast<long long>(need),
                static_cast<long long>(sites), raised);
    CHECK(raised >= 1);
  }
  stub::g_need = 10;
  {
    GpuDecoder d(Graph(), Config());
    for (int stop : {1, 2}) {  // abandoned with a segment in flight: the lanes are free again
      CHECK(ManyOk(d, many, refill, stop));
      CHECK(LanesFree(d));
      CHECK(DecodeOk(d, lens));
      CHECK(ManyOk(d, many, refill));
    }
    int32_t T = 40;
    Out o(static_cast<int>(many.size()), T + 2);
    std::vector<int32_t> rows(many.size());
    bool threw = false;
    try {  // no run under way
      d.ManyWait(rows.data());
    } catch (const std::logic_error&) {
      threw = true;
    }
    CHECK(threw);
    d.ManyBegin(reinterpret_cast<const void*>(0x100), false, 0, 0, static_cast<int32_t>(many.size()), T, 10,
                many.data(), false, 8, false, 0, o.view(), refill);
    threw = false;
    try {  // a wait before its launch
      d.ManyWait(rows.data());
    } catch (const std::logic_error&) {
      threw = true;
    }
    CHECK(threw && d.ManyActive());
    CHECK(d.ManyLaunch());
    threw = false;
    try {  // a second launch before the wait
      d.ManyLaunch();
    } catch (const std::logic_error&) {
      threw = true;
    }
    CHECK(threw && d.ManyActive());
    CHECK(d.ManyWait(rows.data()) >= 0);
    CHECK(ManyOk(d, many, refill));  // a new run over the one left half-way
    d.ManyAbort();                   // (nothing under way: nothing to do)
    stub::steps_per_run = 0;
    CHECK(DecodeOk(d, lens));
  }
  stub::steps_per_run = 0;
  CHECK(Nothing());
}

// The pooled layout's sizing rules (types.cuh): a step's claims list holds every claim it
// can make (at most its slots, one on a final or redirect step, at most claims_cap), its
// table keeps them at most half full (a power of two of at least kPoolAlign slots, at most
// the static table), its next frontier holds every survivor (at most main_q) plus the
// sentinel, regions stay aligned.
static void PooledSizing() {
  Workspace ws{};
  ws.main_q = 1000;
  ws.claims_cap = 2000;
  ws.hash_cap = 4096;
  for (int32_t phase : {kPhaseReal, kPhaseFinal, kPhaseRedirect, kPhaseIdle}) {
    for (int32_t slots : {0, 1, 2, 31, 33, 999, 1000, 1001, 1999, 2000, 2001, 1 << 20}) {
      const int32_t b = PooledClaimsBound(ws, phase, slots);
      const int32_t h = PooledHashSize(ws, b);
      CHECK(b <= slots && b <= ws.claims_cap);
      CHECK(phase == kPhaseIdle || slots == 0 ? b == 0 : (phase == kPhaseReal ? b == std::min(slots, 2000) : b == 1));
      CHECK(b == 0 ? h == 0 : ((h & (h - 1)) == 0 && h >= kPoolAlign && (h >= 2 * b || h == ws.hash_cap)));
      CHECK(h <= ws.hash_cap);
      const int32_t t = PooledTokenRegion(ws, b);
      CHECK(t % kPoolAlign == 0 && t >= std::min(b, ws.main_q) + 1 && t <= ws.main_q + 1 + kPoolAlign);
      CHECK(PooledClaimsRegion(b) % 16 == 0 && PooledClaimsRegion(b) >= b && PooledClaimsRegion(b) < b + 16);
    }
  }
}

int main() {
  PooledSizing();
  Walks(true);
  Walks(false);
  ManyRuns(true);
  ManyRuns(false);
  StreamOpens(true);
  StreamOpens(false);
  {  // CUWFST_STREAM_PRIORITY: high makes the decoder's stream at the device's greatest priority
     // (the stub's -5), unset the default (0); a value it does not know is refused, nothing leaked
    g_lazy = true;
    setenv("CUWFST_STREAM_PRIORITY", "high", 1);
    {
      GpuDecoder d(Graph(), Config());
      CHECK(stub::last_stream_priority == -5);
      CHECK(DecodeOk(d, {20, 7, 0}));
    }
    setenv("CUWFST_STREAM_PRIORITY", "search", 1);  // (the search's stream; the pruning's is made later)
    {
      GpuDecoder d(Graph(), Config());
      CHECK(stub::last_stream_priority == -5);
    }
    setenv("CUWFST_STREAM_PRIORITY", "soon", 1);
    bool threw = false;
    try {
      GpuDecoder d(Graph(), Config());
    } catch (const std::invalid_argument& e) {
      threw = std::strstr(e.what(), "CUWFST_STREAM_PRIORITY") != nullptr;
    }
    CHECK(threw);
    unsetenv("CUWFST_STREAM_PRIORITY");
    {
      GpuDecoder d(Graph(), Config());
      CHECK(stub::last_stream_priority == 0);
    }
    CHECK(Nothing());
  }
  {  // auto keeps a small decoder's lanes static: pooling could only hold more
    g_lazy = true;
    GpuDecoder d(Graph(), Config());
    CHECK(Stat(d, 21) == 0);
  }
  {  // a driver without VMM: a lazy decoder takes the eager log, and works
    stub::vmm = false;
    g_lazy = true;
    {
      GpuDecoder d(Graph(), Config());
      CHECK(Stat(d, 12) == 0 && Stat(d, 13) == 0);
      stub::g_need = 1000;
      CHECK(DecodeOk(d, {60, 10, 0}));
      CHECK(Stat(d, 11) >= 1000);
    }
    stub::vmm = true;
    CHECK(Nothing());
  }
  {  // pooled lanes: a batch that outgrows the pools pauses, and resumes after they grow in
     // place (no re-capture of the batch's graph; the resume is a graph of its own); every
     // growth acquisition fails cleanly and the decoder stays usable
    g_lazy = true;
    stub::g_need = 10;
    const std::vector<int32_t> small = {12, 5, 0};  // no path growth (max_frames 16)
    const int64_t need[3] = {1000, 5000, 20000};
    int64_t sites = 0;
    auto config = [] {  // per-lane capacities far above the first pieces
      DecoderConfig c = Config();
      c.lane_pool = 1;  // on (auto would keep so small a decoder static)
      c.main_q = 4096;
      c.claims_cap = 8192;
      c.hash_cap = 16384;
      return c;
    };
    {
      GpuDecoder d(Graph(), config());
      CHECK(Stat(d, 21) == 1);  // offline batches are pooled
      int64_t cap0[3];
      for (int k = 0; k < 3; ++k) CHECK((cap0[k] = Stat(d, 23 + k)) < need[k]);
      for (int k = 0; k < 3; ++k) stub::g_pool_need[k] = need[k];
      fault::Arm(1 << 30);
      CHECK(DecodeOk(d, small));
      sites = fault::Arm(0);
      // one growth; two captures: the batch, then its resume (results only from the resume:
      // the paused run leaves every lane unfinished in the stub)
      CHECK(Stat(d, 22) == 1 && Stat(d, 6) == 2);
      for (int k = 0; k < 3; ++k) CHECK(Stat(d, 23 + k) >= need[k] && Stat(d, 26 + k) == need[k]);
      // every pool that grew holds at least PoolGrowth of its need (1.125 x the need, at least
      // 1.25 x its capacity), up to its worst case (4 lanes of the config's per-lane
      // capacities): here the claims pool (4,096 -> 5,625, 1.125 x its need 5,000; pieces
      // round it up)
      const int64_t most[3] = {4 * (4096 + 1 + kPoolAlign), 4 * (8192 + 16), 4 * 16384};
      for (int k = 0; k < 3; ++k) CHECK(Stat(d, 23 + k) >= PoolGrowth(need[k], cap0[k], most[k]));
      CHECK(DecodeOk(d, small) && Stat(d, 22) == 1);  // room now: no growth
    }
    CHECK(sites == 2 + 13);  // the two instantiations, and every pool array's new piece
    int raised = 0;
    for (int64_t i = 1; i <= sites; ++i) {
      GpuDecoder d(Graph(), config());
      int64_t caps0[3];
      for (int k = 0; k < 3; ++k) caps0[k] = Stat(d, 23 + k);
      fault::Arm(i);
      bool threw = false, ok = false;
      try {
        ok = DecodeOk(d, small);
      } catch (const CudaOutOfMemory& e) {
        threw = std::strstr(e.what(), "cannot grow the lane pools") && std::strstr(e.what(), "stays usable") &&
                std::strstr(e.what(), "max_lanes");
        ++raised;
        for (int k = 0; k < 3; ++k) CHECK(Stat(d, 23 + k) == caps0[k]);  // the old capacities stay
      }
      fault::Arm(0);
      CHECK(threw || ok);
      CHECK(stub::pending == cudaSuccess);
      CHECK(live::device_bytes.load() == Stat(d, 1));
      CHECK(DecodeOk(d, small));
      CHECK(!stub::bad_access);
    }
    CHECK(raised == 13);
    for (int k = 0; k < 3; ++k) stub::g_pool_need[k] = 0;
    CHECK(Nothing());
  }
  const std::vector<int32_t> lens = {60, 10, 0};
  g_lazy = true;

  {  // the lattice buffers are lazy (issue 9): 1-best decodes, on either lane layout, allocate
     // none of them (hash positions included: max_lanes x hash_cap on an epsilon-free graph);
     // the first lattice decode allocates them all, and only them, and they stay for later ones
    stub::g_need = 10;
    for (int32_t pool : {0, 1}) {
      DecoderConfig c = Config();
      c.lane_pool = pool;  // 0: static; 1: pooled offline batches
      c.lattice_cap = 4096;  // no records growth below
      GpuDecoder d(Graph(), c);
      CHECK(Stat(d, 21) == pool);
      CHECK(DecodeOk(d, lens) && DecodeOk(d, {12, 5, 0}));  // (the first grows the path buffers)
      CHECK(Stat(d, 33) == 0 && live::device_bytes.load() == Stat(d, 1));
      const int64_t held = Stat(d, 1);
      CHECK(LatticeDecodeOk(d, {12, 5, 0}));
      const int64_t lat = Stat(d, 33);
      CHECK(lat >= 4096 * static_cast<int64_t>(sizeof(LatRecord)) + int64_t{4} * c.max_lanes * c.hash_cap);
      CHECK(Stat(d, 1) - held == lat && live::device_bytes.load() == Stat(d, 1));
      CHECK(DecodeOk(d, lens) && Stat(d, 33) == lat);
      CHECK(!stub::bad_access);
    }
    CHECK(Nothing());
  }

  {  // lattice decodes: records row by row; growth and re-run; every acquisition fails cleanly
    stub::g_need = 10;
    stub::lat_extra = 2;  // about 3 records per step and row: far past the 16 to start with
    DecoderConfig c = Config();
    c.lattice_cap = 16;
    int64_t sites = 0;
    {
      GpuDecoder d(Graph(), c);
      const int runs0 = stub::lattice_runs;
      fault::Arm(1 << 30);
      CHECK(LatticeDecodeOk(d, lens));
      sites = fault::Arm(0);
      CHECK(stub::lattice_runs - runs0 == 2);  // grown once, then the batch ran again
      // MemStats [42] growths, [43] capacity: the batch's records (from its step counts,
      // which the stub keeps equal to its cursor) plus a quarter
      CHECK(Stat(d, 42) == 1 && Stat(d, 43) > 16);
      CHECK(!stub::bad_access);
      CHECK(DecodeOk(d, lens));  // the next 1-best decode runs without the lattice stage
      CHECK(stub::lattice_runs - runs0 == 2);
      CHECK(LatticeDecodeOk(d, {3, 0}));  // fewer rows, grown records reused
      CHECK(live::device_bytes.load() == Stat(d, 1) && live::pinned_bytes.load() == Stat(d, 4));
    }
    // path (device, GC drain, pinned), lattice cursor, the filter's settings, records, hash
    // positions, 4 step arrays, instantiate, records growth, instantiate, pinned readback
    CHECK(sites == 15);
    int raised = 0;
    for (int64_t i = 1; i <= sites; ++i) {
      GpuDecoder d(Graph(), c);
      fault::Arm(i);
      bool threw = false, ok = false;
      try {
        ok = LatticeDecodeOk(d, lens);
      } catch (const CudaOutOfMemory& e) {
        threw = std::strstr(e.what(), "stays usable") != nullptr && std::strstr(e.what(), "max_lanes") != nullptr;
        if (!threw) std::printf("lattice site %lld: %s\n", static_cast<long long>(i), e.what());
        ++raised;
      }
      fault::Arm(0);
      CHECK(threw || ok);
      CHECK(stub::pending == cudaSuccess);
      CHECK(live::device_bytes.load() == Stat(d, 1) && live::pinned_bytes.load() == Stat(d, 4));
      CHECK(DecodeOk(d, lens));
      CHECK(LatticeDecodeOk(d, lens));
      CHECK(!stub::bad_access);
    }
    CHECK(raised == 13);  // the two instantiations fall back to plain launches
    stub::lat_extra = 0;
    CHECK(Nothing());
  }

  {  // lattice decodes on the pooled layout (lattice.cuh: every kernel reaches the arrays
     // through the lanes' regions): a batch that pauses keeps the records and step counts of
     // the steps before the pause (zeroed only when a batch starts, not when it resumes), the
     // resume records the rest; records that outgrow their buffer re-run the batch from zero,
     // also from a replayed graph (the zeroing is captured with it)
    stub::g_need = 10;
    stub::lat_extra = 2;
    const std::vector<int32_t> small = {12, 5, 0};  // no path growth (max_frames 16)
    const int64_t need[3] = {1000, 5000, 20000};
    auto config = [](int64_t lattice_cap) {
      DecoderConfig c = Config();
      c.lane_pool = 1;
      c.main_q = 4096;
      c.claims_cap = 8192;
      c.hash_cap = 16384;
      c.lattice_cap = lattice_cap;
      return c;
    };
    for (int64_t cap : {int64_t{4096}, int64_t{16}}) {
      GpuDecoder d(Graph(), config(cap));
      CHECK(Stat(d, 21) == 1);  // pooled
      for (int k = 0; k < 3; ++k) stub::g_pool_need[k] = need[k];
      const int runs0 = stub::lattice_runs;
      CHECK(LatticeDecodeOk(d, small));
      // paused, grown, resumed; with 16 records to start also grown and run again (no pause
      // now: the pools kept their size)
      CHECK(Stat(d, 22) == 1 && stub::lattice_runs - runs0 == (cap == 16 ? 3 : 2));
      CHECK(LatticeDecodeOk(d, small));  // the batch's graph replayed: records from zero again
      CHECK(Stat(d, 22) == 1 && stub::lattice_runs - runs0 == (cap == 16 ? 4 : 3));
      CHECK(DecodeOk(d, small));  // and a 1-best decode after it runs without the stage
      CHECK(stub::lattice_runs - runs0 == (cap == 16 ? 4 : 3));
      CHECK(live::device_bytes.load() == Stat(d, 1) && Stat(d, 33) > 0);
      CHECK(!stub::bad_access);
    }
    for (int k = 0; k < 3; ++k) stub::g_pool_need[k] = 0;
    stub::lat_extra = 0;
    CHECK(Nothing());
  }

  {  // closure = lists only up to kEpsListMaxLanes lanes (EpsListExpandKernel's one-CTA lane
     // scan: shared lane_off[kEpsListMaxLanes + 1]); a lattice decode under it doubles only the
     // slot space's tok_begin, under closure = scan all five arrays
    auto eps_graph = [] {
      auto g = Graph();
      g->max_eps_degree = 2;
      return g;
    };
    DecoderConfig c = Config();
    c.eps_iterations = 2;
    c.max_lanes = kEpsListMaxLanes;
    { GpuDecoder d(eps_graph(), c); CHECK(Stat(d, 31) == 1); }
    c.max_lanes = kEpsListMaxLanes + 1;
    { GpuDecoder d(eps_graph(), c); CHECK(Stat(d, 31) == 0); }
    c = Config();
    c.eps_iterations = 2;
    stub::g_need = 10;
    int64_t grown[2] = {0, 0};
    for (int lists = 0; lists < 2; ++lists) {
      c.closure_lists = lists;
      GpuDecoder d(eps_graph(), c);
      CHECK(Stat(d, 31) == lists);
      const int64_t before = Stat(d, 1);
      CHECK(LatticeDecodeOk(d, {3, 0}));
      grown[lists] = Stat(d, 1) - before;
      CHECK(!stub::bad_access);
    }
    const int64_t L = c.max_lanes, Q = c.main_q, hint_cap = std::min<int64_t>(4 * Q + 1, INT32_MAX / 64);
    // the static layout's regions: main_q + 1 entries a lane for each per-token array
    CHECK(grown[0] - grown[1] == 2 * L * (Q + 1) * 4 + L * hint_cap * 4 + (L + 1) * 8);
  }

  {  // copy back B rows of the longest kept path only
    stub::g_need = 10;
    GpuDecoder d(Graph(), Config());
    CHECK(DecodeOk(d, lens));
    CHECK(stub::copy2d_height == 3 && stub::copy2d_width == 61 * 4);
    CHECK(DecodeOk(d, {5}));
    CHECK(stub::copy2d_height == 1 && stub::copy2d_width == 6 * 4);
  }

  {  // the graph cache is an LRU; past graph_max_steps a decode launches plainly
    DecoderConfig c = Config();
    c.max_frames = 256;  // no path growth here: a growth drops every captured graph
    c.graph_cache_size = 2;
    c.graph_max_steps = 100;
    GpuDecoder d(Graph(), c);
    for (int32_t len : {10, 40, 70}) CHECK(DecodeOk(d, {len}));  // buckets 32, 64, 96
    CHECK(Stat(d, 6) == 3 && Stat(d, 5) == 2 && Stat(d, 7) == 1);
    const int begun = stub::captures_begun, launched = stub::launches;
    CHECK(DecodeOk(d, {120}));  // bucket 128 > 100: exactly 121 steps, no capture
    CHECK(stub::captures_begun == begun && Stat(d, 6) == 3);
    CHECK(stub::launches - launched == 1 + 121 * 4 + 2);
    CHECK(DecodeOk(d, {70}));  // cached: replayed
    CHECK(Stat(d, 6) == 3);
    CHECK(DecodeOk(d, {10}));  // evicted: captured again
    CHECK(Stat(d, 6) == 4 && Stat(d, 5) == 2 && Stat(d, 7) == 2);
  }

  {  // fused_max: three launches a step (no MaxKernel), and the variant is reported
    DecoderConfig c = Config();
    c.fused_max = 1;
    c.use_cuda_graphs = false;
    GpuDecoder d(Graph(), c);
    const int launched = stub::launches;
    CHECK(DecodeOk(d, {20}));
    CHECK(stub::launches - launched == 1 + 21 * 3 + 2);
    CHECK(Stat(d, 34) == 1);  // MemStats [34]: fused_max
    GpuDecoder e(Graph(), Config());
    CHECK(Stat(e, 34) == 0);
  }

  {  // profiling events: each site fails cleanly, then profiling works
    GpuDecoder d(Graph(), Config());
    d.SetProfiling(true);
    fault::Arm(1 << 30);
    CHECK(DecodeOk(d, {5}));
    const int64_t sites = fault::Arm(0);
    CHECK(sites == 2 * (1 + 6 * 4 + 2));  // two events around each launch, 6 steps
    for (int64_t i : {int64_t{1}, sites / 2, sites}) {
      GpuDecoder e(Graph(), Config());  // an empty event pool each time
      e.SetProfiling(true);
      fault::Arm(i);
      bool threw = false;
      try {
        DecodeOk(e, {5});
      } catch (const CudaOutOfMemory& x) {
        threw = std::strstr(x.what(), "turn profiling off") != nullptr;
      }
      fault::Arm(0);
      CHECK(threw);
      CHECK(DecodeOk(e, {5}));
      double ms[cuwfst::kProfileKinds];
      e.Profile(ms);
      CHECK(ms[6] > 0);  // backtrack timed
    }
  }

  {  // a sticky fault names the decode's shape; the decoder refuses later calls; no throw at exit
    GpuDecoder d(Graph(), Config());
    CHECK(DecodeOk(d, lens));
    stub::sticky = true;
    std::string first, again;
    try {
      DecodeOk(d, lens);
    } catch (const CudaContextLost& e) {
      first = e.what();
    }
    try {
      DecodeOk(d, lens);
    } catch (const CudaContextLost& e) {
      again = e.what();
    }
    for (const char* want : {"cudaErrorIllegalAddress", "B=3 rows", "T=60 frames", "V=10 columns", "steps",
                             "dead", "Restart the process"})
      CHECK(first.find(want) != std::string::npos);
    CHECK(again.find("fatal fault earlier") != std::string::npos);
  }
  stub::sticky = false;
  stub::pending = cudaSuccess;
  CHECK(Nothing() && !stub::bad_access);
  std::printf("%s\n", failures ? "FAILED" : "ALL OK");
  return failures ? 1 : 0;
}
