// The GPU decoder's host side: allocation, the per-step launch sequence, CUDA-graph
// capture per step bucket (a bounded LRU cache), and the batch-end result readback.
//
// Failure rules (issue 14): a buffer is replaced only after its successor exists, so an
// allocation that fails leaves the decoder as it was and usable; the pending error of a
// handled failure is cleared; a sticky CUDA error (the context is dead) becomes
// CudaContextLost naming the decode's shape, and the decoder refuses later calls.
#include "gpu_decoder.cuh"

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <sstream>
#include <stdexcept>

#include "cuwfst/epsilon.cuh"
#include "cuwfst/expand.cuh"
#include "cuwfst/finalize.cuh"
#include "cuwfst/lattice.cuh"
#include "cuwfst/lattice_after.cuh"
#include "cuwfst/scan.cuh"

namespace cuwfst {

namespace {
template <typename T>
T* As(const PinnedBuffer& b) {
  return static_cast<T*>(b.get());
}


// Whether the environment switches a default off: NAME=off, read at construction (for same-run A/B
// with two decoders)
bool EnvOff(const char* name) {
  const char* env = std::getenv(name);
  return env != nullptr && std::strcmp(env, "off") == 0;
}

// A two-valued switch: `on` true, `off` false, unset or empty `current`; anything else refused.
bool EnvChoice(const char* name, const char* on, const char* off, bool current) {
  const char* env = std::getenv(name);
  if (env == nullptr || env[0] == '\0') return current;
  if (std::strcmp(env, on) != 0 && std::strcmp(env, off) != 0)
    throw std::invalid_argument(std::string(name) + " must be " + off + " or " + on + ", got '" + env + "'");
  return std::strcmp(env, on) == 0;
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

// The streams' arena guard on (stream advances: scan.cuh ArenaStepFits) or off, in stream order.
void GpuDecoder::SetArenaGuard(bool on) {
  const unsigned long long value = on ? 1ull : 0ull;
  if (value == arena_guard_host_) return;
  arena_guard_host_ = value;  // a member: the pageable copy reads it before returning
  CUWFST_CUDA(cudaMemcpyAsync(arena_guard_, &arena_guard_host_, sizeof(value), cudaMemcpyHostToDevice, stream_));
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
     << ", now " << arena_cap_
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

// The priorities of the decoder's own streams (the search's, the pruning finisher's), from
// CUWFST_STREAM_PRIORITY: unset or "default" the default for both; "high" the device's greatest for
// both (the search's kernels dispatched before those of other work on the GPU, such as a lattice
// pass beside it: issue 10's experiment); "search" the greatest for the search and the least for
// the pruning, which runs beside the next sub-batch's search (CUWFST_LATTICE_PIPELINE).
void GpuDecoder::StreamPriorities(int* search, int* prune) {
  *search = *prune = 0;
  const char* env = std::getenv("CUWFST_STREAM_PRIORITY");
  if (env == nullptr || std::strcmp(env, "") == 0 || std::strcmp(env, "default") == 0) return;
  const bool high = std::strcmp(env, "high") == 0;
  if (!high && std::strcmp(env, "search") != 0)
    throw std::invalid_argument(std::string("CUWFST_STREAM_PRIORITY must be 'default', 'high' or 'search', not '") +
                                env + "'");
  int least = 0, greatest = 0;
  if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
    ClearHandledError();
    return;
  }
  *search = greatest;
  *prune = high ? greatest : least;
}

GpuDecoder::GpuDecoder(std::shared_ptr<GpuGraph> graph, const DecoderConfig& cfg)
    : graph_(std::move(graph)), cfg_(cfg), graphs_(static_cast<size_t>(std::max(cfg.graph_cache_size, 0))) {
  DeviceGuard guard(graph_->device);
  try {
    StreamPriorities(&stream_priority_, &prune_priority_);
    cudaError_t e = TryStreamCreate(cudaStreamNonBlocking, &stream_owned_, stream_priority_);
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
  ws_.eps_iterations = cfg_.eps_iterations;
  ws_.hint_cap = static_cast<int32_t>(std::min<int64_t>(4 * Q + 1, INT32_MAX / 64));
  ws_.pooled = 0;  // per sequence: SeqWorkspace
  ws_.lane_arc_offsets = Alloc<int64_t>(L + 1, "lane_arc_offsets");
  ws_.scan_done = Alloc<int32_t>(1, "scan counter");
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_done, 0, sizeof(int32_t), stream_));
  ws_.max_done = Alloc<int32_t>(1, "max counter");
  CUWFST_CUDA(cudaMemsetAsync(ws_.max_done, 0, sizeof(int32_t), stream_));
  ws_.expand_done = Alloc<int32_t>(1, "expand counter");
  CUWFST_CUDA(cudaMemsetAsync(ws_.expand_done, 0, sizeof(int32_t), stream_));
  // the kernel variants (gpu_decoder.cuh DecoderConfig; docs/design.md "kernel variants")
  if (cfg_.scan_split == 0) cfg_.scan_split = AutoScanSplit(cfg_.max_lanes);
  ws_.scan_split = cfg_.scan_split;
  if (cfg_.scan_round == 0) cfg_.scan_round = kScanRoundTokens;
  ws_.scan_round = cfg_.scan_round;
  ws_.walk_search = cfg_.walker == kWalkWarpSearch ? 1 : 0;  // (the kWalkWarp kernels either way)
  if (cfg_.walker == kWalkWarpCoop || cfg_.walker == kWalkWarpCoopPdl) {  // CoopWalkKernel where the device launches cooperative grids
    int coop = 0, sms = 0, per_sm = 0;
    CUWFST_CUDA(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, graph_->device));
    CUWFST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, graph_->device));
    CUWFST_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, CoopWalkKernel, kWalkThreads, 0));
    coop_cap_ = coop ? per_sm * sms : 0;
    coop_pdl_ = cfg_.walker == kWalkWarpCoopPdl;
  }
  // scan_order 3: the persistent scan (2) without fetching ahead (Workspace::scan_preload)
  ws_.scan_preload = cfg_.scan_order == 3 ? 0 : 1;
  if (cfg_.scan_order == 3) cfg_.scan_order = 2;
  // the persistent scan: with the split scan, at most kPersistMaxLanes lanes (else chunk-major)
  if (cfg_.scan_order == 2 && !(cfg_.scan_split > 1 && cfg_.max_lanes <= kPersistMaxLanes)) cfg_.scan_order = 1;
  ws_.scan_chunk_major = cfg_.scan_order == 1 ? 1 : 0;
  ws_.scan_out = Alloc<LaneStepOut>(L, "scan lane steps");
  if (cfg_.scan_order == 2) {  // one wave: a CTA a multiprocessor (the scan's occupancy), at most L x C
    int sms = 0;
    CUWFST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, graph_->device));
    persist_grid_ = static_cast<int32_t>(std::min<int64_t>(L * cfg_.scan_split, std::max(sms, 1)));
  }
  // the phase trace (diagnostics: CUWFST_SCAN_TRACE=N keeps the last N steps; the persistent scan only)
  if (const char* env = std::getenv("CUWFST_SCAN_TRACE"); env != nullptr && cfg_.scan_order == 2) {
    const long n = std::strtol(env, nullptr, 10);
    if (n > 0) {
      ws_.scan_trace_cap = static_cast<int32_t>(std::min<long>(n, 4096));
      const size_t words = static_cast<size_t>(ws_.scan_trace_cap) * persist_grid_ * kScanTraceWords;
      ws_.scan_trace = Alloc<unsigned long long>(words, "scan trace");
      ws_.scan_trace_step = Alloc<int32_t>(1, "scan trace step");
      CUWFST_CUDA(cudaMemsetAsync(ws_.scan_trace, 0, words * sizeof(unsigned long long), stream_));
      CUWFST_CUDA(cudaMemsetAsync(ws_.scan_trace_step, 0, sizeof(int32_t), stream_));
    }
  }
  // MaxKernel's running max from the trim's anchor (Workspace::max_anchor): on unless
  // CUWFST_MAX_ANCHOR=off (read here, at construction, for same-run A/B with two decoders)
  if (EnvOff("CUWFST_MAX_ANCHOR"))
    max_anchor_ = false;
  // and MaxKernel leaving out the lanes whose max the anchor already is (Workspace::max_known):
  // on unless CUWFST_MAX_KNOWN=off (read here too)
  if (EnvOff("CUWFST_MAX_KNOWN"))
    max_known_ = false;
  // the walkers' grids one by one (gpu_decoder.cuh max_blocks_): CUWFST_{MAX,EXPAND,LAT}_BLOCKS=N
  for (auto [name, field] : {std::pair<const char*, int32_t*>{"CUWFST_MAX_BLOCKS", &max_blocks_},
                             {"CUWFST_EXPAND_BLOCKS", &expand_blocks_}, {"CUWFST_LAT_BLOCKS", &lat_blocks_}})
    if (const char* env = std::getenv(name); env != nullptr) {
      const long n = std::strtol(env, nullptr, 10);
      if (n < 0 || n > (1 << 20)) throw std::invalid_argument(std::string(name) + " out of range");
      *field = static_cast<int32_t>(n);
    }
  if (const char* env = std::getenv("CUWFST_LATTICE_APPEND"); env != nullptr && std::strcmp(env, "warp") == 0)
    lat_append_block_ = false;
  if (EnvOff("CUWFST_LATTICE_CAND_FINAL"))
    lat_cand_final_ = false;
  // ExpandKernel's and LatPersistKernel's register bound (warp walker): CUWFST_EXPAND_MIN_BLOCKS=1|6,
  // CUWFST_LAT_MIN_BLOCKS=4|6 (the first the default)
  for (auto [name, field, base] : {std::tuple<const char*, int32_t*, char>{"CUWFST_EXPAND_MIN_BLOCKS", &expand_min_blocks_, '1'},
                                   {"CUWFST_LAT_MIN_BLOCKS", &lat_min_blocks_, '4'}})
    if (const char* env = std::getenv(name); env != nullptr) {
      if (!(env[0] == base || env[0] == '6') || env[1] != '\0')
        throw std::invalid_argument(std::string(name) + " must be " + base + " or 6, got '" + env + "'");
      *field = env[0] - '0';
    }
  lat_after_ = EnvChoice("CUWFST_LATTICE_RECORDS", "after", "step", lat_after_);
  readback_staged_ = EnvChoice("CUWFST_READBACK", "pinned", "pageable", readback_staged_);
  lat_chain_ = EnvChoice("CUWFST_LATTICE_CHAIN", "on", "off", lat_chain_);
  lat_claims_ = EnvChoice("CUWFST_LATTICE_CLAIMS", "claim", "stride", lat_claims_);
  ws_.lat_claims = lat_claims_ ? 1 : 0;
  lat_reserve_ = EnvChoice("CUWFST_LATTICE_RESERVE", "chunk", "round", lat_reserve_);
  ws_.lat_reserve = lat_reserve_ ? 1 : 0;
  if (const char* env = std::getenv("CUWFST_PRUNE_BEGIN"); env != nullptr && env[0] != '\0') {
    const int32_t v = std::strcmp(env, "sync") == 0 ? kPrBeginSync : std::strcmp(env, "async") == 0 ? kPrBeginAsync
                      : std::strcmp(env, "side") == 0 ? kPrBeginSide : -1;
    if (v < 0) throw std::invalid_argument(std::string("CUWFST_PRUNE_BEGIN must be side, async or sync, got '") + env + "'");
    pr_begin_mode_ = v;
  }
  if (const char* env = std::getenv("CUWFST_PRUNE_SIDE_DELAY_US"); env != nullptr && env[0] != '\0') {
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (end == env || *end != '\0' || v < 0 || v > 10000000)
      throw std::invalid_argument(std::string("CUWFST_PRUNE_SIDE_DELAY_US must be an integer in [0, 10000000], got '") +
                                  env + "'");
    pr_side_delay_us_ = v;
  }
  pr_side_wait_ = EnvChoice("CUWFST_PRUNE_SIDE_WAIT", "on", "off", pr_side_wait_);
  lat_prof_ = EnvChoice("CUWFST_LATTICE_AFTER_PROF", "on", "off", lat_prof_);
  lat_one_grid_ = EnvChoice("CUWFST_LATTICE_AFTER_GRID", "one", "classes", lat_one_grid_);
  ws_.lat_one_grid = lat_one_grid_ ? 1 : 0;
  lat_compact_ = EnvChoice("CUWFST_LATTICE_AFTER_COMPACT", "on", "off", lat_compact_);
  // (the class grids walk as before: the compacted walk is the one grid's alone)
  if (!lat_one_grid_) {
    if (const char* env = std::getenv("CUWFST_LATTICE_AFTER_COMPACT"); env != nullptr && std::strcmp(env, "on") == 0)
      throw std::invalid_argument("CUWFST_LATTICE_AFTER_COMPACT=on needs the one grid (CUWFST_LATTICE_AFTER_GRID=one)");
    lat_compact_ = false;
  }
  // (claimed tokens are the compacted walk's: without it the walk takes every 8th token)
  lat_claim_tokens_ = EnvChoice("CUWFST_LATTICE_AFTER_TOKENS", "claim", "stride", lat_claim_tokens_) && lat_compact_;
  lat_packed_walk_ = EnvChoice("CUWFST_LATTICE_AFTER_PACKED", "on", "off", lat_packed_walk_);
  lat_octet_walk_ = EnvChoice("CUWFST_LATTICE_AFTER_OCTETS", "on", "off", lat_octet_walk_);
  lat_c14_index_ = EnvChoice("CUWFST_LATTICE_AFTER_C14", "index", "global", lat_c14_index_);
  ws_.lat_c14_index = lat_c14_index_ ? 1 : 0;
  lat_tab_packed_ = EnvChoice("CUWFST_LATTICE_TABLES", "packed", "split", lat_tab_packed_);
  // CUWFST_LATTICE_LOG=kernel | finalize | side | scan (Workspace::lat_log_fold 0, 1, 2, 3)
  if (const char* env = std::getenv("CUWFST_LATTICE_LOG"); env != nullptr && env[0] != '\0') {
    const int32_t v = std::strcmp(env, "kernel") == 0 ? 0 : std::strcmp(env, "finalize") == 0 ? 1
                      : std::strcmp(env, "side") == 0  ? 2 : std::strcmp(env, "scan") == 0 ? 3 : -1;
    if (v < 0)
      throw std::invalid_argument(std::string("CUWFST_LATTICE_LOG must be kernel, finalize, side or scan, got '") + env +
                                  "'");
    lat_log_fold_ = v;
  }
  lat_log_extra_ = EnvChoice("CUWFST_LATTICE_LOG_EXTRA", "copy", "none", lat_log_extra_);
  // CUWFST_LATTICE_AFTER_CHUNK: S_t's tokens a records pass work item (Workspace::lat_chunk)
  lat_chunk_ = kAfterChunk;
  if (const char* env = std::getenv("CUWFST_LATTICE_AFTER_CHUNK"); env != nullptr && env[0] != '\0') {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || !(v == 256 || v == 512 || v == 1024 || v == 2048 || v == 4096))
      throw std::invalid_argument(std::string("CUWFST_LATTICE_AFTER_CHUNK must be 256, 512, 1024, 2048 or 4096, got '") +
                                  env + "'");
    lat_chunk_ = static_cast<int32_t>(v);
  }
  ws_.lat_chunk = lat_chunk_;
  ws_.lat_log_fold = lat_log_fold_;
  la_log_split_ = kAfterLogSplit;
  if (const char* env = std::getenv("CUWFST_LATTICE_LOG_SPLIT"); env != nullptr && env[0] != '\0') {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 1 || v > 128)
      throw std::invalid_argument(std::string("CUWFST_LATTICE_LOG_SPLIT must be 1 to 128, got '") + env + "'");
    la_log_split_ = static_cast<int32_t>(v);
  }
  if (const char* env = std::getenv("CUWFST_LAT_CLEAR"); env != nullptr) {
    if (std::strcmp(env, "keys") != 0 && std::strcmp(env, "full") != 0)
      throw std::invalid_argument(std::string("CUWFST_LAT_CLEAR must be keys or full, got '") + env + "'");
    lat_clear_keys_ = std::strcmp(env, "keys") == 0;
  }
  ws_.max_lane_offsets = Alloc<int64_t>(L + 1, "the max's lane offsets");
  ws_.scan_umax = Alloc<uint32_t>(L, "scan token bounds");
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_umax, 0, L * sizeof(uint32_t), stream_));
  ws_.scan_status = Alloc<unsigned long long>(L * cfg_.scan_split, "scan look-back status");
  ws_.scan_lane_done = Alloc<int32_t>(L, "scan lane counters");
  ws_.scan_ticket = Alloc<int32_t>(1, "scan tickets");
  ws_.scan_best = Alloc<unsigned long long>(L, "scan best tokens");
  ws_.fused_max = cfg_.fused_max;
  if (cfg_.pdl) {  // programmatic dependent launch: compute capability 9.0 and later
    int major = 0;
    CUWFST_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device()));
    pdl_ = major >= 9;
  }
  ws_.trim = cfg_.trim_arcs && graph_->view.emit_sorted ? 1 : 0;
  // the trims' label bound (types.cuh Workspace::label_bound): on where the graph has label
  // tables unless CUWFST_LABEL_BOUND=off (read here, at construction, for same-run A/B)
  if (EnvOff("CUWFST_LABEL_BOUND"))
    label_bound_ = false;
  ws_.label_bound = label_bound_ && graph_->view.label_words > 0 ? 1 : 0;
  // the trim's weights-only search (Workspace::trim_weights): where the graph has the blank
  // counts, unless CUWFST_TRIM_WEIGHTS=off (at construction, for same-run A/B)
  if (EnvOff("CUWFST_TRIM_WEIGHTS"))
    trim_weights_ = false;
  ws_.trim_weights = trim_weights_ && graph_->view.emit_blank != nullptr ? 1 : 0;
  ws_.slot_total = Alloc<unsigned long long>(2, "slot counters");
  CUWFST_CUDA(cudaMemsetAsync(ws_.slot_total, 0, 2 * sizeof(unsigned long long), stream_));
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_status, 0, L * cfg_.scan_split * sizeof(unsigned long long), stream_));
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_lane_done, 0, L * sizeof(int32_t), stream_));
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_ticket, 0, sizeof(int32_t), stream_));
  CUWFST_CUDA(cudaMemsetAsync(ws_.scan_best, 0, L * sizeof(unsigned long long), stream_));
  // closure = lists encodes entry j's k-th epsilon arc as payload slot j * stride + k < 2^31,
  // and EpsListExpandKernel's per-CTA lane scan holds kEpsListMaxLanes lanes (its shared
  // lane_off[kEpsListMaxLanes + 1]; kMaxLanes is larger): past either, closure = scan.
  const int64_t stride = std::max<int32_t>(graph_->max_eps_degree, 1);
  if (cfg_.eps_iterations == 0 || Q * stride > INT32_MAX || L > kEpsListMaxLanes) cfg_.closure_lists = 0;
  // closure = chain: one epsilon arc a state, acyclic, eps_iterations covering the longest
  // chain (GpuGraph::max_eps_chain; the host checks the same, gpu.py chain_closure_ok), and
  // entry j's hop k as payload slot j * eps_iterations + k below kBaselineSlot; else the lists
  if (cfg_.closure_lists == kClosureChain &&
      (graph_->max_eps_degree > 1 || graph_->max_eps_chain < 0 || graph_->max_eps_chain > cfg_.eps_iterations ||
       (Q + 1) * cfg_.eps_iterations >= static_cast<int64_t>(kBaselineSlot)))
    cfg_.closure_lists = 1;
  ws_.closure_lists = cfg_.closure_lists;
  ws_.eps_stride = static_cast<int32_t>(stride);
  // payload_tokens (CUWFST_PAYLOAD=token, the default; slot for same-run A/B): an emitting
  // payload's low word is {token : index among its slots} (Workspace::payload_tok) where every
  // such word stays below 2^31: a frontier index is below main_q and an index below the graph's
  // max degree; else the local slot. Results are the same either way.
  ws_.payload_tok = 0;
  if (cfg_.payload_tokens) {
    int32_t bits = 1;
    while (bits < 31 && (int64_t{1} << bits) < graph_->max_degree) ++bits;
    if (bits < 31 && (Q << bits) <= (int64_t{1} << 31)) ws_.payload_tok = bits;
  }
  // A pooled 1-best batch's lane capacities (DecoderConfig::pool_q, SeqWorkspace): at least
  // main_q's; at most the graph's states, the payload words' 2^31 (as main_q above) and
  // tok_hint's int32 slot space (4 entries a token, as pooled_ok_ below asks of main_q)
  {
    int64_t pq = std::min<int64_t>(std::max<int64_t>(cfg_.pool_q, Q), graph_->view.num_states);
    if (ws_.payload_tok > 0) pq = std::min<int64_t>(pq, (int64_t{1} << 31) >> ws_.payload_tok);
    pq = std::max<int64_t>(std::min<int64_t>(pq, INT32_MAX / 256 - 1), Q);
    pool_q_ = static_cast<int32_t>(pq);
    if (pq == Q) {
      pool_claims_ = cfg_.claims_cap;
      pool_hash_ = cfg_.hash_cap;
    } else {  // as the Python side sizes main_q's (gpu.py lane_capacities)
      const int64_t claims = std::min<int64_t>(graph_->view.num_states, 2 * pq);
      int64_t h = 2;
      while (h < 2 * claims) h <<= 1;
      pool_claims_ = static_cast<int32_t>(claims);
      pool_hash_ = static_cast<int32_t>(std::max<int64_t>(std::min<int64_t>(h, int64_t{1} << 30), cfg_.hash_cap));
    }
    pool_hint_cap_ = static_cast<int32_t>(std::min<int64_t>(4 * pq + 1, INT32_MAX / 64));
  }
  ws_.pool_full = cfg_.pool_full;  // (a pooled-layout diagnostic; read only where the layout is pooled)
  // auto: up to AutoFinalizeSplit CTAs a lane, each taking at least a round of claims (a lane
  // with 600 claims runs in one CTA, not 32 that each take 19 and all meet at the arena's
  // cursor); an explicit split: even chunks over it, as before
  ws_.split_min = cfg_.finalize_split == 0 ? kFinalizeThreads * kFinalizeItems : 1;
  if (cfg_.finalize_split == 0) cfg_.finalize_split = AutoFinalizeSplit(cfg_.max_lanes);
  if (cfg_.eps_blocks <= 0) {
    int sms = 0;
    CUWFST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, graph_->device));
    cfg_.eps_blocks = 8 * std::max(sms, 1);
  }
  d_pool_cap_ = Alloc<long long>(kPools, "pool capacities");
  d_pool_need_ = Alloc<unsigned long long>(kPoolNeedSlots, "pool demand");
  CUWFST_CUDA(cudaMemsetAsync(d_pool_need_, 0, kPoolNeedSlots * sizeof(unsigned long long), stream_));
  ws_.pool_cap = d_pool_cap_;
  ws_.pool_need = d_pool_need_;
  // The lane pools (types.cuh). Offline batches on epsilon-free graphs take the pooled
  // layout when memory is lazy (a region's hint takes 4 entries a token, so main_q must
  // keep them inside tok_hint's int32 slot space); everything else takes the static one.
  // Every kernel variant honours both layouts (scan_split, finalize_split; closure = lists
  // only runs on epsilon graphs, which are never pooled, but indexes through the lanes'
  // regions all the same), so the variant does not enter this choice.
  pooled_ok_ = cfg_.lazy && cfg_.lane_pool != 0 && cfg_.eps_iterations == 0 && 4 * (Q + 1) <= INT32_MAX / 64;
  // (pooled regions are rounded up to kPoolAlign tokens and 16 claims a lane: the static
  // sizes plus that are the most any step can ask)
  stat_max_[kPoolTokens] = L * (Q + 1 + kPoolAlign);
  stat_max_[kPoolClaims] = L * (cfg_.claims_cap + 16);
  stat_max_[kPoolHash] = L * cfg_.hash_cap;
  std::copy(stat_max_, stat_max_ + kPools, pool_max_);  // (pool_q's sizes once pooled_ok_ is known)
  auto add = [&](void** target, int32_t pool, int32_t elem, int32_t per_entry, int32_t fill, int64_t static_entries) {
    auto a = std::make_unique<PoolArray>();
    a->target = target;
    a->pool = pool;
    a->elem = elem;
    a->per_entry = per_entry;
    a->fill = fill;
    a->static_entries = static_entries;
    pool_arrays_.push_back(std::move(a));
  };
  const int64_t F = pool_max_[kPoolTokens], C = pool_max_[kPoolClaims], H = pool_max_[kPoolHash];
  for (int b = 0; b < 2; ++b) {
    add(reinterpret_cast<void**>(&ws_.tok_state[b]), kPoolTokens, 4, 1, -1, F);
    add(reinterpret_cast<void**>(&ws_.tok_score[b]), kPoolTokens, 4, 1, -1, F);
    add(reinterpret_cast<void**>(&ws_.tok_winner[b]), kPoolTokens, 4, 1, -1, F);
  }
  add(reinterpret_cast<void**>(&ws_.tok_begin), kPoolTokens, 4, 1, -1, F);
  add(reinterpret_cast<void**>(&ws_.tok_ub), kPoolTokens, 4, 1, -1, F);
  add(reinterpret_cast<void**>(&ws_.arc_offsets), kPoolTokens, 4, 1, -1, F);
  add(reinterpret_cast<void**>(&ws_.tok_hint), kPoolTokens, 4, 4, -1, L * ws_.hint_cap);
  add(reinterpret_cast<void**>(&ws_.claims), kPoolClaims, 8, 1, -1, C);
  add(reinterpret_cast<void**>(&ws_.hash_key), kPoolHash, 4, 1, 0xFF, H);
  add(reinterpret_cast<void**>(&ws_.hash_payload), kPoolHash, 8, 1, 0, H);
  if (cfg_.eps_iterations > 0) {
    add(reinterpret_cast<void**>(&ws_.hash_pos), kPoolHash, 4, 1, 0xFF, H);
    add(reinterpret_cast<void**>(&ws_.eps_tok), kPoolTokens, 4, 1, -1, F);
    add(reinterpret_cast<void**>(&ws_.eps_winner), kPoolTokens, 4, 1, -1, F);
    add(reinterpret_cast<void**>(&ws_.eps_touched), kPoolClaims, 4, 1, -1, C);
    if (cfg_.closure_lists) add(reinterpret_cast<void**>(&ws_.eps_list1), kPoolTokens, 4, 1, -1, F);
  }
  if (pooled_ok_ && cfg_.lane_pool == 2) {  // auto: only where pooling can hold less
    const size_t piece = std::max<size_t>(VmmGranularity(device()), size_t{2} << 20);
    int64_t static_bytes = 0;
    for (const auto& a : pool_arrays_) static_bytes += a->static_entries * a->elem;
    pooled_ok_ = static_bytes > static_cast<int64_t>(2 * pool_arrays_.size() * piece);
  }
  // CUWFST_LANE_VMM (a diagnostic for same-run A/B, read when the decoder is built): "auto" (or
  // unset) VMM reservations for the lane arrays where they are pooled, eager regions
  // (cudaMalloc'd) for the static layout; "off" eager regions for a pooled decoder too (moved and
  // re-captured on growth, the fallback where VMM is refused); "on" a VMM reservation for the
  // static layout too (committed whole in one piece, EnsureStatic). The layouts are unchanged.
  const char* vmm_env = std::getenv("CUWFST_LANE_VMM");
  const std::string lane_vmm = vmm_env != nullptr ? vmm_env : "auto";
  const bool want_vmm = lane_vmm == "on" || (pooled_ok_ && lane_vmm != "off");
  if (pooled_ok_) {  // a pooled 1-best lane may hold pool_q tokens: the pools' most is every lane's
    pool_max_[kPoolTokens] = L * (static_cast<int64_t>(pool_q_) + 1 + kPoolAlign);
    pool_max_[kPoolClaims] = L * (static_cast<int64_t>(pool_claims_) + 16);
    pool_max_[kPoolHash] = L * static_cast<int64_t>(pool_hash_);
  }
  for (auto& a : pool_arrays_) {
    // both layouts fit: the static one, and (pooled) 4 hint entries a token, 3 a lane more
    // than the static hint slices; the static commit takes it all. The reservation also
    // holds the pools' most (pool_q), which only pooled steps reach
    if (pooled_ok_) a->static_entries = std::max<int64_t>(a->static_entries, a->per_entry * stat_max_[a->pool]);
    a->reserve_entries = std::max<int64_t>(a->static_entries, pooled_ok_ ? a->per_entry * pool_max_[a->pool] : 0);
    const int64_t most = a->reserve_entries;
    cudaError_t e = a->region.Init(static_cast<size_t>(most) * a->elem, want_vmm);
    if (e != cudaSuccess && e != cudaErrorMemoryAllocation && !IsStickyError(e))
      e = a->region.Init(static_cast<size_t>(most) * a->elem, false);  // VMM refused: eager
    if (e != cudaSuccess) {
      std::ostringstream os;
      os << "cannot reserve " << FormatBytes(most * a->elem) << " of address space for the lane pools on cuda:"
         << device() << "; " << Advice();
      ThrowAcquireFailure(e, os.str());
    }
  }
  // the bins bound's per-lane suffix sums (types.cuh Workspace::pool_bins), zero between steps
  ws_.pool_bins = 0;  // per sequence: SeqWorkspace
  ws_.pool_late = 0;
  ws_.pool_hints = 0;
  ws_.bin_slots = nullptr;
  if (pooled_ok_ && cfg_.pool_bound == kPoolBoundBins && !cfg_.fused_max) {
    ws_.bin_slots = Alloc<int32_t>(L * kPoolBins, "the bins bound's counts");
    CUWFST_CUDA(cudaMemsetAsync(ws_.bin_slots, 0, L * kPoolBins * sizeof(int32_t), stream_));
  }
  if (pooled_ok_) {
    // a first commit: the start tokens (kPoolAlign a lane) and a little of each pool; a VMM region
    // rounds each array up to its granularity, and the capacity published is what all of a
    // pool's arrays hold, so the first pieces are used whole
    const int64_t want[kPools] = {kPoolAlign * L, std::min<int64_t>(C, 1 << 12), std::min<int64_t>(H, 1 << 13)};
    CommitPools(want, false, "the first batch");
    std::copy(pool_cap_, pool_cap_ + kPools, first_pools_);
  } else {
    EnsureStatic();
  }
  ws_.arena_cursor = Alloc<unsigned long long>(1, "arena cursor");
  arena_guard_ = Alloc<unsigned long long>(1, "arena guard");
  ws_.arena_guard = arena_guard_;
  CUWFST_CUDA(cudaMemsetAsync(arena_guard_, 0, sizeof(unsigned long long), stream_));
  ws_.arena_pause = Alloc<unsigned long long>(1, "arena pause");
  CUWFST_CUDA(cudaMemsetAsync(ws_.arena_pause, 0, sizeof(unsigned long long), stream_));
  ws_.lanes = Alloc<LaneCounters>(L, "lane counters");
  // zero: a lane that no sequence has initialized yet is released by the first one, which
  // leaves its regions as they are; HashSanitizeKernel reads them, so no garbage may be there
  CUWFST_CUDA(cudaMemsetAsync(ws_.lanes, 0, L * sizeof(LaneCounters), stream_));
  d_commands_ = Alloc<LaneCommand>(L, "lane commands");
  ws_.commands = d_commands_;
  d_inputs_ = Alloc<LaneInput>(L, "lane inputs");
  ws_.inputs = d_inputs_;
  ws_.out_path_len = out_path_len_ = Alloc<int32_t>(L, "path lengths");
  // the device-side refill's queue and done records: 4 rows a lane a segment (each refill
  // takes one of each, so the two run out together)
  refill_queue_cap_ = 4 * L;
  refill_done_cap_ = 4 * L;
  d_refill_queue_ = Alloc<RefillEntry>(refill_queue_cap_, "refill queue");
  ws_.refill_queue = d_refill_queue_;
  ws_.refill_ctl = Alloc<int32_t>(kRefillCtl, "refill control");
  CUWFST_CUDA(cudaMemsetAsync(ws_.refill_ctl, 0, kRefillCtl * sizeof(int32_t), stream_));
  ws_.refill_done = Alloc<RefillDone>(refill_done_cap_, "refill records");
  ws_.refill_row = Alloc<int32_t>(L, "refill rows");
  ws_.refill_arrive = Alloc<int32_t>(L, "refill arrivals");
  CUWFST_CUDA(cudaMemsetAsync(ws_.refill_arrive, 0, L * sizeof(int32_t), stream_));
  // (the records log's fold into FinalizeKernel, Workspace::lat_log_fold: back to 0 after each step)
  ws_.lat_log_arrive = Alloc<int32_t>(L, "the records log's arrivals");
  CUWFST_CUDA(cudaMemsetAsync(ws_.lat_log_arrive, 0, L * sizeof(int32_t), stream_));
  // (lat_log_fold 2: each lane's copy job, empty between steps' copies)
  ws_.lat_log_job = Alloc<LatLogJob>(L, "the records log's copy jobs");
  CUWFST_CUDA(cudaMemsetAsync(ws_.lat_log_job, 0, L * sizeof(LatLogJob), stream_));
  ws_.refill_path_len = Alloc<int32_t>(refill_done_cap_, "refill path lengths");
  ws_.refill_inputs = d_inputs_;
  ws_.refill = 0;
  ws_.refill_path = nullptr;  // EnsureRefillPaths
  ws_.gc_live = Alloc<unsigned long long>(1, "GC live counter");
  ws_.gc_conv = Alloc<int32_t>(L, "GC convergence points");
  ws_.drain_len = Alloc<int32_t>(L, "GC drain lengths");
  lane_host_.assign(L, LaneHost{});
  d_arena_limit_ = Alloc<long long>(1, "the winners-log limit");
  ws_.arena_limit = d_arena_limit_;
  // The winners log is the one structure that grows (offline: grow and re-run). As a VMM
  // region its worst case is reserved here and memory is committed as batches need it;
  // the GC tags share its size and are reserved alongside, committed on the first GC.
  const size_t log_max = static_cast<size_t>(cfg_.arena_max) * sizeof(WinnerEntry);
  const bool log_host = cfg_.winners_host && pooled_ok_;
  cudaError_t e = arena_.Init(log_max, cfg_.lazy, log_host);
  // a driver that reports VMM but refuses it (not for lack of memory): the eager log
  if (e != cudaSuccess && e != cudaErrorMemoryAllocation && !IsStickyError(e)) e = arena_.Init(log_max, false);
  if (e == cudaSuccess && log_host) (void)arena_.SetHost(true);  // stays on the device where it cannot
  // (eager tags take nothing here)
  if (e == cudaSuccess) e = gc_tags_.Init(static_cast<size_t>(cfg_.arena_max) * sizeof(long long), arena_.vmm());
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot reserve " << FormatBytes(static_cast<int64_t>(log_max)) << " of address space for the winners log ("
       << cfg_.arena_max << " entries at most) on cuda:" << device() << "; lower max_lanes (now " << cfg_.max_lanes
       << ")";
    ThrowAcquireFailure(e, os.str());
  }
  ws_.gc_tag = gc_tags_.vmm() ? static_cast<long long*>(gc_tags_.get()) : nullptr;
  CommitArena(cfg_.arena_cap, false, "the winners log");
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
  pinned(&h_refill_queue_, refill_queue_cap_ * sizeof(RefillEntry), "the refill queue");
  pinned(&h_refill_ctl_, kRefillCtl * sizeof(int32_t), "the refill control words");
  pinned(&h_refill_done_, refill_done_cap_ * sizeof(RefillDone), "the refill records");
  pinned(&h_refill_row_, L * sizeof(int32_t), "the refill rows");
  pinned(&h_many_cursor_, sizeof(unsigned long long), "the segment's log cursor");
  pinned(&h_readback_, kReadbackBytes + 32 * static_cast<size_t>(L), "the decodes' readbacks");
  pinned(&pr_readback_, kReadbackBytes + 32 * static_cast<size_t>(L), "the lattice prunings' readbacks");
  pinned(&h_refill_path_len_, refill_done_cap_ * sizeof(int32_t), "the refill path lengths");
  // the input check's buffers for up to L rows (FirstNonFinite grows them for more)
  const size_t fin = sizeof(unsigned long long) + sizeof(int32_t) * static_cast<size_t>(L);
  const cudaError_t fe = TryDeviceAlloc(fin, &finite_dev_);
  if (fe != cudaSuccess) {
    std::ostringstream os;
    os << "cannot allocate " << FormatBytes(static_cast<int64_t>(fin)) << " for the input check of a decoder on cuda:"
       << device() << "; lower max_lanes (now " << cfg_.max_lanes << ")";
    ThrowAcquireFailure(fe, os.str());
  }
  pinned(&finite_host_, fin, "the input check");
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

