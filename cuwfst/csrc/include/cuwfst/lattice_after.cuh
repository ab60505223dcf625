// The lattice records after the search (Workspace::lat_after; docs/design.md "The records after
// the search"). A real step's records depend only on S_t, S_{t+1} (states, scores, order) and the
// step's scalars (cutoff, the filter's slack and whether it is on), so the step loop need not find
// them: the step's kernels run as the 1-best's (no lattice stage, the 1-best's trim), LatLogKernel
// copies each step's expanded frontier into a log and writes its scalars, and after the sequence
// one pass finds every step's records at once:
//   LatPlanKernel     a lane a CTA: each logged step's work items (1,024 tokens of S_t each) into a
//                     list by the size of S_{t+1} (its table: 2^11, 2^13 or 2^14 slots in shared
//                     memory, else a global table it places), a final or redirect step's into the
//                     tail list, a global table's build items into their own;
//   LatTabClearKernel, LatTabBuildKernel   the global tables (S_{t+1}: state -> index);
//   LatRecordsKernel  a CTA an item, a warp a token of S_t walking its emitting arcs in the graph
//                     image's order (label-0 arcs, then the others by weight, best first) until
//                     score + (the row's best non-blank log-prob + weight) falls below the filter's
//                     bound, each arc tested as the in-step stage tests it (lattice.cuh
//                     LatPersistKernel): its end, the destination's probe, admission, the filter;
//   LatTailKernel     the final and redirect steps: every final arc (every arc, redirected) of S_T's
//                     tokens where the lane has a final token, acoustic 0.
// The records (lat, lat_ext) and the step counts (lat_count) are the in-step stage's; only their
// order differs, which nothing reads (the pruning buckets them by step and lane). lat_all (k2's
// recorded arcs) is not counted: arcs the filter's bound leaves unread are never probed, as under
// the lattice trim (GpuDecoder::lat_trim_used_). Measured as a standalone pass on the H200
// (benchmarks/lattice_post.*, its `lean` variant): 8.4 ms a batch of 32 on the full HLG.
// Epsilon-free graphs and whole-row decodes only (the host falls back to the in-step stage).
#pragma once

#include "cuwfst/lattice.cuh"
#include "cuwfst/state_table.cuh"

namespace cuwfst {

constexpr int32_t kAfterThreads = 256;
constexpr int32_t kAfterWarps = kAfterThreads / 32;
constexpr int32_t kAfterChunk = 1024;  // S_{t+1}'s tokens a build item; S_t's a records or tail item by default
// (Workspace::lat_chunk: CUWFST_LATTICE_AFTER_CHUNK, 256 to 4,096, multiples of kAfterThreads)
// Item lists (Workspace::lat_items): the shared-table classes, the global-table class, the tail
// (final and redirect steps), the global tables' build items.
enum : int32_t { kAfterC11 = 0, kAfterC13 = 1, kAfterC14 = 2, kAfterGlobal = 3, kAfterTail = 4, kAfterBuild = 5 };
constexpr int32_t kAfterLists = 6;
constexpr int32_t kAfterPlanTab = 6;  // lat_plan[6]: the global tables' entries
constexpr int32_t kAfterPlanOne = 12;  // lat_plan[12]: the one grid's claims (lat_plan[8 + list]: a class's)
constexpr int32_t kAfterOneBits = 13;  // the one grid's shared table: 2^13 slots (c13's), c11's steps use 2^11 of them
__host__ __device__ constexpr int32_t AfterBits(int32_t list) {
  return list == kAfterC11 ? 11 : list == kAfterC13 ? 13 : list == kAfterC14 ? 14 : 0;
}
// log-prob rows up to this many labels are staged in shared memory, longer ones read in place
constexpr int32_t kAfterLpsMax = 4096;

// A LatRecordsKernel<kBits> launch's dynamic shared memory: the table (int32 keys, uint16 indices:
// |S_{t+1}| <= 2^kBits / 2) and the staged log-prob row.
// (bits -1: the one grid's, a 2^13-slot table)
__host__ __device__ constexpr size_t AfterSmem(int32_t bits, int32_t vocab) {
  return (bits > 0 ? size_t{6} << bits : bits < 0 ? size_t{6} << kAfterOneBits : 0) +
         (vocab <= kAfterLpsMax ? sizeof(float) * static_cast<size_t>(vocab) : 0);
}

// Workspace::lat_prof's words (a measurement, CUWFST_LATTICE_AFTER_PROF=on): per item list c < 4 at
// c * 8: its warps' clock64 cycles waiting for the item's first barrier (the claim, and the slowest
// warp of the item before), staging the row and building the table (to the second barrier),
// walking the tokens; the items; its CTAs' active ns (%globaltimer, first claim to exit); the latest
// exit; then at kAfterProfStart + c the earliest start (set to ~0 before the pass); the pass's other
// kernels k (kAfterKernPlan ...) their CTAs' earliest start at kAfterProfKStart + k (~0 before the
// pass) and latest end at kAfterProfKEnd + k (thread 0's, a CTA's other threads may end a little later).
enum : int32_t { kAfterProfWait = 0, kAfterProfSetup = 1, kAfterProfWalk = 2, kAfterProfItems = 3, kAfterProfActive = 4,
                 kAfterProfEnd = 5, kAfterProfStart = 32, kAfterProfKStart = 36, kAfterProfKEnd = 40,
                 kAfterProfWords = 48 };
enum : int32_t { kAfterKernPlan = 0, kAfterKernClear = 1, kAfterKernBuild = 2, kAfterKernTail = 3 };
// (the measurement) a pass kernel's CTA start (end false) or end into Workspace::lat_prof, thread 0's
__device__ __forceinline__ void AfterProfMark(const Workspace& ws, int32_t kernel, bool end) {
  if (ws.lat_prof == nullptr || threadIdx.x != 0) return;
  if (end) atomicMax(ws.lat_prof + kAfterProfKEnd + kernel, GlobalTimer());
  else atomicMin(ws.lat_prof + kAfterProfKStart + kernel, GlobalTimer());
}

__device__ __forceinline__ float AfterLp(const LatStepLog& s, int32_t label) {
  return s.row16 ? __half2float(__ushort_as_half(s.row16[label])) : s.row32[label];
}

// LatLogKernel — per step of a lat_after decode, after FinalizeKernel; grid (kAfterLogSplit,
// max_lanes) x kAfterThreads. CTA 0 of a lane writes the step's lat_cutoff / lat_size and the
// filter's recursion (lat_mag, lat_drift, lat_filter_last, lat_guard) exactly as LatStepEndKernel
// does, and the step's LatStepLog (LatLogScalars); every CTA copies its share of the frontier the
// step expanded (S_t: lc.step_size tokens of buffer buf ^ 1) into the lane's log region at the
// lane's frontier_total before the step (LatLogCopy; the scans add each step's frontier to it, a
// paused step takes it back: PooledUndoStep). A lane past its region logs nothing more (the host
// grows the log to the batch's largest frontier_total and decodes again). The search's
// FinalizeKernel ran as the 1-best's (it cleared its claims). (Its CTAs a lane: kAfterLogSplit, or
// CUWFST_LATTICE_LOG_SPLIT.) Under CUWFST_LATTICE_LOG=finalize (Workspace::lat_log_fold) the same
// two run inside the step's FinalizeKernel instead (LatLogInFinalize), one launch a step fewer.
constexpr int32_t kAfterLogSplit = 8;

__global__ void __launch_bounds__(kAfterThreads) LatLogKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  const int32_t lane = blockIdx.y;
  LaneCounters& lc = ws.lanes[lane];
  const int32_t phase = lc.step_phase;
  if (phase == kPhaseIdle) return;
  if (blockIdx.x == 0 && threadIdx.x == 0) LatLogScalars(g, ws, lane, lc, phase);
  LatLogCopy<true>(ws, lane, lc, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(gridDim.x));
}

