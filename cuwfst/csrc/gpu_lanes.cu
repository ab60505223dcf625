// Lanes as slots: the host side of continuous batching (ManyBegin, ManyLaunch, ManyWait) and streams. A lane
// holds one row's or one stream's search state across launch sequences; each sequence is
// the same step kernels as an offline batch (gpu_decoder.cu), driven by per-lane orders
// (LaneSetupKernel) and per-lane inputs. Between sequences a GC round (gc.cuh) keeps the
// winners log to what live lanes can still read and moves each lane's final arcs to the
// host (LaneHost::prefix), so memory does not grow with a stream's length or a dataset's.
#include "gpu_decoder.cuh"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "cuwfst/gc.cuh"

namespace cuwfst {

namespace {
template <typename T>
T* As(const PinnedBuffer& b) {
  return static_cast<T*>(b.get());
}

// Steps per chunk launch: multiples of 8, so mixed chunk lengths share a few captures.
int32_t ChunkBucket(int32_t steps) { return (steps + 7) / 8 * 8; }
}  // namespace

void GpuDecoder::CheckLanes(const int32_t* lanes, int32_t n, bool want_open) const {
  std::vector<char> seen(cfg_.max_lanes, 0);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t l = lanes[i];
    if (l < 0 || l >= cfg_.max_lanes) {
      std::ostringstream os;
      os << "lane " << l << " outside [0, " << cfg_.max_lanes << ")";
      throw std::invalid_argument(os.str());
    }
    if (seen[l]++) throw std::invalid_argument("a lane appears twice in one call");
    if (lane_host_[l].open != want_open) {
      std::ostringstream os;
      os << "lane " << l << (want_open ? " holds no open stream" : " already holds a stream");
      throw std::invalid_argument(os.str());
    }
  }
}

// Every lane's order for the next sequence starts as: keep (open lanes) or release (the
// rest, so that no kernel follows a chain a GC round may have moved).
void GpuDecoder::ClearLaneOrders() {
  LaneCommand* cmd = As<LaneCommand>(h_commands_);
  for (int32_t l = 0; l < cfg_.max_lanes; ++l) cmd[l] = {lane_host_[l].open ? 0 : kCmdRelease, -1, 0, 0};
}

// Winners-log growth that keeps the contents (live lanes' chains) and their GC tags.
void GpuDecoder::GrowArenaKeeping(int64_t want) { CommitArena(want, true, "the live streams or rows"); }

void GpuDecoder::CommitArenaAhead(unsigned long long want) {
  if (!cfg_.arena_ahead || !arena_.vmm() || arena_cap_ >= cfg_.arena_max) return;
  if (static_cast<unsigned long long>(arena_cap_) >= want + want / 8) return;
  const unsigned long long top = static_cast<unsigned long long>(cfg_.arena_max);
  const int64_t target = static_cast<int64_t>(std::min<unsigned long long>(want + want / 4, top));
  if (target <= arena_cap_) return;
  const int64_t t0 = HostMicros();
  const size_t tags_before = gc_tags_.committed();
  bool moved = false;
  // no fill and no sync here: the pieces are mapped while the kernels run (they never reach
  // past the old limit); the new tags are zeroed in stream order, before the next GC round
  cudaError_t e = arena_.Commit(static_cast<size_t>(target) * sizeof(WinnerEntry), 0, -1, stream_, &moved);
  if (e == cudaSuccess && gc_tags_used_) {
    e = gc_tags_.Commit(static_cast<size_t>(target) * sizeof(long long), 0, -1, stream_, &moved);
    if (e == cudaSuccess && gc_tags_.committed() > tags_before) {
      e = cudaMemsetAsync(static_cast<char*>(gc_tags_.get()) + tags_before, 0, gc_tags_.committed() - tags_before,
                          stream_);
      // tags that were never zeroed must not stay committed (a later commit would take them as they are)
      if (e != cudaSuccess && !IsStickyError(e)) gc_tags_.Trim(tags_before);
    }
  }
  arena_ahead_us_ += HostMicros() - t0;
  if (e != cudaSuccess) {
    if (IsStickyError(e)) throw CudaError(e, CudaErrorString(e, "committing the winners log ahead of need"));
    ClearHandledError();
    return;  // optional: the log keeps its limit (pieces mapped stay committed and counted)
  }
  ++arena_grows_;
  ++arena_ahead_grows_;
  arena_cap_ = target;
  PublishArenaLimit();  // in stream order: the running kernels keep the old limit
}

// Room for the next sequence's appends: after a GC round at most half the log is in use.
void GpuDecoder::EnsureArenaRoom(int64_t used) {
  if (used > arena_cap_ / 2 && arena_cap_ < cfg_.arena_max) GrowArenaKeeping(2 * arena_cap_);
}