// The done rows' path buffers of the device-side refill, [refill_done_cap_, path_cap] on the
// device and pinned on the host, (re)allocated when a refill decode first needs them and after
// path_cap grew; the captured graphs hold the old pointer, so they go.
void GpuDecoder::EnsureRefillPaths() {
  if (refill_path_cap_ == ws_.path_cap && refill_path_.get() != nullptr) return;
  const size_t bytes = static_cast<size_t>(refill_done_cap_) * ws_.path_cap * sizeof(int32_t);
  DeviceBuffer d;
  PinnedBuffer h;
  cudaError_t e = TryDeviceAlloc(bytes, &d);
  if (e == cudaSuccess) e = TryPinnedAlloc(bytes, &h);
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot allocate " << FormatBytes(static_cast<int64_t>(bytes)) << " for the refilled rows' paths on cuda:"
       << device() << "; decode with refill off, or lower max_lanes";
    ThrowAcquireFailure(e, os.str());
  }
  FreeGraphs();
  refill_path_ = std::move(d);
  h_refill_path_ = std::move(h);
  refill_path_cap_ = ws_.path_cap;
  ws_.refill_path = static_cast<int32_t*>(refill_path_.get());
}

// Winners-log growth to what the batch used: the cursor counts every append, also those
// past the limit, so it is the batch's need (an overflowed append loses only its
// backpointer, never a token, so the search and its appends are those of a run with room).
// A VMM log commits a little more than the need (pieces of its granularity); an eager one
// at least doubles, since each growth copies.
void GpuDecoder::GrowArena(unsigned long long cursor) {
  const int64_t need = static_cast<int64_t>(cursor);
  int64_t want = arena_.vmm() ? need + need / 8 : std::max<int64_t>(arena_cap_ * 2, need + need / 4);
  CommitArena(std::max<int64_t>(want, arena_cap_ + 1), false, "this batch");
}