// LatFrontierLogKernel — per step of a GPU-pruned lattice decode on a graph with epsilon arcs
// (Workspace::lattice 2, the in-step stage), after LatStepEndKernel; grid (kAfterLogSplit,
// max_lanes) x kAfterThreads: LatLogKernel's copy of the frontier the step expanded (S_t, its
// closure's tokens included) into the lane's log region, without its scalars (LatStepEndKernel
// wrote them). The pruning reads the log for every token's graph state: the closure's tokens have
// no record of their own (gpu_lattice_prune.cu, "Epsilon graphs"). A lane past its region logs
// nothing more (the host grows the log and decodes again, as for lat_after).
__global__ void __launch_bounds__(kAfterThreads) LatFrontierLogKernel(DeviceGraph g, Workspace ws) {
  StepKernelEntry();
  const int32_t lane = blockIdx.y;
  const LaneCounters& lc = ws.lanes[lane];
  if (lc.step_phase == kPhaseIdle) return;
  LatLogCopy<true>(ws, lane, lc, static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(gridDim.x));
}

// LatPlanKernel — after a lat_after sequence's steps; grid max_lanes x kAfterThreads (lat_plan
// zeroed before). Each logged step of the lane (0 .. lc.t - 1) becomes its work items: a real step
// whose S_t and S_{t+1} (the next step's logged frontier) are not empty goes to the list of its
// S_{t+1}'s table (the smallest shared one holding it at most half full, else a global table of
// 2^bits >= 2 |S_{t+1}| entries placed at lat_plan[6], whose build items go to kAfterBuild); a
// final or redirect step of a lane with a final token to the tail. A step whose table does not
// fit lat_tab_cap gets no items (the host sees lat_plan[6] past it, grows and decodes again).
__global__ void __launch_bounds__(kAfterThreads) LatPlanKernel(Workspace ws) {
  AfterProfMark(ws, kAfterKernPlan, false);
  const int32_t lane = blockIdx.x;
  const int32_t steps = min(ws.lanes[lane].t, ws.seg_cap);
  if (ws.lanes[lane].frontier_total > ws.lat_log_lane) return;  // (its log is incomplete: decoded again)
  auto add = [&](int32_t list, int64_t at, int32_t n) {
    const int32_t chunk = list == kAfterBuild ? kAfterChunk : ws.lat_chunk;
    const int32_t chunks = (n + chunk - 1) / chunk;
    const unsigned long long base = atomicAdd(&ws.lat_plan[list], static_cast<unsigned long long>(chunks));
    int2* items = ws.lat_items + static_cast<int64_t>(list) * ws.lat_items_cap;
    for (int32_t c = 0; c < chunks; ++c)
      if (base + c < static_cast<unsigned long long>(ws.lat_items_cap))
        items[base + c] = make_int2(static_cast<int32_t>(at), c * chunk);
  };
  for (int32_t k = threadIdx.x; k < steps; k += blockDim.x) {
    const int64_t at = static_cast<int64_t>(lane) * ws.seg_cap + k;
    LatStepLog& s = ws.lat_steps[at];
    if (s.src_n <= 0) continue;
    if (s.phase != kPhaseReal) {
      if (s.final_alive) add(kAfterTail, at, s.src_n);
      continue;
    }
    if (k + 1 >= steps) continue;  // (cannot happen: a real step is followed by another)
    const int32_t dn = ws.lat_steps[at + 1].src_n;
    if (dn <= 0) continue;
    int32_t list = kAfterC11;
    while (list < kAfterGlobal && 2 * static_cast<int64_t>(dn) > (int64_t{1} << AfterBits(list))) ++list;
    // (the one grid: c14's steps on global tables unless lat_c14_index, its 2^14 indices alone)
    if (list == kAfterC14 && ws.lat_one_grid && !ws.lat_c14_index) list = kAfterGlobal;
    if (list == kAfterGlobal) {
      int32_t bits = 1;
      while ((int64_t{1} << bits) < 2 * static_cast<int64_t>(dn)) ++bits;
      const unsigned long long off = atomicAdd(&ws.lat_plan[kAfterPlanTab], 1ull << bits);
      if (off + (1ull << bits) > static_cast<unsigned long long>(ws.lat_tab_cap)) continue;
      s.tab_off = static_cast<long long>(off);
      s.tab_bits = bits;
      add(kAfterBuild, at, dn);
    }
    add(list, at, s.src_n);
  }
  AfterProfMark(ws, kAfterKernPlan, true);
}

