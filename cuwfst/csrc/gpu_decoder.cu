// The GPU decoder's host side: allocation, the per-step launch sequence, CUDA-graph
// capture per step bucket, and the batch-end result readback.
#include "gpu_decoder.cuh"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "cuwfst/epsilon.cuh"
#include "cuwfst/expand.cuh"
#include "cuwfst/finalize.cuh"
#include "cuwfst/scan.cuh"

namespace cuwfst {

std::string CudaErrorString(cudaError_t e, const char* what) {
  std::ostringstream os;
  os << what << ": " << cudaGetErrorName(e) << " (" << cudaGetErrorString(e) << ")";
  return os.str();
}

#define CUWFST_CUDA(expr)                                                          \
  do {                                                                             \
    cudaError_t err__ = (expr);                                                    \
    if (err__ != cudaSuccess) throw std::runtime_error(CudaErrorString(err__, #expr)); \
  } while (0)

GpuGraph::~GpuGraph() {
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) return;
  cudaSetDevice(device);
  for (void* p : buffers) cudaFree(p);
  cudaSetDevice(prev);
}

namespace {
struct DeviceGuard {
  int prev = 0;
  explicit DeviceGuard(int d) {
    cudaGetDevice(&prev);
    if (prev != d) CUWFST_CUDA(cudaSetDevice(d));
  }
  ~DeviceGuard() { cudaSetDevice(prev); }
};
}  // namespace

template <typename T>
T* GpuDecoder::Alloc(size_t count, const char* what) {
  void* p = nullptr;
  size_t bytes = std::max<size_t>(1, count * sizeof(T));
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot allocate " << bytes << " bytes for " << what << " on cuda:" << graph_->device
       << " (" << cudaGetErrorString(e) << "); lower max_lanes or main_q_factor";
    throw std::runtime_error(os.str());
  }
  buffers_.push_back(p);
  fixed_bytes_ += bytes;
  return static_cast<T*>(p);
}

GpuDecoder::GpuDecoder(std::shared_ptr<GpuGraph> graph, const DecoderConfig& cfg)
    : graph_(std::move(graph)), cfg_(cfg) {
  DeviceGuard guard(graph_->device);
  CUWFST_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUWFST_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  try {
    Allocate();
  } catch (...) {
    for (void* p : buffers_) cudaFree(p);
    buffers_.clear();
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
    throw;
  }
}

void GpuDecoder::Allocate() {
  const int64_t L = cfg_.max_lanes, Q = cfg_.main_q;
  ws_.max_lanes = cfg_.max_lanes;
  ws_.main_q = cfg_.main_q;
  ws_.claims_cap = cfg_.claims_cap;
  ws_.hash_cap = cfg_.hash_cap;
  for (int b = 0; b < 2; ++b) {
    ws_.tok_state[b] = Alloc<int32_t>(L * Q, "frontier states");
    ws_.tok_score[b] = Alloc<float>(L * Q, "frontier scores");
    ws_.tok_winner[b] = Alloc<int32_t>(L * Q, "frontier winners");
  }
  ws_.tok_begin = Alloc<int32_t>(L * Q, "tok_begin");
  ws_.tok_ub = Alloc<float>(L * Q, "tok_ub");
  ws_.hint_cap = static_cast<int32_t>(std::min<int64_t>(4 * Q + 1, INT32_MAX / 64));
  ws_.tok_hint = Alloc<int32_t>(L * ws_.hint_cap, "tok_hint");
  ws_.arc_offsets = Alloc<int32_t>(L * (Q + 1), "arc_offsets");
  ws_.lane_arc_offsets = Alloc<int32_t>(L + 1, "lane_arc_offsets");
  ws_.scan_done = Alloc<int32_t>(1, "scan counter");
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_done, 0, sizeof(int32_t), stream_));
  ws_.hash_key = Alloc<uint32_t>(L * cfg_.hash_cap, "hash keys");
  ws_.hash_payload = Alloc<unsigned long long>(L * cfg_.hash_cap, "hash payloads");
  CUWFST_CUDA(cudaMemsetAsync(ws_.hash_key, 0xFF, L * cfg_.hash_cap * sizeof(uint32_t), stream_));
  CUWFST_CUDA(cudaMemsetAsync(ws_.hash_payload, 0, L * cfg_.hash_cap * sizeof(unsigned long long), stream_));
  ws_.claims = Alloc<int2>(L * cfg_.claims_cap, "claims");
  ws_.eps_iterations = cfg_.eps_iterations;
  if (cfg_.eps_iterations > 0) {
    ws_.hash_pos = Alloc<int32_t>(L * cfg_.hash_cap, "hash positions (epsilon closure)");
    CUWFST_CUDA(cudaMemsetAsync(ws_.hash_pos, 0xFF, L * cfg_.hash_cap * sizeof(int32_t), stream_));
    ws_.eps_tok = Alloc<int32_t>(L * Q, "epsilon pass tokens");
    ws_.eps_winner = Alloc<int32_t>(L * Q, "epsilon pass winners");
    ws_.eps_touched = Alloc<int32_t>(L * cfg_.claims_cap, "epsilon touched slots");
  }
  ws_.arena_cursor = Alloc<unsigned long long>(1, "arena cursor");
  ws_.lanes = Alloc<LaneCounters>(L, "lane counters");
  d_lengths_ = Alloc<int32_t>(L, "lengths");
  ws_.lengths = d_lengths_;
  d_lp_desc_ = Alloc<LpDesc>(1, "log-prob descriptor");
  ws_.lp_desc = d_lp_desc_;
  ws_.out_path_len = out_path_len_ = Alloc<int32_t>(L, "path lengths");
  // The winners arena is the one structure that grows (offline: grow and re-run).
  void* p = nullptr;
  CUWFST_CUDA(cudaMalloc(&p, cfg_.arena_cap * sizeof(WinnerEntry)));
  arena_ = static_cast<WinnerEntry*>(p);
  ws_.arena = arena_;
  ws_.arena_cap = cfg_.arena_cap;
  CUWFST_CUDA(cudaMallocHost(&h_lp_desc_, sizeof(LpDesc)));
  CUWFST_CUDA(cudaMallocHost(&h_lengths_, L * sizeof(int32_t)));
  CUWFST_CUDA(cudaMallocHost(&h_lanes_, L * sizeof(LaneCounters)));
  CUWFST_CUDA(cudaMallocHost(&h_path_len_, L * sizeof(int32_t)));
  AllocatePath(cfg_.max_frames);
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
}