void GpuDecoder::CommitArena(int64_t entries, bool keep, const char* why) {
  entries = std::min<int64_t>(entries, cfg_.arena_max);
  if (entries <= arena_cap_) return;
  // a growth's host time (MemStats [38]), failed ones too; the first commit (Allocate) is not one
  struct GrowTimer {
    int64_t* total;
    int64_t t0 = HostMicros();
    ~GrowTimer() {
      if (total) *total += HostMicros() - t0;
    }
  } timer{arena_cap_ > 0 ? &arena_grow_us_ : nullptr};
  size_t keep_bytes = 0;
  if (keep && arena_cap_ > 0) {
    unsigned long long cursor = 0;
    CUWFST_CUDA(cudaMemcpyAsync(&cursor, ws_.arena_cursor, sizeof(cursor), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    keep_bytes = static_cast<size_t>(std::min<unsigned long long>(cursor, static_cast<unsigned long long>(arena_cap_))) *
                 sizeof(WinnerEntry);
  }
  bool moved = false, tags_moved = false;
  cudaError_t e = arena_.Commit(static_cast<size_t>(entries) * sizeof(WinnerEntry), keep_bytes, -1, stream_, &moved);
  if (e == cudaSuccess && gc_tags_used_)  // tags are 8 bytes an entry too: same byte counts
    e = gc_tags_.Commit(static_cast<size_t>(entries) * sizeof(long long), keep_bytes, 0, stream_, &tags_moved);
  if (moved || tags_moved) {  // eager: the kernels' arguments changed (a grown log is kept even if the tags failed)
    FreeGraphs();
    ws_.arena = static_cast<WinnerEntry*>(arena_.get());
    if (gc_tags_used_) ws_.gc_tag = static_cast<long long*>(gc_tags_.get());
  }
  if (e != cudaSuccess) {
    std::ostringstream os;
    const int64_t bytes = entries * static_cast<int64_t>(sizeof(WinnerEntry)) * (gc_tags_used_ ? 2 : 1);
    if (arena_cap_ == 0)
      os << "cannot allocate " << FormatBytes(bytes) << " for the winners log (" << entries << " entries) on cuda:"
         << device() << "; lower max_lanes (now " << cfg_.max_lanes << ")";
    else
      os << "cannot grow the winners arena from " << arena_cap_ << " to " << entries << " entries ("
         << FormatBytes(bytes) << ") on cuda:" << device() << " for " << why << "; the decoder keeps its "
         << arena_cap_ << "-entry arena and stays usable; decode fewer rows at a time (max_lanes, now "
         << cfg_.max_lanes << "), lower max_active_states, or set gc_interval for long inputs";
    ThrowAcquireFailure(e, os.str());
  }
  if (arena_cap_ > 0) ++arena_grows_;
  arena_cap_ = entries;
  ws_.arena = static_cast<WinnerEntry*>(arena_.get());  // VMM: the same address every time
  PublishArenaLimit();
}

void GpuDecoder::PublishArenaLimit() {
  h_arena_limit_ = arena_cap_;
  // from pageable memory: staged before the call returns, so h_arena_limit_ may change after
  CUWFST_CUDA(cudaMemcpyAsync(d_arena_limit_, &h_arena_limit_, sizeof(long long), cudaMemcpyHostToDevice, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
}

void GpuDecoder::CommitPools(const int64_t want[kPools], bool statics, const char* why, bool keep) {
  bool moved_any = false;
  cudaError_t e = cudaSuccess;
  int64_t failed_bytes = 0;
  for (auto& a : pool_arrays_) {
    const int64_t entries =
        statics ? a->static_entries : std::min<int64_t>(want[a->pool], pool_max_[a->pool]) * a->per_entry;
    bool moved = false;
    e = a->region.Commit(static_cast<size_t>(entries) * a->elem, keep ? a->region.committed() : 0, a->fill, stream_,
                         &moved);
    moved_any |= moved;
    *a->target = a->region.get();  // VMM: the same address every time
    if (e != cudaSuccess) {
      failed_bytes = entries * a->elem;
      break;
    }
  }
  if (moved_any) FreeGraphs();  // eager regions moved: the captured kernels' arguments changed
  if (e != cudaSuccess) {
    std::ostringstream os;
    if (pool_cap_[kPoolTokens] == 0)
      os << "cannot allocate " << FormatBytes(failed_bytes) << " for the lanes' frontiers, claims and hash tables on cuda:"
         << device() << "; " << Advice();
    else
      os << "cannot grow the lane pools (frontiers, claims, hash tables) to " << FormatBytes(failed_bytes)
         << " an array on cuda:" << device() << " for " << why
         << "; the decoder keeps its pools and stays usable; " << Advice() << ", or decode fewer rows at a time";
    ThrowAcquireFailure(e, os.str());
  }
  PublishPoolCaps(statics);
}

void GpuDecoder::PublishPoolCaps(bool statics) {
  // a pool's capacity is what every one of its arrays holds (VMM rounds each up to whole
  // pieces, so the first pieces are used whole)
  for (int k = 0; k < kPools; ++k) {
    // (the static commit holds the static layout's entries; pooled steps may grow past them
    // up to pool_max_ by pauses, as from any committed capacity)
    int64_t cap = statics ? stat_max_[k] : pool_max_[k];
    if (!statics)
      for (const auto& a : pool_arrays_)
        if (a->pool == k)
          cap = std::min<int64_t>(cap, static_cast<int64_t>(a->region.committed()) / a->elem / a->per_entry);
    pool_cap_[k] = cap;
    h_pool_cap_[k] = cap;
  }
  // from pageable memory: staged before the call returns
  CUWFST_CUDA(cudaMemcpyAsync(d_pool_cap_, h_pool_cap_, sizeof(h_pool_cap_), cudaMemcpyHostToDevice, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
}

int64_t GpuDecoder::TrimWorkspace(bool log) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  CUWFST_CUDA(cudaStreamSynchronize(stream_));  // no queued kernel reads what goes
  int64_t freed = 0;
  if (pooled_ok_ && !static_ready_) {
    bool trimmed = false;
    int64_t before[kPools];
    std::copy(pool_cap_, pool_cap_ + kPools, before);
    // everything goes, the first pieces too (RestoreTrimmed commits at least them again
    // before the next decode: a batch's start tokens need them)
    for (auto& a : pool_arrays_) {
      if (!a->region.vmm() || a->region.committed() == 0) continue;
      freed += static_cast<int64_t>(a->region.Trim(0));
      trimmed = true;
    }
    if (trimmed) {
      PublishPoolCaps(false);
      // the next decode commits them back before its first step (RestoreTrimmed)
      for (int k = 0; k < kPools; ++k) restore_pools_[k] = std::max(restore_pools_[k], before[k]);
    }
  }
  bool live = gc_tags_used_;
  for (const LaneHost& h : lane_host_) live |= h.open;
  const int64_t first = std::min<int64_t>(cfg_.arena_cap, cfg_.arena_max);
  // a log in host memory stays: it holds no device memory, and pinning it again costs more
  // than it gives back
  if (log && !live && arena_.vmm() && !arena_.host() && arena_cap_ > first) {
    restore_arena_ = std::max(restore_arena_, arena_cap_);
    freed += static_cast<int64_t>(arena_.Trim(static_cast<size_t>(first) * sizeof(WinnerEntry)));
    arena_cap_ = std::min<int64_t>(arena_cap_, static_cast<int64_t>(arena_.committed() / sizeof(WinnerEntry)));
    PublishArenaLimit();
  }
  return freed;
}

// What the last TrimWorkspace gave back, committed again in one go before a pooled batch's
// first step: growing back by pauses would pause the batch at each of its growing steps, and
// each pause runs the captured graph's remaining steps idle (a trimmed main instance of the
// full HLG at batch 32 lost ~75 ms a pass that way, s25b); a device log would grow back only
// by re-running the batch. Out of memory here is not an error: the batch grows by pauses as
// far as it needs, and reports there what it cannot get; only the first pieces (Allocate's
// commit, which a batch's start tokens need) are required.
void GpuDecoder::RestoreTrimmed() {
  bool any = false;
  for (int k = 0; k < kPools; ++k) any |= restore_pools_[k] > pool_cap_[k];
  if (any && pooled_ok_ && !static_ready_) {
    int64_t want[kPools];
    for (int k = 0; k < kPools; ++k) want[k] = std::max({restore_pools_[k], pool_cap_[k], first_pools_[k]});
    try {
      CommitPools(want, false, "the pools a trim gave back", /*keep=*/false);
      ++restores_;
    } catch (const CudaOutOfMemory&) {
      std::fill(restore_pools_, restore_pools_ + kPools, 0);
      for (int k = 0; k < kPools; ++k) want[k] = std::max(pool_cap_[k], first_pools_[k]);
      CommitPools(want, false, "the first batch after a trim", /*keep=*/false);  // (throws its own error)
    }
  }
  std::fill(restore_pools_, restore_pools_ + kPools, 0);
  if (restore_arena_ > arena_cap_ && !arena_.host()) {
    try {
      CommitArena(restore_arena_, false, "the log a trim gave back");
      ++restores_;
    } catch (const CudaOutOfMemory&) {
    }
  }
  restore_arena_ = 0;
}

void GpuDecoder::EnsureStatic() {
  if (static_ready_) return;
  if (arena_.host() || arena_.host_committed() > 0) {
    // the static layout's users (GC rounds, stream partials) read the log hard: it moves to
    // the device, empty (no decode is under way between calls; the address stays, so no
    // captured graph changes)
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    arena_.Trim(0);
    (void)arena_.SetHost(false);
    arena_cap_ = 0;
    PublishArenaLimit();  // nothing is mapped now: if the commit below fails, no kernel may append
    CommitArena(cfg_.arena_cap, false, "the winners log on the device");
  }
  CommitPools(pool_max_, true, "the static layout (streams, continuous batching, snapshots)");
  static_ready_ = true;
}

Workspace GpuDecoder::SeqWorkspace(SeqKind kind) const {
  Workspace w = ws_;
  w.pooled = (kind == SeqKind::kBatch || kind == SeqKind::kResume) && pooled_ok_ ? 1 : 0;
  // where MaxKernel runs, it hands the pooled regions out by the admissible arcs it counts or
  // by the bins bound (types.cuh); under the slots bound ScanKernel's last block does
  const bool by_claims = cfg_.pool_bound == kPoolBoundClaims || cfg_.pool_bound == kPoolBoundClaimsFinalize ||
                         cfg_.pool_bound == kPoolBoundClaimsFinalizeAhead;
  w.pool_at_max = w.pooled && !cfg_.fused_max && cfg_.pool_bound != kPoolBoundSlots && !by_claims ? 1 : 0;
  // the next frontiers by the claims, handed out after the expansion (not under fused_max, whose
  // claims are a superset, nor in a lattice decode, whose stage reads the step's regions after it)
  // (ExpandKernel's last CTA hands them out, or under kPoolBoundClaimsFinalize FinalizeKernel's CTAs)
  // (pooled sequences are kBatch / kResume: no refill)
  w.pool_late = w.pooled && !cfg_.fused_max && by_claims && ws_.lattice == 0
                    ? (cfg_.pool_bound == kPoolBoundClaims ? 1 : cfg_.pool_bound == kPoolBoundClaimsFinalize ? 2 : 3)
                    : 0;
  w.pool_bins = w.pool_at_max && ws_.bin_slots != nullptr ? 1 : 0;
  // the count against the trim's anchor where the step trims (types.cuh Workspace::pool_anchor)
  w.pool_anchor = w.pool_at_max && !w.pool_bins && cfg_.pool_bound == kPoolBoundAnchor && w.trim ? 1 : 0;
  // the static layout's max from the trim's anchor (types.cuh Workspace::max_anchor): where
  // MaxKernel finds the max without pool_at_max's count, and the scans name no best token
  // (fused_max); constant per decoder and sequence kind, so the captured graphs' keys hold
  w.max_anchor = max_anchor_ && !cfg_.fused_max && !w.pool_at_max && w.trim ? 1 : 0;
  // and the lanes whose max the anchor already is left out of MaxKernel's walk (types.cuh
  // Workspace::max_known): where MaxKernel runs (not CoopWalkKernel), both layouts (the pooled
  // scans' tail builds the second prefix too; max_anchor already excludes pool_at_max, whose
  // MaxKernel counts every lane's admissible arcs)
  w.max_known = w.max_anchor && max_known_ && coop_cap_ == 0 ? 1 : 0;
  w.pool_handout_kernel = w.pool_at_max && cfg_.pool_handout ? 1 : 0;
  w.pool_hints = w.pooled && cfg_.pool_hints ? 1 : 0;
  w.refill = kind != SeqKind::kSegmentRefill ? kRefillOff : cfg_.refill_kernel ? kRefillByKernel : kRefillInFinalize;
  // a pooled 1-best batch's lanes may hold pool_q tokens (DecoderConfig::pool_q): the pools are
  // shared, and the hand-out sizes every region by the step's own bound under these caps. A
  // lattice decode keeps main_q's (its hash_pos is max_lanes x hash_cap).
  if (w.pooled && ws_.lattice == 0 && pool_q_ > ws_.main_q) {
    w.main_q = pool_q_;
    w.claims_cap = pool_claims_;
    w.hash_cap = pool_hash_;
    w.hint_cap = pool_hint_cap_;
  }
  return w;
}

void GpuDecoder::SyncQuietly() noexcept {
  if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess) ClearHandledError();
  if (pr_stream_owned_ && cudaStreamSynchronize(pr_stream_owned_.get()) != cudaSuccess) ClearHandledError();
  if (pr_bucket_stream_owned_ && cudaStreamSynchronize(pr_bucket_stream_owned_.get()) != cudaSuccess)
    ClearHandledError();
}

// A side bucketing (kPrBeginSide) may still read the records: stream_'s next work waits for it.
// Called before the first launch that writes the records (EnqueueRecordsPass, or RunOnce ahead of a
// sequence whose steps write them), never while stream_ is capturing.
void GpuDecoder::WaitRecordReaders() {
  if (!lat_read_pending_) return;
  if (pr_side_wait_) CUWFST_CUDA(cudaStreamWaitEvent(stream_, pr_records_read_.get(), 0));
  lat_read_pending_ = false;
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
  const Workspace w = SeqWorkspace(kind);
  EnqueueHead(kind, w, f16);
  for (int32_t s = 0; s < steps; ++s) EnqueueStep(w, f16);
  JoinLogSide();
  EnqueueTail(kind, w);
}

// A sequence's launches before its steps: the lanes' setup, the records' resets, the start
// closure.
void GpuDecoder::EnqueueHead(SeqKind kind, const Workspace& w, bool f16) {
  const DeviceGraph& g = graph_->view;
  const StepParams p = Params(f16);
  const int L = cfg_.max_lanes;
  const int32_t reset = kind == SeqKind::kBatch ? 1 : 0;
  Timed(0, [&] { LaneSetupKernel<<<L, 32, 0, stream_>>>(g, w, p, reset); });
  // The records start empty (memset nodes in a captured graph) when a batch starts, not when
  // a paused pooled batch resumes (kResume): the records and step counts of the steps before
  // the pause stay, and the resumed steps append to them.
  // (candidate mode: the step's candidates start empty in every sequence, a resumed one too;
  // the lane-step counts when a batch starts)
  if (w.lattice && w.lat_cand != nullptr)
    CUWFST_CUDA(cudaMemsetAsync(w.lat_cand_n, 0, (reset ? 4 : 1) * sizeof(unsigned long long), stream_));
  if (w.lattice && reset) {
    CUWFST_CUDA(cudaMemsetAsync(w.lat_cursor, 0, sizeof(unsigned long long), stream_));
    CUWFST_CUDA(cudaMemsetAsync(w.lat_count, 0, static_cast<size_t>(L) * w.seg_cap * sizeof(int32_t), stream_));
    CUWFST_CUDA(cudaMemsetAsync(w.lat_all, 0, static_cast<size_t>(L) * w.seg_cap * sizeof(int32_t), stream_));
  }
  const bool segment = kind == SeqKind::kSegment || kind == SeqKind::kSegmentRefill;
  const bool opens = kind == SeqKind::kBatch || segment || kind == SeqKind::kOpen;
  if (opens && cfg_.eps_iterations > 0) EnqueueClosure(w, false);
  CUWFST_CUDA(cudaGetLastError());
}

// A sequence's launches after its steps: the backtracks and the tables' sanitizing.
void GpuDecoder::EnqueueTail(SeqKind kind, const Workspace& w) {
  const int L = cfg_.max_lanes;
  const bool segment = kind == SeqKind::kSegment || kind == SeqKind::kSegmentRefill;
  if (kind == SeqKind::kBatch || segment || kind == SeqKind::kFinalize || kind == SeqKind::kResume)
    Timed(6, [&] { BacktrackKernel<<<(L + 31) / 32, 32, 0, stream_>>>(w); });
  // the records after the search (lattice_after.cuh): every step the batch has taken so far,
  // after each of its sequences (a paused pooled batch's resume finds them all again)
  if (w.lat_after && (kind == SeqKind::kBatch || kind == SeqKind::kResume)) EnqueueRecordsPass(w);
  if (w.refill)
    Timed(6, [&] { RefillBacktrackKernel<<<(refill_done_cap_ + 31) / 32, 32, 0, stream_>>>(w); });
  if (kind != SeqKind::kOpen) Timed(7, [&] { HashSanitizeKernel<<<dim3(64, L), 256, 0, stream_>>>(w, 0); });
  CUWFST_CUDA(cudaGetLastError());
}

// The records after the search (lattice_after.cuh): the frontier log (max_lanes regions of
// lat_log_lane tokens), the step logs, the item lists, the global tables, and the side streams
// and events the pass's table classes run on; each at least as large as asked and as the last
// decode needed (a lane's region starts at kAfterInitialLog / max_lanes tokens, at least 2^14: 8 Mi
// tokens in all up to 512 lanes; the tables at kAfterInitialTab entries; growth asks for a run's
// need and a quarter). Each is
// allocated before it replaces anything, so a failure leaves the decoder as it was; captured
// graphs are dropped when a pointer they hold changes.
namespace {
constexpr int64_t kAfterInitialLog = 8ll << 20;  // 64 MiB of states and scores
constexpr int64_t kAfterInitialTab = 4ll << 20;  // 32 MiB of keys and indices (64 MiB of packed slots)
// LatRecordsKernel<bits> (bits 11, 13, 14, 0 or -1: the one grid; compact: the one grid's compacted
// walk, the default, CUWFST_LATTICE_AFTER_COMPACT=off: not; claim: its tokens claimed, the default,
// CUWFST_LATTICE_AFTER_TOKENS=stride: not; packed: the default where the graph allows,
// CUWFST_LATTICE_AFTER_PACKED=off: not, GpuDecoder::AfterPacked; octets: the packed walk's first round an
// octet of lanes a token, the default, CUWFST_LATTICE_AFTER_OCTETS=off: not, GpuDecoder::AfterOctets)
using AfterKernel = void (*)(DeviceGraph, Workspace, int32_t);
AfterKernel AfterRecordsKernel(int32_t bits, bool compact = false, bool claim = false, bool packed = false,
                               bool octets = false) {
  return bits == 11   ? LatRecordsKernel<11>
         : bits == 13 ? LatRecordsKernel<13>
         : bits == 14 ? LatRecordsKernel<14>
         : bits < 0   ? (!compact ? LatRecordsKernel<-1>
                         : !claim ? LatRecordsKernel<-1, true>
                         : packed ? (octets ? LatRecordsKernel<-1, true, true, true, true>
                                            : LatRecordsKernel<-1, true, true, true>)
                                  : LatRecordsKernel<-1, true, true>)
                      : LatRecordsKernel<0>;
}

}  // namespace

bool GpuDecoder::AfterPacked() const {
  const DeviceGraph& g = graph_->view;
  return lat_packed_walk_ && lat_claim_tokens_ && g.arc_packed != nullptr && g.emit_sorted != 0 &&
         g.vocab_size <= kAfterLpsMax;
}

bool GpuDecoder::AfterOctets() const { return lat_octet_walk_ && AfterPacked(); }

int64_t GpuDecoder::AfterHoleBound() const {
  return int64_t{kAfterReserve - 1} * kAfterWarps * std::max<int64_t>(la_grid_, 1) * 4;
}

void GpuDecoder::EnsureLatticeAfter(int64_t log_lane, int64_t tab_entries) {
  const int64_t L = cfg_.max_lanes, seg = ws_.seg_cap;
  // (CUWFST_LATTICE_AFTER_ROOM=tokens,entries: other first sizes (a lane's log region, the
  // tables), read when the buffers are first made; tests shrink them so that a batch outgrows both)
  int64_t first_log = std::max<int64_t>(kAfterInitialLog / L, 1 << 14), first_tab = kAfterInitialTab;
  if (const char* env = std::getenv("CUWFST_LATTICE_AFTER_ROOM"); env != nullptr && !la_log_state_.get()) {
    long long a = 0, b = 0;
    if (std::sscanf(env, "%lld,%lld", &a, &b) != 2 || a < 1 || b < 1)
      throw std::invalid_argument(std::string("CUWFST_LATTICE_AFTER_ROOM must be two positive counts, got '") + env + "'");
    first_log = a;
    first_tab = b;
  }
  const int64_t lane_cap = std::max({ws_.lat_log_lane, log_lane, first_log});
  const int64_t tab_cap = std::max({ws_.lat_tab_cap, tab_entries, first_tab});
  // (a list's items: the chunks of its steps, at the smaller of the build's and the records' chunks)
  const int64_t items_cap = L * seg + L * lane_cap / std::min(kAfterChunk, lat_chunk_) + 64;
  const bool log = lane_cap > ws_.lat_log_lane || !la_log_state_.get();
  const bool tab = tab_cap > ws_.lat_tab_cap || !la_tab_keys_.get();
  const bool items = items_cap > ws_.lat_items_cap || !la_items_.get();
  const bool steps = la_steps_.amount() < static_cast<int64_t>(L * seg * sizeof(LatStepLog));
  if (!log && !tab && !items && !steps && la_plan_.get() && la_log_join_) return;  // (the last made)
  auto alloc = [&](DeviceBuffer* dst, size_t bytes, const char* what) { LatticeAlloc(dst, bytes, what); };
  auto make = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
      std::ostringstream os;
      os << "cannot create a CUDA " << what << " for the records pass of a lattice decode on cuda:" << device()
         << "; the decoder stays usable for 1-best decodes; free GPU memory or " << Advice();
      ThrowAcquireFailure(e, os.str());
    }
  };
  DeviceBuffer st, sc, ls, it, tk, tp, plan;
  if (log) {
    alloc(&st, static_cast<size_t>(L * lane_cap) * sizeof(int32_t), "the records pass's frontier log (states)");
    alloc(&sc, static_cast<size_t>(L * lane_cap) * sizeof(float), "the records pass's frontier log (scores)");
  }
  if (steps) alloc(&ls, static_cast<size_t>(L * seg) * sizeof(LatStepLog), "the records pass's step logs");
  if (items) alloc(&it, static_cast<size_t>(kAfterLists * items_cap) * sizeof(int2), "the records pass's work items");
  if (tab && lat_tab_packed_) {  // (twice the bytes: a state, an index and a score a slot)
    alloc(&tk, static_cast<size_t>(tab_cap) * sizeof(ulonglong2), "the records pass's tables (packed slots)");
  } else if (tab) {
    alloc(&tk, static_cast<size_t>(tab_cap) * sizeof(int32_t), "the records pass's tables (keys)");
    alloc(&tp, static_cast<size_t>(tab_cap) * sizeof(int32_t), "the records pass's tables (indices)");
  }
  // (the plan's 16 words, then the measurement's: Workspace::lat_prof)
  if (!la_plan_.get()) alloc(&plan, (16 + kAfterProfWords) * sizeof(unsigned long long), "the records pass's plan");
  for (int k = 0; k < 3; ++k) {
    // non-blocking, as stream_ is: a blocking stream that is capturing (this instance's graph)
    // makes another thread's work on the legacy stream fail with cudaErrorStreamCaptureImplicit
    // (the H100 at 4d710f1: the main instance's cudaEventRecord on the caller's stream 0 while
    // EarlyRescue's thread captured the rescue instance's records pass)
    if (!la_side_[k]) {
      Stream x;
      make(TryStreamCreate(cudaStreamNonBlocking, &x, stream_priority_), "stream");
      la_side_[k] = std::move(x);
    }
    for (Event* ev : {&la_fork_, &la_join_[k]})
      if (!*ev) {
        Event x;
        make(TryEventCreate(cudaEventDisableTiming, &x), "event");
        *ev = std::move(x);
      }
  }
  // (CUWFST_LATTICE_LOG=side: the steps' log copies on la_side_[0], forked and joined by these)
  for (Event* ev : {&la_log_fork_, &la_log_join_})
    if (!*ev) {
      Event x;
      make(TryEventCreate(cudaEventDisableTiming, &x), "event");
      *ev = std::move(x);
    }
  if (la_grid_ == 0) {  // (the kernels' dynamic shared memory past 48 KB, once)
    const int32_t V = graph_->view.vocab_size;
    for (int32_t bits : {11, 13, 14, 0, -1})
      for (int32_t walk : {0, 1, 2, 3, 4})  // (plain, compacted, with claimed tokens, packed, and octets)
        if (walk == 0 || bits < 0)
          CUWFST_CUDA(cudaFuncSetAttribute(AfterRecordsKernel(bits, walk > 0, walk >= 2, walk >= 3, walk == 4),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(AfterSmem(bits, V))));
    int sms = 0;
    CUWFST_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, graph_->device));
    la_grid_ = std::max(1, sms) * 4;  // (4 CTAs a multiprocessor: the kernels' register bound)
  }
  if (!log && !tab && !items && !steps && !plan.get()) return;
  FreeGraphs();  // they captured the old pointers
  if (log) {
    la_log_state_ = std::move(st);
    la_log_score_ = std::move(sc);
    ws_.lat_log_state = static_cast<int32_t*>(la_log_state_.get());
    ws_.lat_log_score = static_cast<float*>(la_log_score_.get());
    ws_.lat_log_lane = lane_cap;
  }
  if (steps) {
    la_steps_ = std::move(ls);
    ws_.lat_steps = static_cast<LatStepLog*>(la_steps_.get());
  }
  if (items) {
    la_items_ = std::move(it);
    ws_.lat_items = static_cast<int2*>(la_items_.get());
    ws_.lat_items_cap = items_cap;
  }
  if (tab) {
    la_tab_keys_ = std::move(tk);
    la_tab_pos_ = std::move(tp);  // (empty when packed)
    ws_.lat_tab_slots = lat_tab_packed_ ? static_cast<ulonglong2*>(la_tab_keys_.get()) : nullptr;
    ws_.lat_tab_keys = lat_tab_packed_ ? nullptr : static_cast<int32_t*>(la_tab_keys_.get());
    ws_.lat_tab_pos = lat_tab_packed_ ? nullptr : static_cast<int32_t*>(la_tab_pos_.get());
    ws_.lat_tab_cap = tab_cap;
  }
  if (plan.get()) {
    la_plan_ = std::move(plan);
    ws_.lat_plan = static_cast<unsigned long long*>(la_plan_.get());
    ws_.lat_prof = lat_prof_ ? ws_.lat_plan + 16 : nullptr;
  }
}