void GpuDecoder::CollectGarbage() {
  const int L = cfg_.max_lanes;
  struct GcTimer {  // MemStats [41]
    int64_t& total;
    int64_t t0 = HostMicros();
    ~GcTimer() { total += HostMicros() - t0; }
  } timer{gc_us_};
  if (!gc_tags_used_) {  // the first round: tags for the log's whole capacity, all of an old round (0)
    bool moved = false;
    cudaError_t e = gc_tags_.Commit(static_cast<size_t>(arena_cap_) * sizeof(long long), 0, 0, stream_, &moved);
    if (e != cudaSuccess)
      ThrowAcquireFailure(e, "cannot allocate the winners-log GC tags (" +
                                 FormatBytes(arena_cap_ * static_cast<int64_t>(sizeof(long long))) + ") on cuda:" +
                                 std::to_string(device()) + "; " + Advice());
    gc_tags_used_ = true;
    ws_.gc_tag = static_cast<long long*>(gc_tags_.get());
    if (moved) FreeGraphs();  // eager: Workspace (a kernel argument) changed
  }
  const long long round = ++gc_round_;
  CUWFST_CUDA(cudaMemsetAsync(ws_.gc_live, 0, sizeof(unsigned long long), stream_));
  GcMarkKernel<<<L, kGcThreads, 0, stream_>>>(ws_, round);
  CUWFST_CUDA(cudaGetLastError());
  unsigned long long live = 0, cursor = 0;
  std::vector<int32_t> drain_len(L);
  LaneCounters* h_lanes = As<LaneCounters>(h_lanes_);
  CUWFST_CUDA(cudaMemcpyAsync(h_lanes, ws_.lanes, L * sizeof(LaneCounters), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(&live, ws_.gc_live, sizeof(live), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(&cursor, ws_.arena_cursor, sizeof(cursor), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(drain_len.data(), ws_.drain_len, L * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
  gc_mark_us_ += HostMicros() - timer.t0;  // MemStats [51]: the round's time to here (GcMarkKernel)
  gc_live_total_ += static_cast<int64_t>(live);  // [52]
  cursor = std::min<unsigned long long>(cursor, static_cast<unsigned long long>(arena_cap_));
  arena_high_water_ = std::max(arena_high_water_, cursor);
  for (int32_t l = 0; l < L; ++l)
    if (lane_host_[l].open && h_lanes[l].t > 0) {
      const long long steps = h_lanes[l].t;
      lane_host_[l].mean_frontier =
          static_cast<int32_t>(std::min<long long>((h_lanes[l].frontier_total + steps - 1) / steps, INT32_MAX));
    }
  // the final arcs, root first, onto each lane's host prefix
  int32_t width = 0;
  for (int32_t l = 0; l < L; ++l) width = std::max(width, std::min(drain_len[l], ws_.path_cap));
  if (width > 0) {
    std::vector<int32_t> rows(static_cast<size_t>(L) * width);
    CUWFST_CUDA(cudaMemcpy2DAsync(rows.data(), width * sizeof(int32_t), drain_.get(), ws_.path_cap * sizeof(int32_t),
                                  width * sizeof(int32_t), L, cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    for (int32_t l = 0; l < L; ++l) {
      if (!lane_host_[l].open || drain_len[l] == 0) continue;
      const int32_t n = std::min(drain_len[l], ws_.path_cap);
      if (drain_len[l] > ws_.path_cap) lane_host_[l].overflow |= kOverflowPath;
      lane_host_[l].prefix.insert(lane_host_[l].prefix.end(), rows.begin() + static_cast<int64_t>(l) * width,
                                  rows.begin() + static_cast<int64_t>(l) * width + n);
    }
  }
  // the live entries into the free tail (grown first if it is short), then to the start
  if (cursor + live > static_cast<unsigned long long>(arena_cap_))
    GrowArenaKeeping(static_cast<int64_t>(cursor + live) + static_cast<int64_t>(live));
  if (cursor + live > static_cast<unsigned long long>(arena_cap_)) {  // at arena_max
    std::ostringstream os;
    os << "the winners arena (at its limit of " << cfg_.arena_max << " entries) has no room to collect garbage: "
       << live << " live entries after " << cursor << "; decode fewer rows or streams at once or lower max_active_states";
    throw std::runtime_error(os.str());
  }
  if (cursor > 0) {
    const int blocks = static_cast<int>(std::min<unsigned long long>((cursor + 255) / 256, 4096));
    GcCopyKernel<<<blocks, 256, 0, stream_>>>(ws_, round, static_cast<int64_t>(cursor), static_cast<int64_t>(cursor));
  }
  GcRemapKernel<<<L, kGcThreads, 0, stream_>>>(ws_, round);
  CUWFST_CUDA(cudaGetLastError());
  if (live > 0)
    CUWFST_CUDA(cudaMemcpyAsync(ws_.arena, ws_.arena + cursor,
                                live * sizeof(WinnerEntry), cudaMemcpyDeviceToDevice, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(ws_.arena_cursor, &live, sizeof(live), cudaMemcpyHostToDevice, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
  arena_used_ = live;
  arena_used_max_ = std::max(arena_used_max_, live);
  EnsureArenaRoom(static_cast<int64_t>(live));
}

// ------------------------------------------------------------------ continuous batching
// After a kSegmentRefill segment (ManyWait): the rows the device started (the queue's first
// ctl[kRefillDone] entries, order[*next ...]) leave the host's list, the rows that ended and were
// replaced go to the outputs from their done records (the row a lane held when the segment
// began keeps the prefix GC rounds drained for it; a row that started inside the segment has
// none), and each lane's host view and input follow the row it holds now.
void GpuDecoder::HarvestRefills(const int32_t* lengths, const char* base, int64_t stride_b, int64_t stride_t,
                                int64_t elem, int32_t* next, DecodeOutputs& out) {
  const int L = cfg_.max_lanes;
  const int32_t* ctl = As<int32_t>(h_refill_ctl_);
  const int32_t* lane_rows = As<int32_t>(h_refill_row_);
  *next += ctl[kRefillDone];  // the queue's entries [0, done) were taken (the fused refill's head may pass it)
  refills_ += ctl[kRefillDone];
  const int32_t n_done = std::min(ctl[kRefillDone], refill_done_cap_);
  if (n_done > 0) {
    const size_t pitch = static_cast<size_t>(ws_.path_cap) * sizeof(int32_t);
    CUWFST_CUDA(cudaMemcpyAsync(h_refill_done_.get(), ws_.refill_done, n_done * sizeof(RefillDone),
                                cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaMemcpyAsync(h_refill_path_len_.get(), ws_.refill_path_len, n_done * sizeof(int32_t),
                                cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaMemcpyAsync(h_refill_path_.get(), refill_path_.get(), n_done * pitch, cudaMemcpyDeviceToHost,
                                stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    const RefillDone* done = As<RefillDone>(h_refill_done_);
    const int32_t* path_len = As<int32_t>(h_refill_path_len_);
    const int32_t* paths = As<int32_t>(h_refill_path_);
    for (int32_t r = 0; r < n_done; ++r) {  // (a lane's records are in the order its rows ended)
      const RefillDone& d = done[r];
      LaneHost& h = lane_host_[d.lane];
      const bool held = h.row == d.row;  // the lane's row when the segment began
      LaneCounters lc{};
      lc.final_winner = d.final_winner;
      lc.final_score = d.final_score;
      lc.reached_final = d.reached_final;
      lc.redirected = d.redirected;
      lc.overflow = d.overflow;
      lc.max_frontier = d.max_frontier;
      lc.frontier_total = d.frontier_total;
      lc.closure_added = d.closure_added;
      WriteResult(r, d.row, lc, path_len[r], held ? &h.prefix : nullptr, held ? h.overflow : 0, paths, out);
      many_.finished.push_back(d.row);
      if (held) h.row = -1;  // its prefix and host bits are spent
    }
  }
  LaneInput* in = As<LaneInput>(h_inputs_);
  for (int32_t l = 0; l < L; ++l) {
    LaneHost& h = lane_host_[l];
    if (!h.open || lane_rows[l] == h.row) continue;
    const int32_t row = lane_rows[l];  // started on the device inside the segment
    h = LaneHost{};
    h.open = true;
    h.row = row;
    h.fed = lengths[row];
    in[l] = RowInput(base, row, stride_b, stride_t, elem);  // the next upload keeps it
  }
}

// Continuous batching in three calls, so the caller can work on the rows of one segment while the GPU
// runs the next (the host's share of a dataset's decode: hypotheses, outside the GPU's time).
// ManyGuarded: any failure ends the run (the lanes released, the hash tables to be wiped) and
// is rethrown; a sticky CUDA error is fatal, as in every other entry point.
template <typename F>
auto GpuDecoder::ManyGuarded(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const CudaError& e) {
    many_.active = false;
    pending_.clear();
    hash_dirty_ = true;
    ReleaseAllLanes();
    if (IsStickyError(e.code())) Fatal(e.code(), e.what(), many_.N, many_.T, many_.V, many_.segment);
    SyncQuietly();
    throw;
  } catch (...) {
    many_.active = false;
    pending_.clear();
    hash_dirty_ = true;
    ReleaseAllLanes();
    SyncQuietly();
    throw;
  }
}

void GpuDecoder::ManyBegin(const void* lp, bool lp_f16, int64_t stride_b, int64_t stride_t, int32_t N, int32_t T,
                           int32_t V, const int32_t* lengths, bool online, int32_t segment, bool gc_every_segment,
                           int64_t caller_stream, DecodeOutputs out, bool refill) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  if (N < 1) throw std::invalid_argument("no rows to decode");
  if (segment < 1 || segment > 4096) throw std::invalid_argument("segment must be in [1, 4096] steps");
  if (many_.active) {  // a run the caller abandoned without ManyAbort: its lanes go
    SyncQuietly();
    ReleaseAllLanes();
    many_.active = false;
  }
  ManyRun& r = many_;
  r = ManyRun{};
  r.base = static_cast<const char*>(lp);
  r.f16 = lp_f16;
  r.stride_b = stride_b;
  r.stride_t = stride_t;
  r.elem = lp_f16 ? 2 : 4;
  r.N = N;
  r.T = T;
  r.V = V;
  r.lengths = lengths;
  r.online = online;
  r.segment = segment;
  r.gc_every = gc_every_segment;
  r.out = out;
  int32_t max_len = 0;
  for (int32_t b = 0; b < N; ++b) max_len = std::max(max_len, lengths[b]);
  r.replay = Replays(segment);
  // the device-side refill: offline rows (a stream's length is not known) without the
  // long-form GC rounds after every segment
  r.refill = refill && !online && !gc_every_segment;
  ManyGuarded([&] {
    cudaError_t stale = cudaGetLastError();
    if (IsStickyError(stale)) Fatal(stale, "found pending before the decode started", N, T, V, segment);
    if (max_len > cfg_.max_frames) {
      int32_t mf = cfg_.max_frames;
      while (mf < max_len) mf *= 2;
      AllocatePath(mf);
    }
    EnsureStatic();  // lanes live across segments, which cannot be re-run: the static layout
    ReleaseAllLanes();
    if (r.refill) EnsureRefillPaths();
    // longest rows first: the last segments then hold the short ones, not one long straggler
    r.order.resize(N);
    std::iota(r.order.begin(), r.order.end(), 0);
    std::stable_sort(r.order.begin(), r.order.end(), [&](int32_t a, int32_t b) { return lengths[a] > lengths[b]; });
    Wait(caller_stream);
    CUWFST_CUDA(cudaMemsetAsync(ws_.arena_cursor, 0, sizeof(unsigned long long), stream_));  // no lane is live
    r.cursor = 0;
    r.delta = static_cast<unsigned long long>(arena_cap_ / 4);
    r.active = true;
  });
}

bool GpuDecoder::ManyLaunch() {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  if (!many_.active) throw std::logic_error("no continuous-batching run is under way (ManyBegin)");
  if (many_.launched) throw std::logic_error("the last segment has not been waited for (ManyWait)");
  // (nothing here may copy into pageable host memory behind the segment: such a copy would
  // make this call wait for the segment, and the caller's work would no longer overlap it)
  return ManyGuarded([&]() -> bool {
    ManyRun& r = many_;
    const int L = cfg_.max_lanes;
    const int32_t N = r.N;
    const int32_t* lengths = r.lengths;
    // room for the next segment's appends (twice the last segment's): a GC round first,
    // then growth; a segment that still overflows flags its rows (the caller rescues them).
    // gc_every_segment (offline long-form, gc_interval): a round after every segment, so
    // the log holds what live tokens reach plus one segment's appends, whatever the length.
    bool live = false;
    for (const LaneHost& h : lane_host_) live |= h.open;
    if ((r.gc_every && live) || r.cursor + 2 * r.delta > static_cast<unsigned long long>(arena_cap_)) {
      CollectGarbage();
      CUWFST_CUDA(cudaMemcpyAsync(&r.cursor, ws_.arena_cursor, sizeof(r.cursor), cudaMemcpyDeviceToHost, stream_));
      CUWFST_CUDA(cudaStreamSynchronize(stream_));
      // with the device refill (every lane busy in every segment, long segments) the log keeps
      // room for three segments' appends after a round, so rounds run every other segment
      // (each is ~0.2-0.8 ms with the GPU idle) for one more segment's worth of log
      const unsigned long long room = r.refill ? 3 : 2;
      if (r.cursor + room * r.delta > static_cast<unsigned long long>(arena_cap_))
        GrowArenaKeeping(static_cast<int64_t>(r.cursor + room * r.delta));
    }
    ClearLaneOrders();
    LaneCommand* cmd = As<LaneCommand>(h_commands_);
    LaneInput* in = As<LaneInput>(h_inputs_);
    LaneCounters* h_lanes = As<LaneCounters>(h_lanes_);
    bool any = false;
    for (int32_t l = 0; l < L; ++l) {
      LaneHost& h = lane_host_[l];
      if (!h.open && r.next < N) {
        const int32_t row = r.order[r.next++];
        h = LaneHost{};
        h.open = true;
        h.row = row;
        h.fed = lengths[row];
        cmd[l] = {kCmdInit, lengths[row], lengths[row], r.online ? 1 : 0};
        in[l] = RowInput(r.base, row, r.stride_b, r.stride_t, r.elem);
      }
      any |= h.open;
    }
    if (!any) {  // every row is done
      ReleaseAllLanes();
      r.active = false;
      return false;
    }
    int32_t* ctl = As<int32_t>(h_refill_ctl_);
    int32_t* lane_rows = As<int32_t>(h_refill_row_);
    if (r.refill) {  // the rows the lanes may take inside this segment, in order, and the lanes' rows
      const int32_t queued = std::min(N - r.next, refill_queue_cap_);
      RefillEntry* q = As<RefillEntry>(h_refill_queue_);
      for (int32_t i = 0; i < queued; ++i) {
        const int32_t row = r.order[r.next + i];
        q[i] = RefillEntry{RowInput(r.base, row, r.stride_b, r.stride_t, r.elem), row, lengths[row]};
      }
      ctl[kRefillHead] = 0;
      ctl[kRefillQueued] = queued;
      ctl[kRefillDone] = 0;
      ctl[kRefillDoneCap] = refill_done_cap_;
      for (int32_t l = 0; l < L; ++l) lane_rows[l] = lane_host_[l].open ? lane_host_[l].row : -1;
      if (queued > 0)
        CUWFST_CUDA(cudaMemcpyAsync(d_refill_queue_, q, queued * sizeof(RefillEntry), cudaMemcpyHostToDevice, stream_));
      CUWFST_CUDA(cudaMemcpyAsync(ws_.refill_ctl, ctl, kRefillCtl * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
      CUWFST_CUDA(cudaMemcpyAsync(ws_.refill_row, lane_rows, L * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
      // (zero between steps; a segment that failed half-way may have left counts)
      CUWFST_CUDA(cudaMemsetAsync(ws_.refill_arrive, 0, L * sizeof(int32_t), stream_));
    }
    // Once every row has a lane, the segment need not outlast the longest: its steps are the
    // most any lane still needs, rounded up to a multiple of kTailQuantum (so few graph
    // lengths get captured: coarser than StepBucket's 32 on purpose, the 256-step segment's
    // graph shares the 8-entry cache with them), not `segment` steps of idle lanes.
    int32_t steps = r.segment;
    if (r.next >= N) {
      int32_t need = 0;
      for (int32_t l = 0; l < L; ++l) {
        if (!lane_host_[l].open) continue;
        const bool fresh = (cmd[l].op & kCmdInit) != 0;  // (set up by this round: h_lanes is its old row)
        need = std::max(need, fresh ? lengths[lane_host_[l].row] + 1 : h_lanes[l].length - h_lanes[l].t + 1);
      }
      constexpr int32_t kTailQuantum = 64;
      steps = std::min(r.segment, std::max(kTailQuantum, (need + kTailQuantum - 1) / kTailQuantum * kTailQuantum));
    }
    UploadLaneOrders();
    RunOnce(r.refill ? SeqKind::kSegmentRefill : SeqKind::kSegment, steps, r.f16, r.replay);
    // what ManyWait reads, queued behind the segment (the caller works meanwhile)
    CUWFST_CUDA(cudaMemcpyAsync(h_lanes, ws_.lanes, L * sizeof(LaneCounters), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaMemcpyAsync(As<int32_t>(h_path_len_), out_path_len_, L * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                stream_));
    r.before = r.cursor;
    CUWFST_CUDA(cudaMemcpyAsync(h_many_cursor_.get(), ws_.arena_cursor, sizeof(r.cursor), cudaMemcpyDeviceToHost,
                                stream_));
    if (r.refill) {
      CUWFST_CUDA(cudaMemcpyAsync(ctl, ws_.refill_ctl, kRefillCtl * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
      CUWFST_CUDA(cudaMemcpyAsync(lane_rows, ws_.refill_row, L * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    }
    r.launched = true;
    return true;
  });
}

int32_t GpuDecoder::ManyWait(int32_t* rows_out) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  if (!many_.active || !many_.launched) throw std::logic_error("no segment to wait for (ManyLaunch)");
  return ManyGuarded([&]() -> int32_t {
    ManyRun& r = many_;
    const int L = cfg_.max_lanes;
    LaneCounters* h_lanes = As<LaneCounters>(h_lanes_);
    int32_t* h_path_len = As<int32_t>(h_path_len_);
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    r.launched = false;
    r.cursor = *As<unsigned long long>(h_many_cursor_);
    if (profiling_) CollectProfile();
    arena_high_water_ = std::max(arena_high_water_, r.cursor);
    // the most a segment appended so far: a quiet segment after a busy one must not shrink
    // the room kept for the next (a segment that outruns the log cannot be re-run)
    r.delta = std::max<unsigned long long>(r.delta, r.cursor > r.before ? r.cursor - r.before : 0);
    r.finished.clear();
    if (r.refill) HarvestRefills(r.lengths, r.base, r.stride_b, r.stride_t, r.elem, &r.next, r.out);
    // harvest the lanes whose row took its final step
    int64_t width = 0;
    bool done_any = false;
    for (int32_t l = 0; l < L; ++l) {
      if (lane_host_[l].open && h_lanes[l].t > h_lanes[l].length) {
        done_any = true;
        width = std::max<int64_t>(width, std::min<int64_t>(h_path_len[l], ws_.path_cap));
      }
    }
    if (done_any) {
      const int32_t* h_path = ReadPaths(width, L);
      for (int32_t l = 0; l < L; ++l) {
        LaneHost& h = lane_host_[l];
        if (!h.open || h_lanes[l].t <= h_lanes[l].length) continue;
        WriteResult(l, h.row, h_lanes[l], h_path_len[l], &h.prefix, h.overflow, h_path, r.out);
        r.finished.push_back(h.row);
        h = LaneHost{};  // free for the next row
      }
    }
    if (rows_out) std::copy(r.finished.begin(), r.finished.end(), rows_out);
    return static_cast<int32_t>(r.finished.size());
  });
}

void GpuDecoder::ManyAbort() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!many_.active) return;
  DeviceGuard guard(graph_->device);
  many_.active = false;
  SyncQuietly();  // (a launched segment may still run)
  pending_.clear();
  ReleaseAllLanes();
}

// ------------------------------------------------------------------ streams
void GpuDecoder::StreamOpen(const int32_t* lanes, int32_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  CheckLanes(lanes, n, false);
  EnsureStatic();  // streams live across calls, which cannot be re-run: the static layout
  bool none_open = true;
  for (const LaneHost& h : lane_host_) none_open &= !h.open;
  if (none_open) {  // nothing live: the log restarts (a batch may have left entries)
    CUWFST_CUDA(cudaMemsetAsync(ws_.arena_cursor, 0, sizeof(unsigned long long), stream_));
    arena_used_ = 0;
  }
  // Room for the start tokens and their closure (an open cannot be re-run either), before
  // any lane of a group is marked open: 1 + eps_iterations x main_q entries a stream at worst.
  // The streams open in groups of as many as the log holds now (at least one), so that opening
  // many streams on an epsilon graph commits one stream's worst case, not every stream's (the
  // start closures are independent: a lane's is the same in any group). A failure (a growth's
  // MemoryError) frees every lane this call opened.
  const unsigned long long per = 1ull + static_cast<unsigned long long>(cfg_.eps_iterations) * ws_.main_q;
  int32_t done = 0;
  try {
    while (done < n) {
      const unsigned long long cursor = ArenaCursor();
      const unsigned long long cap = static_cast<unsigned long long>(arena_cap_);
      const unsigned long long fit = cap > cursor ? (cap - cursor) / per : 0;
      const int32_t k = static_cast<int32_t>(std::min<unsigned long long>(n - done, std::max<unsigned long long>(fit, 1)));
      const unsigned long long need = static_cast<unsigned long long>(k) * per;
      if (cursor + need > cap) GrowArenaKeeping(static_cast<int64_t>(cursor + need));
      if (cursor + need > static_cast<unsigned long long>(arena_cap_)) throw std::runtime_error(ArenaShort(need, k));
      ClearLaneOrders();
      LaneCommand* cmd = As<LaneCommand>(h_commands_);
      for (int32_t i = done; i < done + k; ++i) {
        cmd[lanes[i]] = {kCmdInit, kUnknownLength, 0, 1};
        lane_host_[lanes[i]] = LaneHost{};
        lane_host_[lanes[i]].open = true;
      }
      UploadLaneOrders();
      RunOnce(SeqKind::kOpen, 0, false, Replays(0));  // (the guard off, as for every kind but kAdvance)
      CUWFST_CUDA(cudaStreamSynchronize(stream_));
      done += k;
    }
  } catch (...) {
    for (int32_t i = 0; i < n; ++i) lane_host_[lanes[i]] = LaneHost{};  // (the next sequence releases them on the device)
    throw;
  }
}

void GpuDecoder::StreamAdvance(const int32_t* lanes, int32_t S, const void* lp, bool lp_f16, int64_t stride_b,
                               int64_t stride_t, int32_t Tc, int32_t V, const int32_t* lens,
                               int64_t caller_stream) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  CheckLanes(lanes, S, true);
  int32_t max_len = 0;
  for (int32_t i = 0; i < S; ++i) {
    if (lens[i] < 0 || lens[i] > Tc) throw std::invalid_argument("a chunk length is outside [0, Tc]");
    if (static_cast<int64_t>(lane_host_[lanes[i]].fed) + lens[i] >= kUnknownLength)
      throw std::invalid_argument("a stream outgrew 2^30 frames");
    max_len = std::max(max_len, lens[i]);
  }
  if (max_len == 0) return;
  int32_t steps = ChunkBucket(max_len);
  std::vector<int32_t> fed0(S), target(S);
  for (int32_t i = 0; i < S; ++i) {
    fed0[i] = lane_host_[lanes[i]].fed;
    target[i] = fed0[i] + lens[i];
  }
  try {
    // Room for the chunk's winners (the GC runs between rounds, so a round's log holds all it
    // appends): each step of a lane appends about its frontier (its kept claims), once per
    // closure pass too; estimated at twice the stream's mean frontier so far (at least 64: a
    // new stream's grows within a few frames), grown to up front so that one round usually
    // runs the whole chunk. (Until 2026-12-03: twice the largest frontier, at least 1,024,
    // which on small graphs committed more than the steps' own worst cases.)
    unsigned long long need = 0;
    for (int32_t i = 0; i < S; ++i)
      need += static_cast<unsigned long long>(lens[i]) * (1 + cfg_.eps_iterations) *
              (2ull * std::max(lane_host_[lanes[i]].mean_frontier, 64));
    // The estimate is no bound (a new stream's frontier can grow tenfold within a chunk), and
    // an advance cannot be re-run: the arena guard (scan.cuh ArenaStepFits) puts a step back
    // before it appends anything unless the log has room for twice its worst case (its
    // lanes' slots, at most claims_cap each, and the closure passes), and the sequence's
    // later steps wait; each round below runs what fits, collects garbage, grows the log by
    // what the held-back step needed (ws.arena_pause), and goes on with the lanes still short
    // of their chunk's end. So the log is sized by the steps the streams take, not by every
    // lane's worst case.
    unsigned long long held = 0;  // the entries of the step the last round held back
    LaneCounters* h_lanes = As<LaneCounters>(h_lanes_);
    for (int32_t round = 0;; ++round) {
      int32_t active = 0, rest = 0;
      for (int32_t i = 0; i < S; ++i) {
        const int32_t r = target[i] - lane_host_[lanes[i]].fed;
        if (r > 0) {
          ++active;
          rest = std::max(rest, r);
        }
      }
      if (active == 0) break;
      const unsigned long long used = ArenaCursor();  // the opens since the last GC round appended too
      // round 0: the estimate (twice the frontiers: the steps go on while the log is half
      // free); after a held-back step, twice that step's need, so the rest seldom waits again
      const unsigned long long want = round == 0 ? 2 * used + need : 2 * (used + 2 * held);
      if (want > static_cast<unsigned long long>(arena_cap_))
        GrowArenaKeeping(static_cast<int64_t>(std::min<unsigned long long>(want, static_cast<unsigned long long>(cfg_.arena_max))));
      if (2 * (used + held) > static_cast<unsigned long long>(arena_cap_)) throw std::runtime_error(ArenaShort(held, active));
      ClearLaneOrders();
      LaneCommand* cmd = As<LaneCommand>(h_commands_);
      LaneInput* in = As<LaneInput>(h_inputs_);
      const char* base = static_cast<const char*>(lp);
      const int64_t elem = lp_f16 ? 2 : 4;
      for (int32_t i = 0; i < S; ++i) {
        const int32_t l = lanes[i];
        if (target[i] <= lane_host_[l].fed) continue;
        cmd[l] = {kCmdAvail, -1, target[i], 0};
        in[l] = RowInput(base, i, stride_b, stride_t, elem, fed0[i]);
      }
      if (round == 0) Wait(caller_stream);
      SetArenaGuard(true);  // (ArenaStepFits)
      UploadLaneOrders();
      steps = ChunkBucket(rest);
      RunOnce(SeqKind::kAdvance, steps, lp_f16, Replays(steps));
      // while the round runs: room for the next advances, so that they seldom grow the log
      // before their launch (a VMM growth creates, maps and grants access to pieces on the host)
      if (round == 0) CommitArenaAhead(want);
      CUWFST_CUDA(cudaMemcpyAsync(h_lanes, ws_.lanes, cfg_.max_lanes * sizeof(LaneCounters), cudaMemcpyDeviceToHost,
                                  stream_));
      CUWFST_CUDA(cudaMemcpyAsync(&held, ws_.arena_pause, sizeof(held), cudaMemcpyDeviceToHost, stream_));
      CUWFST_CUDA(cudaStreamSynchronize(stream_));  // the caller's chunk tensor is read by now
      if (profiling_) CollectProfile();
      int32_t moved = 0;
      for (int32_t i = 0; i < S; ++i) {
        const int32_t l = lanes[i];
        const int32_t t = h_lanes[l].t;  // steps taken = frames consumed (no final step yet)
        if (t < lane_host_[l].fed || t > target[i])
          throw std::logic_error("a stream's step count left its chunk (lane " + std::to_string(l) + ")");
        moved += t - lane_host_[l].fed;
        lane_host_[l].fed = t;
      }
      ++advance_rounds_;
      CollectGarbage();
      // (no step held back and no frame taken cannot happen; it would loop for ever)
      if (moved == 0 && held == 0) throw std::logic_error("a stream advance's round made no progress");
      if (moved == 0 && round > 0 && arena_cap_ >= cfg_.arena_max) throw std::runtime_error(ArenaShort(held, active));
    }
    SetArenaGuard(false);
  } catch (const CudaError& e) {
    pending_.clear();
    hash_dirty_ = true;
    arena_guard_host_ = ~0ull;  // unknown: the next SetArenaGuard writes
    if (IsStickyError(e.code())) Fatal(e.code(), e.what(), S, Tc, V, steps);
    SyncQuietly();
    throw;
  } catch (...) {
    pending_.clear();
    hash_dirty_ = true;
    arena_guard_host_ = ~0ull;
    SyncQuietly();
    throw;
  }
}

void GpuDecoder::StreamPartial(const int32_t* lanes, int32_t n, PartialOutputs out) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  CheckLanes(lanes, n, true);
  const int L = cfg_.max_lanes;
  ClearLaneOrders();
  LaneCommand* cmd = As<LaneCommand>(h_commands_);
  for (int32_t i = 0; i < n; ++i) cmd[lanes[i]].op |= kCmdPartial;
  UploadLaneOrders();
  PartialKernel<<<L, kGcThreads, 0, stream_>>>(ws_);
  CUWFST_CUDA(cudaGetLastError());
  LaneCounters* h_lanes = As<LaneCounters>(h_lanes_);
  int32_t* h_path_len = As<int32_t>(h_path_len_);
  CUWFST_CUDA(cudaMemcpyAsync(h_lanes, ws_.lanes, L * sizeof(LaneCounters), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(h_path_len, out_path_len_, L * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
  int64_t width = 0;
  for (int32_t i = 0; i < n; ++i) width = std::max<int64_t>(width, std::min<int64_t>(h_path_len[lanes[i]], ws_.path_cap));
  const int32_t* h_path = ReadPaths(width, L);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t l = lanes[i];
    const LaneHost& h = lane_host_[l];
    const LaneCounters& lc = h_lanes[l];
    const bool ok = lc.partial_score > -INFINITY;
    const int32_t tail = ok ? h_path_len[l] : 0;
    out.path_len[i] = static_cast<int32_t>(h.prefix.size()) + tail;
    out.committed[i] = static_cast<int32_t>(h.prefix.size());
    out.score[i] = lc.partial_score;
    out.meta[i * 2 + 0] = ok;
    out.meta[i * 2 + 1] = lc.overflow | h.overflow;
    int32_t* dst = out.arcs + static_cast<int64_t>(i) * out.cap;
    const int64_t np = std::min<int64_t>(h.prefix.size(), out.cap);
    std::copy(h.prefix.begin(), h.prefix.begin() + np, dst);
    const int64_t nt = std::min<int64_t>({static_cast<int64_t>(tail), static_cast<int64_t>(ws_.path_cap), out.cap - np});
    if (nt > 0) std::memcpy(dst + np, h_path + static_cast<int64_t>(l) * ws_.path_cap, nt * sizeof(int32_t));
  }
}

void GpuDecoder::StreamFinalize(const int32_t* lanes, int32_t n, DecodeOutputs out) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  CheckLanes(lanes, n, true);
  const int L = cfg_.max_lanes;
  try {
    ClearLaneOrders();
    LaneCommand* cmd = As<LaneCommand>(h_commands_);
    for (int32_t i = 0; i < n; ++i) cmd[lanes[i]] = {kCmdSetLength, lane_host_[lanes[i]].fed, 0, 0};
    // room for the final step (a finalize cannot be re-run): one entry a stream, since every
    // arc of a final or redirect step ends in the final state, one claim (types.cuh
    // PooledClaimsBound), and no closure follows it
    const unsigned long long need = static_cast<unsigned long long>(n);
    const unsigned long long cursor = ArenaCursor();
    if (cursor + need > static_cast<unsigned long long>(arena_cap_))
      GrowArenaKeeping(static_cast<int64_t>(cursor + need));
    if (cursor + need > static_cast<unsigned long long>(arena_cap_)) throw std::runtime_error(ArenaShort(need, n));
    SetArenaGuard(false);
    UploadLaneOrders();
    RunOnce(SeqKind::kFinalize, 1, false, Replays(1));
    LaneCounters* h_lanes = As<LaneCounters>(h_lanes_);
    int32_t* h_path_len = As<int32_t>(h_path_len_);
    CUWFST_CUDA(cudaMemcpyAsync(h_lanes, ws_.lanes, L * sizeof(LaneCounters), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaMemcpyAsync(h_path_len, out_path_len_, L * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    if (profiling_) CollectProfile();
    int64_t width = 0;
    for (int32_t i = 0; i < n; ++i) width = std::max<int64_t>(width, std::min<int64_t>(h_path_len[lanes[i]], ws_.path_cap));
    const int32_t* h_path = ReadPaths(width, L);
    for (int32_t i = 0; i < n; ++i) {
      const int32_t l = lanes[i];
      LaneHost& h = lane_host_[l];
      WriteResult(l, i, h_lanes[l], h_path_len[l], &h.prefix, h.overflow, h_path, out);
      h = LaneHost{};  // the lane is free; the next sequence releases it on the device
    }
  } catch (const CudaError& e) {
    pending_.clear();
    hash_dirty_ = true;
    if (IsStickyError(e.code())) Fatal(e.code(), e.what(), n, 1, 0, 1);
    SyncQuietly();
    throw;
  }
}

void GpuDecoder::StreamRelease(const int32_t* lanes, int32_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckLanes(lanes, n, true);
  for (int32_t i = 0; i < n; ++i) lane_host_[lanes[i]] = LaneHost{};
}

void GpuDecoder::StreamStats(int32_t lane, int64_t out[3]) {
  std::lock_guard<std::mutex> lock(mu_);
  if (lane < 0 || lane >= cfg_.max_lanes) throw std::invalid_argument("lane out of range");
  DeviceGuard guard(graph_->device);
  unsigned long long cursor = 0;
  CUWFST_CUDA(cudaMemcpyAsync(&cursor, ws_.arena_cursor, sizeof(cursor), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
  out[0] = lane_host_[lane].fed;
  out[1] = static_cast<int64_t>(cursor);
  out[2] = static_cast<int64_t>(lane_host_[lane].prefix.size());
}

}  // namespace cuwfst
