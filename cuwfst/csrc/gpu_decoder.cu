// The GPU decoder's host side: allocation, the per-step launch sequence, CUDA-graph
// capture per step bucket (a bounded LRU cache), and the batch-end result readback.
//
// Failure rules (issue 14): a buffer is replaced only after its successor exists, so an
// allocation that fails leaves the decoder as it was and usable; the pending error of a
// handled failure is cleared; a sticky CUDA error (the context is dead) becomes
// CudaContextLost naming the decode's shape, and the decoder refuses later calls.
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

namespace {
template <typename T>
T* As(const PinnedBuffer& b) {
  return static_cast<T*>(b.get());
}

int32_t StepBucket(int32_t steps) {
  if (steps <= 256) return (steps + 31) / 32 * 32;
  return (steps + 63) / 64 * 64;
}
}  // namespace

cudaGraphExec_t GraphCache::Find(const Key& key) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first == key) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().second.get();
    }
  }
  return nullptr;
}

cudaGraphExec_t GraphCache::Insert(const Key& key, GraphExec exec) {
  entries_.emplace_front(key, std::move(exec));
  // capacity_ >= 1 here (RunOnce does not capture with an empty cache), so the new entry stays
  while (entries_.size() > std::max<size_t>(capacity_, 1)) {
    entries_.pop_back();
    ++evictions_;
  }
  return entries_.front().second.get();
}

// The most winners entries one lane's step may append: its emitting step keeps at most
// claims_cap tokens (FinalizeKernel logs every kept claim, past main_q too), and each closure
// pass logs at most main_q changed tokens.
int64_t GpuDecoder::StepEntriesBound() const {
  return static_cast<int64_t>(ws_.claims_cap) + static_cast<int64_t>(cfg_.eps_iterations) * ws_.main_q;
}

void GpuDecoder::SetArenaGuard(unsigned long long entries) {
  if (entries == arena_guard_host_) return;
  arena_guard_host_ = entries;  // a member: the pageable copy reads it before returning
  CUWFST_CUDA(cudaMemcpyAsync(arena_guard_, &arena_guard_host_, sizeof(entries), cudaMemcpyHostToDevice, stream_));
}

