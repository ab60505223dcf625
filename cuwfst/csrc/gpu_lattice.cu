// Lattice decodes, host side: the buffers the lattice stage (cuwfst/lattice.cuh) writes,
// their growth (grow the records and decode again, as the winners arena does: decode is
// idempotent), and the readback of a decode's records. The host builds the lattices from
// the records with the CPU reference's own search and builder (reference_lattice.h,
// LatticeFromRecords), so a GPU lattice is the CPU's by construction.
#include "gpu_decoder.cuh"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include <sched.h>

namespace cuwfst {

namespace {
// Records a first lattice decode makes room for (64 MiB); growth goes to what a batch used.
constexpr int64_t kLatticeInitialRecords = 4ll << 20;
// Candidates a step's ExpandKernel may write in candidate mode (lattice.cuh LatCandRecords; 16
// bytes each): a quarter of the lanes' frontier capacity, between 16 Ki and 4 Mi entries (32
// lanes of 320,000 tokens: 2.56 Mi, 41 MiB). A lane whose candidates do not all fit is recorded
// by LatPersistKernel's walk instead (the same records, slower), so the buffer never grows.
int64_t LatCandEntries(int64_t lanes, int64_t main_q) {
  const int64_t n = lanes * main_q / 4;
  return n < (16ll << 10) ? (16ll << 10) : (n > (4ll << 20) ? (4ll << 20) : n);
}
}  // namespace

int64_t GpuDecoder::lattice_bytes() const {
  return lat_.amount() + lat_ext_.amount() + lat_cursor_.amount() + lat_count_.amount() + lat_cutoff_.amount() + lat_size_.amount() +
         lat_all_.amount() + lat_filter_.amount() + lat_cand_.amount() + lat_cand_n_.amount() +
         lat_hash_pos_.amount() + eps_begin_.amount() + eps_ub_.amount() + eps_offsets_.amount() +
         eps_hint_.amount() + eps_lane_offsets_.amount() + la_log_state_.amount() + la_log_score_.amount() +
         la_steps_.amount() + la_items_.amount() + la_plan_.amount() +
         la_tab_keys_.amount() + la_tab_pos_.amount() + lattice_prune_bytes();
}

int64_t GpuDecoder::lattice_prune_bytes() const {
  std::lock_guard<std::mutex> lock(pr_mu_);  // a pruning's finisher may grow them meanwhile
  int64_t n = 0;
  for (const auto& b : pr_buf_) n += b.amount();
  for (const auto& b : pr_buf1_) n += b.amount();
  return n;
}

// A lattice decode's buffer of `bytes` into *dst (left as it was on failure), or the error that
// names it and what to lower.
void GpuDecoder::LatticeAlloc(DeviceBuffer* dst, size_t bytes, const char* what) {
  DeviceBuffer b;
  cudaError_t e = TryDeviceAlloc(bytes, &b);
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot allocate " << FormatBytes(static_cast<int64_t>(bytes)) << " for " << what
       << " of a lattice decode on cuda:" << device() << "; the decoder stays usable for 1-best decodes; "
       << Advice();
    ThrowAcquireFailure(e, os.str());
  }
  *dst = std::move(b);
}