void GpuDecoder::AllocatePath(int32_t max_frames) {
  if (out_path_) cudaFree(out_path_);
  if (h_path_) cudaFreeHost(h_path_);
  out_path_ = nullptr;
  h_path_ = nullptr;
  cfg_.max_frames = max_frames;
  // a best path holds one arc per frame and the final arc, plus one per closure pass of
  // each (a pass can add one epsilon hop to the path) on epsilon graphs
  const int64_t path_cap = (static_cast<int64_t>(max_frames) + 2) * (1 + cfg_.eps_iterations);
  if (path_cap > INT32_MAX / 2) throw std::runtime_error("path capacity (frames x (1 + eps_iterations)) too large");
  ws_.path_cap = static_cast<int32_t>(path_cap);
  void* p = nullptr;
  CUWFST_CUDA(cudaMalloc(&p, static_cast<size_t>(cfg_.max_lanes) * ws_.path_cap * sizeof(int32_t)));
  out_path_ = static_cast<int32_t*>(p);
  ws_.out_path = out_path_;
  CUWFST_CUDA(cudaMallocHost(&h_path_, static_cast<size_t>(cfg_.max_lanes) * ws_.path_cap * sizeof(int32_t)));
}

StepParams GpuDecoder::Params(bool f16) const {
  return StepParams{cfg_.search_beam, cfg_.min_active, cfg_.max_active, cfg_.allow_partial ? 1 : 0,
                    f16 ? 1 : 0, online_ ? 1 : 0};
}