unsigned long long GpuDecoder::ArenaCursor() {
  unsigned long long cursor = 0;
  CUWFST_CUDA(cudaMemcpyAsync(&cursor, ws_.arena_cursor, sizeof(cursor), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
  return cursor;
}

const int32_t* GpuDecoder::ReadPaths(int64_t width, int32_t rows) {
  const size_t pitch = static_cast<size_t>(ws_.path_cap) * sizeof(int32_t);
  if (width > 0) {
    CUWFST_CUDA(cudaMemcpy2DAsync(h_path_.get(), pitch, out_path_.get(), pitch, width * sizeof(int32_t), rows,
                                  cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
  }
  return As<int32_t>(h_path_);
}

void GpuDecoder::WriteResult(int32_t lane, int32_t row, const LaneCounters& lc, int32_t tail_len,
                             const std::vector<int32_t>* prefix, int32_t host_overflow, const int32_t* h_path,
                             DecodeOutputs& out) const {
  const int64_t np_all = prefix ? static_cast<int64_t>(prefix->size()) : 0;
  out.path_len[row] = static_cast<int32_t>(std::min<int64_t>(np_all + tail_len, INT32_MAX));
  int32_t* dst = out.arcs + static_cast<int64_t>(row) * out.cap;
  const int64_t np = std::min<int64_t>(np_all, out.cap);
  if (np > 0) std::copy(prefix->begin(), prefix->begin() + np, dst);
  const int64_t nt = std::min<int64_t>({static_cast<int64_t>(tail_len), static_cast<int64_t>(ws_.path_cap), out.cap - np});
  if (nt > 0) std::memcpy(dst + np, h_path + static_cast<int64_t>(lane) * ws_.path_cap, nt * sizeof(int32_t));
  out.score[row] = lc.final_winner != -2 ? lc.final_score : -INFINITY;  // -2: no final token
  out.meta[row * 4 + 0] = lc.final_winner != -2 && lc.reached_final;
  out.meta[row * 4 + 1] = lc.final_winner != -2 && lc.redirected;
  out.meta[row * 4 + 2] = lc.overflow | host_overflow;
  out.meta[row * 4 + 3] = lc.max_frontier;
  out.stats[row * 2 + 0] = lc.frontier_total;
  out.stats[row * 2 + 1] = lc.closure_added;
}

std::string GpuDecoder::ArenaShort(unsigned long long need, int32_t lanes) const {
  std::ostringstream os;
  os << "the winners arena cannot hold one step of " << lanes << " streams (" << need
     << " entries at worst, and as many again for its garbage collection; arena_max " << cfg_.arena_max
     << ", now " << ws_.arena_cap
     << "); nothing of this call ran past its last complete step; open fewer streams per decoder or "
     << "lower max_active_states / main_q_factor";
  return os.str();
}

std::string GpuDecoder::Advice() const {
  std::ostringstream os;
  os << "lower max_lanes (now " << cfg_.max_lanes << ") or main_q_factor (frontier " << cfg_.main_q
     << " tokens per lane)";
  return os.str();
}

template <typename T>
T* GpuDecoder::Alloc(size_t count, const char* what) {
  const size_t bytes = count * sizeof(T);
  DeviceBuffer b;
  cudaError_t e = TryDeviceAlloc(bytes, &b);
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot allocate " << FormatBytes(static_cast<int64_t>(bytes)) << " for " << what
       << " on cuda:" << device() << " after " << FormatBytes(fixed_bytes_)
       << " of this decoder's workspace; " << Advice();
    ThrowAcquireFailure(e, os.str());
  }
  fixed_bytes_ += b.amount();
  T* p = static_cast<T*>(b.get());
  buffers_.push_back(std::move(b));
  return p;
}

GpuDecoder::GpuDecoder(std::shared_ptr<GpuGraph> graph, const DecoderConfig& cfg)
    : graph_(std::move(graph)), cfg_(cfg), graphs_(static_cast<size_t>(std::max(cfg.graph_cache_size, 0))) {
  DeviceGuard guard(graph_->device);
  try {
    cudaError_t e = TryStreamCreate(cudaStreamNonBlocking, &stream_owned_);
    if (e != cudaSuccess)
      ThrowAcquireFailure(e, "cannot create a CUDA stream for a decoder on cuda:" + std::to_string(device()) +
                                 "; free GPU memory or " + Advice());
    stream_ = stream_owned_.get();
    e = TryEventCreate(cudaEventDisableTiming, &ready_);
    if (e != cudaSuccess)
      ThrowAcquireFailure(e, "cannot create a CUDA event for a decoder on cuda:" + std::to_string(device()) +
                                 "; free GPU memory or " + Advice());
    Allocate();
  } catch (...) {
    // The owners free everything taken so far; first let queued memsets finish.
    SyncQuietly();
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
  ws_.lane_arc_offsets = Alloc<int64_t>(L + 1, "lane_arc_offsets");
  ws_.scan_done = Alloc<int32_t>(1, "scan counter");
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_done, 0, sizeof(int32_t), stream_));
  ws_.hash_key = Alloc<uint32_t>(L * cfg_.hash_cap, "hash keys");
  ws_.hash_payload = Alloc<unsigned long long>(L * cfg_.hash_cap, "hash payloads");
  CUWFST_CUDA(cudaMemsetAsync(ws_.hash_key, 0xFF, L * cfg_.hash_cap * sizeof(uint32_t), stream_));
  CUWFST_CUDA(cudaMemsetAsync(ws_.hash_payload, 0, L * cfg_.hash_cap * sizeof(unsigned long long), stream_));
  ws_.claims = Alloc<int2>(L * cfg_.claims_cap, "claims");
  ws_.eps_iterations = cfg_.eps_iterations;
  if (cfg_.scan_split == 0) cfg_.scan_split = AutoScanSplit(cfg_.max_lanes);
  ws_.scan_split = cfg_.scan_split;
  ws_.scan_status = Alloc<unsigned long long>(L * cfg_.scan_split, "scan look-back status");
  ws_.scan_lane_done = Alloc<int32_t>(L, "scan lane counters");
  ws_.scan_ticket = Alloc<int32_t>(1, "scan tickets");
  ws_.scan_best = Alloc<unsigned long long>(L, "scan best tokens");
  ws_.fused_max = cfg_.fused_max;
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_status, 0, L * cfg_.scan_split * sizeof(unsigned long long), stream_));
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_lane_done, 0, L * sizeof(int32_t), stream_));
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_ticket, 0, sizeof(int32_t), stream_));
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_best, 0, L * sizeof(unsigned long long), stream_));
  // closure = lists encodes entry j's k-th epsilon arc as payload slot j * stride + k < 2^31
  const int64_t stride = std::max<int32_t>(graph_->max_eps_degree, 1);
  if (cfg_.eps_iterations == 0 || Q * stride > INT32_MAX) cfg_.closure_lists = 0;
  ws_.closure_lists = cfg_.closure_lists;
  ws_.eps_stride = static_cast<int32_t>(stride);
  if (cfg_.eps_iterations > 0) {
    ws_.hash_pos = Alloc<int32_t>(L * cfg_.hash_cap, "hash positions (epsilon closure)");
    CUWFST_CUDA(cudaMemsetAsync(ws_.hash_pos, 0xFF, L * cfg_.hash_cap * sizeof(int32_t), stream_));
    ws_.eps_tok = Alloc<int32_t>(L * Q, "epsilon pass tokens");
    ws_.eps_winner = Alloc<int32_t>(L * Q, "epsilon pass winners");
    ws_.eps_touched = Alloc<int32_t>(L * cfg_.claims_cap, "epsilon touched slots");
    if (cfg_.closure_lists) ws_.eps_list1 = Alloc<int32_t>(L * Q, "epsilon pass tokens (second list)");
  }
  if (cfg_.finalize_split == 0) cfg_.finalize_split = AutoFinalizeSplit(cfg_.max_lanes);
  if (cfg_.eps_blocks <= 0) {
    int sms = 0;
    CUWFST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, graph_->device));
    cfg_.eps_blocks = 8 * std::max(sms, 1);
  }
  ws_.arena_cursor = Alloc<unsigned long long>(1, "arena cursor");
  arena_guard_ = Alloc<unsigned long long>(1, "arena guard");
  ws_.arena_guard = arena_guard_;
  CUWFST_CUDA(cudaMemsetAsync(arena_guard_, 0, sizeof(unsigned long long), stream_));
  ws_.lanes = Alloc<LaneCounters>(L, "lane counters");
  d_commands_ = Alloc<LaneCommand>(L, "lane commands");
  ws_.commands = d_commands_;
  d_inputs_ = Alloc<LaneInput>(L, "lane inputs");
  ws_.inputs = d_inputs_;
  ws_.out_path_len = out_path_len_ = Alloc<int32_t>(L, "path lengths");
  ws_.gc_live = Alloc<unsigned long long>(1, "GC live counter");
  ws_.gc_conv = Alloc<int32_t>(L, "GC convergence points");
  ws_.drain_len = Alloc<int32_t>(L, "GC drain lengths");
  lane_host_.assign(L, LaneHost{});
  // The winners arena is the one structure that grows (offline: grow and re-run).
  const size_t arena_bytes = static_cast<size_t>(cfg_.arena_cap) * sizeof(WinnerEntry);
  cudaError_t e = TryDeviceAlloc(arena_bytes, &arena_);
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot allocate " << FormatBytes(static_cast<int64_t>(arena_bytes)) << " for the winners arena ("
       << cfg_.arena_cap << " entries) on cuda:" << device() << "; lower max_lanes (now " << cfg_.max_lanes << ")";
    ThrowAcquireFailure(e, os.str());
  }
  ws_.arena = static_cast<WinnerEntry*>(arena_.get());
  ws_.arena_cap = cfg_.arena_cap;
  auto pinned = [&](PinnedBuffer* dst, size_t bytes, const char* what) {
    cudaError_t pe = TryPinnedAlloc(bytes, dst);
    if (pe != cudaSuccess) {
      std::ostringstream os;
      os << "cannot allocate " << FormatBytes(static_cast<int64_t>(bytes)) << " of pinned host memory for "
         << what << " of a decoder on cuda:" << device() << "; lower max_lanes (now " << cfg_.max_lanes << ")";
      ThrowAcquireFailure(pe, os.str());
    }
  };
  pinned(&h_commands_, L * sizeof(LaneCommand), "the lane commands");
  pinned(&h_inputs_, L * sizeof(LaneInput), "the lane inputs");
  pinned(&h_lanes_, L * sizeof(LaneCounters), "the lane counters");
  pinned(&h_path_len_, L * sizeof(int32_t), "the path lengths");
  AllocatePath(cfg_.max_frames);
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
}