// Every buffer a lattice decode of rows up to max_frames frames needs. Each is allocated
// before it replaces anything, so a failure leaves the decoder as it was (and usable for
// 1-best decodes); captured graphs are dropped when a pointer they hold changes.
void GpuDecoder::EnsureLattice(int32_t max_frames, bool ext) {
  const int64_t L = cfg_.max_lanes, Q = cfg_.main_q;
  auto alloc = [&](DeviceBuffer* dst, size_t bytes, const char* what) { LatticeAlloc(dst, bytes, what); };
  const int32_t seg = max_frames + 2;  // steps 0..max_frames
  // candidate mode (common.cuh LatCandOn): GPU-pruned decodes whose ExpandKernel is
  // ExpandLane::Slot for every slot (not the cooperative walkers, whose strips kept in
  // registers skip it, nor fused_max's FusedExpandKernel)
  // (and epsilon-free graphs: an epsilon graph's GPU-pruned decode records by the in-step walk alone)
  const bool cand = ext && !cfg_.fused_max && coop_cap_ == 0 && cfg_.eps_iterations == 0;
  const bool missing = !lat_cursor_.get() || !lat_filter_.get() || !lat_.get() || ws_.hash_pos == nullptr ||
                       (cfg_.eps_iterations > 0 && !eps_begin_.get()) || ws_.seg_cap < seg ||
                       (ext && !lat_ext_.get()) || (cand && !lat_cand_.get());
  if (!missing) return;
  // Every captured graph holds the Workspace it was captured with: drop them before any of
  // its pointers changes (a failure half-way leaves some changed).
  FreeGraphs();
  if (!lat_cursor_.get()) {
    alloc(&lat_cursor_, sizeof(unsigned long long), "the lattice record cursor");
    ws_.lat_cursor = static_cast<unsigned long long*>(lat_cursor_.get());
  }
  if (!lat_filter_.get()) {  // {on, output_beam, pad, prefilter, candidates}: SetLatticeFilter writes it before each decode
    alloc(&lat_filter_, sizeof(lat_filter_host_), "the lattice records' filter settings");
    CUWFST_CUDA(cudaMemsetAsync(lat_filter_.get(), 0, sizeof(lat_filter_host_), stream_));
    ws_.lat_filter = static_cast<const float*>(lat_filter_.get());
  }
  if (cand && !lat_cand_.get()) {
    alloc(&lat_cand_n_, 4 * sizeof(unsigned long long), "the lattice candidates' cursor and counts");
    CUWFST_CUDA(cudaMemsetAsync(lat_cand_n_.get(), 0, 4 * sizeof(unsigned long long), stream_));
    // (CUWFST_LATTICE_CAND_ENTRIES: another size, read when the buffer is made; tests shrink it
    // so that lanes overflow it and take the walk)
    const char* env = std::getenv("CUWFST_LATTICE_CAND_ENTRIES");
    const int64_t n = env != nullptr && std::atoll(env) > 0 ? std::atoll(env) : LatCandEntries(L, Q);
    alloc(&lat_cand_, static_cast<size_t>(n) * sizeof(LatCand), "the lattice candidates");
    ws_.lat_cand = static_cast<LatCand*>(lat_cand_.get());
    ws_.lat_cand_n = static_cast<unsigned long long*>(lat_cand_n_.get());
    ws_.lat_cand_cap = n;
  }
  if (!lat_.get()) {
    const int64_t cap = cfg_.lattice_cap > 0 ? cfg_.lattice_cap : kLatticeInitialRecords;
    alloc(&lat_, static_cast<size_t>(cap) * sizeof(LatRecord), "the lattice records");
    ws_.lat = static_cast<LatRecord*>(lat_.get());
    ws_.lat_cap = cap;
  }
  if (ext && !lat_ext_.get()) {  // GPU pruning's side array, as many entries as the records
    alloc(&lat_ext_, static_cast<size_t>(ws_.lat_cap) * sizeof(LatRecordExt), "the lattice records' tokens");
    ws_.lat_ext = static_cast<LatRecordExt*>(lat_ext_.get());
  }
  if (ws_.hash_pos == nullptr) {  // an epsilon-free graph: the claims' frontier positions
    // max_lanes x hash_cap: the static layout's tables and the most the pooled hash pool
    // holds (pool_max_[kPoolHash]), so either layout's hash_off indexes it; eager, since
    // only lattice decodes read it (the pooled keys and payloads grow lazily without it)
    alloc(&lat_hash_pos_, static_cast<size_t>(L) * cfg_.hash_cap * sizeof(int32_t), "hash positions");
    CUWFST_CUDA(cudaMemsetAsync(lat_hash_pos_.get(), 0xFF, lat_hash_pos_.amount(), stream_));
    ws_.hash_pos = static_cast<int32_t*>(lat_hash_pos_.get());
  }
  if (cfg_.eps_iterations > 0 && !eps_begin_.get()) {  // the closure's own slot space
    // closure = scan (EpsScanKernel) rebuilds the whole slot space each pass; closure =
    // lists only writes tok_begin (an entry's first epsilon arc), so only that is doubled.
    // Epsilon graphs take the static layout only (pooled_ok_ needs eps_iterations == 0), so
    // these are indexed like its per-token arrays: lane l's region at l * (main_q + 1), with
    // main_q tokens (tok_begin, tok_ub) and main_q + 1 offsets; the hints at l * hint_cap.
    DeviceBuffer b, u, o, h, lo;
    alloc(&b, static_cast<size_t>(L * (Q + 1)) * sizeof(int32_t), "the closure's tok_begin");
    if (!cfg_.closure_lists) {
      alloc(&u, static_cast<size_t>(L * (Q + 1)) * sizeof(float), "the closure's score snapshot");
      alloc(&o, static_cast<size_t>(L * (Q + 1)) * sizeof(int32_t), "the closure's arc offsets");
      alloc(&h, static_cast<size_t>(L) * ws_.hint_cap * sizeof(int32_t), "the closure's slot hints");
      alloc(&lo, static_cast<size_t>(L + 1) * sizeof(int64_t), "the closure's lane offsets");
    }
    eps_begin_ = std::move(b);
    eps_ub_ = std::move(u);
    eps_offsets_ = std::move(o);
    eps_hint_ = std::move(h);
    eps_lane_offsets_ = std::move(lo);
  }
  if (ws_.seg_cap < seg) {
    const size_t n = static_cast<size_t>(L) * seg;
    DeviceBuffer c, u, z, a;
    alloc(&c, n * sizeof(int32_t), "the lattice step counts");
    alloc(&u, n * sizeof(float), "the lattice step cutoffs");
    alloc(&z, n * sizeof(int32_t), "the lattice step sizes");
    alloc(&a, n * sizeof(int32_t), "the lattice step counts before the filter");
    lat_count_ = std::move(c);
    lat_cutoff_ = std::move(u);
    lat_size_ = std::move(z);
    lat_all_ = std::move(a);
    ws_.lat_all = static_cast<int32_t*>(lat_all_.get());
    ws_.lat_count = static_cast<int32_t*>(lat_count_.get());
    ws_.lat_cutoff = static_cast<float*>(lat_cutoff_.get());
    ws_.lat_size = static_cast<int32_t*>(lat_size_.get());
    ws_.seg_cap = seg;
  }
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
}