void GpuDecoder::FreeGraphs() {
  for (auto& kv : graphs_) cudaGraphExecDestroy(kv.second);
  graphs_.clear();
}

GpuDecoder::~GpuDecoder() {
  DeviceGuard guard(graph_->device);
  FreeGraphs();
  for (cudaEvent_t e : event_pool_) cudaEventDestroy(e);
  if (stream_) cudaStreamSynchronize(stream_);
  for (void* p : buffers_) cudaFree(p);
  if (arena_) cudaFree(arena_);
  if (out_path_) cudaFree(out_path_);
  cudaFreeHost(h_lp_desc_);
  cudaFreeHost(h_lengths_);
  cudaFreeHost(h_lanes_);
  cudaFreeHost(h_path_);
  cudaFreeHost(h_path_len_);
  if (ready_) cudaEventDestroy(ready_);
  if (stream_) cudaStreamDestroy(stream_);
}

// The whole decode as a launch sequence: capturable (no host reads, fixed shapes).
void GpuDecoder::Enqueue(int32_t steps, bool f16) {
  const DeviceGraph& g = graph_->view;
  const StepParams p = Params(f16);
  const int L = cfg_.max_lanes;
  Timed(0, [&] { InitKernel<<<L, 32, 0, stream_>>>(g, ws_, p); });
  if (cfg_.eps_iterations > 0) EnqueueClosure(0);
  for (int32_t t = 0; t < steps; ++t) EnqueueStep(t, f16);
  Timed(6, [&] { BacktrackKernel<<<(L + 31) / 32, 32, 0, stream_>>>(ws_); });
  Timed(7, [&] { HashSanitizeKernel<<<dim3(64, L), 256, 0, stream_>>>(ws_); });
  CUWFST_CUDA(cudaGetLastError());
}

template <typename F>
void GpuDecoder::Timed(int kind, F&& launch) {
  if (!profiling_) {
    launch();
    return;
  }
  size_t used = pending_.size() * 2;
  while (event_pool_.size() < used + 2) {
    cudaEvent_t e;
    CUWFST_CUDA(cudaEventCreate(&e));
    event_pool_.push_back(e);
  }
  cudaEvent_t a = event_pool_[used], b = event_pool_[used + 1];
  CUWFST_CUDA(cudaEventRecord(a, stream_));
  launch();
  CUWFST_CUDA(cudaEventRecord(b, stream_));
  pending_.push_back({kind, {a, b}});
}

void GpuDecoder::CollectProfile() {
  for (auto& k : pending_) {
    float ms = 0.f;
    CUWFST_CUDA(cudaEventElapsedTime(&ms, k.second.first, k.second.second));
    profile_ms_[k.first] += ms;
  }
  pending_.clear();
}

void GpuDecoder::Profile(double out[kProfileKinds]) const {
  for (int i = 0; i < kProfileKinds; ++i) out[i] = profile_ms_[i];
}