// The records pass after a lat_after sequence's steps (lattice_after.cuh): the records and step
// counts start empty (the pass finds every step's), the plan and the global tables on the
// decoder's stream; then by default (the one grid) every item in one launch there, the tail after
// it; under CUWFST_LATTICE_AFTER_GRID=classes the four table classes at once, the global one (the
// pass's longest, each CTA probing global memory) on the decoder's stream with the tail after it,
// the others on three side streams forked from it and joined back (a captured sequence holds the
// same fork and join). Fixed grids, so a captured sequence replays it whatever the batch.
void GpuDecoder::EnqueueRecordsPass(const Workspace& w) {
  const DeviceGraph& g = graph_->view;
  const int L = cfg_.max_lanes;
  const int32_t V = g.vocab_size;
  WaitRecordReaders();  // (the records it overwrites: a side bucketing's; never pending while capturing)
  CUWFST_CUDA(cudaMemsetAsync(w.lat_cursor, 0, sizeof(unsigned long long), stream_));
  CUWFST_CUDA(cudaMemsetAsync(w.lat_count, 0, static_cast<size_t>(L) * w.seg_cap * sizeof(int32_t), stream_));
  CUWFST_CUDA(cudaMemsetAsync(w.lat_plan, 0, 16 * sizeof(unsigned long long), stream_));
  if (w.lat_prof != nullptr) {  // (the measurement's sums and latest ends from 0, its earliest starts from ~0)
    CUWFST_CUDA(cudaMemsetAsync(w.lat_prof, 0, kAfterProfWords * sizeof(unsigned long long), stream_));
    CUWFST_CUDA(cudaMemsetAsync(w.lat_prof + kAfterProfStart, 0xFF,
                                (kAfterProfKEnd - kAfterProfStart) * sizeof(unsigned long long), stream_));
  }
  Timed(12, [&] {
    // (CUWFST_LATTICE_LOG=scan: the scalars of each lane's last step, which no scan followed)
    if (w.lat_log_fold == 3) LatLogPendingKernel<<<(L + 127) / 128, 128, 0, stream_>>>(g, w);
    LatPlanKernel<<<L, kAfterThreads, 0, stream_>>>(w);
    // the one grid (Workspace::lat_one_grid): every item in one launch after the global tables,
    // longest class first; else the shared-table classes on the side streams, the global one here
    const bool classes = !w.lat_one_grid;
    if (classes) {
      CUWFST_CUDA(cudaEventRecord(la_fork_.get(), stream_));
      for (int k = 0; k < 3; ++k) CUWFST_CUDA(cudaStreamWaitEvent(la_side_[k].get(), la_fork_.get(), 0));
      AfterRecordsKernel(14)<<<la_grid_, kAfterThreads, AfterSmem(14, V), la_side_[0].get()>>>(g, w, kAfterC14);
      AfterRecordsKernel(13)<<<la_grid_, kAfterThreads, AfterSmem(13, V), la_side_[1].get()>>>(g, w, kAfterC13);
      AfterRecordsKernel(11)<<<la_grid_, kAfterThreads, AfterSmem(11, V), la_side_[2].get()>>>(g, w, kAfterC11);
    }
    LatTabClearKernel<<<la_grid_, kAfterThreads, 0, stream_>>>(w);
    LatTabBuildKernel<<<la_grid_, kAfterThreads, 0, stream_>>>(w);
    const int32_t bits = classes ? 0 : -1;
    AfterRecordsKernel(bits, lat_compact_, lat_claim_tokens_, AfterPacked(), AfterOctets())<<<la_grid_, kAfterThreads, AfterSmem(bits, V), stream_>>>(g, w,
                                                                                    classes ? kAfterGlobal : kAfterC11);
    LatTailKernel<<<la_grid_, kAfterThreads, 0, stream_>>>(g, w);
    if (w.lat_prof != nullptr) LatProfTailEndKernel<<<1, 1, 0, stream_>>>(w);
    for (int k = 0; classes && k < 3; ++k) {
      CUWFST_CUDA(cudaEventRecord(la_join_[k].get(), la_side_[k].get()));
      CUWFST_CUDA(cudaStreamWaitEvent(stream_, la_join_[k].get(), 0));
    }
  });
  CUWFST_CUDA(cudaGetLastError());
}