__device__ __forceinline__ int32_t AfterItems(const Workspace& ws, int32_t list) {
  return static_cast<int32_t>(min(ws.lat_plan[list], static_cast<unsigned long long>(ws.lat_items_cap)));
}

// LatTabClearKernel — the global tables' entries placed (lat_plan[6], within lat_tab_cap) to empty.
__global__ void __launch_bounds__(kAfterThreads) LatTabClearKernel(Workspace ws) {
  AfterProfMark(ws, kAfterKernClear, false);
  const unsigned long long n = min(ws.lat_plan[kAfterPlanTab], static_cast<unsigned long long>(ws.lat_tab_cap));
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    if (ws.lat_tab_slots != nullptr) ws.lat_tab_slots[i] = make_ulonglong2(kStateSlotEmpty, 0ull);
    else ws.lat_tab_keys[i] = -1;
  }
  AfterProfMark(ws, kAfterKernClear, true);
}

// LatTabBuildKernel — a CTA a build item: 1,024 tokens of S_{t+1} into the step's global table.
__global__ void __launch_bounds__(kAfterThreads) LatTabBuildKernel(Workspace ws) {
  AfterProfMark(ws, kAfterKernBuild, false);
  const int32_t n_items = AfterItems(ws, kAfterBuild);
  const int2* items = ws.lat_items + static_cast<int64_t>(kAfterBuild) * ws.lat_items_cap;
  for (int32_t w = blockIdx.x; w < n_items; w += gridDim.x) {
    const int2 item = items[w];
    const LatStepLog& s = ws.lat_steps[item.x];
    const LatStepLog& d = ws.lat_steps[item.x + 1];
    const int32_t last = min(d.src_n, item.y + kAfterChunk);
    for (int32_t i = item.y + threadIdx.x; i < last; i += blockDim.x) {
      if (ws.lat_tab_slots != nullptr)
        StateTableInsertPacked(ws.lat_tab_slots + s.tab_off, s.tab_bits, ws.lat_log_state[d.src_off + i], i,
                               ws.lat_log_score[d.src_off + i]);
      else
        StateTableInsert(ws.lat_tab_keys + s.tab_off, ws.lat_tab_pos + s.tab_off, s.tab_bits,
                         ws.lat_log_state[d.src_off + i], i);
    }
  }
  AfterProfMark(ws, kAfterKernBuild, true);
}

// The kept records of a warp's round at one atomicAdd on the records' cursor; past lat_cap only
// the cursor moves (the host grows the records and decodes again). make() gives a lane's record,
// called only where it keeps one. Returns the round's kept records (warp-uniform), which the
// caller adds to the step's count.
template <typename Make>
__device__ __forceinline__ int32_t AfterWrite(const Workspace& ws, bool keep, Make&& make) {
  const unsigned km = __ballot_sync(0xFFFFFFFFu, keep);
  if (km == 0u) return 0;
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
  const int32_t leader = __ffs(km) - 1;
  unsigned long long base = 0;
  if (me == leader) base = atomicAdd(ws.lat_cursor, static_cast<unsigned long long>(__popc(km)));
  base = __shfl_sync(0xFFFFFFFFu, base, leader);
  const unsigned long long r = base + static_cast<unsigned long long>(__popc(km & ((1u << me) - 1u)));
  if (keep && r < static_cast<unsigned long long>(ws.lat_cap)) make(r);
  return __popc(km);
}

// The records' slots a chunk at a time (Workspace::lat_reserve, CUWFST_LATTICE_RESERVE=chunk): a warp
// takes kAfterReserve consecutive slots at the cursor at once and fills them over its rounds, so one
// atomicAdd serves ~kAfterReserve kept records where AfterWrite makes one a round with a kept record
// (and the warp waits for its return before its next round's loads). A round that keeps more than
// its chunk's room fills the room and starts a new chunk (a round keeps at most 32 = kAfterReserve,
// so one new chunk at most; types.cuh AfterChunkSlotOf, AfterChunkUsed). The slots a warp leaves
// unfilled when the kernel ends are holes (AfterReleaseChunk: lane -1, which PrBucketKernel skips),
// so the cursor counts slots, at least the records (the step counts); the host sizes and grows the
// records by the cursor. chunk: the warp's chunk (its first slot), used: its slots filled
// (warp-uniform, as are the calls). Past lat_cap only the cursor moves (grown and decoded again).
// Returns the round's kept records (warp-uniform).
template <typename Make>
__device__ __forceinline__ int32_t AfterWriteChunk(const Workspace& ws, bool keep, unsigned long long& chunk,
                                                   int32_t& used, Make&& make) {
  const unsigned km = __ballot_sync(0xFFFFFFFFu, keep);
  if (km == 0u) return 0;
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
  const int32_t n = __popc(km);
  const AfterChunkSlot at = AfterChunkSlotOf(used, n, __popc(km & ((1u << me) - 1u)));
  unsigned long long base = chunk;
  if (n > kAfterReserve - used) {  // (warp-uniform) a new chunk for the ranks past the room
    unsigned long long fresh = 0;
    if (me == 0) fresh = atomicAdd(ws.lat_cursor, static_cast<unsigned long long>(kAfterReserve));
    fresh = __shfl_sync(0xFFFFFFFFu, fresh, 0);
    if (at.fresh) base = fresh;
    chunk = fresh;
  }
  used = AfterChunkUsed(used, n);
  const unsigned long long r = base + static_cast<unsigned long long>(at.offset);
  if (keep && r < static_cast<unsigned long long>(ws.lat_cap)) make(r);
  return n;
}

