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
// shape and the decoder refuses later calls. Built and run by tests/test_cuda_resources.py.
#include "gpu_decoder.cu"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_stub.h"

using namespace cuwfst;

extern "C" const void* cuwfst_test_backtrack_kernel() { return reinterpret_cast<const void*>(&BacktrackKernel); }


// ---------------------------------------------------------------- checks
static int failures = 0;
#define CHECK(cond)                                                \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
      ++failures;                                                  \
    }                                                              \
  } while (0)

static bool Nothing() {
  return live::device_bytes.load() == 0 && live::pinned_bytes.load() == 0 && live::handles.load() == 0 &&
         stub::device_mem.empty() && stub::pinned_mem.empty();
}

static std::shared_ptr<GpuGraph> Graph() {
  auto g = std::make_shared<GpuGraph>();
  g->view.num_states = 5;
  g->view.vocab_size = 10;
  return g;
}

static DecoderConfig Config() {
  DecoderConfig c;
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
  d.Decode(reinterpret_cast<const void*>(0x100), false, 0, 0, static_cast<int32_t>(lens.size()), T, 10, lens.data(),
           /*online=*/false, 0, o.view());
  bool ok = true;
  for (size_t b = 0; b < lens.size(); ++b) {
    ok &= o.len[b] == lens[b] + 1 && o.meta[b * 4 + 2] == 0 && o.score[b] == -static_cast<float>(lens[b]);
    for (int32_t k = 0; k <= lens[b]; ++k) ok &= o.arcs[b * o.cap + k] == static_cast<int32_t>(1000 * b + k);
  }
  return ok;
}

static int64_t Stat(GpuDecoder& d, int i) {
  int64_t s[GpuDecoder::kMemStats];
  d.MemStats(s);
  return s[i];
}

int main() {
  {  // every constructor acquisition fails cleanly
    fault::Arm(1 << 30);
    { GpuDecoder d(Graph(), Config()); }
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
      fault::Arm(1 << 30);
      CHECK(DecodeOk(d, lens));
      sites = fault::Arm(0);
      CHECK(Stat(d, 6) == 2);  // captured before and after the arena grew
    }
    CHECK(sites == 6);  // path (device, GC drain, pinned), instantiate, arena, instantiate
    int raised = 0;
    for (int64_t i = 1; i <= sites; ++i) {
      GpuDecoder d(Graph(), Config());
      const int64_t held0 = Stat(d, 0), pinned0 = Stat(d, 4);
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
      CHECK(live::device_bytes.load() == Stat(d, 0) && live::pinned_bytes.load() == Stat(d, 4));
      if (i <= 3) CHECK(Stat(d, 0) == held0 && Stat(d, 4) == pinned0);  // a failed path growth keeps the old buffers
      CHECK(DecodeOk(d, lens));
      CHECK(!stub::bad_access);  // the next decode's kernels only touch live, large enough buffers
    }
    CHECK(raised == 4);  // the two instantiations fall back to plain launches
    CHECK(Nothing());
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
    CHECK(Stat(d, 12) == 1);
    GpuDecoder e(Graph(), Config());
    CHECK(Stat(e, 12) == 0);
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