// CUWFST_LATTICE_AFTER_PROF=on (a measurement): the last records pass's sums (lattice_after.cuh
// kAfterProf*) as one line a table class on stderr: items, the warps' cycles a phase (waiting for
// an item's first barrier, staging the row and building the table, walking), the CTAs' active time
// against the class's span (its earliest start to its latest exit); then one timeline line: the
// records kernels' grid, then each of the pass's kernels that ran, its earliest start and latest end
// in ms from the pass's first start.
void GpuDecoder::PrintRecordsProfile() {
  unsigned long long h[kAfterProfWords];
  CUWFST_CUDA(cudaMemcpy(h, ws_.lat_prof, sizeof(h), cudaMemcpyDeviceToHost));
  // (the one grid's sums are in c11's slot)
  static const char* const kNames[4] = {"c11", "c13", "c14", "global"};
  const char* const names[4] = {lat_one_grid_ ? "one" : kNames[0], kNames[1], kNames[2], kNames[3]};
  static const char* const kKernels[4] = {"plan", "clear", "build", "tail"};
  unsigned long long origin = ~0ull;
  for (int x = kAfterProfStart; x < kAfterProfKEnd; ++x) origin = std::min(origin, h[x]);
  std::string line = "[records-prof] timeline ctas " + std::to_string(la_grid_);
  auto span = [&](const char* name, unsigned long long a, unsigned long long b) {
    if (a == ~0ull || b < a || origin == ~0ull) return;  // (did not run, or no CTA got past its start)
    char buf[96];
    std::snprintf(buf, sizeof(buf), " %s %.4f %.4f", name, (a - origin) * 1e-6, (b - origin) * 1e-6);
    line += buf;
  };
  for (int k = 0; k < 4; ++k) span(kKernels[k], h[kAfterProfKStart + k], h[kAfterProfKEnd + k]);
  for (int c = 0; c < 4; ++c) span(names[c], h[kAfterProfStart + c], h[c * 8 + kAfterProfEnd]);
  std::fprintf(stderr, "%s\n", line.c_str());
  for (int c = 0; c < 4; ++c) {
    const unsigned long long* x = h + c * 8;
    if (x[kAfterProfItems] == 0) continue;
    const unsigned long long start = h[kAfterProfStart + c], end = x[kAfterProfEnd];
    std::fprintf(stderr,
                 "[records-prof] %s items %llu wait_mcyc %.3f setup_mcyc %.3f walk_mcyc %.3f active_ms %.3f span_ms %.3f "
                 "ctas %d\n",
                 names[c], x[kAfterProfItems], x[kAfterProfWait] * 1e-6, x[kAfterProfSetup] * 1e-6,
                 x[kAfterProfWalk] * 1e-6, x[kAfterProfActive] * 1e-6, end > start ? (end - start) * 1e-6 : 0.0,
                 la_grid_);
  }
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

// A step kernel's launch: cooperative or not, with programmatic dependent launch where `pdl`
// asks for it, the device has it (pdl_) and no profiling records an event around each launch
// (then no kernel directly precedes this one).
template <typename... KernelArgs, typename... Args>
void GpuDecoder::LaunchWith(bool cooperative, bool pdl, size_t smem, void (*kernel)(KernelArgs...), dim3 grid,
                            dim3 block, Args&&... args) {
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cooperative) {
    attr[n].id = cudaLaunchAttributeCooperative;
    attr[n].val.cooperative = 1;
    ++n;
  }
  const bool root = pdl_root_;  // the first launch of a chunk's capture: no kernel before it there
  pdl_root_ = false;
  if (pdl && pdl_ && !profiling_ && !root) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cudaLaunchConfig_t c = {};
  c.gridDim = grid;
  c.blockDim = block;
  c.dynamicSmemBytes = smem;
  c.stream = stream_;
  c.attrs = attr;
  c.numAttrs = n;
  CUWFST_CUDA(cudaLaunchKernelEx(&c, kernel, std::forward<Args>(args)...));
}

template <typename... KernelArgs, typename... Args>
void GpuDecoder::LaunchStep(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, Args&&... args) {
  LaunchWith(false, true, 0, kernel, grid, block, std::forward<Args>(args)...);
}

template <typename... KernelArgs, typename... Args>
void GpuDecoder::LaunchStepSmem(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
  LaunchWith(false, true, smem, kernel, grid, block, std::forward<Args>(args)...);
}

// A cooperative launch (CoopWalkKernel: its grid syncs); under walker kWalkWarpCoopPdl with
// programmatic dependent launch too (as LaunchStep). No deadlock either way: the grid may start
// beside the kernel before it (its CTAs wait in StepKernelEntry; those that do not fit yet get
// room as that kernel's CTAs exit, and that kernel waits on nothing of this one), and the kernel
// after it starts only once every CTA of this grid has passed StepKernelEntry, i.e. is resident.
template <typename... KernelArgs, typename... Args>
void GpuDecoder::LaunchCoop(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, Args&&... args) {
  LaunchWith(true, coop_pdl_, 0, kernel, grid, block, std::forward<Args>(args)...);
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

// The decoder's stream waits for the caller's work (the tensor it is about to read). Stream 0
// is the legacy default stream, torch's and cupy's default: the decoder's stream is created
// non-blocking, so it does not wait for that stream by itself, and an input made there (a
// model's output, the rows a sub-batch selects) is waited for like any other's.
void GpuDecoder::Wait(int64_t caller_stream, std::chrono::steady_clock::time_point* mid) {
  CUWFST_CUDA(cudaEventRecord(ready_.get(), reinterpret_cast<cudaStream_t>(caller_stream)));
  if (mid != nullptr) *mid = std::chrono::steady_clock::now();
  CUWFST_CUDA(cudaStreamWaitEvent(stream_, ready_.get(), 0));
}

// A batch (or snapshots) starts every lane afresh: streams or rows the lanes held are gone.
void GpuDecoder::ReleaseAllLanes() {
  for (LaneHost& h : lane_host_) h = LaneHost{};
}

void GpuDecoder::UploadLaneOrders() {
  const int L = cfg_.max_lanes;
  if (hash_dirty_) {  // a sequence failed half-way: its steps may have left claimed slots
    HashSanitizeKernel<<<dim3(64, L), 256, 0, stream_>>>(ws_, pool_cap_[kPoolHash]);
    CUWFST_CUDA(cudaGetLastError());
    hash_dirty_ = false;
  }
  CUWFST_CUDA(cudaMemcpyAsync(d_commands_, h_commands_.get(), L * sizeof(LaneCommand), cudaMemcpyHostToDevice, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(d_inputs_, h_inputs_.get(), L * sizeof(LaneInput), cudaMemcpyHostToDevice, stream_));
}

// The epsilon closure of each lane's frontier (buffer lc.buf) after a real step or the
// start: eps_iterations passes, then the targeted clear of the hash slots the step and its
// closure claimed (epsilon.cuh). In a lattice decode the passes build their slot spaces in
// a second set of arrays, so the step's own stays for the lattice walk (lattice.cuh), which
// then clears the claims (LatStepEndKernel) in place of ClearClaimsKernel.
void GpuDecoder::EnqueueClosure(const Workspace& w, bool closes_step) {
  const DeviceGraph& g = graph_->view;
  const int L = cfg_.max_lanes;
  const int walk_blocks = cfg_.walk_blocks > 0 ? cfg_.walk_blocks : ExpandBlocksFor(L, w.trim != 0);
  // A lattice decode keeps the step's slot space for the lattice walk after the closure
  // (lattice.cuh): the closure's kernels get a Workspace whose slot-space arrays are a
  // second set. closure = scan (EpsScanKernel) writes all five; closure = lists writes only
  // tok_begin (each list entry's first epsilon arc, EpsListExpandKernel) and leaves the
  // lane's phase, frontier size and hint flag alone, so only tok_begin is swapped there
  // (EnsureLattice allocates just that one). The closure runs on epsilon graphs only, which
  // never take the pooled layout, so the second set is indexed like the static layout's
  // arrays (tok_off = lane * (main_q + 1), HintBase = lane * hint_cap).
  Workspace ews = w;
  if (w.lattice) {
    ews.tok_begin = static_cast<int32_t*>(eps_begin_.get());
    if (!cfg_.closure_lists) {
      ews.tok_ub = static_cast<float*>(eps_ub_.get());
      ews.arc_offsets = static_cast<int32_t*>(eps_offsets_.get());
      ews.tok_hint = static_cast<int32_t*>(eps_hint_.get());
      ews.lane_arc_offsets = static_cast<int64_t*>(eps_lane_offsets_.get());
    }
  }
  // The claims stay for the lattice walk after a real step's closure; LatStepEndKernel
  // clears them (and counts closure_added) in place of ClearClaimsKernel.
  const bool clear = !(w.lattice && closes_step);
  // (the records' replay, lattice 1, takes the lists closure, as every lattice decode did before
  // 2026-12-05 20:37; a GPU-pruned one, lattice 2, needs no record of the passes: its epsilon arcs
  // come from the frontier log, and the chain keeps what its stage reads: every new token's
  // hash_pos, the claims LatStepEndKernel clears, eps_base; the default, CUWFST_LATTICE_CHAIN=off at
  // construction takes the lists there too)
  if (cfg_.closure_lists == kClosureChain && (w.lattice == 0 || (w.lattice == 2 && lat_chain_))) {
    Timed(9, [&] { LaunchStep(EpsChainExpandKernel, dim3(cfg_.eps_blocks), dim3(kWalkThreads), g, ews); });
    Timed(10, [&] { LaunchStep(EpsChainResolveKernel, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), ews); });
    Timed(15, [&] { LaunchStep(EpsChainLinkKernel, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), g, ews); });
  } else if (cfg_.closure_lists) {
    for (int32_t pass = 0; pass < cfg_.eps_iterations; ++pass) {
      Timed(9, [&] { LaunchStep(EpsListExpandKernel, dim3(cfg_.eps_blocks), dim3(kWalkThreads), g, ews, pass); });
      Timed(10, [&] { LaunchStep(EpsListResolveKernel, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), g, ews, pass); });
    }
  } else {
    for (int32_t pass = 0; pass < cfg_.eps_iterations; ++pass) {
      Timed(8, [&] { LaunchStep(EpsScanKernel, dim3(L), dim3(kScanThreads), g, ews, pass); });
      if (cfg_.walker == kWalkThread)
        Timed(9, [&] { LaunchStep(EpsExpandKernel<kWalkThread>, dim3(walk_blocks), dim3(kWalkThreads), g, ews); });
      else
        Timed(9, [&] { LaunchStep(EpsExpandKernel<kWalkWarp>, dim3(walk_blocks), dim3(kWalkThreads), g, ews); });
      Timed(10, [&] { LaunchStep(EpsResolveKernel, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), ews); });
    }
  }
  if (clear)
    Timed(11, [&] { LaunchStep(ClearClaimsKernel, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), w); });
}

// CUWFST_LATTICE_LOG=side: the step's copy of S_t (LatLogSideKernel, the job its FinalizeKernel
// wrote) on la_side_[0], forked from the decoder's stream after that FinalizeKernel; the next
// step's FinalizeKernel, or the sequence's (or captured chunk's) end, joins it (JoinLogSide).
// Profiled decodes launch it on the decoder's stream, timed as LatLogKernel is (kind 13).
void GpuDecoder::ForkLogSide(const Workspace& w) {
  const int L = cfg_.max_lanes;
  if (profiling_) {
    Timed(13, [&] { LatLogSideKernel<<<L, 1024, 0, stream_>>>(w); });
    return;
  }
  CUWFST_CUDA(cudaEventRecord(la_log_fork_.get(), stream_));
  CUWFST_CUDA(cudaStreamWaitEvent(la_side_[0].get(), la_log_fork_.get(), 0));
  LatLogSideKernel<<<L, 1024, 0, la_side_[0].get()>>>(w);
  CUWFST_CUDA(cudaEventRecord(la_log_join_.get(), la_side_[0].get()));
  log_side_pending_ = true;
}