// A warp's unfilled slots of its last chunk (AfterWriteChunk) marked holes: lane -1 (and step -1),
// which the pruning's bucketing skips. Every lane of the warp calls it.
__device__ __forceinline__ void AfterReleaseChunk(const Workspace& ws, unsigned long long chunk, int32_t used) {
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
  if (used + me >= kAfterReserve) return;
  const unsigned long long r = chunk + static_cast<unsigned long long>(used + me);
  if (r >= static_cast<unsigned long long>(ws.lat_cap)) return;
  ws.lat[r] = {-1, -1, 0.f, -1};
  ws.lat_ext[r] = {-1, -1, -1, 0};
}

// The one grid's item x (Workspace::lat_one_grid: the global items, then c14's, c13's and c11's, as
// one list): its list, its index there in *at; -1 past the last item.
__device__ __forceinline__ int32_t AfterOneItem(const Workspace& ws, unsigned long long x, int32_t* at) {
  for (const int32_t list : {kAfterGlobal, kAfterC14, kAfterC13, kAfterC11}) {
    const unsigned long long n = static_cast<unsigned long long>(AfterItems(ws, list));
    if (x < n) {
      *at = static_cast<int32_t>(x);
      return list;
    }
    x -= n;
  }
  *at = 0;
  return -1;
}