// Path buffers for rows of up to max_frames frames: the new pair is allocated first and
// swapped in only when both exist; on failure the old pair, path_cap and the captured
// graphs (which hold the old pointers) are all kept.
void GpuDecoder::AllocatePath(int32_t max_frames) {
  // a best path holds one arc per frame and the final arc, plus one per closure pass of
  // each (a pass can add one epsilon hop to the path) on epsilon graphs
  const int64_t cap = (static_cast<int64_t>(max_frames) + 2) * (1 + cfg_.eps_iterations);
  if (cap > INT32_MAX / 2) throw std::invalid_argument("path capacity (frames x (1 + eps_iterations)) too large");
  const size_t bytes = static_cast<size_t>(cfg_.max_lanes) * cap * sizeof(int32_t);
  DeviceBuffer d, drain;
  PinnedBuffer h;
  cudaError_t e = TryDeviceAlloc(bytes, &d);
  if (e == cudaSuccess) e = TryDeviceAlloc(bytes, &drain);  // GC drains up to path_cap arcs a lane
  bool on_device = true;
  if (e == cudaSuccess) {
    e = TryPinnedAlloc(bytes, &h);
    on_device = false;
  }
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot allocate " << FormatBytes(static_cast<int64_t>(bytes)) << (on_device ? "" : " of pinned host memory")
       << " for the best paths of " << cfg_.max_lanes << " lanes x " << max_frames << " frames on cuda:" << device();
    if (ws_.path_cap > 0)
      os << "; the decoder keeps its " << cfg_.max_frames << "-frame path buffers and stays usable";
    os << "; lower max_lanes or decode shorter inputs";
    ThrowAcquireFailure(e, os.str());
  }
  FreeGraphs();  // they captured the old pointers and path_cap
  out_path_ = std::move(d);
  drain_ = std::move(drain);
  ws_.drain = static_cast<int32_t*>(drain_.get());
  h_path_ = std::move(h);
  cfg_.max_frames = max_frames;
  ws_.path_cap = static_cast<int32_t>(cap);
  ws_.out_path = static_cast<int32_t*>(out_path_.get());
}