void GpuDecoder::JoinLogSide() {
  if (!log_side_pending_) return;
  log_side_pending_ = false;
  CUWFST_CUDA(cudaStreamWaitEvent(stream_, la_log_join_.get(), 0));
}

void GpuDecoder::EnqueueStep(const Workspace& lat_w, bool f16) {
  const DeviceGraph& g = graph_->view;
  // The records after the search (Workspace::lat_after): the step's kernels run as the 1-best's
  // (no lattice stage, no candidates), and LatLogKernel logs what the records pass reads.
  Workspace w = lat_w;
  if (lat_w.lat_after) {
    w.lattice = 0;
    w.lat_cand = nullptr;
  }
  // The records log in FinalizeKernel (CUWFST_LATTICE_LOG=finalize, side) or in the scans (scan): a
  // lat_after step with nothing between its FinalizeKernel and the log or the next scan (no refill;
  // epsilon-free, so no closure) and not on the late path (a lattice decode never is: pool_late
  // needs ws_.lattice 0)
  const bool log_cond = lat_w.lat_after && w.refill == kRefillOff && w.pool_late < 2 && cfg_.eps_iterations == 0;
  const bool log_fold = log_cond && (lat_w.lat_log_fold == 1 || lat_w.lat_log_fold == 2);
  const bool log_scan = log_cond && lat_w.lat_log_fold == 3;
  w.lat_log_scan = log_scan ? 1 : 0;
  const StepParams p = Params(f16);
  const int L = cfg_.max_lanes;
  const int walk_blocks = cfg_.walk_blocks > 0 ? cfg_.walk_blocks : ExpandBlocksFor(L, w.trim != 0);
  const int grid = cfg_.scan_split > 1 ? L * cfg_.scan_split : L;
  // the scans that start each lane's max at L (an arc end, scan.cuh BestTokenEnd): fused_max
  // admits against it, and pool_at_max's MaxKernel counts the admissible arcs against it
  // (not under the bins bound, which needs no lower bound)
  // (not under pool_anchor: the scans take the trim's anchor for it, no best token)
  const bool lower = cfg_.fused_max || (w.pool_at_max && !w.pool_bins && !w.pool_anchor);
  Timed(1, [&] {
    // (the traced persistent scans only where the decoder was built with CUWFST_SCAN_TRACE)
    if (cfg_.scan_order == 2 && lower && w.scan_trace != nullptr)
      LaunchStep(ScanSplitKernel<true, true, true>, dim3(persist_grid_), dim3(kScanThreads), g, w, p);
    else if (cfg_.scan_order == 2 && w.scan_trace != nullptr)
      LaunchStep(ScanSplitKernel<false, true, true>, dim3(persist_grid_), dim3(kScanThreads), g, w, p);
    else if (cfg_.scan_order == 2 && lower)
      LaunchStep(ScanSplitKernel<true, true>, dim3(persist_grid_), dim3(kScanThreads), g, w, p);
    else if (cfg_.scan_order == 2)
      LaunchStep(ScanSplitKernel<false, true>, dim3(persist_grid_), dim3(kScanThreads), g, w, p);
    else if (cfg_.scan_split > 1 && lower) LaunchStep(ScanSplitKernel<true, false>, dim3(grid), dim3(kScanThreads), g, w, p);
    else if (cfg_.scan_split > 1) LaunchStep(ScanSplitKernel<false, false>, dim3(grid), dim3(kScanThreads), g, w, p);
    else if (lower) LaunchStep(ScanKernel<true>, dim3(grid), dim3(kScanThreads), g, w, p);
    else LaunchStep(ScanKernel<false>, dim3(grid), dim3(kScanThreads), g, w, p);
  });
  if (cfg_.fused_max) {  // the max and the admission in one walk (expand.cuh); profiled as expand
    if (cfg_.walker == kWalkThread)
      Timed(4, [&] { LaunchStep(FusedExpandKernel<kWalkThread>, dim3(walk_blocks), dim3(kWalkThreads), g, w); });
    else
      Timed(4, [&] { LaunchStep(FusedExpandKernel<kWalkWarp>, dim3(walk_blocks), dim3(kWalkThreads), g, w); });
  } else if (coop_cap_ > 0 && !w.pooled) {  // walker kWalkWarpCoop: Max and Expand in one launch (profiled as expand)
    const int grid = std::min(walk_blocks, coop_cap_);
    Timed(4, [&] { LaunchCoop(CoopWalkKernel, dim3(grid), dim3(kWalkThreads), g, w); });
  } else {
    // the pooled hand-out after the max: in MaxKernel's last block, or (pool_handout_kernel)
    // in a kernel of its own between MaxKernel and ExpandKernel, on every step
    // (max_known: MaxKernel walks the slot space without the lanes whose max is already known)
    Workspace wm = w;
    if (w.max_known) wm.lane_arc_offsets = w.max_lane_offsets;
    const int max_grid = max_blocks_ > 0          ? max_blocks_
                         : cfg_.walk_blocks > 0 ? walk_blocks
                                                : MaxBlocksFor(L, w.trim != 0);
    const int expand_grid = expand_blocks_ > 0 ? expand_blocks_ : walk_blocks;
    if (cfg_.walker == kWalkThread)
      Timed(3, [&] { LaunchStep(MaxKernel<kWalkThread>, dim3(max_grid), dim3(kWalkThreads), g, wm); });
    else
      Timed(3, [&] { LaunchStep(MaxKernel<kWalkWarp>, dim3(max_grid), dim3(kWalkThreads), g, wm); });
    if (w.pool_handout_kernel) Timed(14, [&] { LaunchStep(PoolHandOutKernel, dim3(1), dim3(32), w); });
    if (cfg_.walker == kWalkThread)
      Timed(4, [&] { LaunchStep(ExpandKernel<kWalkThread>, dim3(expand_grid), dim3(kWalkThreads), g, w); });
    else if (expand_min_blocks_ == 6)
      Timed(4, [&] { LaunchStep(ExpandKernel<kWalkWarp, 6>, dim3(expand_grid), dim3(kWalkThreads), g, w); });
    else
      Timed(4, [&] { LaunchStep(ExpandKernel<kWalkWarp>, dim3(expand_grid), dim3(kWalkThreads), g, w); });
  }
  // (kRefillInFinalize: the device-side refill runs in Finalize's last CTA of each ended lane)
  // (CUWFST_LATTICE_LOG=side: the last step's copy of its S_t, on the side stream, is done before
  // this step's FinalizeKernel writes into that buffer)
  JoinLogSide();
  if (w.pool_late == 3)  // the same, each working CTA's prefix beside its first loads
    Timed(5, [&] { LaunchStep(FinalizeKernel<true, true>, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), g, w, p); });
  else if (w.pool_late == 2)  // the next frontiers handed out by the claims in FinalizeKernel's CTAs
    Timed(5, [&] { LaunchStep(FinalizeKernel<true>, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), g, w, p); });
  else if (log_fold)  // (and the log: LatLogInFinalize)
    Timed(5, [&] { LaunchStep(FinalizeKernel<false, false, true>, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), g, w, p); });
  else
    Timed(5, [&] { LaunchStep(FinalizeKernel<false>, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), g, w, p); });
  if (log_fold && lat_w.lat_log_fold == 2) ForkLogSide(lat_w);
  // kRefillByKernel: lanes whose row just ended take the next queued row, whose start the
  // closure below closes with the others (profiled as init)
  if (w.refill == kRefillByKernel)
    Timed(0, [&] { LaunchStep(RefillKernel, dim3(1), dim3(kRefillThreads), g, w, p); });
  if (cfg_.eps_iterations > 0) EnqueueClosure(w, true);
  if (lat_w.lat_after && !log_fold && !log_scan)
    Timed(13, [&] { LaunchStep(LatLogKernel, dim3(la_log_split_, L), dim3(kAfterThreads), g, lat_w); });
  // (CUWFST_LATTICE_LOG_EXTRA=copy, a measurement: the same copy of S_t once more, the same values, so
  // the batch's time less the default's is what a copy launch costs on the step's chain)
  if (lat_w.lat_after && !log_fold && lat_log_extra_)
    Timed(13, [&] { LaunchStep(LatFrontierLogKernel, dim3(la_log_split_, L), dim3(kAfterThreads), g, lat_w); });
  if (w.lattice) {  // the lattice stage (lattice.cuh): after the step and its closure
    // (in candidate mode LatPersistKernel records ExpandKernel's candidates first, then walks
    // only the lanes they do not cover, or returns at once)
    const int lat_grid = lat_blocks_ > 0          ? lat_blocks_
                         : cfg_.walk_blocks > 0 ? walk_blocks
                                                : LatBlocksFor(L, w.trim != 0, w.lat_cand != nullptr, walk_blocks);
    // (its dynamic shared memory: the lanes' LatLane copies in candidate mode, LatPersistSmem)
    const size_t smem = LatPersistSmem(w);
    if (cfg_.walker == kWalkThread)
      Timed(12, [&] { LaunchStepSmem(LatPersistKernel<kWalkThread>, dim3(lat_grid), dim3(kWalkThreads), smem, g, w); });
    else if (lat_min_blocks_ == 6)
      Timed(12, [&] { LaunchStepSmem(LatPersistKernel<kWalkWarp, 6>, dim3(lat_grid), dim3(kWalkThreads), smem, g, w); });
    else
      Timed(12, [&] { LaunchStepSmem(LatPersistKernel<kWalkWarp>, dim3(lat_grid), dim3(kWalkThreads), smem, g, w); });
    Timed(13, [&] { LaunchStep(LatStepEndKernel, dim3(cfg_.finalize_split, L), dim3(kFinalizeThreads), g, w); });
    // a GPU-pruned decode on an epsilon graph: the frontiers' states for the pruning (every token's
    // state; the closure's tokens have no records)
    if (w.lattice == 2 && cfg_.eps_iterations > 0)
      Timed(13, [&] { LaunchStep(LatFrontierLogKernel, dim3(la_log_split_, L), dim3(kAfterThreads), g, w); });
  }
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
    EnsureStatic();  // snapshots launch step by step, with no re-run: the static layout
    ReleaseAllLanes();
    LaneCommand* cmd = As<LaneCommand>(h_commands_);
    LaneInput* in = As<LaneInput>(h_inputs_);
    for (int32_t l = 0; l < cfg_.max_lanes; ++l) cmd[l] = {kCmdInit, l == 0 ? length : -1, l == 0 ? length : 0, 0};
    in[0] = {lp, stride_t, 0, 0};
    Wait(caller_stream);
    const int L = cfg_.max_lanes;
    SetArenaGuard(false);  // launched step by step, not through RunOnce: no stream's guard may linger
    UploadLaneOrders();
    const StepParams p = Params(lp_f16);
    LaneSetupKernel<<<L, 32, 0, stream_>>>(graph_->view, ws_, p, 1);
    if (cfg_.eps_iterations > 0) EnqueueClosure(ws_, false);
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
      s.overflow = lc.overflow;  // a frontier cut at main_q (16) is cut here too: the caller sees it
      int32_t n = t < length ? std::min(lc.next_size, lc.tok_cap[buf]) : (lc.final_winner != -2 ? 1 : 0);
      const int64_t q = lc.tok_off[buf];
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
        CUWFST_CUDA(cudaMemcpy(s.state.data(), ws_.tok_state[buf] + q, n * sizeof(int32_t), cudaMemcpyDeviceToHost));
        CUWFST_CUDA(cudaMemcpy(s.score.data(), ws_.tok_score[buf] + q, n * sizeof(float), cudaMemcpyDeviceToHost));
        CUWFST_CUDA(cudaMemcpy(winner.data(), ws_.tok_winner[buf] + q, n * sizeof(int32_t), cudaMemcpyDeviceToHost));
      } else if (n > 0) {
        s.state[0] = graph_->view.num_states - 1;
        s.score[0] = lc.final_score;
        winner[0] = lc.final_winner;
      }
      const unsigned long long kept = std::min<unsigned long long>(cursor, static_cast<unsigned long long>(arena_cap_));
      log.resize(kept);
      if (kept) CUWFST_CUDA(cudaMemcpy(log.data(), ws_.arena, kept * sizeof(WinnerEntry), cudaMemcpyDeviceToHost));
      s.arc.resize(n);
      for (int32_t i = 0; i < n; ++i) s.arc[i] = winner[i] >= 0 ? log[winner[i]].arc : -1;
      snaps.push_back(std::move(s));
    };
    take(-1);
    for (int32_t t = 0; t <= length; ++t) {
      EnqueueStep(ws_, lp_f16);
      JoinLogSide();
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
  if (kind != SeqKind::kAdvance) SetArenaGuard(false);  // only stream advances wait for room
  // A side bucketing still reading the records (PruneBeginLocked, kPrBeginSide): a batch whose records
  // come from the pass after the search (lat_after) writes them first in its tail, which launches
  // plainly where the steps replay chunks or nothing is captured, so the wait goes there
  // (EnqueueRecordsPass) and the search runs beside the bucketing; any other sequence waits here.
  if (lat_read_pending_) {
    const bool tail_writes = ws_.lat_after && (kind == SeqKind::kBatch || kind == SeqKind::kResume) &&
                             (!capture || (cfg_.graph_chunks && steps > kChunkFrom));
    if (!tail_writes) WaitRecordReaders();
  }
  if (!capture) {
    Enqueue(kind, steps, f16);
    return;
  }
  const int32_t flags = (f16 ? 1 : 0) | (static_cast<int32_t>(kind) << 1) | (ws_.lattice << 4) | (ws_.trim << 6) |
                        (ws_.lat_after << 10);
  if (cfg_.graph_chunks && steps > kChunkFrom) {
    // A long sequence replays step chunks (every step launches the same kernels with the same
    // arguments: the lanes keep their own time on the device), so the executables held are a
    // few chunks' worth of steps, not a whole bucket's for each length seen; the head and the
    // tail launch plainly.
    const Workspace w = SeqWorkspace(kind);
    EnqueueHead(kind, w, f16);
    for (int32_t c : {kChunkBig, kChunkSmall, 1})
      for (; steps >= c; steps -= c) LaunchChunk(w, c, flags, f16);
    EnqueueTail(kind, w);
    return;
  }
  ReplayOrCapture({steps, flags}, [&] { Enqueue(kind, steps, f16); });
}

// Replays the executable cached under `key`, capturing `enqueue`'s launches into it on first
// use. If the executable cannot be instantiated for lack of memory, the cached ones are given
// back and `enqueue` launches plainly: graphs are an optimisation.
template <typename F>
void GpuDecoder::ReplayOrCapture(const GraphCache::Key& key, F&& enqueue) {
  cudaGraphExec_t exec = graphs_.Find(key);
  if (exec == nullptr) {
    cudaGraph_t graph = nullptr;
    CUWFST_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue();
    } catch (...) {
      pdl_root_ = false;
      log_side_pending_ = false;
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
      enqueue();
      return;
    }
    ++graph_captures_;
    exec = graphs_.Insert(key, std::move(owned));
  }
  CUWFST_CUDA(cudaGraphLaunch(exec, stream_));
}

// One chunk of `c` steps of a sequence whose Workspace is `w`: its captured graph, captured on
// first use (the key's bit 8 sets chunks apart from whole sequences); launched plainly if it
// cannot be instantiated for lack of memory.
void GpuDecoder::LaunchChunk(const Workspace& w, int32_t c, int32_t flags, bool f16) {
  ReplayOrCapture({c, flags | (1 << 8)}, [&] {
    pdl_root_ = true;  // (a plain launch after a failed instantiation has kernels before it: harmless)
    for (int32_t s = 0; s < c; ++s) EnqueueStep(w, f16);
    JoinLogSide();  // (a captured chunk joins what it forked)
  });
}

