// Host objects of the GPU decoder: the uploaded graph (shared by every decoder on its
// device) and the decoder instance (workspace, stream, captured CUDA graphs, mutex).
// Every CUDA resource is held by an owner from cuda_resources.cuh, so a failed
// constructor or a failed growth frees exactly what it took and keeps what it had.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda_resources.cuh"
#include "cuwfst/lattice_number.h"
#include "cuwfst/types.cuh"
#include "lazy_region.cuh"

namespace cuwfst {

// The CPUs this process may run on (its affinity mask; hardware_concurrency where that is not
// known), at least 1: the host-side copies' and numbering's thread counts (gpu_lattice.cu).
int32_t HostCpus();

// Host wall clock in microseconds (the growth and GC timings of MemStats).
inline int64_t HostMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}


struct GpuGraph {
  int device = 0;
  int32_t max_eps_degree = 0;  // the most epsilon arcs of one state
  // with max_eps_degree 1: the longest epsilon chain (-1: a cycle); -1 otherwise (closure = chain)
  int32_t max_eps_chain = -1;
  int32_t max_degree = 0;  // the most arcs of one state (finals and epsilons included)
  int32_t heavy_states = 0;  // the label bound's heavy states (DeviceGraph::heavy_bits; 0: no tables)
  // view.arc_src_place's host copy (empty without it): the host numbering's arc order
  // (lattice_number.h), each source state's arcs by their place in the source graph
  std::vector<uint16_t> src_place;
  DeviceGraph view{};
  std::vector<DeviceBuffer> buffers;  // the device arrays of `view`; free themselves
  int64_t bytes() const {
    int64_t b = 0;
    for (const auto& x : buffers) b += x.amount();
    return b;
  }
};

struct DecoderConfig {
  float search_beam = 20.f;
  float output_beam = 8.f;
  int32_t min_active = 30;
  int32_t max_active = 10000;
  bool allow_partial = true;
  int32_t max_lanes = 32;
  int32_t max_frames = 1024;
  int32_t main_q = 320000;
  int32_t claims_cap = 640000;
  int32_t hash_cap = 1 << 21;
  int64_t arena_cap = 64ll << 20;   // winners entries the log starts with
  int64_t arena_max = 512ll << 20;  // ... and the most it grows to
  // The winners log (and its GC tags) as lazily committed VMM regions where the driver has
  // them (lazy_region.cuh); false: the eager path, a buffer replaced by a larger one. lazy
  // also lets offline batches on epsilon-free graphs take the pooled layout of the lanes'
  // frontiers, claims and hash tables (types.cuh), committed as batches need it.
  bool lazy = true;
  // The pooled layout for offline batches (with lazy, on epsilon-free graphs): 0 off, 1 on,
  // 2 auto (on where the static layout is larger than what the pools' first pieces take,
  // twice over: a small decoder holds less with every lane's worst case).
  int32_t lane_pool = 2;
  // What the pooled layout sizes a step's regions by (CUWFST_POOL_BOUND; under fused_max the
  // slots whatever this says): kPoolBoundAdmit the admissible arcs MaxKernel counts
  // (pool_at_max, types.cuh), kPoolBoundSlots the step's slots (the rule before), kPoolBoundBins
  // the bins bound (pool_bins.h: token slots binned by the scans, read at the exact cutoff),
  // kPoolBoundAnchor the admissible arcs counted against the trim's anchor (pool_anchor),
  // kPoolBoundClaims the slots for the claims lists and tables and the claims for the next
  // frontiers (pool_late: ExpandKernel's last CTA hands those out).
  int32_t pool_bound = 0;
  // The pooled layout's slot hints (CUWFST_POOL_HINTS): 1 adaptive (types.cuh HintShiftOf),
  // 0 every 32nd slot as in the static layout (the hints at 2f568a0).
  int32_t pool_hints = 1;
  // Where the pooled hand-out after the max runs (CUWFST_POOL_HANDOUT; only where MaxKernel
  // hands out, types.cuh pool_at_max): 0 MaxKernel's last block (MaxLastBlock), 1 a kernel of
  // its own right after MaxKernel (PoolHandOutKernel, profiled as "handout").
  int32_t pool_handout = 0;
  // The emitting payloads' low word (CUWFST_PAYLOAD): 0 the slot, 1 {token : index} where it fits
  // (types.cuh Workspace::payload_tok; GpuDecoder::Allocate decides the fit).
  int32_t payload_tokens = 0;
  // The pooled layout's diagnostic (CUWFST_POOL_FULL): Workspace::pool_full's mask.
  int32_t pool_full = 0;
  // pool_q (CUWFST_POOL_LANE_Q, GpuBackend's main instance): the frontier one lane may hold in
  // a pooled 1-best batch, past main_q (0: main_q). The pools are shared, so a lane may take
  // more than the static layout's share (a row whose frontier outgrows main_q then needs no
  // rescue); its claims (2 x) and hash table (a power of two, load <= 1/2) follow, and the pools' most
  // becomes max_lanes x that (address space; memory is committed as steps need it). The static
  // layout and lattice decodes keep main_q (GpuDecoder::SeqWorkspace).
  int32_t pool_q = 0;
  // Stream advances commit a VMM winners log ahead of need (CUWFST_ARENA_AHEAD): after launching
  // an advance's first round, a log within 1/8 of that round's room estimate grows to 5/4 of
  // it while the kernels run, so the next advances seldom map memory before their launch.
  bool arena_ahead = true;
  // winners_host: while this decoder runs pooled offline batches only (never the static
  // layout: streams, continuous batching, snapshots), its winners log is committed in pinned
  // host memory mapped into the log's device addresses, where the driver can (VMM host
  // pieces); the kernels write it over the bus and BacktrackKernel reads it. The first use of
  // the static layout moves the log to the device for good (its GC rounds read it hard).
  bool winners_host = false;
  bool use_cuda_graphs = true;
  int32_t walker = 0;  // kWalkWarp, kWalkThread, kWalkWarpSearch, kWalkWarpCoop or kWalkWarpCoopPdl (expand.cuh)
  int32_t walk_blocks = 0;  // grid of Max/Expand; 0: ExpandBlocksFor(max_lanes, trimmed)
  // CUDA-graph cache: at most graph_cache_size executables (least recently used evicted);
  // a decode of more than graph_max_steps steps launches plainly instead of capturing
  // (a 90,000-frame input would capture ~360k nodes for one use).
  int32_t graph_cache_size = 8;
  int32_t graph_max_steps = 4096;
  int32_t eps_iterations = 0;  // epsilon-closure passes per real step (0: none)
  // Kernel variants, switchable at construction so one process can time old against new
  // (benchmarks/gpu_speed.py --variants); every variant gives the same results.
  // scan_split: CTAs per lane of the step's scan (1: ScanKernel, one CTA per lane; > 1:
  // ScanSplitKernel; 0: auto, AutoScanSplit(max_lanes)).
  int32_t scan_split = 0;
  // scan_round: tokens per granule of ScanSplitKernel's chunks (Workspace::scan_round; 0: the
  // default, kScanRoundTokens = 2,048, one round of the kernel's block). Chunks are whole
  // granules, so with 512 a lane of 5,000 tokens is scanned by 10 CTAs, with 2,048 by 3.
  int32_t scan_round = 0;
  // scan_order: the order ScanSplitKernel's CTAs take (lane, chunk) items in: 0 = lane-major
  // (a lane's scan_split chunks, then the next lane's), 1 = chunk-major (every lane's first
  // chunk first). With scan_split 16 at 32 lanes most of the 512 CTAs hold empty chunks (a
  // lane of up to 2,048 tokens has one chunk) and leave at once, but at one CTA a
  // multiprocessor they pass through in waves; chunk-major puts the real chunks of every
  // lane in the first wave. 2 = persistent: one wave of CTAs (a multiprocessor each) that take
  // the lanes' non-empty chunks only, in turn, the lanes' counters written by the grid's last
  // CTA (scan.cuh PersistLastBlock); with the split scan and at most 512 lanes, else 1. The
  // same chunks and results in every order. 3 = 2 with Workspace::scan_preload off (no fetching
  // ahead: a chunk's tokens read after the trim's anchor walk and every ticket its own atomic,
  // as before; the constructor makes it 2).
  int32_t scan_order = 0;
  // closure_lists: 1 = the closure passes read lists that Finalize and Resolve write
  // (EpsListExpandKernel, no EpsScanKernel); 0 = EpsScanKernel rescans each pass's tokens;
  // kClosureChain (2) = the passes' fixpoint by chains (epsilon.cuh; one epsilon arc a state,
  // else 1; the host asks for it only where eps_iterations covers the longest chain; lattice
  // decodes run the lists).
  // Falls back to 0 where entry x max_eps_degree slots would not fit the payload's 31 bits,
  // and above kEpsListMaxLanes (1,024) lanes (EpsListExpandKernel's shared lane scan).
  int32_t closure_lists = 1;
  int32_t eps_blocks = 0;  // grid of EpsListExpandKernel; 0: 8 x the device's multiprocessors
  // finalize_split: CTAs per lane of Finalize, (EpsList)Resolve and ClearClaims (8: the old
  // grid; 0: auto, AutoFinalizeSplit(max_lanes), each CTA taking at least one round of
  // claims, Workspace::split_min; explicit: even chunks). The work is split by claims, so the
  // results are the same; a lane with many claims takes fewer rounds.
  int32_t finalize_split = 0;
  int64_t lattice_cap = 0;     // lattice records a first lattice decode makes room for (0: 4 Mi)
  // fused_max: 1 = FusedExpandKernel admits each step's arcs against a lower bound of the max
  // that the scan computes and finds the exact max as it goes (FinalizeKernel keeps the same
  // survivors), so MaxKernel does not run; 0 = MaxKernel, then ExpandKernel.
  int32_t fused_max = 0;
  // trim_arcs: 1 = the scans trim each token's slots to the prefix of its sorted emitting arcs
  // that can pass (Workspace::trim; only on a graph whose arcs are sorted, emit_sorted)
  int32_t trim_arcs = 1;
  // pdl: 1 = the step pipeline's kernels (EnqueueStep, EnqueueClosure: the scans, the max, the
  // expansions, Finalize, the refill, the closure and lattice stages) are launched with
  // programmatic dependent launch where the device has it (compute capability 9.0 and later)
  // and the decoder is not profiling: each kernel's launch overlaps the end of the one before,
  // which it waits for on entry (common.cuh StepKernelEntry). The same kernels and results.
  int32_t pdl = 0;
  // refill_kernel: where continuous batching's device-side refill runs: 0 = in FinalizeKernel,
  // by the last CTA of each lane whose row ended (no launch; Workspace kRefillInFinalize);
  // 1 = RefillKernel after every step's Finalize (one CTA; kRefillByKernel). The same rows
  // start the same way, so results are the same; only which lane takes which row may differ.
  int32_t refill_kernel = 0;
  // graph_chunks: captured sequences of more than GpuDecoder::kChunkFrom steps replay
  // executables of 64, 8 and 1 steps (RunOnce), not one executable a step bucket: the
  // executables' memory (outside every counter of ours) no longer grows with the lengths seen.
  bool graph_chunks = true;
};