// The records' filter for the next runs (Workspace::lat_filter, lattice.cuh LatFilterFor),
// stream-ordered before them.
void GpuDecoder::SetLatticeFilter(bool on, float output_beam, float pad, bool eps_on, bool eps_trim) {
  // a member, as arena_guard_host_: the pageable copy reads it before returning
  lat_filter_host_[0] = on ? 1.f : 0.f;
  lat_filter_host_[1] = output_beam;
  lat_filter_host_[2] = pad;
  // LatPersistKernel's prefilter (lattice.cuh): on unless CUWFST_LATTICE_PREFILTER=off (for
  // same-run A/B; the records and lattices are the same either way)
  const char* pre = std::getenv("CUWFST_LATTICE_PREFILTER");
  lat_filter_host_[3] = pre != nullptr && std::strcmp(pre, "off") == 0 ? 0.f : 1.f;
  // candidate mode (common.cuh LatCandOn), where the decode has a candidate buffer: on unless
  // CUWFST_LATTICE_CAND=off (same records either way)
  const char* cand = std::getenv("CUWFST_LATTICE_CAND");
  lat_filter_host_[4] = cand != nullptr && std::strcmp(cand, "off") == 0 ? 0.f : 1.f;
  // the candidates' records appended per CTA (lattice.cuh LatCandRecordsBlock) unless the decoder
  // was built with CUWFST_LATTICE_APPEND=warp (lat_append_block_)
  lat_filter_host_[5] = lat_append_block_ ? 1.f : 0.f;
  // a final step's arcs as candidates (common.cuh LatCandFinalOn) unless the decoder was built
  // with CUWFST_LATTICE_CAND_FINAL=off (lat_cand_final_)
  lat_filter_host_[6] = lat_cand_final_ ? 1.f : 0.f;
  lat_filter_host_[7] = eps_on ? 1.f : 0.f;
  lat_filter_host_[8] = eps_on && eps_trim ? 1.f : 0.f;
  lat_filter_on_ = on;
  lat_eps_trim_on_ = eps_on && eps_trim;
  CUWFST_CUDA(cudaMemcpyAsync(lat_filter_.get(), lat_filter_host_, sizeof(lat_filter_host_), cudaMemcpyHostToDevice, stream_));
}