// Winners-arena growth to what the batch used (at least double): the new arena is
// allocated before the old one is let go, so a failure keeps a valid arena under ws_.arena.
void GpuDecoder::GrowArena(unsigned long long cursor) {
  int64_t want = std::max<int64_t>(ws_.arena_cap * 2, static_cast<int64_t>(cursor) + static_cast<int64_t>(cursor >> 2));
  want = std::min<int64_t>(want, cfg_.arena_max);
  DeviceBuffer fresh;
  cudaError_t e = TryDeviceAlloc(static_cast<size_t>(want) * sizeof(WinnerEntry), &fresh);
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot grow the winners arena from " << ws_.arena_cap << " to " << want << " entries ("
       << FormatBytes(want * static_cast<int64_t>(sizeof(WinnerEntry))) << ") on cuda:" << device()
       << "; this batch needs about " << cursor << " entries; the decoder keeps its " << ws_.arena_cap
       << "-entry arena and stays usable; decode fewer rows at a time (max_lanes, now " << cfg_.max_lanes
       << ") or lower max_active_states";
    ThrowAcquireFailure(e, os.str());
  }
  FreeGraphs();  // they captured the old arena pointer
  arena_ = std::move(fresh);
  ws_.arena = static_cast<WinnerEntry*>(arena_.get());
  ws_.arena_cap = want;
  gc_tag_ = DeviceBuffer();  // sized to the arena; made again by the next GC round
  ws_.gc_tag = nullptr;
}

void GpuDecoder::SyncQuietly() noexcept {
  if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess) ClearHandledError();
}

GpuDecoder::~GpuDecoder() {
  // Nothing here may throw: a destructor that throws aborts the process (issue 14, 9).
  // The owners free themselves on their own device after this body.
  NoThrowDeviceGuard guard(graph_->device);
  SyncQuietly();
  graphs_.Clear();
}

void GpuDecoder::Fatal(cudaError_t e, const char* what, int32_t B, int32_t T, int32_t V, int32_t steps) {
  std::ostringstream os;
  os << "fatal CUDA fault (" << cudaGetErrorName(e) << ") in a decode of B=" << B << " rows, T=" << T
     << " frames, V=" << V << " columns, " << steps << " steps, on cuda:" << device() << ": " << what
     << ". The CUDA context of this process is dead: every later CUDA call in this process fails, "
        "PyTorch's included. Restart the process.";
  dead_ = os.str();
  throw CudaContextLost(dead_);
}

void GpuDecoder::CheckAlive() const {
  if (!dead_.empty()) throw CudaContextLost("this decoder hit a fatal fault earlier: " + dead_);
}

void GpuDecoder::SetProfiling(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  profiling_ = on;
}

void GpuDecoder::InjectIllegalAddress() {
  std::lock_guard<std::mutex> lock(mu_);
  inject_illegal_address_ = true;
}