// finalize_split = 0: about 1,024 CTAs over the batch, between 8 and 32 a lane.
inline int32_t AutoFinalizeSplit(int32_t max_lanes) {
  int32_t c = 1024 / (max_lanes > 0 ? max_lanes : 1);
  return c < 8 ? 8 : (c > 32 ? 32 : c);
}

// scan_split = 0: enough CTAs per lane that a batch's scan has about 512 CTAs (at most 16 a
// lane; one at 512 lanes and more, where the lanes alone fill the device).
inline int32_t AutoScanSplit(int32_t max_lanes) {
  int32_t c = 512 / (max_lanes > 0 ? max_lanes : 1);
  return c < 1 ? 1 : (c > 16 ? 16 : c);
}

// Kernel kinds timed by the profiling mode, in Profile()'s order.
constexpr int kProfileKinds = 16;

// Results of one decode, on the host.
struct DecodeOutputs {
  int32_t* arcs;        // [B, cap]
  int64_t cap;
  int32_t* path_len;    // [B]
  float* score;         // [B]
  int32_t* meta;        // [B, 4] {reached_final, redirected, overflow, max_frontier}
  int64_t* stats;       // [B, 2] {frontier_total, closure_added}
};

// A lattice decode's per-step outputs, on the host ([B, S] each, S >= the longest row + 1;
// step t of row b at b * S + t, zero past the row's final step) and the records' count.
// The records themselves stay in the decoder until TakeLatticeRecords.
struct LatticeOutputs {
  int64_t S;
  int32_t* counts;   // records of each step
  float* cutoffs;    // each step's cutoff (exact max - beam)
  int32_t* sizes;    // the frontier after each step and its epsilon closure
  int64_t* total;    // [1] records of the batch
  // 1: the records come back for the host's replay (TakeLatticeRecords); 2: the records also
  // carry tokens and admission (LatRecordExt) and stay on the device for PruneLattice.
  int32_t mode = 1;
  // mode 2 only: > 0 bounds the lattice memory (gpu_lattice_prune.cu "Bounded lattice
  // memory"): the batch runs `chunk` steps at a time and after each run its records are
  // pruned with the k2 windows whose end exists; what no later window touches leaves the
  // device. 0: one run of the whole batch, pruned after it (the path before the bound).
  int32_t chunk = 0;
  float output_beam = 0.f;  // mode 2: the windows' beam (and the records' filter's)
  // mode 2, chunk 0: 1 = the records' filter (lattice.cuh LatFilterFor) drops the arcs no k2
  // window can keep; filter_pad is added to its pad (0; tests make it negative to show that a
  // filter dropping too much is caught)
  int32_t filter = 0;
  float filter_pad = 0.f;
  // mode 2 with the filter: 1 = the lattice trim (common.cuh LatTrimLow; where the decoder
  // trims its 1-best steps): the steps walk only the arcs the filter could keep, and the
  // rows' recorded-arc counts are not made (-1); epsilon-free graphs only
  int32_t trim = 0;
  // mode 2 on a graph with epsilon arcs, with its records' filter (`filter` there): 1 = the
  // lattice trim on epsilon graphs and its prefilter (common.cuh LatEpsTrimOn), whose guard
  // decodes the batch again without them
  int32_t eps_trim = 0;
  // mode 1 on a graph with epsilon arcs: 1 = the records' filter on epsilon graphs (lattice.cuh
  // LatEpsFilterFor) drops a real step's non-admitted arcs that end below s(dst) - c, and
  // producer_a [B, S] gets each step's assumed magnitude A (0: not filtered) for the host
  // replay's guard (reference_lattice.h RecordedRow::producer_a); filter_pad as above
  int32_t eps_filter = 0;
  float* producer_a = nullptr;
};

// One row's lattice from the GPU's own pruning (gpu_lattice_prune.cu): PrunedRow,
// cuwfst/lattice_number.h.

struct IncPrune;  // gpu_lattice_prune.cu

// Launch sequences (Enqueue): what runs around the steps.
enum class SeqKind : int32_t {
  kBatch = 0,     // setup (every lane, arena reset), start closure, steps, backtrack, sanitize
  kSegment = 1,   // continuous batching: setup (new and finished lanes), start closure, steps, backtrack, sanitize
  kAdvance = 2,   // a streams' chunk: setup (frames available), steps, sanitize
  kFinalize = 3,  // streams' final step: setup (lengths), one step, backtrack, sanitize
  kOpen = 4,      // new streams: setup, start closure
  kResume = 5,    // a paused pooled batch (scan.cuh LaneScanLastBlock): setup (every lane goes on), steps,
                  // backtrack, sanitize
  kSegmentRefill = 6,  // kSegment with the device-side refill: in every step's Finalize (or RefillKernel
                       // after it, DecoderConfig::refill_kernel), RefillBacktrackKernel at the end
};

// Outputs of StreamPartial, on the host: the best path so far and how much of it is final.
struct PartialOutputs {
  int32_t* arcs;       // [n, cap]
  int64_t cap;
  int32_t* path_len;   // [n] true length
  int32_t* committed;  // [n] leading arcs that can no longer change
  float* score;        // [n]
  int32_t* meta;       // [n, 2] {ok (a frontier exists), overflow}
};

// Captured whole-sequence graphs keyed by (steps, fp16 | kind << 1), least recently used
// first out.
class GraphCache {
 public:
  using Key = std::pair<int32_t, int32_t>;
  explicit GraphCache(size_t capacity) : capacity_(capacity) {}
  // The executable for key, marked most recently used; nullptr if absent.
  cudaGraphExec_t Find(const Key& key);
  // Adds an executable, evicting the least recently used beyond the capacity.
  cudaGraphExec_t Insert(const Key& key, GraphExec exec);
  void Clear() { entries_.clear(); }
  size_t size() const { return entries_.size(); }
  int64_t evictions() const { return evictions_; }

 private:
  size_t capacity_;
  std::list<std::pair<Key, GraphExec>> entries_;  // front: most recently used
  int64_t evictions_ = 0;
};