// Room for `want` records (what one run of the batch needs: OverflowedRunNeed), plus a
// quarter; `made`: what the run that overflowed made (the message).
void GpuDecoder::GrowLattice(unsigned long long want, unsigned long long made) {
  const int64_t n = static_cast<int64_t>(want) + static_cast<int64_t>(want >> 2);
  DeviceBuffer fresh, fresh_ext;
  cudaError_t e = TryDeviceAlloc(static_cast<size_t>(n) * sizeof(LatRecord), &fresh);
  if (e == cudaSuccess && lat_ext_.get())
    e = TryDeviceAlloc(static_cast<size_t>(n) * sizeof(LatRecordExt), &fresh_ext);
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot grow the lattice records from " << ws_.lat_cap << " to " << n << " ("
       << FormatBytes(n * static_cast<int64_t>(sizeof(LatRecord))) << ") on cuda:" << device() << "; a run of this batch made "
       << made << " records (room for " << want << " asked); the decoder keeps its records and stays usable; decode fewer rows at a time "
       << "(max_lanes, now " << cfg_.max_lanes << ") or lower max_active_states";
    ThrowAcquireFailure(e, os.str());
  }
  FreeGraphs();  // they captured the old pointer
  // (a side bucketing may still read the old records: PruneBeginLocked, kPrBeginSide)
  if (pr_records_read_) CUWFST_CUDA(cudaEventSynchronize(pr_records_read_.get()));
  lat_ = std::move(fresh);
  ws_.lat = static_cast<LatRecord*>(lat_.get());
  if (fresh_ext.get()) {
    lat_ext_ = std::move(fresh_ext);
    ws_.lat_ext = static_cast<LatRecordExt*>(lat_ext_.get());
  }
  ws_.lat_cap = n;
  ++lat_grows_;
}