// A launch sequence: capturable (no host reads, fixed shapes; the lanes' orders are
// device data rewritten before each replay). The steps are the same kernels in every
// kind; each lane takes the steps its own counters allow (scan.cuh).
void GpuDecoder::Enqueue(SeqKind kind, int32_t steps, bool f16) {
  const DeviceGraph& g = graph_->view;
  const StepParams p = Params(f16);
  const int L = cfg_.max_lanes;
  const int32_t reset = kind == SeqKind::kBatch ? 1 : 0;
  Timed(0, [&] { LaneSetupKernel<<<L, 32, 0, stream_>>>(g, ws_, p, reset); });
  const bool opens = kind == SeqKind::kBatch || kind == SeqKind::kSegment || kind == SeqKind::kOpen;
  if (opens && cfg_.eps_iterations > 0) EnqueueClosure();
  for (int32_t s = 0; s < steps; ++s) EnqueueStep(f16);
  if (kind == SeqKind::kBatch || kind == SeqKind::kSegment || kind == SeqKind::kFinalize)
    Timed(6, [&] { BacktrackKernel<<<(L + 31) / 32, 32, 0, stream_>>>(ws_); });
  if (kind != SeqKind::kOpen) Timed(7, [&] { HashSanitizeKernel<<<dim3(64, L), 256, 0, stream_>>>(ws_, 0); });
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
    Event ev;
    cudaError_t e = TryEventCreate(cudaEventDefault, &ev);
    if (e != cudaSuccess)
      ThrowAcquireFailure(e, "cannot create CUDA events for profiling on cuda:" + std::to_string(device()) +
                                 "; turn profiling off");
    event_pool_.push_back(std::move(ev));
  }
  cudaEvent_t a = event_pool_[used].get(), b = event_pool_[used + 1].get();
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
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < kProfileKinds; ++i) out[i] = profile_ms_[i];
}

StepParams GpuDecoder::Params(bool f16) const {
  return StepParams{cfg_.search_beam, cfg_.min_active, cfg_.max_active, cfg_.allow_partial ? 1 : 0, f16 ? 1 : 0};
}

// The decoder's stream waits for the caller's work (the tensor it is about to read).
void GpuDecoder::Wait(int64_t caller_stream) {
  if (caller_stream == 0) return;
  CUWFST_CUDA(cudaEventRecord(ready_.get(), reinterpret_cast<cudaStream_t>(caller_stream)));
  CUWFST_CUDA(cudaStreamWaitEvent(stream_, ready_.get(), 0));
}

// A batch (or snapshots) starts every lane afresh: streams or rows the lanes held are gone.
void GpuDecoder::ReleaseAllLanes() {
  for (LaneHost& h : lane_host_) h = LaneHost{};
}