// The epsilon closure of frontier buffer `buf`: eps_iterations passes, then the targeted
// clear of the hash slots the step and its closure claimed (epsilon.cuh).
void GpuDecoder::EnqueueClosure(int32_t buf) {
  const DeviceGraph& g = graph_->view;
  const int L = cfg_.max_lanes;
  const int walk_blocks = cfg_.walk_blocks > 0 ? cfg_.walk_blocks : ExpandBlocksFor(L);
  for (int32_t pass = 0; pass < cfg_.eps_iterations; ++pass) {
    Timed(8, [&] { EpsScanKernel<<<L, kScanThreads, 0, stream_>>>(g, ws_, buf, pass); });
    if (cfg_.walker == kWalkThread)
      Timed(9, [&] { EpsExpandKernel<kWalkThread><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
    else
      Timed(9, [&] { EpsExpandKernel<kWalkWarp><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
    Timed(10, [&] { EpsResolveKernel<<<dim3(kFinalizeSplit, L), kFinalizeThreads, 0, stream_>>>(ws_, buf); });
  }
  Timed(11, [&] { ClearClaimsKernel<<<dim3(kFinalizeSplit, L), kFinalizeThreads, 0, stream_>>>(ws_); });
}

void GpuDecoder::EnqueueStep(int32_t t, bool f16) {
  const DeviceGraph& g = graph_->view;
  const StepParams p = Params(f16);
  const int L = cfg_.max_lanes;
  const int walk_blocks = cfg_.walk_blocks > 0 ? cfg_.walk_blocks : ExpandBlocksFor(L);
  Timed(1, [&] { ScanKernel<<<L, kScanThreads, 0, stream_>>>(g, ws_, p, t); });
  if (cfg_.walker == kWalkThread) {
    Timed(3, [&] { MaxKernel<kWalkThread><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_, t); });
    Timed(4, [&] { ExpandKernel<kWalkThread><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_, t); });
  } else {
    Timed(3, [&] { MaxKernel<kWalkWarp><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_, t); });
    Timed(4, [&] { ExpandKernel<kWalkWarp><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_, t); });
  }
  Timed(5, [&] { FinalizeKernel<<<dim3(kFinalizeSplit, L), kFinalizeThreads, 0, stream_>>>(g, ws_, t); });
  if (cfg_.eps_iterations > 0) EnqueueClosure((t + 1) & 1);
}