void GpuDecoder::Decode(const void* lp, bool lp_f16, int64_t stride_b, int64_t stride_t,
                        int32_t B, int32_t T, int32_t V, const int32_t* lengths, bool online,
                        int64_t caller_stream, DecodeOutputs out, const LatticeOutputs* lattice,
                        const int32_t* rows) {
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
  // CUWFST_DECODE_SPLIT=1: this decode's host phases to stderr (diagnostics: where a decode's
  // time goes beyond its kernels)
  const bool split = std::getenv("CUWFST_DECODE_SPLIT") != nullptr;
  const auto s0 = std::chrono::steady_clock::now();
  auto s1 = s0, s2 = s0;
  // (the setup's parts under CUWFST_DECODE_SPLIT: the buffers ensured, the caller's stream, the
  // static layout and restores, the lattice filter's copy)
  auto p1 = s0, pw = s0, p2 = s0, p3 = s0, p4 = s0;
  int32_t runs = 0;
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
    if (lattice) EnsureLattice(cfg_.max_frames, lattice->mode == 2);
    // The lattice stage is a flag of the one pipeline (a kernel argument): on for this
    // decode only, so every other sequence runs (and captures) without it.
    // The trimmed slots (scan.cuh TrimDegrees) are off in a lattice decode: the lattice stage
    // records every arc of a step whose destination survives, admitted by the beam or not
    // (k2's rule, lattice.cuh), so it walks every arc. The exception is the lattice trim of
    // a GPU-pruned decode with the records' filter (LatticeOutputs::trim; common.cuh
    // LatTrimLow): it leaves out only arcs the filter would drop, so the records are the
    // same, but the arcs it leaves out are not counted (the rows' recorded arcs are -1).
    // (The graph cache's key has the lattice and trim flags, so the settings never share a
    // captured graph.)
    struct LatticeFlag {
      GpuDecoder& d;
      int32_t trim;
      ~LatticeFlag() {
        // (the records after the search never count the arcs they leave unread: as the trim)
        d.lat_trim_used_ = (d.ws_.lattice == 2 && d.ws_.trim != 0 && d.lat_filter_on_) || d.ws_.lat_after != 0;
        d.ws_.lattice = 0;
        d.ws_.lat_after = 0;
        d.ws_.lat_keys_only = 0;
        d.ws_.trim = trim;
      }
    } lattice_flag{*this, ws_.trim};
    ws_.lattice = lattice ? (lattice->mode == 2 ? 2 : 1) : 0;
    // The records after the search (lattice_after.cuh): GPU-pruned decodes of whole rows on
    // epsilon-free graphs where the in-step stage would run the lattice trim (the records' filter
    // and the trim asked for, a decoder that trims its 1-best steps: ws_.trim here), so the rows'
    // recorded arcs are uncounted either way (with the filter or the trim off the in-step stage
    // counts them), unless the decoder was made with CUWFST_LATTICE_RECORDS=step; their search
    // keeps the 1-best's trim (the pass reads every arc the records need itself).
    const bool after = lattice != nullptr && lat_after_ && lattice->mode == 2 && lattice->chunk <= 0 &&
                       lattice->filter != 0 && lattice->trim != 0 && ws_.trim != 0 && cfg_.eps_iterations == 0;
    if (lattice) lat_after_used_ = after;
    // (a GPU-pruned decode on an epsilon graph logs its frontiers in the records pass's log)
    const bool flog = lattice != nullptr && lattice->mode == 2 && cfg_.eps_iterations > 0;
    if (after || flog) EnsureLatticeAfter(0, 0);
    if (split) p1 = std::chrono::steady_clock::now();
    ws_.lat_after = after ? 1 : 0;
    // (a constant of the decoder for its lattice decodes, so the graph cache's lattice flag covers it)
    ws_.lat_keys_only = lattice && lat_clear_keys_ && cfg_.eps_iterations == 0 ? 1 : 0;
    // (the trim asked for: on an epsilon graph the lattice trim on epsilon graphs, eps_trim)
    const bool lat_trim = lattice != nullptr && lattice->mode == 2 && lattice->filter != 0 &&
                          (cfg_.eps_iterations > 0 ? lattice->eps_trim != 0 : lattice->trim != 0);
    if (lattice && !after && !lat_trim) ws_.trim = 0;
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
      const int32_t b = l < B ? l : 0;
      in[l] = RowInput(base, rows ? rows[b] : b, stride_b, stride_t, elem);
    }
    Wait(caller_stream, split ? &pw : nullptr);
    if (split) p2 = std::chrono::steady_clock::now();
    LaneCounters* h_lanes = As<LaneCounters>(h_lanes_);
    int32_t* h_path_len = As<int32_t>(h_path_len_);
    if (!pooled_ok_) EnsureStatic();
    RestoreTrimmed();
    if (split) p3 = std::chrono::steady_clock::now();
    const bool bounded = lattice && lattice->mode == 2 && lattice->chunk > 0 && cfg_.eps_iterations == 0;
    if (lattice && !bounded && inc_) inc_.reset();  // PruneLattice takes this decode's records whole
    bool resume = false;  // the pooled batch paused: the next run takes it from where it stopped
    // The records' filter (lattice.cuh LatFilterFor) of GPU-pruned decodes; its guard decodes
    // the batch again without it (a bounded decode restarts from its first run).
    // (the records' filter of GPU-pruned decodes is for epsilon-free graphs: its bound's proof has
    // no epsilon arcs inside a time)
    // (and on an epsilon graph's GPU-pruned decode with its filter and the trim asked for, the
    // lattice trim on epsilon graphs: common.cuh LatEpsTrimOn)
    if (lattice)
      SetLatticeFilter(lattice->mode == 2 && lattice->filter != 0 && cfg_.eps_iterations == 0, lattice->output_beam,
                       lattice->filter_pad,
                       cfg_.eps_iterations > 0 && ((lattice->mode == 1 && lattice->eps_filter != 0) ||
                                                   (lattice->mode == 2 && lattice->filter != 0)),
                       cfg_.eps_iterations > 0 && lat_trim && ws_.trim != 0);
    if (split) p4 = std::chrono::steady_clock::now();
    if (bounded) RunBoundedLattice(B, lengths, online, lp_f16, *lattice);
    for (; !bounded;) {
      if (resume)  // every lane goes on (no order): its counters and frontier are where the pause left them
        for (int32_t l = 0; l < L; ++l) cmd[l] = {0, 0, 0, 0};
      else
        for (int32_t l = 0; l < L; ++l) cmd[l] = {kCmdInit, l < B ? lengths[l] : -1, l < B ? lengths[l] : 0, online ? 1 : 0};
      UploadLaneOrders();
      if (runs++ == 0) s1 = std::chrono::steady_clock::now();
      RunOnce(resume ? SeqKind::kResume : SeqKind::kBatch, steps, lp_f16, replay);
      // Only the batch's B lanes come back; the paths follow once their lengths are known.
      CUWFST_CUDA(cudaMemcpyAsync(h_lanes, ws_.lanes, B * sizeof(LaneCounters), cudaMemcpyDeviceToHost, stream_));
      CUWFST_CUDA(cudaMemcpyAsync(h_path_len, out_path_len_, B * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
      unsigned long long cursor = 0, lat_cursor = 0, need[kPoolNeedSlots] = {0, 0, 0, 0};
      // (pinned: a pageable copy would block other threads' calls on the legacy default stream)
      Readback rb(h_readback_, stream_, readback_staged_);
      CUWFST_CUDA(rb.Copy(&cursor, ws_.arena_cursor, sizeof(cursor)));
      if (pooled_ok_) CUWFST_CUDA(rb.Copy(need, d_pool_need_, sizeof(need)));
      if (lattice) CUWFST_CUDA(rb.Copy(&lat_cursor, ws_.lat_cursor, sizeof(lat_cursor)));
      unsigned long long plan[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (after) CUWFST_CUDA(rb.Copy(plan, ws_.lat_plan, sizeof(plan)));
      CUWFST_CUDA(rb.Sync());
      if (profiling_) CollectProfile();
      if (after && ws_.lat_prof != nullptr) PrintRecordsProfile();
      bool arena_full = false, lane_refused = false;
      for (int32_t b = 0; b < B; ++b) {
        arena_full |= (h_lanes[b].overflow & kOverflowArena) != 0;
        lane_refused |= (h_lanes[b].overflow & kOverflowPool) != 0;
      }
      // A step whose asks did not fit the pools paused the batch before it (common.cuh
      // PooledHandOut, in MaxKernel's or ScanKernel's last block): nothing of that step ran,
      // every lane still holds the frontier it had, and need[] holds what the step asked of
      // each pool, exactly (every lane had stepped fully until then). Each pool short of it
      // grows in one step to 1.125 x that, at least 1.25 x its capacity (PoolGrowth: a first
      // big batch's frontiers grow step by step, so the next pause may come a few steps
      // later), within the static worst case, which holds any step; the batch then resumes
      // from the paused step, so no step is decoded twice.
      if (need[kPoolPauseSlot] != 0) {
        int64_t want[kPools];
        bool grows = false;
        for (int k = 0; k < kPools; ++k) {
          want[k] = PoolGrowth(static_cast<int64_t>(need[k]), pool_cap_[k], pool_max_[k]);
          grows |= want[k] > pool_cap_[k];
        }
        if (!grows)  // cannot happen: a step asks at most the static layout's sizes
          throw std::logic_error("a pooled batch paused with its pools at their worst case");
        // Under the claims' hand-out in FinalizeKernel (types.cuh Workspace::pool_late 2) a step
        // that did not fit left its lanes as it had advanced them (marked late_undo 2; the later
        // steps of the sequence idled them without moving them): put them back here, as
        // PooledUndoStep does on the device for a pause before a step, and resume from there.
        bool undone = false;
        for (int32_t b = 0; b < B; ++b)
          if (h_lanes[b].late_undo == 2) {
            PooledUndoStep(&h_lanes[b]);
            h_lanes[b].late_undo = 0;
            undone = true;
          }
        if (undone)
          CUWFST_CUDA(cudaMemcpyAsync(ws_.lanes, h_lanes, B * sizeof(LaneCounters), cudaMemcpyHostToDevice, stream_));
        CommitPools(want, false, "this batch", /*keep=*/true);
        ++pool_grows_;
        resume = true;
        continue;
      }
      resume = false;
      if (lane_refused)  // cannot happen (a step that fits gives every lane its regions); never a result
        throw std::logic_error("a pooled lane was refused its regions by a step that fitted the pools");
      for (int k = 0; k < kPools; ++k) pool_high_[k] = std::max<int64_t>(pool_high_[k], static_cast<int64_t>(need[k]));
      arena_high_water_ = std::max(arena_high_water_, cursor);
      // The lattice records (their own buffer, not the winners log): the cursor counts every
      // record, also those past lat_cap, so after the whole batch it is what the batch needs.
      const bool lattice_full = lat_cursor > static_cast<unsigned long long>(ws_.lat_cap);
      const bool arena_grows = arena_full && arena_cap_ < cfg_.arena_max;
      // The filter's guard: a lane's scores left the magnitudes its pads cover within a
      // pruning window of a filtered step; decode the batch again without the filter.
      const bool guard = lattice && LatticeFilterGuard(B, h_lanes, *lattice);
      // the records after the search: the frontier log or the global tables past their room (the
      // pass then left steps out): grow them and decode again
      long long log_n = 0;  // (the largest lane's logged tokens: its frontier_total)
      for (int32_t b = 0; b < B && (after || flog); ++b) log_n = std::max(log_n, h_lanes[b].frontier_total);
      const bool log_full = (after || flog) && log_n > ws_.lat_log_lane;
      const bool tab_full = after && !log_full && plan[kAfterPlanTab] > static_cast<unsigned long long>(ws_.lat_tab_cap);
      if (log_full || tab_full)
        EnsureLatticeAfter(log_full ? static_cast<int64_t>(log_n + log_n / 4) : 0,
                           tab_full ? static_cast<int64_t>(plan[kAfterPlanTab] + plan[kAfterPlanTab] / 4) : 0);
      if (!arena_grows && !lattice_full && !guard && !log_full && !tab_full) break;
      // decode is idempotent (LaneSetupKernel resets all loop state): grow and run it again
      if (arena_grows) GrowArena(cursor);
      if (lattice_full && !guard) {  // the batch's records, from its step counts (checked against the cursor)
        const LatticeRunNeed r = OverflowedRunNeed(B, 0, static_cast<int32_t>(ws_.seg_cap), 0, lat_cursor,
                                                   after && lat_reserve_ ? AfterHoleBound() : 0);
        GrowLattice(static_cast<unsigned long long>(r.need), static_cast<unsigned long long>(r.made));
      }
    }
    s2 = std::chrono::steady_clock::now();
    if (lattice) {
      ReadLattice(B, lengths, *lattice);
      // an epsilon graph's GPU pruning reads each lane's frontier log: where its S_0 ends
      // (frontier_total less the later frontiers' sizes, GpuDecoder::PruneBeginLocked)
      pr_flog_ = flog;
      pr_ftotal_.assign(flog ? B : 0, 0);
      for (int32_t b = 0; b < B && flog; ++b) pr_ftotal_[b] = h_lanes[b].frontier_total;
      if (bounded) {  // every run's records, as the whole batch would have counted them
        int64_t total = 0;
        for (int32_t b = 0; b < B; ++b)
          for (int64_t t = 0; t <= lengths[b] && t < lattice->S; ++t) total += lattice->counts[b * lattice->S + t];
        lattice->total[0] = total;
      } else {
        lat_live_high_ = lattice->total[0];
        lat_runs_ = 1;
      }
    }
    // Path bytes: B rows of the longest kept path, not max_lanes x path_cap (a long input
    // once grew path_cap; short batches after it must not pay for it).
    int64_t width = 0;
    for (int32_t b = 0; b < B; ++b) width = std::max<int64_t>(width, std::min<int64_t>(h_path_len[b], ws_.path_cap));
    const int32_t* h_path = ReadPaths(width, B);
    for (int32_t b = 0; b < B; ++b) WriteResult(b, b, h_lanes[b], h_path_len[b], nullptr, 0, h_path, out);
    if (split) {
      const auto s3 = std::chrono::steady_clock::now();
      auto ms = [](std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
      };
      std::fprintf(stderr, "decode split ms: setup %.2f, runs %.2f (%d), results %.2f; B %d, steps %d, lattice %d, "
                   "replayed %d; setup parts: ensure %.3f, wait %.3f (record %.3f), static %.3f, filter %.3f, "
                   "upload %.3f\n",
                   ms(s0, s1), ms(s1, s2), runs, ms(s2, s3), B, steps, lattice ? lattice->mode : 0, replay ? 1 : 0,
                   ms(s0, p1), ms(p1, p2), ms(p1, pw), ms(p2, p3), ms(p3, p4), ms(p4, s1));
    }
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

// A bounded lattice decode (LatticeOutputs::chunk > 0, epsilon-free graphs): the batch runs
// `chunk` steps at a time (the first run a kBatch, the others kResume, which takes every
// lane on from where the last run left it, as after a pooled pause), and after each run
// IncPass prunes the records of its steps with every k2 window whose end exists, then moves
// what no later window touches to the host (gpu_lattice_prune.cu). The records arena holds
// one run's records and is emptied before the next. A run that overflowed the records or
// the winners log grows it and starts the batch again (decode is idempotent from a kBatch;
// the pruning restarts with it); a pooled pause grows the pools and the next run resumes.
void GpuDecoder::RunBoundedLattice(int32_t B, const int32_t* lengths, bool online, bool f16,
                                   const LatticeOutputs& lat) {
  const int L = cfg_.max_lanes;
  LaneCommand* cmd = As<LaneCommand>(h_commands_);
  LaneCounters* h_lanes = As<LaneCounters>(h_lanes_);
  int32_t* h_path_len = As<int32_t>(h_path_len_);
  int32_t Tmax = 0;  // times 0 .. Tmax (Tmax = the longest row + 1 = its steps)
  for (int32_t b = 0; b < B; ++b) Tmax = std::max(Tmax, lengths[b] + 1);
  const int32_t chunk = std::max<int32_t>(1, lat.chunk);
  for (;;) {
    IncReset(B, lengths, lat.output_beam);
    lat_runs_ = 0;
    bool first = true, restart = false;
    int32_t t_done = 0;
    while (t_done < Tmax) {
      const int32_t remaining = Tmax - t_done;
      int32_t steps = std::min(chunk, remaining);
      bool replay;
      if (steps == remaining) {  // the last run: bucketed (steps past a lane's end do nothing)
        replay = Replays(StepBucket(steps));
        if (replay) steps = StepBucket(steps);
      } else {  // exactly `chunk` steps: replayed when that is a bucket, else launched plainly
        replay = StepBucket(steps) == steps && Replays(steps);
      }
      for (int32_t l = 0; l < L; ++l)
        cmd[l] = first ? LaneCommand{kCmdInit, l < B ? lengths[l] : -1, l < B ? lengths[l] : 0, online ? 1 : 0}
                       : LaneCommand{0, 0, 0, 0};
      UploadLaneOrders();
      // each run's records start at 0 (a kBatch's setup resets the cursor itself; kResume's does not)
      if (!first) CUWFST_CUDA(cudaMemsetAsync(ws_.lat_cursor, 0, sizeof(unsigned long long), stream_));
      RunOnce(first ? SeqKind::kBatch : SeqKind::kResume, steps, f16, replay);
      first = false;
      ++lat_runs_;
      CUWFST_CUDA(cudaMemcpyAsync(h_lanes, ws_.lanes, B * sizeof(LaneCounters), cudaMemcpyDeviceToHost, stream_));
      CUWFST_CUDA(cudaMemcpyAsync(h_path_len, out_path_len_, B * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
      unsigned long long cursor = 0, lat_cursor = 0, need[kPoolNeedSlots] = {0, 0, 0, 0};
      Readback rb(h_readback_, stream_, readback_staged_);
      CUWFST_CUDA(rb.Copy(&cursor, ws_.arena_cursor, sizeof(cursor)));
      if (pooled_ok_) CUWFST_CUDA(rb.Copy(need, d_pool_need_, sizeof(need)));
      CUWFST_CUDA(rb.Copy(&lat_cursor, ws_.lat_cursor, sizeof(lat_cursor)));
      CUWFST_CUDA(rb.Sync());
      if (profiling_) CollectProfile();
      bool arena_full = false, lane_refused = false;
      for (int32_t b = 0; b < B; ++b) {
        arena_full |= (h_lanes[b].overflow & kOverflowArena) != 0;
        lane_refused |= (h_lanes[b].overflow & kOverflowPool) != 0;
      }
      // every lane still stepping is at the same time; finished lanes stopped at theirs
      int32_t t1 = t_done;
      for (int32_t b = 0; b < B; ++b) t1 = std::max(t1, std::min(h_lanes[b].t, lengths[b] + 1));
      const bool lattice_full = lat_cursor > static_cast<unsigned long long>(ws_.lat_cap);
      const bool arena_grows = arena_full && arena_cap_ < cfg_.arena_max;
      // the filter's guard, before IncPass prunes a window whose end this run made: every step
      // a window of a filtered step reaches is in this run or an earlier one
      if (LatticeFilterGuard(B, h_lanes, lat)) {
        restart = true;
        break;
      }
      if (lattice_full || arena_grows) {
        // the log holds the whole batch's winners (a restart begins at frame 0): the need so
        // far scaled to every step, so one growth suffices (not ~1/8 more per restart)
        if (arena_grows)
          GrowArena(std::max<unsigned long long>(
              cursor, cursor * static_cast<unsigned long long>(Tmax + 1) / static_cast<unsigned long long>(std::max(1, t1))));
        // room for one run of `chunk` steps, each as large as the largest this run made
        // (types.cuh LatticeNeedOfRun: from the run's step counts, checked against the
        // cursor); the steps counted are the run's own, [t_done, t_done + steps): a lane
        // that stopped early left the rest zero
        if (lattice_full) {
          const LatticeRunNeed r = OverflowedRunNeed(B, t_done, t_done + steps, std::min(chunk, Tmax), lat_cursor);
          GrowLattice(static_cast<unsigned long long>(r.need), static_cast<unsigned long long>(r.made));
        }
        restart = true;
        break;
      }
      if (need[kPoolPauseSlot] != 0) {  // as Decode: grow the pools, the next run resumes the paused step
        int64_t want[kPools];
        bool grows = false;
        for (int k = 0; k < kPools; ++k) {
          want[k] = PoolGrowth(static_cast<int64_t>(need[k]), pool_cap_[k], pool_max_[k]);
          grows |= want[k] > pool_cap_[k];
        }
        if (!grows) throw std::logic_error("a pooled batch paused with its pools at their worst case");
        CommitPools(want, false, "this batch", /*keep=*/true);
        ++pool_grows_;
      } else {
        if (lane_refused) throw std::logic_error("a pooled lane was refused its regions by a step that fitted the pools");
        for (int k = 0; k < kPools; ++k) pool_high_[k] = std::max<int64_t>(pool_high_[k], static_cast<int64_t>(need[k]));
        arena_high_water_ = std::max(arena_high_water_, cursor);
      }
      if (t1 == t_done && need[kPoolPauseSlot] == 0)
        throw std::logic_error("a bounded lattice run took no step (a decoder bug)");
      IncPass(t1, lat_cursor);
      t_done = t1;
    }
    if (!restart) break;
  }
}

// The records' filter's guard (lattice.cuh LatFilterFor): when a lane of the run just made
// raised lat_guard while the filter was on, the filter goes off for the rest of this decode
// (the caller decodes the batch again). True then.
// On an epsilon graph the guard is the lattice trim's (common.cuh LatEpsTrimOn): the batch is
// decoded again with the records' filter on epsilon graphs but without the trim.
bool GpuDecoder::LatticeFilterGuard(int32_t B, const LaneCounters* h_lanes, const LatticeOutputs& lat) {
  if (!lat_filter_on_ && !lat_eps_trim_on_) return false;
  bool fired = false;
  for (int32_t b = 0; b < B; ++b) fired |= h_lanes[b].lat_guard != 0;
  if (!fired) return false;
  if (lat_eps_trim_on_) SetLatticeFilter(false, lat.output_beam, lat.filter_pad, true, false);
  else SetLatticeFilter(false, lat.output_beam, lat.filter_pad);
  ++lat_filter_reruns_;
  return true;
}

void GpuDecoder::MemStats(int64_t out[kMemStats]) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t paths = out_path_.amount() + drain_.amount() + refill_path_.amount() + finite_dev_.amount();
  const int64_t log_committed = static_cast<int64_t>(arena_.committed() + gc_tags_.committed());
  const int64_t log_reserved = static_cast<int64_t>(arena_.reserved() + gc_tags_.reserved());
  int64_t pool_committed = 0, pool_reserved = 0;
  for (const auto& a : pool_arrays_) {
    pool_committed += static_cast<int64_t>(a->region.committed());
    pool_reserved += static_cast<int64_t>(a->region.reserved());
  }
  const int64_t log_host = static_cast<int64_t>(arena_.host_committed());
  out[0] = fixed_bytes_ + pool_reserved + log_reserved + paths + lattice_bytes();
  out[1] = fixed_bytes_ + pool_committed + log_committed - log_host + paths + lattice_bytes();
  out[2] = fixed_bytes_;
  out[3] = static_cast<int64_t>(arena_high_water_);
  out[4] = h_commands_.amount() + h_inputs_.amount() + h_lanes_.amount() + h_path_.amount() + h_path_len_.amount() +
           h_lat_.amount() + pr_host_[0].amount() + pr_host_[1].amount() + h_refill_queue_.amount() +
           h_refill_ctl_.amount() + h_refill_done_.amount() + h_refill_row_.amount() + h_refill_path_.amount() +
           h_refill_path_len_.amount() + h_many_cursor_.amount() + h_readback_.amount() + pr_readback_.amount() +
           finite_host_.amount() + log_host;
  out[5] = static_cast<int64_t>(graphs_.size());
  out[6] = graph_captures_;
  out[7] = graphs_.evictions();
  out[8] = graph_->bytes();
  out[9] = log_committed;
  out[10] = log_reserved;
  out[11] = arena_cap_;
  out[12] = arena_.vmm() ? 1 : 0;
  out[13] = static_cast<int64_t>(arena_.granularity());
  out[14] = paths;
  out[15] = arena_grows_;
  out[16] = gc_round_;
  out[17] = static_cast<int64_t>(arena_used_);
  out[18] = static_cast<int64_t>(arena_used_max_);
  out[19] = pool_committed;
  out[20] = pool_reserved;
  out[21] = pooled_ok_ ? 1 : 0;
  out[22] = pool_grows_;
  for (int k = 0; k < kPools; ++k) {
    out[23 + k] = pool_cap_[k];
    out[26 + k] = pool_high_[k];
  }
  out[29] = advance_rounds_;
  out[30] = cfg_.scan_split;
  out[31] = cfg_.closure_lists;
  out[32] = cfg_.finalize_split;
  out[33] = lattice_bytes();
  out[34] = cfg_.fused_max;
  out[35] = lattice_prune_bytes();
  out[36] = lat_live_high_;
  out[37] = lat_runs_;
  out[38] = arena_grow_us_;
  out[39] = arena_ahead_grows_;
  out[40] = arena_ahead_us_;
  out[41] = gc_us_;
  out[42] = lat_grows_;
  out[43] = lat_.get() ? ws_.lat_cap : 0;
  out[44] = ws_.trim;
  unsigned long long slots[2] = {0, 0};
  const bool read = cudaMemcpyAsync(slots, ws_.slot_total, sizeof(slots), cudaMemcpyDeviceToHost, stream_) == cudaSuccess &&
                    cudaStreamSynchronize(stream_) == cudaSuccess;
  if (!read) ClearHandledError();
  out[45] = read ? static_cast<int64_t>(slots[0]) : -1;
  out[66] = read ? static_cast<int64_t>(slots[1]) : -1;
  out[46] = refills_;
  out[47] = pdl_ ? 1 : 0;
  out[48] = cfg_.scan_round;
  out[49] = cfg_.scan_order;
  out[50] = cfg_.refill_kernel;
  out[51] = gc_mark_us_;
  out[52] = gc_live_total_;
  out[53] = lat_filter_reruns_;
  out[54] = lat_filter_dropped_;
  {
    std::lock_guard<std::mutex> l(pr_mu_);  // a pruning's finisher adds to them
    out[55] = prune_block_times_;
    out[56] = prune_sort_times_;
    out[64] = prune_lane_times_;
  }
  out[57] = lat_cand_steps_;
  out[58] = lat_cand_over_;
  out[59] = log_host;
  out[60] = arena_.host() ? 1 : 0;
  out[61] = arena_.host_ok() ? 1 : 0;
  out[62] = restores_;
  out[63] = ws_.payload_tok;
  out[65] = max_anchor_ && !cfg_.fused_max && ws_.trim ? 1 : 0;
  out[67] = max_blocks_;
  out[68] = expand_blocks_;
  out[69] = lat_blocks_;
  out[70] = lat_append_block_ ? 1 : 0;
  out[71] = lat_cand_final_ ? 1 : 0;
  out[72] = lat_cand_final_steps_;
  out[73] = expand_min_blocks_;
  out[74] = lat_min_blocks_;
  out[75] = ws_.label_bound;
  out[76] = ws_.trim_weights;
  out[77] = lat_clear_keys_ ? 1 : 0;
  out[78] = lat_after_decodes_;
  out[79] = lat_reserve_ ? 1 : 0;
  out[80] = lat_tab_packed_ ? 1 : 0;
  out[81] = lat_log_fold_;
  out[82] = lat_one_grid_ ? 1 : 0;
  out[83] = lat_c14_index_ ? 1 : 0;
  out[84] = lat_log_extra_ ? 1 : 0;
  out[85] = lat_chunk_;
  out[86] = lat_compact_ ? 1 : 0;
  out[87] = lat_claim_tokens_ ? 1 : 0;
  out[88] = AfterPacked() ? 1 : 0;
  out[89] = AfterOctets() ? 1 : 0;
}

// FirstNonFinite's kernel: a warp a frame (b, t) with t < len[b], its lanes over the V columns;
// a frame with a NaN or +inf min-reduces b * T + t into *first (left at ~0 when none does).
// float16: NaN is an all-ones exponent with a non-zero mantissa, +inf 0x7C00 (-inf is allowed).
__global__ void __launch_bounds__(256) FirstNonFiniteKernel(const char* base, int32_t f16, int64_t stride_b,
                                                             int64_t stride_t, int32_t B, int32_t T, int32_t V,
                                                             const int32_t* len, unsigned long long* first) {
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const int64_t frames = static_cast<int64_t>(B) * T;
  const int64_t elem = f16 ? 2 : 4;
  for (int64_t f = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; f < frames; f += warps) {
    const int32_t b = static_cast<int32_t>(f / T), t = static_cast<int32_t>(f % T);
    if (t >= len[b]) continue;  // (uniform over the warp)
    const char* row = base + (static_cast<int64_t>(b) * stride_b + static_cast<int64_t>(t) * stride_t) * elem;
    bool bad = false;
    if (f16) {
      const uint16_t* r = reinterpret_cast<const uint16_t*>(row);
      for (int32_t v = me; v < V; v += 32) {
        const uint16_t x = r[v];
        bad |= (x & 0x7FFFu) > 0x7C00u || x == 0x7C00u;
      }
    } else {
      const float* r = reinterpret_cast<const float*>(row);
      for (int32_t v = me; v < V; v += 32) {
        const float x = r[v];
        bad |= isnan(x) || x == INFINITY;
      }
    }
    if (__any_sync(0xFFFFFFFFu, bad) && me == 0) atomicMin(first, static_cast<unsigned long long>(f));
  }
}

int64_t GpuDecoder::FirstNonFinite(const void* lp, bool lp_f16, int64_t stride_b, int64_t stride_t, int32_t B,
                                   int32_t T, int32_t V, const int32_t* lengths, int64_t caller_stream) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  if (B < 1 || T < 0 || V < 1) throw std::invalid_argument("log_probs must be [B >= 1, T, V >= 1]");
  const size_t bytes = sizeof(unsigned long long) + sizeof(int32_t) * static_cast<size_t>(B);
  if (finite_dev_.amount() < static_cast<int64_t>(bytes) || finite_host_.amount() < static_cast<int64_t>(bytes)) {
    DeviceBuffer d;
    PinnedBuffer h;
    cudaError_t e = TryDeviceAlloc(bytes, &d);
    const bool on_device = e != cudaSuccess;
    if (e == cudaSuccess) e = TryPinnedAlloc(bytes, &h);
    if (e != cudaSuccess) {
      std::ostringstream os;
      os << "cannot allocate " << FormatBytes(static_cast<int64_t>(bytes)) << (on_device ? "" : " of pinned host memory")
         << " to check " << B << " rows of log_probs for NaN/+inf on cuda:" << device()
         << "; the decoder keeps its buffers for " << cfg_.max_lanes << " rows (max_lanes) and stays usable; decode "
         << "fewer rows at a time, or skip the check with check_inputs=False";
      ThrowAcquireFailure(e, os.str());
    }
    finite_dev_ = std::move(d);
    finite_host_ = std::move(h);
  }
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(caller_stream);
  char* hb = static_cast<char*>(finite_host_.get());
  char* db = static_cast<char*>(finite_dev_.get());
  std::memcpy(hb + sizeof(unsigned long long), lengths, sizeof(int32_t) * static_cast<size_t>(B));
  CUWFST_CUDA(cudaMemcpyAsync(db + sizeof(unsigned long long), hb + sizeof(unsigned long long),
                              sizeof(int32_t) * static_cast<size_t>(B), cudaMemcpyHostToDevice, s));
  CUWFST_CUDA(cudaMemsetAsync(db, 0xFF, sizeof(unsigned long long), s));
  const int64_t frames = static_cast<int64_t>(B) * T;
  if (frames > 0) {
    const int32_t grid = static_cast<int32_t>(std::min<int64_t>((frames + 7) / 8, 4096));  // 8 warps a block
    FirstNonFiniteKernel<<<grid, 256, 0, s>>>(static_cast<const char*>(lp), lp_f16 ? 1 : 0, stride_b, stride_t, B, T,
                                              V, reinterpret_cast<const int32_t*>(db + sizeof(unsigned long long)),
                                              reinterpret_cast<unsigned long long*>(db));
    CUWFST_CUDA(cudaGetLastError());
  }
  CUWFST_CUDA(cudaMemcpyAsync(hb, db, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
  CUWFST_CUDA(cudaStreamSynchronize(s));
  unsigned long long first;
  std::memcpy(&first, hb, sizeof(first));
  return first == ~0ull ? -1 : static_cast<int64_t>(first);
}

int64_t GpuDecoder::ScanTrace(uint64_t* out, int64_t out_len) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ws_.scan_trace == nullptr) return 0;
  const int64_t ring = static_cast<int64_t>(ws_.scan_trace_cap) * persist_grid_ * kScanTraceWords;
  int32_t steps = 0;
  CUWFST_CUDA(cudaMemcpyAsync(&steps, ws_.scan_trace_step, sizeof(steps), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
  const uint64_t head[4] = {static_cast<uint64_t>(ws_.scan_trace_cap), static_cast<uint64_t>(persist_grid_),
                            static_cast<uint64_t>(kScanTraceWords), static_cast<uint64_t>(steps)};
  for (int64_t i = 0; i < 4 && i < out_len; ++i) out[i] = head[i];
  const int64_t n = std::min<int64_t>(ring, std::max<int64_t>(out_len - 4, 0));
  if (n > 0) {
    CUWFST_CUDA(cudaMemcpyAsync(out + 4, ws_.scan_trace, n * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
  }
  return 4 + ring;
}

}  // namespace cuwfst