// LatRecordsKernel<kBits> — the real steps' records of one item list (kBits 11 / 13 / 14: S_{t+1}
// in a table of 2^kBits slots in shared memory, built by every CTA of the step; 0: the step's
// global table); a fixed grid, each CTA claiming the list's next item when done with one. Per
// item: the step's log-prob row into shared memory (up to kAfterLpsMax labels) and its best
// non-blank value `rest`; then a
// warp a token of S_t: its emitting arcs 32 at a time, each read arc's end = score + (acoustic +
// weight); an arc ending below pre_low is dropped (the filter drops it whatever its destination,
// and it is not admitted: lattice.cuh LatPreLowFor), else its destination is probed in S_{t+1}; a
// surviving one is kept when admitted (end > cutoff), or the step unfiltered, or not below
// (s(dst) - output_beam) - slack. On a sorted graph (DeviceGraph::emit_sorted) an arc past the
// label-0 arcs with score + (rest + weight) < pre_low ends below pre_low whatever its label, and so
// does every later one (their weights fall; float addition is monotone): the token's walk stops.
// The kept records take their slots a round at a time (AfterWrite), or under Workspace::lat_reserve
// a chunk a warp at a time (AfterWriteChunk; the last chunk's rest marked holes at the end).
// kBits -1 (Workspace::lat_one_grid, CUWFST_LATTICE_AFTER_GRID=one): one launch for every item of the
// pass, claimed from one counter (lat_plan[kAfterPlanOne]) in the order global, c14, c13, c11 (the
// longest items first), each item's table its class's in the same 48 KB of shared memory (2^13 or
// 2^11 key and index slots; under Workspace::lat_c14_index c14's 2^14 slots of indices alone,
// StateIndexFind, its states read from S_{t+1}'s log, else the plan puts c14's steps on global
// tables), or the step's global table; `list` names the measurement's slot (c11's). Why one launch:
// the four class launches on four streams run one class after another in an order the hardware
// picks (each grid fills every multiprocessor and keeps it until its list is done), the global
// class most often last and alone (s172's timeline).
// kCompact (the one grid only, by default; GpuDecoder::lat_compact_, CUWFST_LATTICE_AFTER_COMPACT=off: not):
// a round tests only the arcs' ends against pre_low; its candidates (end >= pre_low) join the warp's
// queue, one a lane in registers (arc, destination, acoustic, end, token), and the probe, the
// filter and the records run once 32 are queued, every lane busy, and for the rest at the item's
// end. Without it each round with any candidate runs the probe and the write with the few lanes
// that have one (~2 to ~6 candidates a round of 32 arcs on the full HLG, s118's counts). The
// records are the same; only their slots' order differs, which nothing reads.
// kClaim (with kCompact, by default; GpuDecoder::lat_claim_tokens_, CUWFST_LATTICE_AFTER_TOKENS=stride: not): a warp's
// third and later tokens of an item are claimed from a counter in shared memory as it needs them,
// not every kAfterWarps-th, so the item's warps end together rather than at its slowest warp's
// share (the item's first barrier held ~16 % of the warps' samples under Nsight Compute, s198).
// kPacked (with kClaim, by default since s200; GpuDecoder::lat_packed_walk_, CUWFST_LATTICE_AFTER_PACKED=off:
// not; for graphs whose arcs are packed and sorted and whose log-prob rows are staged): those three known
// when compiled, so a round reads the packed word alone, with no per-arc test of the graph's layout
// (s198's SASS: both layouts' loads and decodes issued predicated in every round).
// kOct (with kPacked, by default since the session of 2026-12-06 22:19; GpuDecoder::lat_octet_walk_,
// CUWFST_LATTICE_AFTER_OCTETS=off: not): a warp takes its tokens
// four at a time, and its first round reads each one's first 8 arcs (an octet of lanes a token); a
// token none of whose 8 is past the sorted bound and that has more arcs is then walked on alone, 32
// arcs a round from its 9th. Why: on the full HLG's sim rows 65 % of S_t's tokens read at most 8 arcs
// (their blank loop and a few others before the bound), each a whole round of 32 lanes in the packed
// walk (benchmarks/records_skip.py counts the rounds both ways: 80 % of them left). The records are the
// same set. s210 (H100): the kernel 6.33-6.42 -> 5.44-5.56 ms a pass, its warps' cycles -16 %. Its rounds
// and the compacted walks' are one lambda (compact_round): the octets' first round passes each lane its
// octet's token, the others the warp's.
template <int kBits, bool kCompact = false, bool kClaim = false, bool kPacked = false, bool kOct = false>
__global__ void __launch_bounds__(kAfterThreads, 4) LatRecordsKernel(DeviceGraph g, Workspace ws, int32_t list) {
  static_assert(!kCompact || kBits < 0, "the compacted walk is the one grid's");
  static_assert(!kClaim || kCompact, "the claimed tokens are the compacted walk's");
  static_assert(!kPacked || kClaim, "the packed walk is the claimed tokens'");
  static_assert(!kOct || kPacked, "the octets' walk is the packed walk's");
  constexpr bool kOne = kBits < 0;
  constexpr int32_t H = kOne ? 1 << kAfterOneBits : kBits > 0 ? 1 << kBits : 0;
  extern __shared__ __align__(16) unsigned char after_smem[];
  int32_t* keys = reinterpret_cast<int32_t*>(after_smem);
  uint16_t* pos16 = reinterpret_cast<uint16_t*>(keys + H);
  float* lps = reinterpret_cast<float*>(pos16 + H);
  __shared__ float s_rest[kAfterWarps];
  // (kCompact: a round's candidates' lanes by rank, a row a warp)
  __shared__ int32_t s_src[kCompact ? kAfterWarps * 32 : 1];
  __shared__ int32_t s_next;  // (kClaim: the item's tokens claimed past each warp's first two)
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31), wid = static_cast<int32_t>(threadIdx.x >> 5);
  const int32_t V = g.vocab_size;
  const bool staged = kPacked || V <= kAfterLpsMax;
  const bool sorted = kPacked || g.emit_sorted != 0;
  const float output_beam = ws.lat_filter[1];
  const int32_t n_items = kOne ? 0 : AfterItems(ws, list);  // (kOne: AfterOneItem's bound)
  // Work items claimed one at a time (Workspace::lat_claims; their work differs ~100-fold, so a
  // fixed stride leaves the grid waiting on its slowest CTA), else item blockIdx.x + k gridDim.x.
  // (s_item is read after the barrier and rewritten only after the item's next barrier.)
  __shared__ int32_t s_item, s_list;  // (s_list: kOne's item's list, -1 past the last item)
  const bool claims = ws.lat_claims != 0;
  const bool reserve = ws.lat_reserve != 0;
  unsigned long long chunk = 0;  // (reserve: the warp's chunk of record slots, kAfterReserve used: none)
  int32_t chunk_used = kAfterReserve;
  // (the measurement: a warp's lane 0 adds each phase's cycles to the CTA's sums in shared memory)
  unsigned long long* const prof = list < 4 ? ws.lat_prof : nullptr;
  __shared__ unsigned long long s_prof[4];
  unsigned long long t_cta = 0;
  long long t_mark = 0;
  if (prof != nullptr) {
    if (threadIdx.x < 4) s_prof[threadIdx.x] = 0;
    t_cta = GlobalTimer();
    t_mark = clock64();
  }
  auto phase = [&](int32_t k) {  // (prof only) the cycles since the last mark into phase k
    const long long now = clock64();
    if (me == 0) atomicAdd(&s_prof[k], static_cast<unsigned long long>(now - t_mark));
    t_mark = now;
  };
  for (int32_t w = blockIdx.x;; w += gridDim.x) {
    if ((claims || kOne) && threadIdx.x == 0) {
      // (kOne: thread 0 also finds the item's list and its index there, so no thread holds the
      // lists' counts in registers)
      const unsigned long long x = claims ? atomicAdd(&ws.lat_plan[kOne ? kAfterPlanOne : 8 + list], 1ull)
                                          : static_cast<unsigned long long>(w);
      if constexpr (kOne) s_list = AfterOneItem(ws, x, &s_item);
      else s_item = static_cast<int32_t>(min(x, static_cast<unsigned long long>(n_items)));
    }
    __syncthreads();  // (and the last item's table and row read by every warp)
    if (prof != nullptr) phase(kAfterProfWait);
    // the item's list and its index there, and its table's bits (0: the step's global table)
    const int32_t ilist = kOne ? s_list : list;
    const int32_t iw = claims || kOne ? s_item : w;
    if (kOne ? ilist < 0 : iw >= n_items) break;
    if (prof != nullptr && threadIdx.x == 0) s_prof[kAfterProfItems] += 1;
    const int32_t bits = kOne ? AfterBits(ilist) : kBits;
    const int2 item = ws.lat_items[static_cast<int64_t>(ilist) * ws.lat_items_cap + iw];
    const LatStepLog s = ws.lat_steps[item.x];
    const LatStepLog& d = ws.lat_steps[item.x + 1];
    const long long d_off = d.src_off;
    const int32_t d_n = d.src_n;
    float rest = -INFINITY;
    for (int32_t i = threadIdx.x; i < V; i += kAfterThreads) {
      const float v = AfterLp(s, i);
      if (staged) lps[i] = v;
      if (i > 0) rest = fmaxf(rest, v);
    }
    for (int32_t o = 16; o > 0; o >>= 1) rest = fmaxf(rest, __shfl_xor_sync(0xFFFFFFFFu, rest, o));
    if (me == 0) s_rest[wid] = rest;
    // (kOne's c14: 2^14 uint16 indices over the first 2^13 keys' bytes, all 0xFFFF when cleared)
    if (kClaim && threadIdx.x == 0) s_next = 0;  // (every warp is past the last item's walk: the barrier above)
    const bool index_only = kOne && bits == 14;
    if (bits > 0) {  // (block-uniform)
      for (int32_t i = threadIdx.x; i < (index_only ? 1 << 13 : 1 << bits); i += kAfterThreads) keys[i] = -1;
      __syncthreads();
      for (int32_t i = threadIdx.x; i < d_n; i += kAfterThreads) {
        if (index_only) StateIndexInsert(reinterpret_cast<uint16_t*>(keys), 14, ws.lat_log_state[d_off + i], i);
        else StateTableInsert(keys, pos16, bits, ws.lat_log_state[d_off + i], i);
      }
    }
    __syncthreads();
    if (prof != nullptr) phase(kAfterProfSetup);
    rest = s_rest[0];
    for (int32_t x = 1; x < kAfterWarps; ++x) rest = fmaxf(rest, s_rest[x]);
    // (the global class: the step's table, two arrays or packed slots, CUWFST_LATTICE_TABLES)
    const ulonglong2* tslots = bits > 0 || ws.lat_tab_slots == nullptr ? nullptr : ws.lat_tab_slots + s.tab_off;
    const int32_t* tkeys = bits > 0 ? keys : tslots != nullptr ? nullptr : ws.lat_tab_keys + s.tab_off;
    const int32_t* tpos = bits > 0 || tslots != nullptr ? nullptr : ws.lat_tab_pos + s.tab_off;
    const int32_t tbits = bits > 0 ? bits : s.tab_bits;
    const float* dsc = ws.lat_log_score + d_off;
    const int32_t* st = ws.lat_log_state + s.src_off;
    const float* sc = ws.lat_log_score + s.src_off;
    const int32_t lane = item.x / ws.seg_cap, k = item.x - lane * ws.seg_cap;
    int32_t* count = ws.lat_count + item.x;
    const int32_t last = min(s.src_n, item.y + ws.lat_chunk);
    // A warp's next token's arc range and the state and score of the one after are loaded while it
    // walks the current one (its two dependent round trips off the walk's chain); its kept records
    // are counted in a register and reach the step's count once an item.
    int32_t kept = 0;
    // The probe of a candidate's destination in S_{t+1} (-1: it did not survive) and the filter:
    // *keep where admitted (end > cutoff), the step unfiltered, or not below (s(dst) -
    // output_beam) - slack.
    auto probe_keep = [&](int32_t dest, float end, bool* keep, bool* admitted) {
      float dscore = 0.f;  // (packed tables: the destination's score, from the probe's load)
      int32_t p;
      if constexpr (kBits > 0) p = StateTableFind(tkeys, pos16, kBits, dest);
      else if (kOne && index_only)
        p = StateIndexFind(reinterpret_cast<const uint16_t*>(tkeys), ws.lat_log_state + d_off, 14, dest);
      else if (kOne && bits > 0) p = StateTableFind(tkeys, pos16, bits, dest);
      else if (tslots != nullptr) p = StateTableFindPacked(tslots, tbits, dest, &dscore);
      else p = StateTableFind(tkeys, tpos, tbits, dest);
      if (p >= 0) {
        *admitted = end > s.cutoff;
        *keep = *admitted || !s.filter_on ||
                !(end < ((bits == 0 && tslots != nullptr ? dscore : dsc[p]) - output_beam) - s.slack);
      }
      return p;
    };
    // (kCompact) the warp's queue: lane x < qn holds the x-th queued candidate
    int32_t qn = 0, q_arc = 0, q_dest = 0, q_i = 0;
    float q_ac = 0.f, q_end = 0.f;
    // lane x takes the round's candidate of rank r where `get` (every lane calls it: the shuffles)
    auto queue_in = [&](bool get, int32_t r, int32_t arc, int32_t dest, float ac, float end, int32_t i) {
      const int32_t src = get ? s_src[wid * 32 + r] : me;
      const int32_t x_arc = __shfl_sync(0xFFFFFFFFu, arc, src), x_dest = __shfl_sync(0xFFFFFFFFu, dest, src);
      const float x_ac = __shfl_sync(0xFFFFFFFFu, ac, src), x_end = __shfl_sync(0xFFFFFFFFu, end, src);
      const int32_t x_i = kOct ? __shfl_sync(0xFFFFFFFFu, i, src) : i;  // (kOct: the lanes' tokens differ)
      if (get) {
        q_arc = x_arc;
        q_dest = x_dest;
        q_ac = x_ac;
        q_end = x_end;
        q_i = x_i;
      }
    };
    // the queued candidates' probes and records (every lane calls it; `valid`: the lane holds one)
    auto flush = [&](bool valid) {
      bool keep = false, admitted = false;
      int32_t p = -1;
      if (valid) p = probe_keep(q_dest, q_end, &keep, &admitted);
      auto make = [&](unsigned long long r) {
        ws.lat[r] = {st[q_i], q_arc, q_ac, lane};
        ws.lat_ext[r] = {k, q_i, p, admitted ? 1 : 0};
      };
      kept += reserve ? AfterWriteChunk(ws, keep, chunk, chunk_used, make) : AfterWrite(ws, keep, make);
    };
    // (kCompact) one round: lane x's arc `arc` of its token ti (score ta) where `valid` (the octets' first
    // round: each octet's own token; else the warp's token); its candidates queued (lanes qn, qn + 1, ...
    // by rank; 32 queued: their probes and records, then the rest); returns the round's past lanes (on a
    // sorted graph, a label arc past the bound: the token's last round)
    auto compact_round = [&](bool valid, int32_t arc, float ta, int32_t ti) {
      bool cand = false, past = false;
      float ac = 0.f, end = 0.f;
      int32_t dest = 0;
      if (valid) {
        // (the weight, label and destination in one round trip, the destination's for the probe:
        // loading the label alone, then the packed word again for a candidate, put an L1 round trip
        // on the candidates' path)
        const float wt = g.arc_weight[arc];
        const ArcDestLabel dl = kPacked ? ArcDestAndLabelPacked(g, arc) : ArcDestAndLabel(g, arc);
        const uint16_t lab = dl.label;
        const bool read = !sorted || lab == 0 || ta + (rest + wt) >= s.pre_low;
        past = sorted && lab != 0 && !read;
        if (read) {
          ac = staged ? lps[lab] : AfterLp(s, lab);
          end = ArcEnd(ta, wt, ac);
          cand = !(end < s.pre_low);
          dest = dl.dest;
        }
      }
      const unsigned cm = __ballot_sync(0xFFFFFFFFu, cand);
      if (cm != 0u) {  // (warp-uniform) the candidates to lanes qn, qn + 1, ... by rank
        const int32_t nc = __popc(cm);
        if (cand) s_src[wid * 32 + __popc(cm & ((1u << me) - 1u))] = me;
        __syncwarp();
        const int32_t take = min(nc, 32 - qn);
        queue_in(me - qn >= 0 && me - qn < take, me - qn, arc, dest, ac, end, ti);
        if (qn + nc >= 32) {  // (warp-uniform) 32 queued: their probes and records, then the rest
          flush(true);
          qn = qn + nc - 32;
          queue_in(me < qn, take + me, arc, dest, ac, end, ti);
        } else {
          qn += nc;
        }
        __syncwarp();  // (s_src read before the next round writes it)
      }
      return __ballot_sync(0xFFFFFFFFu, past);
    };
    if constexpr (kOct) {
      const int32_t oct = me >> 3, ol = me & 7;
      // groups of 4 tokens (g0 .. g0 + 3; the lane's octet takes g0 + oct): the warp's first two
      // fixed, then claimed 4 at a time; a group's arc ranges loaded one group ahead, its states and
      // scores two ahead (as the packed walk does a token's)
      int32_t g0 = item.y + 4 * wid, g1 = item.y + 4 * (wid + kAfterWarps);
      int32_t b = 0, n = 0, nstate = 0;
      float a = 0.f, na = 0.f;
      if (g0 + oct < last) {
        a = sc[g0 + oct];
        const StateArcs sa = ArcsOf(g, st[g0 + oct]);
        b = sa.EmitBegin();
        n = sa.EmitEnd() - b;
      }
      if (g1 + oct < last) {
        nstate = st[g1 + oct];
        na = sc[g1 + oct];
      }
      while (g0 < last) {  // (warp-uniform; claims rise, so past `last` every later group is)
        int32_t nb = 0, nn = 0, nnstate = 0, c = 0;
        float nna = 0.f;
        if (me == 0) c = atomicAdd(&s_next, 4);
        const int32_t g2 = item.y + 8 * kAfterWarps + __shfl_sync(0xFFFFFFFFu, c, 0);
        if (g1 + oct < last) {
          const StateArcs sa = ArcsOf(g, nstate);
          nb = sa.EmitBegin();
          nn = sa.EmitEnd() - nb;
        }
        if (g2 + oct < last) {
          nnstate = st[g2 + oct];
          nna = sc[g2 + oct];
        }
        const int32_t ti = g0 + oct;
        const bool tv = ti < last;
        const unsigned pm = compact_round(tv && ol < n, b + ol, a, ti);
        // the group's tokens walked on: none of their 8 past and more arcs
        unsigned on = __ballot_sync(0xFFFFFFFFu, ol == 0 && tv && n > 8 && ((pm >> (oct * 8)) & 0xFFu) == 0u);
        while (on != 0u) {
          const int32_t src = __ffs(on) - 1;
          on &= on - 1u;
          const float ta = __shfl_sync(0xFFFFFFFFu, a, src);
          const int32_t tb = __shfl_sync(0xFFFFFFFFu, b, src), tn = __shfl_sync(0xFFFFFFFFu, n, src);
          for (int32_t j = 8 + me; j - me < tn; j += 32)
            if (compact_round(j < tn, tb + j, ta, g0 + (src >> 3)) != 0u) break;
        }
        a = na;
        b = nb;
        n = nn;
        nstate = nnstate;
        na = nna;
        g0 = g1;
        g1 = g2;
      }
    } else {
      int32_t state = 0, nstate = 0, b = 0, n = 0;
      float a = 0.f, na = 0.f;
      int32_t i1 = item.y + wid + kAfterWarps;  // the warp's next token (then i2, the one after it)
      {
        const int32_t i = item.y + wid;
        if (i < last) {
          state = st[i];
          a = sc[i];
          const StateArcs sa = ArcsOf(g, state);
          b = sa.EmitBegin();
          n = sa.EmitEnd() - b;
        }
        if (i1 < last) {
          nstate = st[i1];
          na = sc[i1];
        }
      }
      for (int32_t i = item.y + wid; i < last;) {
        int32_t nb = 0, nn = 0, nnstate = 0;
        float nna = 0.f;
        int32_t i2 = i1 + kAfterWarps;
        if constexpr (kClaim) {  // (claims rise, so a warp's tokens do: past `last`, so is every later one)
          int32_t c = 0;
          if (me == 0) c = atomicAdd(&s_next, 1);
          i2 = item.y + 2 * kAfterWarps + __shfl_sync(0xFFFFFFFFu, c, 0);
        }
        if (i1 < last) {
          const StateArcs sa = ArcsOf(g, nstate);
          nb = sa.EmitBegin();
          nn = sa.EmitEnd() - nb;
        }
        if (i2 < last) {
          nnstate = st[i2];
          nna = sc[i2];
        }
        if constexpr (kCompact) {
          for (int32_t j0 = 0; j0 < n; j0 += 32)
            if (compact_round(j0 + me < n, b + j0 + me, a, i) != 0u) break;
        } else {
          for (int32_t j0 = 0; j0 < n; j0 += 32) {
            const int32_t j = j0 + me;
            const int32_t arc = b + j;
            bool read = false, keep = false, admitted = false, past = false;
            int32_t p = -1;
            float ac = 0.f;
            if (j < n) {
              // (the weight, label and destination in one round trip, the destination's for the probe:
              // loading the label alone, then the packed word again for a candidate, put an L1 round trip
              // on the candidates' path)
              const float wt = g.arc_weight[arc];
              const ArcDestLabel dl = ArcDestAndLabel(g, arc);
              const uint16_t lab = dl.label;
              read = !sorted || lab == 0 || a + (rest + wt) >= s.pre_low;
              past = sorted && lab != 0 && !read;
              if (read) {
                ac = staged ? lps[lab] : AfterLp(s, lab);
                const float end = ArcEnd(a, wt, ac);
                if (!(end < s.pre_low)) {
                  float dscore = 0.f;  // (packed tables: the destination's score, from the probe's load)
                  if constexpr (kBits > 0) p = StateTableFind(tkeys, pos16, kBits, dl.dest);
                  else if (kOne && index_only)
                    p = StateIndexFind(reinterpret_cast<const uint16_t*>(tkeys), ws.lat_log_state + d_off, 14, dl.dest);
                  else if (kOne && bits > 0) p = StateTableFind(tkeys, pos16, bits, dl.dest);
                  else if (tslots != nullptr) p = StateTableFindPacked(tslots, tbits, dl.dest, &dscore);
                  else p = StateTableFind(tkeys, tpos, tbits, dl.dest);
                  if (p >= 0) {
                    admitted = end > s.cutoff;
                    keep = admitted || !s.filter_on ||
                           !(end < ((bits == 0 && tslots != nullptr ? dscore : dsc[p]) - output_beam) - s.slack);
                  }
                }
              }
            }
            auto make = [&](unsigned long long r) {
              ws.lat[r] = {state, arc, ac, lane};
              ws.lat_ext[r] = {k, i, p, admitted ? 1 : 0};
            };
            kept += reserve ? AfterWriteChunk(ws, keep, chunk, chunk_used, make) : AfterWrite(ws, keep, make);
            if (__ballot_sync(0xFFFFFFFFu, past) != 0u) break;
          }
        }
        state = nstate;
        a = na;
        b = nb;
        n = nn;
        nstate = nnstate;
        na = nna;
        i = i1;
        i1 = i2;
      }
    }
    if constexpr (kCompact) {
      if (qn > 0) flush(me < qn);  // (warp-uniform) the item's last queued candidates
    }
    if (me == 0 && kept > 0) atomicAdd(count, kept);
    if (prof != nullptr) phase(kAfterProfWalk);
  }
  if (reserve) AfterReleaseChunk(ws, chunk, chunk_used);
  if (prof != nullptr) {
    __syncthreads();  // (every warp's sums in)
    if (threadIdx.x == 0) {
      const unsigned long long t_end = GlobalTimer();
      unsigned long long* const c = prof + list * 8;
      for (int32_t x = 0; x < 4; ++x) atomicAdd(c + x, s_prof[x]);
      atomicAdd(c + kAfterProfActive, t_end - t_cta);
      atomicMax(c + kAfterProfEnd, t_end);
      atomicMin(prof + kAfterProfStart + list, t_cta);
    }
  }
}