std::vector<GpuDecoder::Snapshot> GpuDecoder::DecodeSnapshots(const void* lp, bool lp_f16,
                                                              int64_t stride_t, int32_t T,
                                                              int32_t length,
                                                              int64_t caller_stream) {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceGuard guard(graph_->device);
  online_ = false;  // snapshots follow the offline beam rules
  if (length > cfg_.max_frames) {
    FreeGraphs();
    AllocatePath(length);
  }
  for (int32_t l = 0; l < cfg_.max_lanes; ++l) h_lengths_[l] = l == 0 ? length : -1;
  *h_lp_desc_ = LpDesc{lp, 0, stride_t};
  if (caller_stream != 0) {
    CUWFST_CUDA(cudaEventRecord(ready_, reinterpret_cast<cudaStream_t>(caller_stream)));
    CUWFST_CUDA(cudaStreamWaitEvent(stream_, ready_, 0));
  }
  const int L = cfg_.max_lanes;
  CUWFST_CUDA(cudaMemcpyAsync(d_lengths_, h_lengths_, L * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(d_lp_desc_, h_lp_desc_, sizeof(LpDesc), cudaMemcpyHostToDevice, stream_));
  const StepParams p = Params(lp_f16);
  InitKernel<<<L, 32, 0, stream_>>>(graph_->view, ws_, p);
  if (cfg_.eps_iterations > 0) EnqueueClosure(0);
  std::vector<Snapshot> snaps;
  std::vector<WinnerEntry> log;
  // The frontier in buffer `buf` after a step (t < length) or the start (t = -1), or the
  // final token after the final step, with each token's winning arc.
  auto take = [&](int32_t t, int32_t buf) {
    CUWFST_CUDA(cudaGetLastError());
    LaneCounters lc;
    CUWFST_CUDA(cudaMemcpyAsync(&lc, ws_.lanes, sizeof(lc), cudaMemcpyDeviceToHost, stream_));
    unsigned long long cursor = 0;
    CUWFST_CUDA(cudaMemcpyAsync(&cursor, ws_.arena_cursor, sizeof(cursor), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    Snapshot s;
    s.phase = lc.phase == kPhaseEps ? kPhaseReal : lc.phase;  // the step's phase, as the CPU's
    s.beam = lc.beam;
    // the cutoff as the kernels computed it
    int32_t mo = lc.max_ord;
    float mx;
    int32_t bits = mo >= 0 ? mo : mo ^ 0x7FFFFFFF;
    std::memcpy(&mx, &bits, sizeof(mx));
    s.cutoff = mx - lc.beam;
    if (t < 0) {
      s.phase = kPhaseReal;
      s.beam = cfg_.search_beam;
      s.cutoff = 0.f - cfg_.search_beam;
    }
    int32_t n = t < length ? std::min(lc.next_size, cfg_.main_q) : (lc.final_winner != -2 ? 1 : 0);
    s.before_closure = cfg_.eps_iterations > 0 && lc.phase == kPhaseEps ? lc.eps_base : n;
    if (t < 0) s.before_closure = 1;
    s.state.resize(n);
    s.score.resize(n);
    std::vector<int32_t> winner(n);
    if (t < length && n > 0) {
      CUWFST_CUDA(cudaMemcpy(s.state.data(), ws_.tok_state[buf], n * sizeof(int32_t), cudaMemcpyDeviceToHost));
      CUWFST_CUDA(cudaMemcpy(s.score.data(), ws_.tok_score[buf], n * sizeof(float), cudaMemcpyDeviceToHost));
      CUWFST_CUDA(cudaMemcpy(winner.data(), ws_.tok_winner[buf], n * sizeof(int32_t), cudaMemcpyDeviceToHost));
    } else if (n > 0) {
      s.state[0] = graph_->view.num_states - 1;
      s.score[0] = lc.final_score;
      winner[0] = lc.final_winner;
    }
    log.resize(cursor);
    if (cursor) CUWFST_CUDA(cudaMemcpy(log.data(), arena_, std::min<unsigned long long>(cursor, ws_.arena_cap) * sizeof(WinnerEntry), cudaMemcpyDeviceToHost));
    s.arc.resize(n);
    for (int32_t i = 0; i < n; ++i) s.arc[i] = winner[i] >= 0 ? log[winner[i]].arc : -1;
    snaps.push_back(std::move(s));
  };
  take(-1, 0);
  for (int32_t t = 0; t <= length; ++t) {
    EnqueueStep(t, lp_f16);
    take(t, (t + 1) & 1);
  }
  HashSanitizeKernel<<<dim3(64, L), 256, 0, stream_>>>(ws_);
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
  return snaps;
}

void GpuDecoder::RunOnce(int32_t steps, bool f16) {
  if (!cfg_.use_cuda_graphs || profiling_) {
    Enqueue(steps, f16);
    return;
  }
  auto key = std::make_pair(steps, (f16 ? 1 : 0) | (online_ ? 2 : 0));
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    cudaGraph_t graph = nullptr;
    CUWFST_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      Enqueue(steps, f16);
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    CUWFST_CUDA(cudaStreamEndCapture(stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    CUWFST_CUDA(e);
    it = graphs_.emplace(key, exec).first;
  }
  CUWFST_CUDA(cudaGraphLaunch(it->second, stream_));
}

static int32_t StepBucket(int32_t steps) {
  if (steps <= 256) return (steps + 31) / 32 * 32;
  return (steps + 63) / 64 * 64;
}

void GpuDecoder::Decode(const void* lp, bool lp_f16, int64_t stride_b, int64_t stride_t,
                        int32_t B, int32_t T, const int32_t* lengths, bool online,
                        int64_t caller_stream, DecodeOutputs out) {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceGuard guard(graph_->device);
  online_ = online;
  if (B > cfg_.max_lanes) throw std::runtime_error("batch larger than max_lanes");
  int32_t max_len = 0;
  for (int32_t b = 0; b < B; ++b) max_len = std::max(max_len, lengths[b]);
  if (max_len > cfg_.max_frames) {  // grow the frame capacity (offline: not a limit)
    int32_t mf = cfg_.max_frames;
    while (mf < max_len) mf *= 2;
    FreeGraphs();
    AllocatePath(mf);
  }
  for (int32_t l = 0; l < cfg_.max_lanes; ++l) h_lengths_[l] = l < B ? lengths[l] : -1;
  *h_lp_desc_ = LpDesc{lp, stride_b, stride_t};
  if (caller_stream != 0) {
    CUWFST_CUDA(cudaEventRecord(ready_, reinterpret_cast<cudaStream_t>(caller_stream)));
    CUWFST_CUDA(cudaStreamWaitEvent(stream_, ready_, 0));
  }
  const int32_t steps = StepBucket(max_len + 1);
  const int L = cfg_.max_lanes;
  for (int attempt = 0;; ++attempt) {
    CUWFST_CUDA(cudaMemcpyAsync(d_lengths_, h_lengths_, L * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    CUWFST_CUDA(cudaMemcpyAsync(d_lp_desc_, h_lp_desc_, sizeof(LpDesc), cudaMemcpyHostToDevice, stream_));
    RunOnce(steps, lp_f16);
    CUWFST_CUDA(cudaMemcpyAsync(h_lanes_, ws_.lanes, L * sizeof(LaneCounters), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaMemcpyAsync(h_path_len_, out_path_len_, L * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaMemcpyAsync(h_path_, out_path_, static_cast<size_t>(L) * ws_.path_cap * sizeof(int32_t),
                                cudaMemcpyDeviceToHost, stream_));
    unsigned long long cursor = 0;
    CUWFST_CUDA(cudaMemcpyAsync(&cursor, ws_.arena_cursor, sizeof(cursor), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    if (profiling_) CollectProfile();
    arena_high_water_ = std::max(arena_high_water_, cursor);
    bool arena_full = false;
    for (int32_t b = 0; b < B; ++b) arena_full |= (h_lanes_[b].overflow & kOverflowArena) != 0;
    if (!arena_full || ws_.arena_cap >= cfg_.arena_max) break;
    // Grow the winners arena to what this batch used (at least double) and decode again;
    // decode is idempotent (InitKernel resets all loop state).
    int64_t want = std::max<int64_t>(ws_.arena_cap * 2, static_cast<int64_t>(cursor) + (cursor >> 2));
    want = std::min<int64_t>(want, cfg_.arena_max);
    FreeGraphs();
    CUWFST_CUDA(cudaFree(arena_));
    arena_ = nullptr;
    void* p = nullptr;
    CUWFST_CUDA(cudaMalloc(&p, want * sizeof(WinnerEntry)));
    arena_ = static_cast<WinnerEntry*>(p);
    ws_.arena = arena_;
    ws_.arena_cap = want;
  }
  for (int32_t b = 0; b < B; ++b) {
    const LaneCounters& lc = h_lanes_[b];
    int32_t len = h_path_len_[b];
    out.path_len[b] = len;
    int64_t n = std::min<int64_t>({static_cast<int64_t>(len), static_cast<int64_t>(ws_.path_cap), out.cap});
    std::memcpy(out.arcs + b * out.cap, h_path_ + static_cast<int64_t>(b) * ws_.path_cap, n * sizeof(int32_t));
    out.score[b] = lc.final_winner != -2 ? lc.final_score : -INFINITY;  // -2: no final token
    out.meta[b * 4 + 0] = lc.final_winner != -2 && lc.reached_final;
    out.meta[b * 4 + 1] = lc.final_winner != -2 && lc.redirected;
    out.meta[b * 4 + 2] = lc.overflow;
    out.meta[b * 4 + 3] = lc.max_frontier;
    out.stats[b * 2 + 0] = lc.frontier_total;
    out.stats[b * 2 + 1] = lc.closure_added;
  }
}

void GpuDecoder::MemStats(int64_t out[4]) const {
  out[0] = fixed_bytes_ + ws_.arena_cap * static_cast<int64_t>(sizeof(WinnerEntry));
  out[1] = out[0];
  out[2] = fixed_bytes_;
  out[3] = static_cast<int64_t>(arena_high_water_);
}

}  // namespace cuwfst