void GpuDecoder::UploadLaneOrders() {
  const int L = cfg_.max_lanes;
  if (hash_dirty_) {  // a sequence failed half-way: its steps may have left claimed slots
    HashSanitizeKernel<<<dim3(64, L), 256, 0, stream_>>>(ws_, 1);
    CUWFST_CUDA(cudaGetLastError());
    hash_dirty_ = false;
  }
  CUWFST_CUDA(cudaMemcpyAsync(d_commands_, h_commands_.get(), L * sizeof(LaneCommand), cudaMemcpyHostToDevice, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(d_inputs_, h_inputs_.get(), L * sizeof(LaneInput), cudaMemcpyHostToDevice, stream_));
}

// The epsilon closure of each lane's frontier (buffer lc.buf) after a real step or the
// start: eps_iterations passes, then the targeted clear of the hash slots the step and its
// closure claimed (epsilon.cuh).
void GpuDecoder::EnqueueClosure() {
  const DeviceGraph& g = graph_->view;
  const int L = cfg_.max_lanes;
  const int walk_blocks = cfg_.walk_blocks > 0 ? cfg_.walk_blocks : ExpandBlocksFor(L);
  if (cfg_.closure_lists) {
    for (int32_t pass = 0; pass < cfg_.eps_iterations; ++pass) {
      Timed(9, [&] { EpsListExpandKernel<<<cfg_.eps_blocks, kWalkThreads, 0, stream_>>>(g, ws_, pass); });
      Timed(10, [&] { EpsListResolveKernel<<<dim3(cfg_.finalize_split, L), kFinalizeThreads, 0, stream_>>>(g, ws_, pass); });
    }
    Timed(11, [&] { ClearClaimsKernel<<<dim3(cfg_.finalize_split, L), kFinalizeThreads, 0, stream_>>>(ws_); });
    return;
  }
  for (int32_t pass = 0; pass < cfg_.eps_iterations; ++pass) {
    Timed(8, [&] { EpsScanKernel<<<L, kScanThreads, 0, stream_>>>(g, ws_, pass); });
    if (cfg_.walker == kWalkThread)
      Timed(9, [&] { EpsExpandKernel<kWalkThread><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
    else
      Timed(9, [&] { EpsExpandKernel<kWalkWarp><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
    Timed(10, [&] { EpsResolveKernel<<<dim3(cfg_.finalize_split, L), kFinalizeThreads, 0, stream_>>>(ws_); });
  }
  Timed(11, [&] { ClearClaimsKernel<<<dim3(cfg_.finalize_split, L), kFinalizeThreads, 0, stream_>>>(ws_); });
}

void GpuDecoder::EnqueueStep(bool f16) {
  const DeviceGraph& g = graph_->view;
  const StepParams p = Params(f16);
  const int L = cfg_.max_lanes;
  const int walk_blocks = cfg_.walk_blocks > 0 ? cfg_.walk_blocks : ExpandBlocksFor(L);
  const int grid = cfg_.scan_split > 1 ? L * cfg_.scan_split : L;
  Timed(1, [&] {
    if (cfg_.scan_split > 1 && cfg_.fused_max) ScanSplitKernel<true><<<grid, kScanThreads, 0, stream_>>>(g, ws_, p);
    else if (cfg_.scan_split > 1) ScanSplitKernel<false><<<grid, kScanThreads, 0, stream_>>>(g, ws_, p);
    else if (cfg_.fused_max) ScanKernel<true><<<grid, kScanThreads, 0, stream_>>>(g, ws_, p);
    else ScanKernel<false><<<grid, kScanThreads, 0, stream_>>>(g, ws_, p);
  });
  if (cfg_.fused_max) {  // the max and the admission in one walk (expand.cuh); profiled as expand
    if (cfg_.walker == kWalkThread)
      Timed(4, [&] { FusedExpandKernel<kWalkThread><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
    else
      Timed(4, [&] { FusedExpandKernel<kWalkWarp><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
  } else if (cfg_.walker == kWalkThread) {
    Timed(3, [&] { MaxKernel<kWalkThread><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
    Timed(4, [&] { ExpandKernel<kWalkThread><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
  } else {
    Timed(3, [&] { MaxKernel<kWalkWarp><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
    Timed(4, [&] { ExpandKernel<kWalkWarp><<<walk_blocks, kWalkThreads, 0, stream_>>>(g, ws_); });
  }
  Timed(5, [&] { FinalizeKernel<<<dim3(cfg_.finalize_split, L), kFinalizeThreads, 0, stream_>>>(g, ws_); });
  if (cfg_.eps_iterations > 0) EnqueueClosure();
}

std::vector<GpuDecoder::Snapshot> GpuDecoder::DecodeSnapshots(const void* lp, bool lp_f16,
                                                              int64_t stride_t, int32_t T, int32_t V,
                                                              int32_t length,
                                                              int64_t caller_stream) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  try {
    cudaError_t stale = cudaGetLastError();  // see Decode
    if (IsStickyError(stale)) Fatal(stale, "found pending before the decode started", 1, T, V, length + 1);
    if (length > cfg_.max_frames) AllocatePath(length);
    ReleaseAllLanes();
    LaneCommand* cmd = As<LaneCommand>(h_commands_);
    LaneInput* in = As<LaneInput>(h_inputs_);
    for (int32_t l = 0; l < cfg_.max_lanes; ++l) cmd[l] = {kCmdInit, l == 0 ? length : -1, l == 0 ? length : 0, 0};
    in[0] = {lp, stride_t, 0, 0};
    Wait(caller_stream);
    const int L = cfg_.max_lanes;
    UploadLaneOrders();
    const StepParams p = Params(lp_f16);
    LaneSetupKernel<<<L, 32, 0, stream_>>>(graph_->view, ws_, p, 1);
    if (cfg_.eps_iterations > 0) EnqueueClosure();
    std::vector<Snapshot> snaps;
    std::vector<WinnerEntry> log;
    // The frontier in buffer `buf` after a step (t < length) or the start (t = -1), or the
    // final token after the final step, with each token's winning arc.
    auto take = [&](int32_t t) {
      CUWFST_CUDA(cudaGetLastError());
      LaneCounters lc;
      CUWFST_CUDA(cudaMemcpyAsync(&lc, ws_.lanes, sizeof(lc), cudaMemcpyDeviceToHost, stream_));
      unsigned long long cursor = 0;
      CUWFST_CUDA(cudaMemcpyAsync(&cursor, ws_.arena_cursor, sizeof(cursor), cudaMemcpyDeviceToHost, stream_));
      CUWFST_CUDA(cudaStreamSynchronize(stream_));
      if (profiling_) CollectProfile();
      Snapshot s;
      const int32_t buf = lc.buf;
      s.phase = lc.phase == kPhaseEps ? kPhaseReal : lc.phase;  // the step's phase, as the CPU's
      s.beam = lc.beam;
      // the cutoff as the kernels computed it
      int32_t mo = lc.max_ord;
      float mx;
      int32_t bits = mo >= 0 ? mo : mo ^ 0x7FFFFFFF;
      std::memcpy(&mx, &bits, sizeof(mx));
      s.cutoff = mx - lc.beam;
      int32_t n = t < length ? std::min(lc.next_size, cfg_.main_q) : (lc.final_winner != -2 ? 1 : 0);
      // after a real step's closure the lane is kPhaseEps (closure = scan) or still
      // kPhaseReal (closure = lists); eps_base is the frontier before the closure either way
      s.before_closure =
          cfg_.eps_iterations > 0 && (lc.phase == kPhaseEps || lc.phase == kPhaseReal) ? lc.eps_base : n;
      if (t < 0) {
        s.phase = kPhaseReal;
        s.beam = cfg_.search_beam;
        s.cutoff = 0.f - cfg_.search_beam;
        s.before_closure = 1;
      }
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
      const unsigned long long kept = std::min<unsigned long long>(cursor, ws_.arena_cap);
      log.resize(kept);
      if (kept) CUWFST_CUDA(cudaMemcpy(log.data(), arena_.get(), kept * sizeof(WinnerEntry), cudaMemcpyDeviceToHost));
      s.arc.resize(n);
      for (int32_t i = 0; i < n; ++i) s.arc[i] = winner[i] >= 0 ? log[winner[i]].arc : -1;
      snaps.push_back(std::move(s));
    };
    take(-1);
    for (int32_t t = 0; t <= length; ++t) {
      EnqueueStep(lp_f16);
      take(t);
    }
    HashSanitizeKernel<<<dim3(64, L), 256, 0, stream_>>>(ws_, 0);
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    return snaps;
  } catch (const CudaError& e) {
    pending_.clear();
    hash_dirty_ = true;
    if (IsStickyError(e.code())) Fatal(e.code(), e.what(), 1, T, V, length + 1);
    SyncQuietly();
    throw;
  } catch (...) {
    pending_.clear();
    hash_dirty_ = true;
    SyncQuietly();
    throw;
  }
}

// Whether a decode of `steps` (bucketed) steps replays a captured graph: not past
// graph_max_steps, with profiling, or without CUDA graphs; those launch plainly (same
// kernels, same numerics).
bool GpuDecoder::Replays(int32_t steps) const {
  return cfg_.use_cuda_graphs && !profiling_ && cfg_.graph_cache_size > 0 && steps <= cfg_.graph_max_steps;
}

// Runs one decode of `steps` steps: with `capture`, replays its captured graph, capturing
// it on first use. If the executable cannot be instantiated for lack of memory, the cached
// ones are given back and this decode launches plainly: graphs are an optimisation.
void GpuDecoder::RunOnce(SeqKind kind, int32_t steps, bool f16, bool capture) {
  if (kind != SeqKind::kAdvance) SetArenaGuard(0);  // only stream advances wait for room
  if (!capture) {
    Enqueue(kind, steps, f16);
    return;
  }
  const GraphCache::Key key{steps, (f16 ? 1 : 0) | (static_cast<int32_t>(kind) << 1)};
  cudaGraphExec_t exec = graphs_.Find(key);
  if (exec == nullptr) {
    cudaGraph_t graph = nullptr;
    CUWFST_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      Enqueue(kind, steps, f16);
    } catch (...) {
      if (cudaStreamEndCapture(stream_, &graph) != cudaSuccess) ClearHandledError();
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    CUWFST_CUDA(cudaStreamEndCapture(stream_, &graph));
    GraphExec owned;
    cudaError_t e = TryGraphInstantiate(graph, &owned);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      if (e != cudaErrorMemoryAllocation) throw CudaError(e, CudaErrorString(e, "cudaGraphInstantiate"));
      FreeGraphs();
      Enqueue(kind, steps, f16);
      return;
    }
    ++graph_captures_;
    exec = graphs_.Insert(key, std::move(owned));
  }
  CUWFST_CUDA(cudaGraphLaunch(exec, stream_));
}

void GpuDecoder::Decode(const void* lp, bool lp_f16, int64_t stride_b, int64_t stride_t,
                        int32_t B, int32_t T, int32_t V, const int32_t* lengths, bool online,
                        int64_t caller_stream, DecodeOutputs out) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  if (B < 1 || B > cfg_.max_lanes) throw std::invalid_argument("batch size outside [1, max_lanes]");
  int32_t max_len = 0;
  for (int32_t b = 0; b < B; ++b) max_len = std::max(max_len, lengths[b]);
  // Graphs replay bucketed step counts; plain launches run exactly the steps needed.
  const int32_t bucket = StepBucket(max_len + 1);
  const bool replay = Replays(bucket);
  const int32_t steps = replay ? bucket : max_len + 1;
  try {
    // The last-error slot is per thread and shared with every library: an error some other
    // call left there must not be reported as this decode's. A sticky one means the
    // context is already gone.
    cudaError_t stale = cudaGetLastError();
    if (IsStickyError(stale)) Fatal(stale, "found pending before the decode started", B, T, V, steps);
    if (max_len > cfg_.max_frames) {  // grow the frame capacity (offline: not a limit)
      int32_t mf = cfg_.max_frames;
      while (mf < max_len) mf *= 2;
      AllocatePath(mf);
    }
    const int L = cfg_.max_lanes;
    const char* base = static_cast<const char*>(lp);
    if (inject_illegal_address_) {  // test hook: an address no allocation has
      inject_illegal_address_ = false;
      base = reinterpret_cast<const char*>(uintptr_t{256});
    }
    // A batch starts every lane afresh: streams or rows a lane held before are gone.
    ReleaseAllLanes();
    LaneCommand* cmd = As<LaneCommand>(h_commands_);
    LaneInput* in = As<LaneInput>(h_inputs_);
    const int64_t elem = lp_f16 ? 2 : 4;
    for (int32_t l = 0; l < L; ++l) {
      cmd[l] = {kCmdInit, l < B ? lengths[l] : -1, l < B ? lengths[l] : 0, online ? 1 : 0};
      in[l] = {base + (l < B ? l : 0) * stride_b * elem, stride_t, 0, 0};
    }
    Wait(caller_stream);
    LaneCounters* h_lanes = As<LaneCounters>(h_lanes_);
    int32_t* h_path_len = As<int32_t>(h_path_len_);
    for (;;) {
      UploadLaneOrders();
      RunOnce(SeqKind::kBatch, steps, lp_f16, replay);
      // Only the batch's B lanes come back; the paths follow once their lengths are known.
      CUWFST_CUDA(cudaMemcpyAsync(h_lanes, ws_.lanes, B * sizeof(LaneCounters), cudaMemcpyDeviceToHost, stream_));
      CUWFST_CUDA(cudaMemcpyAsync(h_path_len, out_path_len_, B * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
      unsigned long long cursor = 0;
      CUWFST_CUDA(cudaMemcpyAsync(&cursor, ws_.arena_cursor, sizeof(cursor), cudaMemcpyDeviceToHost, stream_));
      CUWFST_CUDA(cudaStreamSynchronize(stream_));
      if (profiling_) CollectProfile();
      arena_high_water_ = std::max(arena_high_water_, cursor);
      bool arena_full = false;
      for (int32_t b = 0; b < B; ++b) arena_full |= (h_lanes[b].overflow & kOverflowArena) != 0;
      if (!arena_full || ws_.arena_cap >= cfg_.arena_max) break;
      // decode is idempotent (InitKernel resets all loop state): grow and run it again
      GrowArena(cursor);
    }
    // Path bytes: B rows of the longest kept path, not max_lanes x path_cap (a long input
    // once grew path_cap; short batches after it must not pay for it).
    int64_t width = 0;
    for (int32_t b = 0; b < B; ++b) width = std::max<int64_t>(width, std::min<int64_t>(h_path_len[b], ws_.path_cap));
    const int32_t* h_path = ReadPaths(width, B);
    for (int32_t b = 0; b < B; ++b) WriteResult(b, b, h_lanes[b], h_path_len[b], nullptr, 0, h_path, out);
  } catch (const CudaError& e) {
    pending_.clear();
    hash_dirty_ = true;
    if (IsStickyError(e.code())) Fatal(e.code(), e.what(), B, T, V, steps);
    SyncQuietly();  // no queued kernel may still read the caller's tensor after we return
    throw;
  } catch (...) {
    pending_.clear();
    hash_dirty_ = true;
    SyncQuietly();
    throw;
  }
}

void GpuDecoder::MemStats(int64_t out[kMemStats]) const {
  std::lock_guard<std::mutex> lock(mu_);
  out[0] = fixed_bytes_ + arena_.amount() + out_path_.amount() + gc_tag_.amount() + drain_.amount();
  out[1] = out[0];
  out[2] = fixed_bytes_;
  out[3] = static_cast<int64_t>(arena_high_water_);
  out[4] = h_commands_.amount() + h_inputs_.amount() + h_lanes_.amount() + h_path_.amount() + h_path_len_.amount();
  out[5] = static_cast<int64_t>(graphs_.size());
  out[6] = graph_captures_;
  out[7] = graphs_.evictions();
  out[8] = advance_rounds_;
  out[9] = cfg_.scan_split;
  out[10] = cfg_.closure_lists;
  out[11] = cfg_.finalize_split;
  out[12] = cfg_.fused_max;
}

}  // namespace cuwfst