LatticeRunNeed GpuDecoder::OverflowedRunNeed(int32_t B, int32_t t0, int32_t t1, int32_t steps,
                                             unsigned long long cursor, int64_t holes) {
  const bool slots = holes > 0;
  const int64_t seg = ws_.seg_cap;
  std::vector<int32_t> count(static_cast<size_t>(B) * seg);  // lanes 0 .. B - 1: rows of seg_cap
  CUWFST_CUDA(cudaMemcpyAsync(count.data(), ws_.lat_count, count.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
  LatticeRunNeed r = LatticeNeedOfRun(count.data(), B, seg, t0, t1, steps);
  // (slots: the records pass took its slots a chunk a warp, CUWFST_LATTICE_RESERVE=chunk; the cursor
  // counts them, holes included, so it is at least the records and is what the run needs)
  if (slots ? static_cast<unsigned long long>(r.made) > cursor : static_cast<unsigned long long>(r.made) != cursor) {
    std::ostringstream os;
    os << "lattice records: the cursor counted " << cursor << (slots ? " slots" : " records") << " but the step counts of steps " << t0
       << " .. " << t1 - 1 << " add up to " << r.made << " (a decoder bug; please report it)";
    throw std::logic_error(os.str());
  }
  if (slots) r.need = std::max<int64_t>({r.need, static_cast<int64_t>(cursor), r.made + holes});
  return r;
}

// The batch's per-step arrays into the caller's [B, S] arrays, the records into h_lat_
// (pinned, grown to the high water), and each row's record count for TakeLatticeRecords.
void GpuDecoder::ReadLattice(int32_t B, const int32_t* lengths, const LatticeOutputs& out) {
  const int64_t seg = ws_.seg_cap, n = static_cast<int64_t>(B) * seg;
  std::vector<int32_t> count(n), size(n);
  std::vector<float> cutoff(n);
  unsigned long long total = 0;
  CUWFST_CUDA(cudaMemcpyAsync(&total, ws_.lat_cursor, sizeof(total), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(count.data(), ws_.lat_count, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(cutoff.data(), ws_.lat_cutoff, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaMemcpyAsync(size.data(), ws_.lat_size, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  CUWFST_CUDA(cudaStreamSynchronize(stream_));
  if (total > static_cast<unsigned long long>(ws_.lat_cap))
    throw std::runtime_error("lattice records past their capacity after growth (a decoder bug)");
  pr_B_ = -1;
  if (out.mode == 2) {  // the records stay on the device for PruneLattice
    // every surviving arc, the filter's drops included (k2's recorded arcs, a row's recorded_arcs)
    pr_all_.resize(n);
    CUWFST_CUDA(cudaMemcpyAsync(pr_all_.data(), ws_.lat_all, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
    if (lat_after_used_) ++lat_after_decodes_;  // (which does not count the arcs it leaves unread)
    else if (lat_filter_host_[7] != 0.f) {  // (an epsilon graph's records' filter: lat_all holds each step's A)
    } else
      for (int32_t b = 0; b < B; ++b)
        for (int64_t t = 0; t <= lengths[b] && t < seg; ++t)
          lat_filter_dropped_ += pr_all_[b * seg + t] - count[b * seg + t];
    if (ws_.lat_cand != nullptr) {  // the decode's candidate lane-steps (zeroed when its batch started)
      unsigned long long cand[4] = {0, 0, 0, 0};
      CUWFST_CUDA(cudaMemcpyAsync(cand, ws_.lat_cand_n, sizeof(cand), cudaMemcpyDeviceToHost, stream_));
      CUWFST_CUDA(cudaStreamSynchronize(stream_));
      lat_cand_steps_ += static_cast<int64_t>(cand[1]);
      lat_cand_over_ += static_cast<int64_t>(cand[2]);
      lat_cand_final_steps_ += static_cast<int64_t>(cand[3]);
    }
    pr_count_ = count;
    pr_size_ = size;
    pr_slots_ = total;  // (the records' slots: under CUWFST_LATTICE_RESERVE=chunk more than their counts)
    pr_B_ = B;
    h_lat_n_ = 0;
    h_lat_lane_.assign(B, 0);
    for (int32_t b = 0; b < B; ++b) {
      const int64_t steps = std::min<int64_t>(static_cast<int64_t>(lengths[b]) + 1, std::min<int64_t>(out.S, seg));
      for (int64_t t = 0; t < out.S; ++t) {
        const bool in = t < steps;
        out.counts[b * out.S + t] = in ? count[b * seg + t] : 0;
        out.cutoffs[b * out.S + t] = in ? cutoff[b * seg + t] : 0.f;
        out.sizes[b * out.S + t] = in ? size[b * seg + t] : 0;
      }
    }
    out.total[0] = static_cast<int64_t>(total);
    return;
  }
  // the records' filter on epsilon graphs: each step's A (LatEpsFilterFor, in lat_all), 0 where
  // the step kept every record or the filter was off
  std::vector<int32_t> fa;
  if (out.producer_a != nullptr && lat_filter_host_[7] != 0.f) {
    fa.resize(n);
    CUWFST_CUDA(cudaMemcpyAsync(fa.data(), ws_.lat_all, n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
  }
  const size_t bytes = static_cast<size_t>(total) * sizeof(LatRecord);
  if (h_lat_.amount() < static_cast<int64_t>(bytes)) {
    PinnedBuffer fresh;
    cudaError_t e = TryPinnedAlloc(bytes + bytes / 4, &fresh);
    if (e != cudaSuccess) {
      std::ostringstream os;
      os << "cannot allocate " << FormatBytes(static_cast<int64_t>(bytes)) << " of pinned host memory for "
         << total << " lattice records of a decode on cuda:" << device()
         << "; the decoder stays usable; decode fewer rows at a time (max_lanes, now " << cfg_.max_lanes << ")";
      ThrowAcquireFailure(e, os.str());
    }
    h_lat_ = std::move(fresh);
  }
  if (total > 0) {
    CUWFST_CUDA(cudaMemcpyAsync(h_lat_.get(), ws_.lat, bytes, cudaMemcpyDeviceToHost, stream_));
    CUWFST_CUDA(cudaStreamSynchronize(stream_));
  }
  h_lat_n_ = static_cast<int64_t>(total);
  h_lat_lane_.assign(B, 0);
  for (int32_t b = 0; b < B; ++b) {
    const int64_t steps = std::min<int64_t>(static_cast<int64_t>(lengths[b]) + 1, std::min<int64_t>(out.S, seg));
    for (int64_t t = 0; t < out.S; ++t) {
      const bool in = t < steps;
      out.counts[b * out.S + t] = in ? count[b * seg + t] : 0;
      out.cutoffs[b * out.S + t] = in ? cutoff[b * seg + t] : 0.f;
      out.sizes[b * out.S + t] = in ? size[b * seg + t] : 0;
      if (out.producer_a != nullptr) {
        float a = 0.f;
        if (in && !fa.empty()) std::memcpy(&a, &fa[b * seg + t], sizeof(a));
        out.producer_a[b * out.S + t] = a;
      }
      if (in) h_lat_lane_[b] += count[b * seg + t];
    }
  }
  out.total[0] = h_lat_n_;
}

// Threads for TakeLatticeRecords: the process's CPUs, at most 16; CUWFST_RECORDS_THREADS (1-256)
// sets it (tests, A/B runs).
int32_t HostCpus() {
  int c = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) c = CPU_COUNT(&set);
  if (c <= 0) c = static_cast<int>(std::thread::hardware_concurrency());
  return static_cast<int32_t>(std::max(1, c));
}

static int32_t RecordsCopyThreads(int64_t n) {
  if (const char* env = std::getenv("CUWFST_RECORDS_THREADS")) {
    const int v = std::atoi(env);
    if (v >= 1 && v <= 256) return v;
  }
  if (n < (int64_t{1} << 20)) return 1;
  return std::min(HostCpus(), 16);
}

void GpuDecoder::TakeLatticeRecords(int32_t* out, int64_t N) {
  std::lock_guard<std::mutex> lock(mu_);
  if (N != h_lat_n_) {
    std::ostringstream os;
    os << "the last lattice decode made " << h_lat_n_ << " records, not " << N;
    throw std::invalid_argument(os.str());
  }
  // Row by row (a stable partition by lane): within a lane the arena holds its steps in
  // order, since each step's records are complete before the next step runs. The arena is cut
  // into P contiguous parts, one thread each: every part counts its records per lane, then each
  // part writes its lane's records from its place (the lane's start plus the earlier parts'
  // counts), so the order within a lane is the arena's, as with one thread.
  const int32_t B = static_cast<int32_t>(h_lat_lane_.size());
  std::vector<int64_t> at(B + 1, 0);
  for (int32_t b = 0; b < B; ++b) at[b + 1] = at[b] + h_lat_lane_[b];
  if (at[B] != N) throw std::runtime_error("lattice records: the step counts do not add up to the records");
  const LatRecord* r = static_cast<const LatRecord*>(h_lat_.get());
  const int64_t P = std::max<int64_t>(1, std::min<int64_t>(RecordsCopyThreads(N), N));
  std::vector<int64_t> cnt(static_cast<size_t>(P) * (B + 1), 0);  // per part, per lane; [B]: bad lanes
  auto run = [P](const std::function<void(int64_t)>& f) {
    std::vector<std::thread> pool;
    for (int64_t p = 1; p < P; ++p) {
      try {
        pool.emplace_back(f, p);
      } catch (const std::system_error&) {  // no thread to be had: this one does that part
        f(p);
      }
    }
    f(0);
    for (auto& t : pool) t.join();
  };
  const auto lo = [&](int64_t p) { return N * p / P; };
  run([&](int64_t p) {
    int64_t* c = &cnt[static_cast<size_t>(p) * (B + 1)];
    for (int64_t i = lo(p), e = lo(p + 1); i < e; ++i) {
      const int32_t lane = r[i].lane;
      ++c[lane >= 0 && lane < B ? lane : B];
    }
  });
  std::vector<int64_t> start(static_cast<size_t>(P) * B);
  for (int32_t b = 0; b < B; ++b) {
    int64_t x = at[b];
    for (int64_t p = 0; p < P; ++p) {
      start[static_cast<size_t>(p) * B + b] = x;
      x += cnt[static_cast<size_t>(p) * (B + 1) + b];
    }
    if (x != at[b + 1]) throw std::runtime_error("lattice records: a record of an unknown or overfull lane");
  }
  for (int64_t p = 0; p < P; ++p)
    if (cnt[static_cast<size_t>(p) * (B + 1) + B] != 0)
      throw std::runtime_error("lattice records: a record of an unknown or overfull lane");
  run([&](int64_t p) {
    int64_t* next = &start[static_cast<size_t>(p) * B];
    for (int64_t i = lo(p), e = lo(p + 1); i < e; ++i) {
      int32_t* o = out + 3 * next[r[i].lane]++;
      o[0] = r[i].src_state;
      o[1] = r[i].arc;
      std::memcpy(&o[2], &r[i].acoustic, sizeof(float));
    }
  });
}

}  // namespace cuwfst