class GpuDecoder {
 public:
  GpuDecoder(std::shared_ptr<GpuGraph> graph, const DecoderConfig& cfg);
  ~GpuDecoder();
  GpuDecoder(const GpuDecoder&) = delete;
  GpuDecoder& operator=(const GpuDecoder&) = delete;
  // log_probs: device pointer to a packed [B, T, V] tensor (strides in elements).
  // With `rows` (B entries, each a row of lp), lane b reads row rows[b] of lp: a sub-batch
  // of a larger tensor without a copy; else lane b reads row b.
  // With `lattice`, the decode also records every arc of every step whose destination
  // survived (lattice.cuh) and fills `lattice`; the records wait in the decoder for
  // TakeLatticeRecords.
  void Decode(const void* lp, bool lp_f16, int64_t stride_b, int64_t stride_t, int32_t B,
              int32_t T, int32_t V, const int32_t* lengths, bool online, int64_t caller_stream,
              DecodeOutputs out, const LatticeOutputs* lattice = nullptr, const int32_t* rows = nullptr);
  // The last lattice decode's records as [N, 3] int32 {source state, arc, acoustic bits},
  // row by row, each row's in step order (the order within a step is arbitrary).
  void TakeLatticeRecords(int32_t* out, int64_t N);
  // After a Decode with LatticeOutputs::mode 2 (epsilon-free graphs): k2's output-beam
  // pruning of every row's records on the device (the CPU LatticeBuilder's windows, bit for
  // bit), then only the kept states and arcs come back and are numbered as the CPU numbers
  // them. Rows with skip[b] != 0 get an empty lattice (their records are not trusted).
  // sizes_out [B, 3] = {states, arcs, recorded arcs}; the rows then by TakePrunedRows.
  void PruneLattice(int32_t B, const int32_t* lengths, const uint8_t* skip, float output_beam,
                    int64_t* sizes_out);
  // PruneLattice in two halves, so a batch's pruning runs beside the next batch's decode
  // (docs/design.md "The pruning beside the next decode"). PruneBegin, after a whole-batch
  // mode-2 Decode and on its thread: snapshots what the pruning needs (the step counts and
  // sizes, the windows) into one of two jobs and copies the records into that job's buffer
  // set on stream_ (PrBucketKernel, the last read of the search's records), so the next
  // Decode may write its own; returns the job's id. PruneFinish(id), on any one thread at a
  // time (the host-overlap worker): the forward, ranks, windows and numbering on pr_stream_,
  // then sizes_out as PruneLattice's and the rows for TakePrunedRows. A job must be finished
  // before the PruneBegin after next reuses its set (that Begin throws otherwise); a job
  // never finished is dropped by the Begin that takes its set, and finishing it then throws.
  int64_t PruneBegin(int32_t B, const int32_t* lengths, const uint8_t* skip, float output_beam);
  void PruneFinish(int64_t job, int64_t* sizes_out, int64_t rows, double* ms_out);  // sizes_out [rows, 3], ms_out [3]
  // Rows rows[0 .. n) of the last PruneLattice into the caller's arrays: states[i] [3, S[i]]
  // i32, arcs[i] [4, A[i]] i32, scores[i] [3, A[i]] f32 (S, A as sizes_out gave them; all
  // checked first), copied on several threads.
  void TakePrunedRows(int64_t n, const int32_t* rows, const int64_t* S, const int64_t* A, int32_t* const* states,
                      int32_t* const* arcs, float* const* scores);
  // Milliseconds of the last PruneLattice: {device passes, readback, host numbering}.
  double prune_ms_[3] = {0, 0, 0};
  // Continuous batching: N rows of one packed [N, T, V] tensor through the lanes, the next
  // row entering a lane as soon as one finishes (segments of `segment` steps); each row's
  // result equals its decode alone. Outputs as Decode's, one row per input row. A GC round
  // runs when the next segment might not fit the winners log, or after every segment with
  // gc_every_segment (long-form offline decoding, Decoder(gc_interval=...)).
  // refill (offline rows only, not with gc_every_segment): a lane whose row ends inside a
  // segment takes the next queued row at once on the device (finalize.cuh, scan.cuh), so no lane
  // idles until the segment's end and segments can be long; results as without it.
  // A run is ManyBegin, then ManyLaunch and ManyWait until ManyLaunch says every row is done:
  // ManyLaunch queues the next segment and returns at once (false: no row left, the run is over); ManyWait waits for it, writes the rows that
  // ended into the outputs and their indices into rows_out (room for N; may be null) and
  // returns how many. Between the two the caller may read the rows earlier ManyWaits gave.
  // The inputs, lengths and outputs must stay alive until the run is over. A failure ends
  // the run; ManyAbort ends one the caller gives up (idempotent).
  void ManyBegin(const void* lp, bool lp_f16, int64_t stride_b, int64_t stride_t, int32_t N, int32_t T,
                 int32_t V, const int32_t* lengths, bool online, int32_t segment, bool gc_every_segment,
                 int64_t caller_stream, DecodeOutputs out, bool refill);
  bool ManyLaunch();
  int32_t ManyWait(int32_t* rows_out);
  void ManyAbort();
  bool ManyActive() const { return many_.active; }
  int32_t ManyRows() const { return many_.N; }
  // Streams (k2's online beam mode; lanes are their slots). Open: the lanes' start tokens
  // and closures. Advance: lanes[i] takes lens[i] frames of rows i of a packed [S, Tc, V]
  // device tensor, in one launch sequence, then a GC round (in more rounds when the arena
  // guard made steps wait for room). Partial: the best paths so far.
  // Finalize: the final step and the results, after which the lanes are free. Release:
  // abandon lanes.
  void StreamOpen(const int32_t* lanes, int32_t n);
  void StreamAdvance(const int32_t* lanes, int32_t S, const void* lp, bool lp_f16, int64_t stride_b,
                     int64_t stride_t, int32_t Tc, int32_t V, const int32_t* lens, int64_t caller_stream);
  void StreamPartial(const int32_t* lanes, int32_t n, PartialOutputs out);
  void StreamFinalize(const int32_t* lanes, int32_t n, DecodeOutputs out);
  void StreamRelease(const int32_t* lanes, int32_t n);
  // {frames fed, winners entries held by the decoder (all lanes), committed arcs on the host}
  void StreamStats(int32_t lane, int64_t out[3]);
  // Debug: one row (lane 0), launch by launch; after step t copies the frontier of
  // buffer (t + 1) & 1. Snapshot 0 is the start token and its closure.
  struct Snapshot {
    int32_t phase;
    float beam;
    float cutoff;
    int32_t before_closure;  // frontier size before the step's epsilon closure
    // lane 0's overflow bits after this step (kOverflow*, OR-ed over the decode so far): a
    // capacity bit (frontier past main_q 16, claims 8, hash 2, slots 64) means this frontier
    // and every later one may miss tokens the CPU keeps; the caller rescues (decoder/gpu.py)
    int32_t overflow;
    std::vector<int32_t> state, arc;
    std::vector<float> score;
  };
  std::vector<Snapshot> DecodeSnapshots(const void* lp, bool lp_f16, int64_t stride_t, int32_t T,
                                        int32_t V, int32_t length, int64_t caller_stream);
  // out[kMemStats], bytes unless said: [0] reserved (address space: the lazy regions'
  // reservations and every eager buffer), [1] committed (device memory this decoder holds),
  // [2] fixed workspace, [3] winners high water (entries), [4] pinned host bytes, [5]
  // cached CUDA graphs, [6] graph captures, [7] graph evictions, [8] the uploaded graph's
  // bytes (shared by every decoder of the graph on this device, not in [0] or [1]), [9]
  // winners log committed (the log and its GC tags), [10] winners log reserved, [11] the
  // log's capacity (entries, the kernels' limit), [12] 1 if the log is a VMM region, [13]
  // the VMM granularity (0: eager), [14] path and GC-drain buffers and the input check's, [15] log growths (each
  // re-ran a batch or kept a sequence's contents), [16] GC rounds, [17] winners entries
  // live after the last GC round, [18] the most live after any round, [19] lane pools
  // committed (frontiers, step scratch, claims, hash tables), [20] lane pools reserved,
  // [21] 1 if offline batches take the pooled layout, [22] pool growths (each paused a
  // batch, which then resumed), [23..25] the pools' capacity (entries: tokens, claims, hash slots), [26..28]
  // the most of each a batch used, [29] the rounds stream advances took (more than one per
  // advance when the arena guard made steps wait for room), [30..32] the kernel variant in
  // use: scan_split, closure_lists, finalize_split (after the auto choices and fallbacks),
  // [33] lattice buffers (records, per-step arrays, hash positions, the closure's second
  // slot space, the GPU pruning's work buffers [35]; allocated by the first lattice decode,
  // eager, and in [0] and [1]), [34] fused_max (the kernel variant's fourth switch), [35] the
  // GPU lattice pruning's work buffers (gpu_lattice_prune.cu, kept at their high water; part
  // of [33]; its pinned readback is in [4]).
  // [36] the most lattice records the last lattice decode held on the device at once (the
  // records arena's of one run plus, bounded, the incremental pruning's), [37] the runs of the
  // last lattice decode (1: whole; more: bounded, LatticeOutputs::chunk).
  // [38] microseconds (host wall clock) spent growing the winners log before a launch could
  // go on (every growth but [39]'s, GC tags and the limit's upload included), [39] growths
  // committed ahead of need by stream advances while their kernels ran (cfg arena_ahead),
  // [40] the microseconds of those, [41] microseconds in GC rounds (CollectGarbage), [42] the
  // lattice records' growths since construction (each one re-runs the batch), [43] the
  // records' capacity (entries; 0 before the first lattice decode).
  // [44] 1 when the steps trim each token's arcs (Workspace::trim; lattice decodes never do),
  // [45] the slots the steps gave the walkers since construction (the walkers' work: counted by
  // the scans, so a step a pooled pause undoes and a batch re-run after a lattice-records growth
  // count again; -1 if it cannot be read back). Reading [45] synchronizes the decoder's stream.
  // [46] rows the device-side refill started inside segments since construction (continuous batching);
  // its done rows' path buffers count in [14] and its pinned buffers in [4].
  // [47] 1 when the step kernels are launched with programmatic dependent launch (pdl_:
  // DecoderConfig::pdl on a device of compute capability 9.0 or later), [48] the split
  // scan's granule (Workspace::scan_round), [49] the split scan's ticket order (scan_order), [50] 1 when
  // continuous batching's refill runs in RefillKernel, 0 in FinalizeKernel (refill_kernel).
  // [51] of [41], the GC rounds' time until GcMarkKernel's results are read (the mark and
  // convergence walks), [52] the live entries the rounds kept, summed over rounds.
  // [55] / [56]: the GPU lattice pruning's times ranked by PrBlockRankKernel / by a sort (a lane
  // past its cap, or CUWFST_PRUNE_SORT=radix / segmented), all decodes.
  // [57] / [58]: lattice lane-steps recorded from ExpandKernel's candidates / whose candidates
  // overflowed their buffer and were walked instead (candidate mode, lattice.cuh LatCandRecords),
  // all decodes.
  // [59] of [9], the winners-log bytes committed in host memory (pinned, mapped for the
  // kernels; DecoderConfig::winners_host): counted in [4], not in [1] or [9]'s device part,
  // [60] 1 while the log commits in host memory, [61] 1 where the driver can place it there.
  // [62] the commits that gave a decode back what a TrimWorkspace took (RestoreTrimmed: the
  // pools and the device log each count one).
  // [63] Workspace::payload_tok: 0 where the emitting payloads hold slots, else the token's shift
  // (CUWFST_PAYLOAD=token where it fits).
  // [64] the times the GPU lattice pruning ranked in its per-lane kernel (PrLaneForwardKernel, the
  // default), all decodes.
  // [65] 1 where the decoder's static-layout steps start MaxKernel's running max at the trim's
  // anchor (Workspace::max_anchor: trimming, not fused_max; CUWFST_MAX_ANCHOR=off at construction: 0).
  // [66] of [45], the slots of lane-steps whose max the anchor already was (Workspace::max_known):
  // MaxKernel left them out (reading it synchronizes the decoder's stream, as [45]).
  // [67] [68] [69] the grids of MaxKernel, ExpandKernel and LatPersistKernel as set at construction
  // (CUWFST_MAX_BLOCKS, CUWFST_EXPAND_BLOCKS, CUWFST_LAT_BLOCKS; 0: the walkers' grid, and
  // MaxKernel's MaxBlocksFor where the decoder trims, LatPersistKernel's LatBlocksFor in candidate mode).
  // [70] 1 where LatPersistKernel appends the candidates' records per CTA (CUWFST_LATTICE_APPEND=warp: 0).
  // [71] 1 where a final step's arcs are candidates too (common.cuh LatCandFinalOn;
  // CUWFST_LATTICE_CAND_FINAL=off at construction: 0, LatPersistKernel walks final steps).
  // [72] final lane-steps recorded from candidates, all decodes ([57] and [58] count real ones).
  // [73] [74] ExpandKernel's and LatPersistKernel's __launch_bounds__ CTAs a multiprocessor, warp
  // walker (defaults 1, i.e. no bound, and 4; CUWFST_EXPAND_MIN_BLOCKS=6, CUWFST_LAT_MIN_BLOCKS=6 at construction).
  // [75] 1 where the trims bound heavy tokens by their labels (Workspace::label_bound: the graph
  // has label tables; CUWFST_LABEL_BOUND=off at construction: 0).
  // [76] 1 where the trim's search probes weights only past each state's label-0 arcs
  // (Workspace::trim_weights: the graph has blank counts; CUWFST_TRIM_WEIGHTS=off: 0).
  // [79] 1 where the records pass's warps take their slots a chunk at a time (CUWFST_LATTICE_RESERVE=chunk).
  // [80] 1 where the records pass's global tables are packed slots (CUWFST_LATTICE_TABLES=packed).
  // [81] 1 where a lattice decode's records log is written by FinalizeKernel (CUWFST_LATTICE_LOG=finalize).
  // [82] 1 where the records pass runs its items in one launch (CUWFST_LATTICE_AFTER_GRID=one).
  // [83] 1 where the one grid's c14 steps use shared index-only tables (the default; CUWFST_LATTICE_AFTER_C14=global: 0).
  // [84] 1 where each step's log copy runs twice (CUWFST_LATTICE_LOG_EXTRA=copy, a measurement).
  // [85] S_t's tokens a records pass work item (Workspace::lat_chunk; CUWFST_LATTICE_AFTER_CHUNK).
  // [86] 1 where the one grid's records walk queues its candidates (the default; CUWFST_LATTICE_AFTER_COMPACT=off: 0).
  // [87] 1 where that walk's warps claim their tokens (the default; CUWFST_LATTICE_AFTER_TOKENS=stride: 0).
  // [88] 1 where that walk is compiled for packed, sorted arcs and staged rows (the default since s200
  // where the graph has them: GpuDecoder::AfterPacked; CUWFST_LATTICE_AFTER_PACKED=off: 0).
  // [89] 1 where that packed walk's first round takes an octet of lanes a token (the default since the session
  // of 2026-12-06 22:19 where the packed walk runs: GpuDecoder::AfterOctets; CUWFST_LATTICE_AFTER_OCTETS=off: 0).
  static constexpr int kMemStats = 90;
  void MemStats(int64_t out[kMemStats]) const;
  // Profiling: decode launch by launch with CUDA events around every kernel; Profile()
  // returns the accumulated milliseconds per kernel kind (kProfileKinds entries).
  void SetProfiling(bool on);
  void Profile(double out[kProfileKinds]) const;
  // Test hook: the next decode reads its log-probs through an unmapped address, which
  // kills the CUDA context the way a kernel bug would (tests/test_gpu_faults.py).
  void InjectIllegalAddress();
  // Gives back what offline batches hold: the lane pools (pooled layout, unless the static
  // layout was committed) are unmapped whole, and with `log` the winners log (VMM on the
  // device, while no lane lives across calls and no GC ran; a log in host memory keeps its
  // pieces) returns to its first commit; pointers do not move (VMM pieces are unmapped, the
  // reservations kept), so no captured graph is re-made. The next offline decode commits them back before its first step
  // (RestoreTrimmed), so a trim lowers the memory held between decodes, not their speed. The
  // rescue instance calls it after each rescue (its rows are the rare ones that outgrew the
  // main instance), the main instance before one (GpuBackend.main_trim). Returns the bytes
  // given back.
  int64_t TrimWorkspace(bool log = true);
  void RestoreTrimmed();
  // The persistent scan's phase trace (CUWFST_SCAN_TRACE=N when the decoder was built, the
  // persistent scan running; scan.cuh ScanTraceMark): copies header {steps ring, grid, words,
  // launches traced} and then the ring (steps x grid x words) into out, as far as out_len
  // allows; returns the words the whole trace takes (4 + ring), 0 when the trace is off.
  int64_t ScanTrace(uint64_t* out, int64_t out_len);
  // The input check (Python's check_inputs, for torch and DLPack device tensors alike): the
  // first frame, as b * T + t in row-major order, among rows b < B and frames t < lengths[b]
  // of log-probs [B, T, V] (elements at lp + b * stride_b + t * stride_t + v, v < V) that holds
  // a NaN or +inf, or -1 when none does. One kernel on the caller's stream, which this waits
  // for; no framework kernels, no [B, T, V] temporaries. Its buffers (8 + 4 B bytes on the
  // device and pinned) grow with B and stay.
  int64_t FirstNonFinite(const void* lp, bool lp_f16, int64_t stride_b, int64_t stride_t, int32_t B, int32_t T,
                         int32_t V, const int32_t* lengths, int64_t caller_stream);
  int device() const { return graph_->device; }
  int32_t vocab_size() const { return graph_->view.vocab_size; }