// LatTailKernel — the final and redirect steps' records (the tail list): every final arc of a
// token of S_T (a redirect step: every arc, marked kRedirectArcBit), acoustic 0, into the final token
// (index 0), admitted where end > cutoff: LatPersistKernel's records of those steps. A warp takes 32
// tokens and their arcs in rounds of one arc a token, its kept records at one atomicAdd a round
// (AfterWrite); the step's count once an item a warp. (A final step's frontier is large, k2's last
// frames widen the beam: ~300,000 final records a batch of 32 on the full HLG, counted on the CPU.)
__global__ void __launch_bounds__(kAfterThreads) LatTailKernel(DeviceGraph g, Workspace ws) {
  AfterProfMark(ws, kAfterKernTail, false);
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
  const int32_t n_items = AfterItems(ws, kAfterTail);
  const int2* items = ws.lat_items + static_cast<int64_t>(kAfterTail) * ws.lat_items_cap;
  for (int32_t w = blockIdx.x; w < n_items; w += gridDim.x) {
    const int2 item = items[w];
    const LatStepLog& s = ws.lat_steps[item.x];
    const int32_t lane = item.x / ws.seg_cap, k = item.x - lane * ws.seg_cap;
    const int32_t last = min(s.src_n, item.y + ws.lat_chunk);
    int32_t kept = 0;
    for (int32_t i0 = item.y + static_cast<int32_t>(threadIdx.x & ~31u); i0 < last; i0 += blockDim.x) {  // (warp-uniform)
      const int32_t i = i0 + me;
      int32_t state = 0, b = 0, e = 0;
      float a = 0.f;
      if (i < last) {
        state = ws.lat_log_state[s.src_off + i];
        a = ws.lat_log_score[s.src_off + i];
        PhaseArcs(ArcsOf(g, state), s.phase, &b, &e);
      }
      const int32_t rounds = static_cast<int32_t>(__reduce_max_sync(0xFFFFFFFFu, static_cast<unsigned>(e - b)));
      for (int32_t x = 0; x < rounds; ++x) {
        const int32_t arc = b + x;
        const bool keep = arc < e;
        const bool admitted = keep && ArcEnd(a, g.arc_weight[arc], 0.f) > s.cutoff;
        kept += AfterWrite(ws, keep, [&](unsigned long long r) {
          ws.lat[r] = {state, s.phase == kPhaseRedirect ? (arc | kRedirectArcBit) : arc, 0.f, lane};
          ws.lat_ext[r] = {k, i, 0, admitted ? 1 : 0};
        });
      }
    }
    if (me == 0 && kept > 0) atomicAdd(ws.lat_count + item.x, kept);
  }
}

// (the measurement) LatTailKernel's end, marked by one thread launched after it on its stream (a mark
// inside the kernel made it spill)
__global__ void LatProfTailEndKernel(Workspace ws) { AfterProfMark(ws, kAfterKernTail, true); }

}  // namespace cuwfst