 private:
  void Allocate();
  static void StreamPriorities(int* search, int* prune);  // CUWFST_STREAM_PRIORITY's (gpu_decoder.cu)
  void AllocatePath(int32_t max_frames);
  void GrowArena(unsigned long long cursor);
  // Makes the winners log (and its GC tags once used) hold `entries` (at most arena_max),
  // keeping the live contents when `keep` (eager regions move and copy them; VMM regions
  // only map more). Publishes the new limit; on failure the old log and limit stay.
  void CommitArena(int64_t entries, bool keep, const char* why);
  // A stream advance's first round is running (launched, not waited for): a VMM log whose
  // capacity is within 1/8 of the round's estimate `want` maps up to 5/4 of it now, overlapped
  // with the kernels, and publishes the limit after them (stream order). Optional: a failure
  // leaves the log as it was (the next advance grows before its launch, as without it).
  void CommitArenaAhead(unsigned long long want);
  void PublishArenaLimit();
  // The lane pools (types.cuh): commits every array of pool k to hold want[k] entries
  // (statics: the static layout's full size), publishes the capacities; on failure the old
  // capacities stay (arrays that did grow keep their memory, and say so in MemStats). keep:
  // the contents stay (a paused batch's frontiers; VMM regions keep them anyway, an eager
  // region copies them into its replacement).
  void CommitPools(const int64_t want[kPools], bool statics, const char* why, bool keep = false);
  // The pools' capacities from what every array holds (statics: the static layout's), published.
  void PublishPoolCaps(bool statics);
  // The static layout's full size, once (streams, continuous batching, snapshots, and every
  // sequence where the pooled layout is off).
  void EnsureStatic();
  // The Workspace a sequence of `kind` launches with (pooled for offline batches when on).
  Workspace SeqWorkspace(SeqKind kind) const;
  void FreeGraphs() { graphs_.Clear(); }
  void Enqueue(SeqKind kind, int32_t steps, bool f16);
  void EnqueueHead(SeqKind kind, const Workspace& w, bool f16);
  void EnqueueStep(const Workspace& w, bool f16);
  void ForkLogSide(const Workspace& w);  // CUWFST_LATTICE_LOG=side (EnqueueStep)
  void JoinLogSide();
  void EnqueueTail(SeqKind kind, const Workspace& w);
  // DecoderConfig::graph_chunks: a captured sequence of more than kChunkFrom steps replays
  // chunks of kChunkBig, kChunkSmall and 1 steps (LaunchChunk).
  static constexpr int32_t kChunkFrom = 128, kChunkBig = 64, kChunkSmall = 8;
  void LaunchChunk(const Workspace& w, int32_t c, int32_t flags, bool f16);
  template <typename F>
  void ReplayOrCapture(const GraphCache::Key& key, F&& enqueue);
  // closes_step: the closure of a real step, which a lattice decode's walk follows (it keeps
  // the claims for it); false for the start closure.
  void EnqueueClosure(const Workspace& w, bool closes_step);
  // Lattice decodes (gpu_lattice.cu): buffers for rows of up to max_frames frames, growth
  // of the records, and the readback after a decode.
  void EnsureLattice(int32_t max_frames, bool ext = false);
  void LatticeAlloc(DeviceBuffer* dst, size_t bytes, const char* what);  // (gpu_lattice.cu)
  void GrowLattice(unsigned long long want, unsigned long long made);
  // The records after the search (gpu_decoder.cu): its buffers, with room for at least log_lane
  // logged tokens a lane and tab_entries global-table entries (0: the current or initial sizes),
  // and the pass's launches after a sequence's steps.
  void EnsureLatticeAfter(int64_t log_lane, int64_t tab_entries);
  void EnqueueRecordsPass(const Workspace& w);
  void PrintRecordsProfile();
  // The records a run that overflowed them made and needs (types.cuh LatticeNeedOfRun, from
  // the step counts of lanes < B and steps [t0, t1)), checked against the cursor.
  // holes > 0: the records pass took its slots a chunk a warp (CUWFST_LATTICE_RESERVE=chunk), so the
  // cursor counts slots, and a run again leaves at most `holes` unfilled (AfterHoleBound): the need
  // is the records plus that bound, so the first run after growth fits whatever its holes.
  LatticeRunNeed OverflowedRunNeed(int32_t B, int32_t t0, int32_t t1, int32_t steps, unsigned long long cursor,
                                   int64_t holes = 0);
  // The most slots the records pass's chunks can leave unfilled in one run: kAfterReserve - 1 a
  // warp of each of its four records launches.
  int64_t AfterHoleBound() const;
  void ReadLattice(int32_t B, const int32_t* lengths, const LatticeOutputs& out);
  void ReleaseAllLanes();
  StepParams Params(bool f16) const;
  bool Replays(int32_t steps) const;
  void RunOnce(SeqKind kind, int32_t steps, bool f16, bool capture);
  // Writes the commands and inputs (h_commands_, h_inputs_) to the device.
  void UploadLaneOrders();
  void ClearLaneOrders();
  // A GC round over every live lane (gc.cuh); the drained arcs join the lanes' prefixes.
  void CollectGarbage();
  void EnsureArenaRoom(int64_t entries);
  void SetArenaGuard(bool on);
  // Result rows: the first `width` arcs of the best paths of lanes [0, rows) to h_path_ (one
  // 2-D copy, then a sync), and one lane's result written as row `row` of `out`: `prefix`
  // (final arcs a stream's GC moved to the host) then the lane's path tail from h_path_.
  const int32_t* ReadPaths(int64_t width, int32_t rows);
  void WriteResult(int32_t lane, int32_t row, const LaneCounters& lc, int32_t tail_len,
                   const std::vector<int32_t>* prefix, int32_t host_overflow, const int32_t* h_path,
                   DecodeOutputs& out) const;
  unsigned long long ArenaCursor();
  void GrowArenaKeeping(int64_t want);
  void CheckLanes(const int32_t* lanes, int32_t n, bool want_open) const;
  // (mid: where given, the time between its event record and its wait; CUWFST_DECODE_SPLIT)
  void Wait(int64_t caller_stream, std::chrono::steady_clock::time_point* mid = nullptr);
  void SyncQuietly() noexcept;
  [[noreturn]] void Fatal(cudaError_t e, const char* what, int32_t B, int32_t T, int32_t V,
                          int32_t steps);
  void CheckAlive() const;
  template <typename T>
  T* Alloc(size_t count, const char* what);
  std::string Advice() const;
  std::string ArenaShort(unsigned long long need, int32_t lanes) const;

  std::shared_ptr<GpuGraph> graph_;
  DecoderConfig cfg_;
  Workspace ws_{};
  Stream stream_owned_;
  int stream_priority_ = 0, prune_priority_ = 0;  // its priority and the finishers' stream's (StreamPriorities)
  Event ready_;
  cudaStream_t stream_ = nullptr;  // stream_owned_.get(), the name every launch uses
  mutable std::mutex mu_;
  GraphCache graphs_;
  std::vector<DeviceBuffer> buffers_;  // the fixed workspace (Alloc)
  LazyRegion arena_;                   // winners log, grows (CommitArena)
  LazyRegion gc_tags_;                 // [arena capacity] int64 GC tags; committed on the first GC
  bool gc_tags_used_ = false;
  int64_t arena_cap_ = 0;              // the log's capacity in entries (published as *ws_.arena_limit)
  long long* d_arena_limit_ = nullptr;
  long long h_arena_limit_ = 0;        // the source of the limit's upload
  int64_t arena_grows_ = 0;
  int64_t arena_grow_us_ = 0;       // MemStats [38]
  int64_t arena_ahead_grows_ = 0;   // [39]
  int64_t arena_ahead_us_ = 0;      // [40]
  int64_t gc_us_ = 0;               // [41]
  int64_t gc_mark_us_ = 0;          // [51]
  int64_t gc_live_total_ = 0;       // [52]
  // The lane pools: one region per array (Workspace's per-token, claims and hash arrays)
  struct PoolArray {
    LazyRegion region;
    void** target;       // the Workspace field that points at it
    int32_t pool;        // kPoolTokens / kPoolClaims / kPoolHash
    int32_t elem;        // bytes per entry
    int32_t per_entry;   // entries per pool entry (tok_hint: 4 per token)
    int32_t fill;        // byte new memory is set to (-1: none)
    int64_t static_entries;  // the static layout's size
    int64_t reserve_entries = 0;  // the region's reservation: the static size or the pools' most
  };
  std::vector<std::unique_ptr<PoolArray>> pool_arrays_;
  bool pooled_ok_ = false;    // offline batches take the pooled layout
  bool static_ready_ = false; // committed to the static layout's full size
  int64_t pool_cap_[kPools] = {0, 0, 0};   // committed entries (published as *ws_.pool_cap)
  int64_t pool_max_[kPools] = {0, 0, 0};   // the most a pooled step's asks sum to (pool_q's lanes)
  int64_t stat_max_[kPools] = {0, 0, 0};   // the static layout's entries (pool_max_ without pool_q)
  // a pooled 1-best batch's lane capacities (DecoderConfig::pool_q; main_q's where it is off)
  int32_t pool_q_ = 0, pool_claims_ = 0, pool_hash_ = 0, pool_hint_cap_ = 0;
  int64_t pool_high_[kPools] = {0, 0, 0};  // the most a batch used
  long long h_pool_cap_[kPools] = {0, 0, 0};
  long long* d_pool_cap_ = nullptr;
  unsigned long long* d_pool_need_ = nullptr;
  int64_t pool_grows_ = 0;
  int64_t restore_pools_[kPools] = {0, 0, 0};  // TrimWorkspace: what the next decode commits back
  int64_t restore_arena_ = 0;
  int64_t first_pools_[kPools] = {0, 0, 0};  // the pools' first commit (Allocate): RestoreTrimmed's floor
  int64_t restores_ = 0;  // [62]
  DeviceBuffer out_path_;              // [max_lanes, path_cap], grows (AllocatePath)
  int32_t* out_path_len_ = nullptr;
  LaneCommand* d_commands_ = nullptr;
  LaneInput* d_inputs_ = nullptr;
  PinnedBuffer h_commands_;   // LaneCommand [max_lanes]
  PinnedBuffer h_inputs_;     // LaneInput [max_lanes]
  PinnedBuffer h_lanes_;      // LaneCounters [max_lanes]
  PinnedBuffer h_path_;       // int32 [max_lanes, path_cap]
  PinnedBuffer h_path_len_;   // int32 [max_lanes]
  // the device-side refill (continuous batching with refill): queue, control words, done records, the
  // rows the lanes hold; the done rows' paths (sized by path_cap when a refill decode needs them)
  int32_t refill_queue_cap_ = 0, refill_done_cap_ = 0;
  RefillEntry* d_refill_queue_ = nullptr;
  PinnedBuffer h_refill_queue_, h_refill_ctl_, h_refill_done_, h_refill_row_, h_refill_path_, h_refill_path_len_;
  DeviceBuffer refill_path_;
  int32_t refill_path_cap_ = 0;
  int64_t refills_ = 0;  // rows the device-side refill started (continuous batching with refill)
  void EnsureRefillPaths();
  // the continuous-batching run under way (ManyBegin .. the ManyLaunch that returns false)
  struct ManyRun {
    bool active = false, launched = false;
    const char* base = nullptr;
    bool f16 = false, online = false, gc_every = false, refill = false, replay = false;
    int64_t stride_b = 0, stride_t = 0, elem = 4;
    int32_t N = 0, T = 0, V = 0, segment = 0, next = 0;
    const int32_t* lengths = nullptr;
    DecodeOutputs out{};
    std::vector<int32_t> order;     // rows, longest first
    std::vector<int32_t> finished;  // the rows the last ManyWait wrote
    unsigned long long cursor = 0, delta = 0, before = 0;
  };
  ManyRun many_;
  // the log's cursor after a segment, read back behind it: pinned, so ManyLaunch returns
  // before the segment ends (a copy into pageable memory would wait for it)
  PinnedBuffer h_many_cursor_;
  // the slabs of the small readbacks (cuda_resources.cuh Readback): the decode calls' (under mu_:
  // a decode's counters and cursors, a pruning's begin) and the finishers' (under pr_fin_mu_: a
  // pruning's counts and rows' sizes), each kReadbackBytes + 32 max_lanes bytes
  PinnedBuffer h_readback_, pr_readback_;
  bool readback_staged_ = true;  // CUWFST_READBACK=pinned|pageable (read when the decoder is made)
  static constexpr size_t kReadbackBytes = 4096;
  template <typename F>
  auto ManyGuarded(F&& fn) -> decltype(fn());
  void HarvestRefills(const int32_t* lengths, const char* base, int64_t stride_b, int64_t stride_t, int64_t elem,
                      int32_t* next, DecodeOutputs& out);
  int64_t fixed_bytes_ = 0;
  bool profiling_ = false;
  bool inject_illegal_address_ = false;
  std::string dead_;  // set by a fatal fault: the context is gone, every call says so
  // init, scan, lane_scan, max, expand, finalize, backtrack, sanitize, eps_scan, eps_expand,
  // eps_resolve, clear_claims
  double profile_ms_[kProfileKinds] = {0};
  std::vector<std::pair<int, std::pair<cudaEvent_t, cudaEvent_t>>> pending_;
  std::vector<Event> event_pool_;
  template <typename F>
  void Timed(int kind, F&& launch);
  // A step pipeline kernel (one that starts with StepKernelEntry): launched on stream_ with
  // programmatic dependent launch when pdl_ holds and no profiling event sits between it and
  // the kernel before it, else as a plain launch.
  template <typename... KernelArgs, typename... Args>
  void LaunchStep(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, Args&&... args);
  // LaunchStep with `smem` bytes of dynamic shared memory (LatPersistKernel's lanes)
  template <typename... KernelArgs, typename... Args>
  void LaunchStepSmem(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, Args&&... args);
  // LaunchStep's and LaunchCoop's one launch: cooperative or not, PDL where `pdl` and pdl_ hold
  template <typename... KernelArgs, typename... Args>
  void LaunchWith(bool cooperative, bool pdl, size_t smem, void (*kernel)(KernelArgs...), dim3 grid, dim3 block,
                  Args&&... args);
  bool pdl_ = false;  // DecoderConfig::pdl on a device that has it
  bool pdl_root_ = false;  // LaunchChunk: the next launch is its capture's first (no PDL edge)
  int32_t persist_grid_ = 0;  // the persistent split scan's CTAs (scan_order 2)
  bool max_anchor_ = true;    // Workspace::max_anchor where it applies (CUWFST_MAX_ANCHOR=off: never)
  bool max_known_ = true;     // Workspace::max_known where it applies (CUWFST_MAX_KNOWN=off: never)
  // The grids of MaxKernel, ExpandKernel and LatPersistKernel on the static walkers' path, where 0
  // DecoderConfig::walk_blocks if set, else MaxBlocksFor (MaxKernel), LatBlocksFor (LatPersistKernel)
  // and ExpandBlocksFor (ExpandKernel);
  // CUWFST_MAX_BLOCKS, CUWFST_EXPAND_BLOCKS and CUWFST_LAT_BLOCKS at construction (same-run A/B of
  // the grids: every walk splits its slots among whatever warps it has, so results do not change)
  int32_t max_blocks_ = 0, expand_blocks_ = 0, lat_blocks_ = 0;
  // LatPersistKernel appends the candidates' records per CTA (lattice.cuh LatCandRecordsBlock);
  // CUWFST_LATTICE_APPEND=warp at construction: per warp and lane (LatAppend), as before
  bool lat_append_block_ = true;
  // CUWFST_LATTICE_CAND_FINAL=off at construction: a final step's records by LatPersistKernel's
  // walk, as before (lat_filter[6] 0)
  bool lat_cand_final_ = true;
  int32_t expand_min_blocks_ = 1, lat_min_blocks_ = 4;  // MemStats [73] [74]
  // LatStepEndKernel clears only the keys on epsilon-free graphs (Workspace::lat_keys_only):
  // CUWFST_LAT_CLEAR=full at construction clears keys, payloads and hash_pos, as before; MemStats [77]
  bool lat_clear_keys_ = true;
  // The records after the search (lattice_after.cuh; the default, CUWFST_LATTICE_RECORDS=step at
  // construction turns it off): GPU-pruned lattice decodes of whole rows on epsilon-free graphs,
  // with the filter and the lattice trim, find their records in one pass after the search instead
  // of a stage of every step; MemStats [78] counts the decodes that did
  bool lat_after_ = true;
  // the chain closure in GPU-pruned lattice decodes (Workspace::lattice 2), the default since the
  // session of 2026-12-05 22:48 (device_s169.sh on the H100: exact on every epsilon and lattice test
  // file under it, the small TLG's lattice batch 58.6 -> 51.9 ms); CUWFST_LATTICE_CHAIN=off at
  // construction: the lists closure there, as before
  bool lat_chain_ = true;
  bool lat_claims_ = true;  // CUWFST_LATTICE_CLAIMS (Workspace::lat_claims)
  // The pass's warps take record slots a chunk at a time, so the cursor counts slots (records and
  // holes): the default since 2026-12-05 (s131 on the H200: 41.45 against 43.76 ms a lattice batch,
  // the same lattices); CUWFST_LATTICE_RESERVE=round at construction takes them a round at a time
  // (Workspace::lat_reserve; MemStats [79])
  bool lat_reserve_ = true;
  // CUWFST_PRUNE_BEGIN at construction, where PruneBeginLocked buckets the records (epsilon-free
  // graphs; an epsilon graph's begin is always kPrBeginAsync's, then syncs in PruneEpsBegin):
  //  kPrBeginSync (sync): on the decoder's stream, waiting for it before returning (before 2026-12-06);
  //  kPrBeginAsync (async, the default): on the decoder's stream, not waiting (the next decode queues
  //  behind it);
  //  kPrBeginSide (side): on pr_bucket_stream_, beside the next decode, whose records pass (the one
  //  writer of the records the bucketing reads) waits for it (WaitRecordReaders). Not the default: s193
  //  read it 0.24 ms a lattice batch below async, inside the run's spread (docs/speed-notes.md).
  static constexpr int32_t kPrBeginSync = 0, kPrBeginAsync = 1, kPrBeginSide = 2;
  int32_t pr_begin_mode_ = kPrBeginAsync;
  // CUWFST_PRUNE_SIDE_DELAY_US at construction (tests): a spin of that long on pr_bucket_stream_ before
  // each side bucketing, so a next decode that did not wait for it would overwrite its records first
  int64_t pr_side_delay_us_ = 0;
  // CUWFST_PRUNE_SIDE_WAIT=off at construction (tests only; gives wrong lattices): the next decode does
  // not wait for a side bucketing, so the delay test can show that it would fail without the wait
  bool pr_side_wait_ = true;
  // CUWFST_LATTICE_AFTER_PROF=on at construction (Workspace::lat_prof): each records pass's phase
  // sums on stderr (PrintRecordsProfile; a measurement)
  bool lat_prof_ = false;
  // CUWFST_LATTICE_TABLES=packed at construction (Workspace::lat_tab_slots; MemStats [80]): the pass's
  // global tables hold each slot's state and index in one word
  bool lat_tab_packed_ = false;
  // CUWFST_LATTICE_LOG at construction (Workspace::lat_log_fold; MemStats [81]): scan (3, the default
  // since the session of 2026-12-06 07:39): the scans write a lattice decode's records log (S_t as
  // TokenLoad reads it; the step's scalars at the next scan's apply, LatLogPending), no log launch a
  // step; kernel (0): a LatLogKernel launch a step; finalize (1): the log written at the end of each
  // step's FinalizeKernel; side (2): that FinalizeKernel writes the scalars and a copy job, and
  // LatLogSideKernel copies S_t on la_side_[0] (ForkLogSide, JoinLogSide).
  int32_t lat_log_fold_ = 3;
  bool log_side_pending_ = false;  // a side copy forked and not yet joined to the decoder's stream
  // CUWFST_LATTICE_LOG_EXTRA=copy at construction (MemStats [84]; a measurement): each step of a
  // records-after decode copies S_t into the log once more (a LatFrontierLogKernel launch after the
  // step's log, wherever that is written but in FinalizeKernel)
  bool lat_log_extra_ = false;
  // Workspace::lat_chunk (MemStats [85]): S_t's tokens a records pass work item (kAfterChunk, or
  // CUWFST_LATTICE_AFTER_CHUNK at construction)
  int32_t lat_chunk_ = 0;
  unsigned long long pr_slots_ = 0;  // the last mode-2 decode's record slots (its cursor): PrBucketKernel reads them all
  int32_t la_log_split_ = 0;  // LatLogKernel's CTAs a lane (kAfterLogSplit, or CUWFST_LATTICE_LOG_SPLIT)
  bool lat_after_used_ = false;  // the last lattice decode's records came from the pass
  int64_t lat_after_decodes_ = 0;
  // Workspace::lat_one_grid (MemStats [82]): the records pass's items in one launch, longest class
  // first; CUWFST_LATTICE_AFTER_GRID=classes at construction: a launch a table class on four streams
  bool lat_one_grid_ = true;
  // Workspace::lat_c14_index (MemStats [83]): the one grid's c14 steps in shared memory as indices
  // alone (the default since 2026-12-06 06:26); CUWFST_LATTICE_AFTER_C14=global at construction: on
  // global tables
  bool lat_c14_index_ = true;
  // the one grid's records walk queues each round's candidates a warp and probes them 32 at a time
  // (lattice_after.cuh LatRecordsKernel kCompact; the default, CUWFST_LATTICE_AFTER_COMPACT=off at
  // construction: the walk probing in each round; MemStats [86])
  bool lat_compact_ = true;
  // the compacted walk's warps claim their item's tokens from a shared counter (LatRecordsKernel
  // kClaim; the default, CUWFST_LATTICE_AFTER_TOKENS=stride at construction: every 8th token; MemStats
  // [87]; nothing without that walk)
  bool lat_claim_tokens_ = true;
  // the claimed tokens' walk compiled for packed, sorted arcs and staged rows where the graph has them (the
  // default since s200; CUWFST_LATTICE_AFTER_PACKED=off at construction: not; AfterPacked; LatRecordsKernel
  // kPacked; MemStats [88])
  bool lat_packed_walk_ = true;
  bool AfterPacked() const;
  // the packed walk's tokens four at a time, its first round an octet of lanes a token (the default since the
  // session of 2026-12-06 22:19; CUWFST_LATTICE_AFTER_OCTETS=off at construction: not; LatRecordsKernel kOct;
  // MemStats [89])
  bool lat_octet_walk_ = true;
  bool AfterOctets() const;
  int32_t la_grid_ = 0;          // the pass kernels' grid (4 CTAs a multiprocessor)
  DeviceBuffer la_log_state_, la_log_score_, la_steps_, la_items_, la_plan_, la_tab_keys_, la_tab_pos_;
  Stream la_side_[3];            // the pass's table classes beside the global one (EnqueueRecordsPass)
  Event la_fork_, la_join_[3];
  Event la_log_fork_, la_log_join_;  // (CUWFST_LATTICE_LOG=side: each step's copy's fork and join)
  bool trim_weights_ = true;  // Workspace::trim_weights where the graph has blank counts (CUWFST_TRIM_WEIGHTS=off: never)
  bool label_bound_ = true;  // Workspace::label_bound where the graph has tables (CUWFST_LABEL_BOUND=off: never)
  int32_t coop_cap_ = 0;  // walker kWalkWarpCoop(Pdl): CoopWalkKernel's co-resident CTAs (0: Max and Expand instead)
  bool coop_pdl_ = false;  // walker kWalkWarpCoopPdl: its launch has programmatic dependent launch too
  template <typename... KernelArgs, typename... Args>
  void LaunchCoop(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, Args&&... args);
  void CollectProfile();
  unsigned long long arena_high_water_ = 0;
  int64_t advance_rounds_ = 0;
  // Lanes that live across sequences (streams, continuous batching): host side.
  struct LaneHost {
    bool open = false;          // a stream (or a row of continuous batching) holds the lane
    int32_t row = -1;           // continuous batching: the row in the lane
    int32_t fed = 0;            // frames given to the lane so far
    std::vector<int32_t> prefix;  // final arcs GC rounds drained, in order
    int32_t overflow = 0;       // overflow bits seen on the host (drain truncation)
    int32_t mean_frontier = 0;  // its frontiers' mean so far, rounded up (the advance's room estimate)
  };
  std::vector<LaneHost> lane_host_;
  DeviceBuffer drain_;          // [max_lanes, path_cap]
  DeviceBuffer finite_dev_;     // FirstNonFinite: {u64 first, int32 lengths[B]}
  PinnedBuffer finite_host_;    // its staging: the same layout
  long long gc_round_ = 0;
  unsigned long long arena_used_ = 0;  // winners entries live after the last GC round
  unsigned long long arena_used_max_ = 0;
  unsigned long long* arena_guard_ = nullptr;  // device scalar (ws_.arena_guard)
  unsigned long long arena_guard_host_ = 0;    // its value (what the last SetArenaGuard wrote)
  bool hash_dirty_ = false;  // a sequence failed half-way: wipe every hash table before the next
  int64_t graph_captures_ = 0;
  // Lattice decodes (allocated by the first one): the records, the per-step arrays
  // [max_lanes, seg_cap], hash_pos on an epsilon-free graph, and on an epsilon graph a
  // second slot space for the closure's passes (the step's own stays for the lattice walk).
  DeviceBuffer lat_, lat_cursor_, lat_count_, lat_cutoff_, lat_size_, lat_hash_pos_;
  DeviceBuffer lat_all_, lat_filter_;  // Workspace::lat_all, Workspace::lat_filter
  DeviceBuffer lat_cand_, lat_cand_n_;  // Workspace::lat_cand, lat_cand_n (candidate mode)
  bool lat_filter_on_ = false;         // what SetLatticeFilter last wrote
  bool lat_trim_used_ = false;         // the last lattice decode's steps trimmed (LatticeOutputs::trim)
  bool lat_eps_trim_on_ = false;       // what SetLatticeFilter last wrote (Workspace::lat_filter[8])
  float lat_filter_host_[9] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t lat_filter_reruns_ = 0;      // MemStats [53]: batches decoded again without the filter (its guard,
                                       // or the lattice trim's)
  int64_t lat_cand_steps_ = 0;         // MemStats [57]
  int64_t lat_cand_over_ = 0;          // MemStats [58]
  int64_t lat_cand_final_steps_ = 0;   // MemStats [72]
  int64_t lat_filter_dropped_ = 0;     // MemStats [54]: arcs the filter kept out of the records, all decodes
                                       // (of the arcs walked: the lattice trim's are not counted)
  int64_t prune_block_times_ = 0;      // MemStats [55]: times the pruning ranked by a block sort (PrBlockRankKernel)
  int64_t prune_lane_times_ = 0;       // MemStats [64]: times it ranked in the per-lane kernel (PrLaneForwardKernel)
  int64_t prune_sort_times_ = 0;       // MemStats [56]: times it ranked by a radix or segmented sort
  DeviceBuffer eps_begin_, eps_ub_, eps_offsets_, eps_hint_, eps_lane_offsets_;
  PinnedBuffer h_lat_;                  // the last lattice decode's records (LatRecord)
  int64_t h_lat_n_ = 0;                 // records in h_lat_
  std::vector<int64_t> h_lat_lane_;     // each row's records, from the step counts
  int64_t lattice_bytes() const;
  int64_t lattice_prune_bytes() const;  // pr_buf_ (in lattice_bytes)
  // GPU pruning (mode 2): the records' side array and PruneLattice's work buffers, kept at
  // their high water; the per-step arrays of the last mode-2 decode on the host.
  DeviceBuffer lat_ext_;
  DeviceBuffer pr_eps_buf_[2][24];  // PruneBufferIn's [72, 96) of either set: an epsilon graph's pruning
  DeviceBuffer pr_buf_[72];  // [0, 24): PruneLattice's; [24, 62): the incremental pruning's; 62, 63: PruneLattice's lane scratch and clocks; [64, 72): NumberOnDevice's
  // Bounded lattice memory (LatticeOutputs::chunk > 0, gpu_lattice_prune.cu): the
  // incremental pruning's host state (defined there; shared_ptr for the incomplete type).
  std::shared_ptr<IncPrune> inc_;
  int64_t lat_live_high_ = 0;  // MemStats [36]
  int32_t lat_runs_ = 0;       // MemStats [37]
  int64_t lat_grows_ = 0;      // MemStats [38]
  // eps_on: the records' filter on epsilon graphs (common.cuh LatEpsFilterFor); eps_trim: with
  // it, lattice == 2's lattice trim on epsilon graphs and its prefilter (LatEpsTrimOn)
  void SetLatticeFilter(bool on, float output_beam, float pad, bool eps_on = false, bool eps_trim = false);
  bool LatticeFilterGuard(int32_t B, const LaneCounters* h_lanes, const LatticeOutputs& lat);
  void RunBoundedLattice(int32_t B, const int32_t* lengths, bool online, bool f16, const LatticeOutputs& lat);
  void IncReset(int32_t B, const int32_t* lengths, float output_beam);
  void IncPass(int32_t t1, unsigned long long arena_records);
  void IncFinish(int32_t B, const int32_t* lengths, const uint8_t* skip, int64_t* sizes_out);
  PinnedBuffer pr_host_[2];
  // the device numbering (NumberOnDevice): the rows' arrays are in pr_host_ (pr_on_device_),
  // per row {states, arcs, state offset, arc offset}, the rows' arcs in all, its time (ms)
  bool pr_on_device_ = false;
  std::vector<int64_t> pr_num_sizes_;
  int64_t pr_num_arcs_ = 0;
  double pr_num_ms_ = 0.0;
  std::vector<int32_t> pr_count_, pr_size_, pr_all_;
  // the last mode-2 decode logged its frontiers (an epsilon graph: LatFrontierLogKernel), and each
  // lane's logged tokens (its frontier_total: S_0 .. S_n)
  bool pr_flog_ = false;
  std::vector<long long> pr_ftotal_;
  int32_t pr_B_ = -1;  // rows of the last mode-2 decode (-1: none to prune)
  std::vector<PrunedRow> pr_rows_;     // kept from decode to decode: the rows' arrays keep their capacity
  LatticeNumberScratch pr_number_;     // the host numbering's scratch, likewise
  void* PruneBuffer(int k, size_t bytes);
  // The pipelined pruning (PruneBegin / PruneFinish): two jobs, each with its own buffers for
  // PruneLattice's [0, 24) and 62, 63 (set 0: pr_buf_, set 1: pr_buf1_); NumberOnDevice's, the
  // pinned rows and pr_rows_ are the finisher's alone (one finish at a time).
  struct PruneJob;  // gpu_lattice_prune.cu
  std::shared_ptr<PruneJob> pr_job_[2];
  int64_t pr_job_ids_ = 0;
  int32_t pr_job_turn_ = 0;       // the set the next PruneBegin takes (PruneLattice takes set 0)
  mutable std::mutex pr_mu_;      // the jobs' states, the buffers' growth, the pruning's counters
  std::mutex pr_fin_mu_;          // one PruneFinish (or PruneLattice, TakePrunedRows) at a time
  Stream pr_stream_owned_;        // the finishers' stream (non-blocking; made by the first PruneBegin)
  // kPrBeginSide: the bucketing's own stream (the pruning's priority), the event it waits for (the
  // records written, on stream_), and the event after its reads of the records; lat_read_pending_
  // while a decode on stream_ has not yet been made to wait for that one (WaitRecordReaders)
  Stream pr_bucket_stream_owned_;
  Event pr_records_ready_, pr_records_read_;
  bool lat_read_pending_ = false;
  void WaitRecordReaders();
  DeviceBuffer pr_buf1_[26];      // set 1: [0, 24) and 62, 63 at 24, 25
  void* PruneBufferIn(int set, int k, size_t bytes);
  int64_t PruneBeginLocked(int32_t B, const int32_t* lengths, const uint8_t* skip, float output_beam, int32_t set);
  PruneJob& TakePruneJob(int64_t id);
  void PruneFinishLocked(PruneJob& job, int64_t* sizes_out);
  void PruneEpsBegin(PruneJob& job, const std::vector<int64_t>& log_off, cudaStream_t s);
  void PruneEpsFinish(PruneJob& job, int64_t* sizes_out, std::chrono::steady_clock::time_point c0);
  void PinnedFor(int k, int64_t want);
  void NumberOnHost(const PrunedArcOut* arcs, int64_t A, const PrunedStateOut* states, int64_t S, int32_t B,
                    const int32_t* lengths, const uint8_t* skip, PrunedEndpoints ends);
  void PrunedSizes(int32_t B, const int32_t* lengths, int64_t seg, const std::vector<int32_t>& all, bool trimmed,
                   int64_t* sizes_out);
  // eps_levels: an epsilon graph's (PrEpsLevels, [B (Tmax + 2)]; its ranks are layer << eps_sb | state),
  // nullptr on epsilon-free graphs
  bool NumberOnDevice(const PrunedArcOut* o_arcs, int64_t A, const PrunedStateOut* o_states, int64_t S, int32_t B,
                      const int32_t* lengths, const uint8_t* d_skip, int32_t Tmax, int64_t max_rank, int64_t M,
                      cudaStream_t s, const int32_t* eps_levels = nullptr, int32_t eps_sb = 0);
};

}  // namespace cuwfst
