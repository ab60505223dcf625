// GPU output-beam pruning of a lattice decode's records (LatticeOutputs::mode 2,
// epsilon-free graphs): the CPU LatticeBuilder's rules (reference_lattice.cc) on the
// device, so only the kept states and arcs come back (docs/design.md "Lattices on the
// GPU", docs/speed-notes.md). Nothing here depends on the GPU's frontier order:
//  * forward (k2's Viterbi forward): fwd[dst] = max over the step's records of
//    fwd[src] + score, score = acoustic + weight (float; the record's own sum, as the CPU);
//    max is order-free, so atomicMax on an order-preserving int gives the CPU's value (a
//    -0 / +0 difference can only ever give equal values in every later sum and compare);
//  * the CPU's token order, which numbers lattice states: a new frontier lists its states
//    in the order of their first admitted offer (frontier order, then arc id), so a
//    token's position is the rank, within its lane and time, of min over its admitted
//    records of (rank of the source, arc): atomicMin of that 64-bit key, then a sort per
//    time (PrRankSort);
//  * k2's windows (PruneWindows) per lane, each on what the earlier ones kept: bwd = -fwd
//    (alive) at the window's end, then times end-1 .. begin: an arc of an alive source not
//    dropped before is kept iff (score + bwd[dst]) + fwd[src] >= -output_beam, and bwd[src]
//    is the max over kept arcs (atomicMax); states of times strictly inside the window with
//    bwd = -inf die at its end (no time's states are read as sources after their time is
//    done, so deferring the CPU's per-time update to the window's end changes nothing).
// Then the kept states are numbered by (time, rank) and each row's arcs sorted by (source, arc
// id), on the device (NumberOnDevice) or on the host (lattice_number.h): the CPU's RowLattice,
// array for array.
#include "gpu_decoder.cuh"

#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "cuwfst/common.cuh"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace cuwfst {

namespace {

constexpr uint8_t kPrAdmitted = 1, kPrDropped = 2, kPrInvalid = 4;
constexpr int kPrThreads = 256;

// PrunedArcOut, PrunedStateOut: cuwfst/lattice_number.h (the host numbering reads them there)
static_assert(kLatticeNumberRedirectBit == kRedirectArcBit, "lattice_number.h's redirect bit is types.cuh's");

// The bucket (t * B + lane, or tau * B + lane) of index i in an exclusive prefix `off` of n + 1
// entries: the last bucket whose offset is <= i.
__device__ __forceinline__ int32_t BucketOf(const int64_t* off, int32_t n, int64_t i) {
  int32_t lo = 0, hi = n;  // off[lo] <= i < off[hi]
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) >> 1;
    if (off[mid] <= i) lo = mid; else hi = mid;
  }
  return lo;
}

// CUWFST_PRUNE_SIDE_DELAY_US (tests): spins for `ns` nanoseconds of the device's clock.
__global__ void PrSpinKernel(long long ns) {
  unsigned long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (static_cast<long long>(t - t0) < ns);
}

__global__ void PrFillFlags(uint8_t* flags, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    flags[i] = kPrInvalid;
}

// A place in bucket `cur`'s range for this thread's record: the warp's threads whose records
// share a bucket (__match_any_sync on its cursor's index) take one atomicAdd for the group and
// their ranks in it, instead of one atomicAdd each (the records of a step sit together in the
// arena, so a warp's records mostly share one bucket). cur < 0: no record (returns -1). Every
// thread of the warp calls it (the callers' loops are warp-uniform). The order of records
// inside a bucket changes, which nothing depends on (the forward, the windows and the counts
// are atomic max / min / adds; the numbering sorts the kept arcs, which have no ties).
// per_warp false (CUWFST_PRUNE_BUCKET=atomic, A/B runs): one atomicAdd a record, as before.
__device__ __forceinline__ int32_t WarpBucketPlace(int32_t* rec_cur, int64_t cur, bool per_warp) {
  if (!per_warp) return cur < 0 ? -1 : atomicAdd(&rec_cur[cur], 1);
  const int32_t me = static_cast<int32_t>(threadIdx.x & 31);
  const unsigned peers = __match_any_sync(0xFFFFFFFFu, static_cast<unsigned long long>(cur));
  const int32_t leader = __ffs(peers) - 1;
  int32_t first = 0;
  if (cur >= 0 && me == leader) first = atomicAdd(&rec_cur[cur], __popc(peers));
  first = __shfl_sync(0xFFFFFFFFu, first, leader);
  return cur < 0 ? -1 : first + __popc(peers & ((1u << me) - 1u));
}

// The first-admission key's arc part (PlaceRecord writes it to p_code): a record's code (its arc id,
// kRedirectArcBit on a redirected arc) as {redirect bit, the arc's place among its source
// state's arcs} in code_bits = deg_bits + 1 bits (PrCodeBits), where 2^deg_bits > the graph's
// most arcs of a state, so the place never fills deg_bits. Two records of one source token (one
// rank) order by it as by their codes: the same state's arcs, the redirected ones (bit 30)
// after the others, each kind by arc id. code_bits 32 keeps the code itself.
// With DeviceGraph::arc_src_place (the image moved arcs), p_code carries two places: the key's
// part {redirect bit, the arc's place in the source graph's order} (the order that numbers the
// states, k2's) above the image's place (place_bits = code_bits - 1 bits: the arc id back, ArcOfCode),
// 1 + 2 place_bits <= 31 bits; the key takes p_code >> PrPlaceShift.
__host__ __device__ __forceinline__ int32_t PrPlaceShift(const DeviceGraph& g, int32_t code_bits) {
  return code_bits < 32 && g.arc_src_place != nullptr ? g.place_bits : 0;
}
// code_bits 32 (CUWFST_PRUNE_CODE=arc: p_code is the arc id) with arc_src_place: the places the
// forward's key reads for the source order ({redirect bit, source place} for the arc id), else nullptr.
__host__ __device__ __forceinline__ const uint16_t* PrKeyPlaces(const DeviceGraph& g, int32_t code_bits) {
  return code_bits >= 32 ? g.arc_src_place : nullptr;
}
__device__ __forceinline__ uint32_t PrKeyCode(const DeviceGraph& g, int32_t code, int32_t src_state,
                                              int32_t code_bits) {
  if (code_bits >= 32) return static_cast<uint32_t>(code);
  if (src_state < 0) return 0u;  // (PlaceRecord calls it for valid records only)
  const uint32_t redirect = (code & kRedirectArcBit) ? 1u : 0u;
  const int32_t arc = code & (kRedirectArcBit - 1);
  const uint32_t place = static_cast<uint32_t>(arc - g.row_splits[src_state]);
  const int32_t sh = PrPlaceShift(g, code_bits);
  if (sh == 0) return (redirect << (code_bits - 1)) | place;
  const uint32_t src_place = g.arc_src_place[arc];
  return (((redirect << (code_bits - 1)) | src_place) << sh) | place;
}

// One record into its bucket's place (PrBucketKernel, IncBucketKernel): tokens as global
// indices; a record whose tokens or arc are out of range (or, with places, whose arc is not one of
// its source state's), or whose row is skipped, is kept as kPrInvalid (the passes ignore it). Past
// the bucket's end (never for consistent counts) it is dropped. Two things the forward did in its
// serial chain are done here, for every record at once: p_code holds the key's arc part
// (PrKeyCode, from the record's own source state; the output kernels turn it back into the arc id
// through the source token's state, ArcOfCode), and an admitted record gives its destination token
// its state (every admitted record into a token names the same state).
__device__ __forceinline__ void PlaceRecord(const DeviceGraph& g, const LatRecord& r, const LatRecordExt& e,
                                            int64_t bucket, int32_t place, int32_t B, bool skipped,
                                            const int64_t* rec_off, const int64_t* tok_off, int32_t* p_src,
                                            int32_t* p_dst, int32_t* p_code, float* p_ac, float* p_score,
                                            uint8_t* p_flags, int32_t* state, int32_t code_bits) {
  const int64_t pos = rec_off[bucket] + place;
  if (pos >= rec_off[bucket + 1]) return;
  const int64_t s0 = tok_off[bucket], d0 = tok_off[bucket + B];
  const int64_t ns = tok_off[bucket + 1] - s0, nd = tok_off[bucket + B + 1] - d0;
  const int32_t a = r.arc & ~kRedirectArcBit;
  const bool places = code_bits < 32;
  const bool ok = !skipped && e.src_tok >= 0 && e.src_tok < ns && e.dst_tok >= 0 && e.dst_tok < nd && r.arc >= 0 &&
                  a < g.num_arcs &&
                  (!places || (r.src_state >= 0 && r.src_state < g.num_states && a >= g.row_splits[r.src_state] &&
                               a < g.row_splits[r.src_state + 1]));
  p_src[pos] = static_cast<int32_t>(s0 + (ok ? e.src_tok : 0));
  p_dst[pos] = static_cast<int32_t>(d0 + (ok ? e.dst_tok : 0));
  p_code[pos] = !places ? r.arc : ok ? static_cast<int32_t>(PrKeyCode(g, r.arc, r.src_state, code_bits)) : 0;
  if (ok && e.admitted) state[d0 + e.dst_tok] = (r.arc & kRedirectArcBit) ? g.num_states - 1 : ArcDest(g, a);
  p_ac[pos] = r.acoustic;
  p_score[pos] = ok ? r.acoustic + g.arc_weight[a] : 0.f;  // k2's order: acoustic + graph
  p_flags[pos] = ok ? (e.admitted ? kPrAdmitted : 0) : kPrInvalid;
}

// Records into buckets (t, lane), t-major, with tokens as global indices. (The loop is
// warp-uniform for WarpBucketPlace: blockDim.x is a multiple of 32.)
__global__ void PrBucketKernel(DeviceGraph g, const LatRecord* lat, const LatRecordExt* ext, int64_t N, int32_t B,
                               int32_t Tmax, const int64_t* rec_off, int32_t* rec_cur, const int64_t* tok_off,
                               const uint8_t* skip, int32_t* p_src, int32_t* p_dst, int32_t* p_code, float* p_ac,
                               float* p_score, uint8_t* p_flags, bool per_warp, int32_t* state, int32_t code_bits) {
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + (threadIdx.x & ~31u); w < N;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = w + (threadIdx.x & 31);
    LatRecord r{};
    LatRecordExt e{};
    int32_t bucket = -1;
    if (i < N) {
      r = lat[i];
      e = ext[i];
      if (r.lane >= 0 && r.lane < B && e.t >= 0 && e.t < Tmax) bucket = e.t * B + r.lane;
    }
    const int32_t place = WarpBucketPlace(rec_cur, bucket, per_warp);
    if (place < 0) continue;
    PlaceRecord(g, r, e, bucket, place, B, skip[r.lane] != 0, rec_off, tok_off, p_src, p_dst, p_code, p_ac, p_score,
                p_flags, state, code_bits);
  }
}

__global__ void PrInitTokens(int64_t M, int32_t* fwd, unsigned long long* key, uint8_t* alive, int32_t* rank,
                             int32_t* state) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < M;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    fwd[i] = FloatToOrderedInt(-INFINITY);
    key[i] = ~0ull;
    alive[i] = 1;
    rank[i] = 0x7FFFFFFF;
    state[i] = -1;
  }
}

// The start token of every lane (time 0): forward 0, rank 0.
__global__ void PrInitStart(DeviceGraph g, int32_t B, const int64_t* tok_off, int32_t* fwd, int32_t* rank,
                            int32_t* state) {
  const int32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= B || tok_off[b + 1] - tok_off[b] < 1) return;
  const int64_t tok = tok_off[b];
  fwd[tok] = FloatToOrderedInt(0.f);
  rank[tok] = 0;
  state[tok] = g.start_state;
}

// Time t's records: forward scores and the first-admission keys of time t + 1's tokens.
// One record of time t into the forward (PrForwardKernel's and PrLaneForwardKernel's): p_code is
// the key's arc part already (PlaceRecord), so no graph read is left here.
__device__ __forceinline__ void PrForwardRecord(int64_t i, const int32_t* p_src, const int32_t* p_dst,
                                                const int32_t* p_code, const float* p_score, const uint8_t* p_flags,
                                                int32_t* fwd, unsigned long long* key, const int32_t* rank,
                                                int32_t code_bits, int32_t pshift, const uint16_t* key_places) {
  const uint8_t f = p_flags[i];
  if (f & kPrInvalid) return;
  const int32_t s = p_src[i], d = p_dst[i];
  const float v = OrderedIntToFloat(fwd[s]) + p_score[i];
  atomicMax(&fwd[d], FloatToOrderedInt(v));
  if (f & kPrAdmitted) {  // (pshift: PrPlaceShift, the key's part of a code with both places;
    // key_places: PrKeyPlaces, the arc id's source place under its redirect bit)
    const int32_t c = p_code[i];
    const uint32_t part = key_places != nullptr
                              ? static_cast<uint32_t>((c & kRedirectArcBit) | key_places[c & ~kRedirectArcBit])
                              : static_cast<uint32_t>(c) >> pshift;
    atomicMin(&key[d], (static_cast<unsigned long long>(static_cast<uint32_t>(rank[s])) << code_bits) | part);
  }
}

// The arc id of a record from its p_code (PlaceRecord) and its source token's state: the inverse
// of PrKeyCode (code_bits 32: p_code is the arc id).
__device__ __forceinline__ int32_t ArcOfCode(const DeviceGraph& g, int32_t code, int32_t src_state,
                                             int32_t code_bits) {
  if (code_bits >= 32) return code;
  const int32_t sh = PrPlaceShift(g, code_bits);
  const uint32_t c = static_cast<uint32_t>(code), k = c >> sh;  // k: the key's part
  const int32_t place = static_cast<int32_t>(sh ? c & ((1u << sh) - 1u) : k & ((1u << (code_bits - 1)) - 1u));
  const int32_t arc = src_state >= 0 && src_state < g.num_states ? g.row_splits[src_state] + place : 0;
  return ((k >> (code_bits - 1)) & 1u) ? (arc | kRedirectArcBit) : arc;
}

// code_bits: PrKeyCode's (the keys rank << code_bits | code).
__global__ void PrForwardKernel(int64_t begin, int64_t end, const int32_t* p_src, const int32_t* p_dst,
                                const int32_t* p_code, const float* p_score, const uint8_t* p_flags, int32_t* fwd,
                                unsigned long long* key, const int32_t* rank, int32_t code_bits, int32_t pshift,
                                const uint16_t* key_places) {
  for (int64_t i = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < end;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    PrForwardRecord(i, p_src, p_dst, p_code, p_score, p_flags, fwd, key, rank, code_bits, pshift, key_places);
}

// A time's keys for one device-wide radix sort (PruneLattice, CUWFST_PRUNE_SORT=radix): the
// lane above the key's used bits, so the sorted order is lane by lane and within a lane the
// segmented sort's; a key past them (a token no admitted record reached: a skipped lane's)
// is clamped to the lane's largest. vals: the tokens' global indices (PrIota's).
__global__ void PrLaneKeys(int32_t B, int64_t base, const int32_t* seg, const unsigned long long* key,
                           unsigned long long* ck, int32_t* vals, int32_t shift) {
  const int32_t b = blockIdx.y;
  const unsigned long long mask = (1ull << shift) - 1ull;
  for (int32_t j = seg[b] + blockIdx.x * blockDim.x + threadIdx.x; j < seg[b + 1]; j += gridDim.x * blockDim.x) {
    const unsigned long long k = key[base + j];
    ck[j] = (static_cast<unsigned long long>(b) << shift) | (k < mask ? k : mask);
    vals[j] = static_cast<int32_t>(base + j);
  }
}

__global__ void PrIota(int32_t* v, int64_t base, int32_t m) {
  for (int32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x)
    v[j] = static_cast<int32_t>(base + j);
}

// The rank of each time in shared memory, one CTA a lane (PrRankSort's block path, the default
// where every lane of the time holds at most kPrBlockRankCap tokens): the lane's keys, clamped
// as PrLaneKeys clamps them, each packed with its index as clamped << kIdxBits | index
// (distinct, so no order depends on the sort's stability), sorted by cub::BlockRadixSort; the
// token of sorted place p gets rank p. That is the radix path's order exactly: it sorts the same
// clamped keys stably, its values in index order. One launch a time instead of PrLaneKeys', the
// device-wide sort's and PrRankKernel's. Padding (places past the lane's tokens) sorts last:
// (mask + 1) << kIdxBits is above every packed key. Three sizes (PrBlockRank): kThreads x kItems
// slots, kIdxBits bits of index; the temporary storage is dynamic shared memory (the largest
// size needs more than the 48 KiB a kernel gets without asking: PrRankSort asks).
constexpr int kPrBlockRankCap = 8192;
template <int kThreads, int kItems, int kIdxBits>
struct PrBlockRank {
  static_assert(kThreads * kItems <= (1 << kIdxBits), "a lane's places fit the index bits");
  static constexpr int kSlots = kThreads * kItems;
  static constexpr int kThreadsOf = kThreads, kItemsOf = kItems, kIdxBitsOf = kIdxBits;
  using Sort = cub::BlockRadixSort<unsigned long long, kThreads, kItems, cub::NullType, 5>;
  static constexpr size_t kSmem = sizeof(typename Sort::TempStorage);
};
using PrBlockRank1K = PrBlockRank<256, 4, 10>;
using PrBlockRank4K = PrBlockRank<512, 8, 12>;
using PrBlockRank8K = PrBlockRank<1024, 8, 13>;
static_assert(PrBlockRank8K::kSlots == kPrBlockRankCap, "the largest size is the cap");
template <int kThreads, int kItems, int kIdxBits>
__global__ void __launch_bounds__(kThreads)
PrBlockRankKernel(int64_t base, const int32_t* seg, const unsigned long long* key, int32_t* rank, int32_t shift) {
  using R = PrBlockRank<kThreads, kItems, kIdxBits>;
  extern __shared__ __align__(16) unsigned char pr_rank_smem[];
  auto& temp = *reinterpret_cast<typename R::Sort::TempStorage*>(pr_rank_smem);
  const int32_t b = blockIdx.x;
  const int32_t s0 = seg[b], n = seg[b + 1] - s0;
  if (n <= 0 || n > R::kSlots) return;  // (the host sends no lane past the size)
  const unsigned long long mask = (1ull << shift) - 1ull;
  const unsigned long long pad = (mask + 1ull) << kIdxBits;
  unsigned long long k[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int32_t i = j * kThreads + static_cast<int32_t>(threadIdx.x);  // striped loads: the index is in the key
    if (i < n) {
      const unsigned long long v = key[base + s0 + i];
      k[j] = ((v < mask ? v : mask) << kIdxBits) | static_cast<unsigned long long>(i);
    } else {
      k[j] = pad;
    }
  }
  typename R::Sort(temp).Sort(k, 0, shift + 1 + kIdxBits);  // blocked out: thread t holds places t * kItems + j
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int32_t p = static_cast<int32_t>(threadIdx.x) * kItems + j;
    if (p < n) rank[base + s0 + static_cast<int64_t>(k[j] & ((1ull << kIdxBits) - 1ull))] = p;
  }
}
template <class R>
void LaunchBlockRank(cudaStream_t s, int32_t B, int64_t base, const int32_t* seg, const unsigned long long* key,
                     int32_t* rank, int32_t shift) {
  PrBlockRankKernel<R::kThreadsOf, R::kItemsOf, R::kIdxBitsOf><<<B, R::kThreadsOf, R::kSmem, s>>>(base, seg, key, rank,
                                                                                               shift);
}

// The lane rank's group of a key (PrLaneRank): its source's rank, or P for a key at or past the
// clamp or whose rank is not below P.
__device__ __forceinline__ int32_t PrLaneGroup(unsigned long long k, unsigned long long mask, int32_t code_bits,
                                                int32_t P) {
  return k < mask && (k >> code_bits) < static_cast<unsigned long long>(P) ? static_cast<int32_t>(k >> code_bits) : P;
}

// ---- The forward, the ranks and the windows per lane (the default; CUWFST_PRUNE_SORT=lanes):
// one CTA a lane walks every time of a batch (or a bounded pass) in one launch, with
// __syncthreads between the phases, where the grid-wide path (CUWFST_PRUNE_SORT=block etc.)
// launches a forward and a rank a time and a backward a window's time. Lanes never share a token
// or a record, so a lane's times need no other lane's: the per-lane order of the work is the
// grid-wide path's, and every value is the same (the forward's max and min are order-free; the
// ranks are the block sort's order, below; the windows run in their order per lane). Arrays
// written by atomics or stores in one phase are read by the CTA's threads after the barrier (no
// read-only cache path: nothing here is __restrict__).
constexpr int kPrLaneThreads = 1024;  // the lane kernels' CTA
constexpr int kPrLaneBatch = 4;  // records a thread whose loads go out together (the windows kernel's backward)
using PrLaneScan = cub::BlockScan<int32_t, kPrLaneThreads>;
constexpr size_t kPrLaneScanBytes = (sizeof(PrLaneScan::TempStorage) + 15) / 16 * 16;
// shared memory of the lane rank for lane-times and sources up to `cap` tokens: the scan's storage,
// a flag word, cnt [cap + 1], and grp, gcode, bits [cap] each
constexpr size_t PrLaneSmem(int32_t cap) {
  return kPrLaneScanBytes + 16 + sizeof(int32_t) * (4 * static_cast<size_t>(cap) + 1);
}
static_assert(PrLaneSmem(2048) <= 48 * 1024, "the smaller size needs no attribute");
// The lane kernels' phase clocks (CUWFST_PRUNE_SPLIT: SM cycles summed over the lanes, thread 0's
// view between barriers): forward, count + scan, scatter, in-group ranks, others; windows' init,
// backward, end.
enum PrLaneClock { kClkForward, kClkCount, kClkScatter, kClkGroup, kClkOthers, kClkWinInit, kClkWinBack, kClkWinEnd,
                   kPrLaneClocks };
struct PrLaneClk {
  unsigned long long* out;
  long long last = 0, acc[kPrLaneClocks] = {};
  __device__ explicit PrLaneClk(unsigned long long* o) : out(o) {
    if (out && threadIdx.x == 0) last = clock64();
  }
  __device__ void Mark(int k) {  // after a barrier
    if (!out || threadIdx.x != 0) return;
    const long long now = clock64();
    acc[k] += now - last;
    last = now;
  }
  __device__ void Flush() {
    if (!out || threadIdx.x != 0) return;
    for (int k = 0; k < kPrLaneClocks; ++k)
      if (acc[k]) atomicAdd(&out[k], static_cast<unsigned long long>(acc[k]));
  }
};

// The ranks of one lane-time's n tokens (keys kb, ranks out to rb) whose sources are the time
// before's P tokens, without a sort. A token's key is rank(p) << code_bits | code, p its
// first-admitting source (rank below P), so the block sort's order (clamped key, then index) is by
// p, then by key within p's children, then by index; a key at or past the clamp (`mask`: a token
// no admitted record reached) or whose p is not below P orders after every other, by index. So:
// the children of each p counted (cnt[0 .. P], cnt[P] the others), an exclusive scan, the tokens
// scattered into their p's group (cnt[p] then ends it), each token ranked as its group's start
// plus the members before it (a thread a place of the groups, not a token: a warp's threads then
// read one group's codes), the others by a scan of their flags in index order. Arrays: cnt
// [P + 1], and grp, gcode (the key's low 32 bits: within a group only the code differs) and bits
// [n] in shared memory or, past its size, in global scratch. In-group ranks: a group of at most
// `big` members compares its members' codes (then indices); a larger one (code_bits <= 13 only)
// sets one bit a member in a bitmap of 2^code_bits bits at its own places [start, start + words)
// (words <= big < its size: groups never overlap) and counts the bits below its own. Two members
// of one group with one code (impossible: one source's arc reaches one token) would share a bit:
// a lane-time where that happens compares instead. Every thread calls it; it ends with a barrier.
__device__ void PrLaneRank(const unsigned long long* kb, int32_t* rb, int32_t n, int32_t P, unsigned long long mask,
                           int32_t code_bits, int32_t* cnt, int32_t* grp, uint32_t* gcode, uint32_t* bits,
                           int32_t* flag, PrLaneScan::TempStorage& scan, PrLaneClk& clk) {
  const int32_t tid = static_cast<int32_t>(threadIdx.x);
  const int32_t words = code_bits <= 13 ? max(1, (1 << code_bits) >> 5) : 0;
  const int32_t big = words > 0 ? max(words, 16) : INT32_MAX;
  for (int32_t j = tid; j <= P; j += kPrLaneThreads) cnt[j] = 0;
  if (tid == 0) *flag = 0;
  __syncthreads();
  for (int32_t i = tid; i < n; i += kPrLaneThreads) atomicAdd(&cnt[PrLaneGroup(kb[i], mask, code_bits, P)], 1);
  __syncthreads();
  {  // exclusive scan of cnt[0 .. P] in place: each thread a contiguous chunk
    const int32_t len = P + 1, chunk = (len + kPrLaneThreads - 1) / kPrLaneThreads;
    const int32_t c0 = min(len, tid * chunk), c1 = min(len, c0 + chunk);
    int32_t sum = 0;
    for (int32_t c = c0; c < c1; ++c) sum += cnt[c];
    int32_t pre = 0;
    PrLaneScan(scan).ExclusiveSum(sum, pre);
    for (int32_t c = c0; c < c1; ++c) {
      const int32_t v = cnt[c];
      cnt[c] = pre;
      pre += v;
    }
  }
  __syncthreads();
  clk.Mark(kClkCount);
  for (int32_t i = tid; i < n; i += kPrLaneThreads) {
    const unsigned long long k = kb[i];
    const int32_t q = atomicAdd(&cnt[PrLaneGroup(k, mask, code_bits, P)], 1);  // cnt[p] ends p's group after this
    grp[q] = i;
    gcode[q] = static_cast<uint32_t>(k);
    bits[q] = 0u;
  }
  __syncthreads();
  clk.Mark(kClkScatter);
  if (words > 0) {
    for (int32_t i = tid; i < n; i += kPrLaneThreads) {
      const unsigned long long k = kb[i];
      const int32_t p = PrLaneGroup(k, mask, code_bits, P);
      if (p == P) continue;
      const int32_t lo = p > 0 ? cnt[p - 1] : 0;
      if (cnt[p] - lo <= big) continue;
      const uint32_t c = static_cast<uint32_t>(k) & ((1u << code_bits) - 1u), m = 1u << (c & 31u);
      if (atomicOr(&bits[lo + static_cast<int32_t>(c >> 5)], m) & m) *flag = 1;
    }
    __syncthreads();
  }
  const bool bitmaps = words > 0 && *flag == 0;  // (block-uniform)
  // in the groups' order: a thread a place (grp[qq] = its token), so a warp's threads are mostly
  // one group's members, and their reads of the group's codes or bitmap words are broadcasts
  for (int32_t qq = tid; qq < n; qq += kPrLaneThreads) {
    const int32_t i = grp[qq];
    const unsigned long long k = kb[i];
    const int32_t p = PrLaneGroup(k, mask, code_bits, P);
    if (p == P) continue;
    const int32_t lo = p > 0 ? cnt[p - 1] : 0, hi = cnt[p];
    int32_t before = 0;
    if (bitmaps && hi - lo > big) {
      const uint32_t c = static_cast<uint32_t>(k) & ((1u << code_bits) - 1u);
      const int32_t w = static_cast<int32_t>(c >> 5);
      for (int32_t j = 0; j < w; ++j) before += __popc(bits[lo + j]);
      before += __popc(bits[lo + w] & ((1u << (c & 31u)) - 1u));
    } else {
      const uint32_t c = static_cast<uint32_t>(k);
      for (int32_t q = lo; q < hi; ++q) {
        const uint32_t co = gcode[q];
        before += (co < c || (co == c && grp[q] < i)) ? 1 : 0;
      }
    }
    rb[i] = lo + before;
  }
  clk.Mark(kClkGroup);
  const int32_t others = P > 0 ? cnt[P - 1] : 0;  // where the others start (block-uniform)
  if (cnt[P] != others) {
    // the others by index, a tile of the CTA's threads at a time
    int32_t done = 0;
    for (int32_t t0 = 0; t0 < n; t0 += kPrLaneThreads) {
      const int32_t i = t0 + tid;
      const bool other = i < n && PrLaneGroup(kb[i], mask, code_bits, P) == P;
      int32_t pre = 0, total = 0;
      __syncthreads();  // (the scan's storage is used again)
      PrLaneScan(scan).ExclusiveSum(other ? 1 : 0, pre, total);
      if (other) rb[i] = others + done + pre;
      done += total;
    }
  }
  __syncthreads();
  clk.Mark(kClkOthers);
}

// Steps [ta, tb) of every lane, one CTA a lane (blockIdx.x): each step's forward over the lane's
// records (bucket (t - R) * B + b of rec_off), then the ranks of time t + 1's tokens (bucket
// (t + 1 - R) * B + b of tok_off), from the ranks of time t (an earlier step's, a carried pass's,
// or the start's). Lane-times and their sources up to `cap` tokens rank in shared memory, larger
// ones in global scratch: g_cnt (at tok_off[k] + k: bucket k's P + 1 entries), and g_grp, g_code,
// g_bits (at a token's index). clk: PrLaneClk's sums, or nullptr.
__global__ void __launch_bounds__(kPrLaneThreads)
PrLaneForwardKernel(DeviceGraph g, int32_t B, int32_t R, int32_t ta, int32_t tb, const int64_t* tok_off,
                    const int64_t* rec_off, const int32_t* p_src, const int32_t* p_dst, const int32_t* p_code,
                    const float* p_score, const uint8_t* p_flags, int32_t* fwd, unsigned long long* key,
                    int32_t* rank, int32_t code_bits, int32_t shift, int32_t cap, int32_t* g_cnt,
                    int32_t* g_grp, uint32_t* g_code, uint32_t* g_bits, unsigned long long* clk_out) {
  extern __shared__ __align__(16) unsigned char pr_lane_smem[];
  auto& scan = *reinterpret_cast<PrLaneScan::TempStorage*>(pr_lane_smem);
  int32_t* flag = reinterpret_cast<int32_t*>(pr_lane_smem + kPrLaneScanBytes);
  int32_t* s_cnt = reinterpret_cast<int32_t*>(pr_lane_smem + kPrLaneScanBytes + 16);  // [cap + 1]
  int32_t* s_grp = s_cnt + cap + 1;                                                   // [cap]
  uint32_t* s_code = reinterpret_cast<uint32_t*>(s_grp + cap);                        // [cap]
  uint32_t* s_bits = s_code + cap;                                                    // [cap]
  PrLaneClk clk(clk_out);
  const int32_t b = blockIdx.x;
  const unsigned long long mask = (1ull << shift) - 1ull;
  for (int32_t t = ta; t < tb; ++t) {
    const int64_t kr = static_cast<int64_t>(t - R) * B + b;
    const int64_t r1 = rec_off[kr + 1];
    // (one record a thread at a time: batching the loads as the windows kernel does needs more
    // than the 64 registers a thread of 1,024 has, and at 512 threads, where it fits, the ranks'
    // phases lost more than the forward won: s47)
    for (int64_t i = rec_off[kr] + threadIdx.x; i < r1; i += kPrLaneThreads)
      PrForwardRecord(i, p_src, p_dst, p_code, p_score, p_flags, fwd, key, rank, code_bits,
                      PrPlaceShift(g, code_bits), PrKeyPlaces(g, code_bits));
    __syncthreads();
    clk.Mark(kClkForward);
    const int64_t k1 = kr + B, k0 = kr;  // token buckets of times t + 1 and t
    const int64_t base1 = tok_off[k1];
    const int32_t n = static_cast<int32_t>(tok_off[k1 + 1] - base1);
    const int32_t P = static_cast<int32_t>(tok_off[k0 + 1] - tok_off[k0]);
    if (n == 0) continue;
    if (n <= cap && P <= cap)
      PrLaneRank(key + base1, rank + base1, n, P, mask, code_bits, s_cnt, s_grp, s_code, s_bits, flag, scan, clk);
    else
      PrLaneRank(key + base1, rank + base1, n, P, mask, code_bits, g_cnt + tok_off[k0] + k0, g_grp + base1,
                 g_code + base1, g_bits + base1, flag, scan, clk);
  }
  clk.Flush();
}

// Every window of every lane in order, one CTA a lane: window k (begin win_begin[k], end
// win_end[k * B + b], -1 where lane b has none; both relative to the token buckets' time 0) as
// PrWindowInit, PrBackwardKernel time by time and PrWindowEnd do it for all lanes at once.
__global__ void __launch_bounds__(kPrLaneThreads)
PrLaneWindowsKernel(int32_t B, int32_t K, const int32_t* win_begin, const int32_t* win_end, const int64_t* tok_off,
                    const int64_t* rec_off, const int32_t* p_src, const int32_t* p_dst, const float* p_score,
                    uint8_t* p_flags, const int32_t* fwd, uint8_t* alive, int32_t* bwd, float neg_beam,
                    unsigned long long* clk_out) {
  const int32_t b = blockIdx.x;
  PrLaneClk clk(clk_out);
  for (int32_t k = 0; k < K; ++k) {
    const int32_t E = win_end[static_cast<int64_t>(k) * B + b], begin = win_begin[k];
    if (E < 0) continue;
    for (int32_t tau = begin; tau <= E; ++tau) {
      const int64_t kt = static_cast<int64_t>(tau) * B + b;
      const int64_t t1 = tok_off[kt + 1];
      for (int64_t i = tok_off[kt] + threadIdx.x; i < t1; i += kPrLaneThreads)
        bwd[i] = FloatToOrderedInt(tau == E && alive[i] ? -OrderedIntToFloat(fwd[i]) : -INFINITY);
    }
    __syncthreads();
    clk.Mark(kClkWinInit);
    for (int32_t t = E - 1; t >= begin; --t) {
      const int64_t kr = static_cast<int64_t>(t) * B + b;
      const int64_t r1 = rec_off[kr + 1];
      // (kPrLaneBatch records a thread: the records' fields, then the gathers, then the updates;
      // the gathers read time t + 1's backward and time t's alive bits and forward scores, the
      // updates write time t's backward and the records' own flags)
      const int64_t r0 = rec_off[kr];
      const int32_t nr = static_cast<int32_t>(r1 - r0);
      uint8_t* lf = p_flags + r0;
      const int32_t *ls = p_src + r0, *ld = p_dst + r0;
      const float* lsc = p_score + r0;
      for (int32_t i0 = static_cast<int32_t>(threadIdx.x); i0 < nr; i0 += kPrLaneBatch * kPrLaneThreads) {
        uint8_t f[kPrLaneBatch], al[kPrLaneBatch];
        int32_t src[kPrLaneBatch], dst[kPrLaneBatch], bd[kPrLaneBatch], fs[kPrLaneBatch];
        float sc[kPrLaneBatch];
#pragma unroll
        for (int j = 0; j < kPrLaneBatch; ++j) {
          const int32_t i = i0 + j * kPrLaneThreads;
          f[j] = i < nr ? lf[i] : kPrInvalid;
          if (!(f[j] & (kPrInvalid | kPrDropped))) {
            src[j] = ls[i];
            dst[j] = ld[i];
            sc[j] = lsc[i];
          }
        }
#pragma unroll
        for (int j = 0; j < kPrLaneBatch; ++j)
          if (!(f[j] & (kPrInvalid | kPrDropped))) {
            al[j] = alive[src[j]];
            bd[j] = bwd[dst[j]];
            fs[j] = fwd[src[j]];
          }
#pragma unroll
        for (int j = 0; j < kPrLaneBatch; ++j) {
          if ((f[j] & (kPrInvalid | kPrDropped)) || !al[j]) continue;
          const float arc_bwd = sc[j] + OrderedIntToFloat(bd[j]);  // k2: arc_loglike + backward[dest]
          if (arc_bwd + OrderedIntToFloat(fs[j]) >= neg_beam)
            atomicMax(&bwd[src[j]], FloatToOrderedInt(arc_bwd));
          else
            lf[i0 + j * kPrLaneThreads] = f[j] | kPrDropped;
        }
      }
      __syncthreads();
    }
    clk.Mark(kClkWinBack);
    for (int32_t tau = begin + 1; tau < E; ++tau) {
      const int64_t kt = static_cast<int64_t>(tau) * B + b;
      const int64_t t1 = tok_off[kt + 1];
      for (int64_t i = tok_off[kt] + threadIdx.x; i < t1; i += kPrLaneThreads)
        if (OrderedIntToFloat(bwd[i]) == -INFINITY) alive[i] = 0;
    }
    __syncthreads();
    clk.Mark(kClkWinEnd);
  }
  clk.Flush();
}

// rank[token] = its position within its lane's segment of the sorted keys.
__global__ void PrRankKernel(const int32_t* seg, const int32_t* sorted_tok, int32_t* rank) {
  const int32_t b = blockIdx.y;
  const int32_t s0 = seg[b], s1 = seg[b + 1];
  for (int32_t j = s0 + blockIdx.x * blockDim.x + threadIdx.x; j < s1; j += gridDim.x * blockDim.x)
    rank[sorted_tok[j]] = j - s0;
}

// A window's start for every lane in it (win_end[b] >= 0): bwd = -fwd on the alive tokens of
// time E (-inf on the others), -inf on times [begin, E).
__global__ void PrWindowInit(int32_t B, int32_t begin, const int32_t* win_end, const int64_t* tok_off,
                             const int32_t* fwd, const uint8_t* alive, int32_t* bwd) {
  const int32_t b = blockIdx.y;
  const int32_t E = win_end[b];
  if (E < 0) return;
  for (int32_t tau = begin; tau <= E; ++tau) {
    const int64_t t0 = tok_off[static_cast<int64_t>(tau) * B + b], t1 = tok_off[static_cast<int64_t>(tau) * B + b + 1];
    for (int64_t i = t0 + blockIdx.x * blockDim.x + threadIdx.x; i < t1; i += gridDim.x * blockDim.x)
      bwd[i] = FloatToOrderedInt(tau == E && alive[i] ? -OrderedIntToFloat(fwd[i]) : -INFINITY);
  }
}

// Time t of a window, the lanes whose window holds it (t < win_end[b]).
__global__ void PrBackwardKernel(int32_t t, int32_t B, const int32_t* win_end, const int64_t* rec_off,
                                 const int32_t* p_src, const int32_t* p_dst, const float* p_score,
                                 uint8_t* p_flags, const int32_t* fwd, const uint8_t* alive, int32_t* bwd,
                                 float neg_beam) {
  const int32_t b = blockIdx.y;
  if (t >= win_end[b]) return;  // also -1: not in this window
  const int64_t r0 = rec_off[static_cast<int64_t>(t) * B + b], r1 = rec_off[static_cast<int64_t>(t) * B + b + 1];
  for (int64_t i = r0 + blockIdx.x * blockDim.x + threadIdx.x; i < r1; i += gridDim.x * blockDim.x) {
    const uint8_t f = p_flags[i];
    if (f & (kPrInvalid | kPrDropped)) continue;
    const int32_t s = p_src[i];
    if (!alive[s]) continue;
    const float arc_bwd = p_score[i] + OrderedIntToFloat(bwd[p_dst[i]]);  // k2: arc_loglike + backward[dest]
    if (arc_bwd + OrderedIntToFloat(fwd[s]) >= neg_beam)
      atomicMax(&bwd[s], FloatToOrderedInt(arc_bwd));
    else
      p_flags[i] = f | kPrDropped;
  }
}

// A window's end: states of times strictly inside it without a kept arc die.
__global__ void PrWindowEnd(int32_t B, int32_t begin, const int32_t* win_end, const int64_t* tok_off,
                            const int32_t* bwd, uint8_t* alive) {
  const int32_t b = blockIdx.y;
  const int32_t E = win_end[b];
  if (E < 0) return;
  for (int32_t tau = begin + 1; tau < E; ++tau) {
    const int64_t t0 = tok_off[static_cast<int64_t>(tau) * B + b], t1 = tok_off[static_cast<int64_t>(tau) * B + b + 1];
    for (int64_t i = t0 + blockIdx.x * blockDim.x + threadIdx.x; i < t1; i += gridDim.x * blockDim.x)
      if (OrderedIntToFloat(bwd[i]) == -INFINITY) alive[i] = 0;
  }
}

// The kept arcs (counted, or written at an atomic cursor).
__global__ void PrOutArcs(DeviceGraph g, int64_t N, int32_t nb, const int64_t* rec_off, int32_t B,
                          const int32_t* p_src, const int32_t* p_dst, const int32_t* p_code, const float* p_ac,
                          const float* p_score, const uint8_t* p_flags, const uint8_t* alive,
                          unsigned long long* cursor, PrunedArcOut* out, unsigned long long cap,
                          const int32_t* state, int32_t code_bits) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (p_flags[i] & (kPrInvalid | kPrDropped)) continue;
    const int32_t s = p_src[i];
    if (!alive[s]) continue;
    const unsigned long long k = atomicAdd(cursor, 1ull);
    if (out == nullptr || k >= cap) continue;
    const int32_t bucket = BucketOf(rec_off, nb, i);
    const int32_t code = ArcOfCode(g, p_code[i], state[s], code_bits);
    out[k] = {bucket % B, bucket / B, s, p_dst[i], code, p_ac[i], g.arc_weight[code & ~kRedirectArcBit], p_score[i]};
  }
}

// The kept states of times 0 .. T_b of every lane.
__global__ void PrOutStates(int64_t M, int32_t nb, const int64_t* tok_off, int32_t B, const int32_t* last_tau,
                            const uint8_t* alive, const int32_t* rank, const int32_t* state,
                            unsigned long long* cursor, PrunedStateOut* out, unsigned long long cap) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < M;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!alive[i]) continue;
    const int32_t bucket = BucketOf(tok_off, nb, i);
    const int32_t lane = bucket % B, tau = bucket / B;
    if (tau > last_tau[lane]) continue;
    const unsigned long long k = atomicAdd(cursor, 1ull);
    if (out == nullptr || k >= cap) continue;
    out[k] = {lane, tau, rank[i], state[i], static_cast<int32_t>(i)};
  }
}

// ---- bounded lattice memory (LatticeOutputs::chunk > 0): the incremental pruning's kernels.
// Layout of a pass: tokens of times [R, t1] and records of times [R, t1) in buckets
// (time - R) * B + lane, as PruneLattice's with a time base R.

// The run's records (arena [0, n)) of steps [t0, t1) into their buckets; rec_cur counts
// the new buckets only (from (t0 - R) * B). As PrBucketKernel otherwise (no row is skipped
// here: overflowed rows are dropped by IncFinish; their records are checked all the same).
__global__ void IncBucketKernel(DeviceGraph g, const LatRecord* lat, const LatRecordExt* ext, int64_t n, int32_t B,
                                int32_t R, int32_t t0, int32_t t1, const int64_t* rec_off, int32_t* rec_cur,
                                const int64_t* tok_off, int32_t* p_src, int32_t* p_dst, int32_t* p_code,
                                float* p_ac, float* p_score, uint8_t* p_flags, bool per_warp, int32_t* state,
                                int32_t code_bits) {
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + (threadIdx.x & ~31u); w < n;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {  // warp-uniform (WarpBucketPlace)
    const int64_t i = w + (threadIdx.x & 31);
    LatRecord r{};
    LatRecordExt e{};
    int64_t bucket = -1;
    if (i < n) {
      r = lat[i];
      e = ext[i];
      if (r.lane >= 0 && r.lane < B && e.t >= t0 && e.t < t1) bucket = static_cast<int64_t>(e.t - R) * B + r.lane;
    }
    const int32_t place =
        WarpBucketPlace(rec_cur, bucket < 0 ? -1 : bucket - static_cast<int64_t>(t0 - R) * B, per_warp);
    if (place < 0) continue;
    PlaceRecord(g, r, e, bucket, place, B, false, rec_off, tok_off, p_src, p_dst, p_code, p_ac, p_score, p_flags, state,
                code_bits);
  }
}

// The carried tokens (new buckets [0, nb)) from the last pass's buffers: new bucket k is
// old bucket k + shift (shift = (R - R_old) * B); each keeps its size or became empty.
__global__ void IncMoveTokens(int64_t n, int32_t nb, int64_t shift, const int64_t* new_off, const int64_t* old_off,
                              const int32_t* fwd0, const int32_t* rank0, const uint8_t* alive0,
                              const int32_t* state0, int32_t* fwd1, int32_t* rank1, uint8_t* alive1,
                              int32_t* state1) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t k = BucketOf(new_off, nb, i);
    const int64_t j = old_off[k + shift] + (i - new_off[k]);
    fwd1[i] = fwd0[j];
    rank1[i] = rank0[j];
    alive1[i] = alive0[j];
    state1[i] = state0[j];
  }
}

// The carried records, their tokens renumbered into the new layout (a record of bucket k
// leaves a token of token bucket k and enters one of k + B).
__global__ void IncMoveRecords(int64_t n, int32_t nb, int32_t B, int64_t shift, const int64_t* new_rec,
                               const int64_t* old_rec, const int64_t* new_tok, const int64_t* old_tok,
                               const int32_t* src0, const int32_t* dst0, const int32_t* code0, const float* ac0,
                               const float* score0, const uint8_t* flags0, int32_t* src1, int32_t* dst1,
                               int32_t* code1, float* ac1, float* score1, uint8_t* flags1) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t k = BucketOf(new_rec, nb, i);
    const int64_t j = old_rec[k + shift] + (i - new_rec[k]);
    src1[i] = static_cast<int32_t>(new_tok[k] + (src0[j] - old_tok[k + shift]));
    dst1[i] = static_cast<int32_t>(new_tok[k + B] + (dst0[j] - old_tok[k + shift + B]));
    code1[i] = code0[j];
    ac1[i] = ac0[j];
    score1[i] = score0[j];
    flags1[i] = flags0[j];
  }
}

// The kept arcs of times [lo[lane], hi[lane]) (final: no later window reaches them), with
// their source's and destination's ranks (-1 for a destination not alive: a bug the host
// reports), counted or written at an atomic cursor.
__global__ void IncEmitArcs(DeviceGraph g, int64_t N, int32_t nb, const int64_t* rec_off, int32_t B, int32_t R,
                            const int32_t* lo, const int32_t* hi, const int32_t* p_src, const int32_t* p_dst,
                            const int32_t* p_code, const float* p_ac, const float* p_score, const uint8_t* p_flags,
                            const uint8_t* alive, const int32_t* rank, unsigned long long* cursor,
                            PrunedArcOut* out, unsigned long long cap, const int32_t* state, int32_t code_bits) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < N;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (p_flags[i] & (kPrInvalid | kPrDropped)) continue;
    const int32_t s = p_src[i];
    if (!alive[s]) continue;
    const int32_t bucket = BucketOf(rec_off, nb, i);
    const int32_t lane = bucket % B, t = bucket / B + R;
    if (t < lo[lane] || t >= hi[lane]) continue;
    const unsigned long long k = atomicAdd(cursor, 1ull);
    if (out == nullptr || k >= cap) continue;
    const int32_t code = ArcOfCode(g, p_code[i], state[s], code_bits), d = p_dst[i];
    out[k] = {lane, t, rank[s], alive[d] ? rank[d] : -1, code, p_ac[i], g.arc_weight[code & ~kRedirectArcBit],
              p_score[i]};
  }
}

// The alive tokens of times [lo[lane], hi[lane]) and <= last_tau[lane].
__global__ void IncEmitStates(int64_t M, int32_t nb, const int64_t* tok_off, int32_t B, int32_t R,
                              const int32_t* lo, const int32_t* hi, const int32_t* last_tau, const uint8_t* alive,
                              const int32_t* rank, const int32_t* state, unsigned long long* cursor,
                              PrunedStateOut* out, unsigned long long cap) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < M;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!alive[i]) continue;
    const int32_t bucket = BucketOf(tok_off, nb, i);
    const int32_t lane = bucket % B, tau = bucket / B + R;
    if (tau < lo[lane] || tau >= hi[lane] || tau > last_tau[lane]) continue;
    const unsigned long long k = atomicAdd(cursor, 1ull);
    if (out == nullptr || k >= cap) continue;
    out[k] = {lane, tau, rank[i], state[i], 0};
  }
}

// The bits of PrKeyCode's codes for graph G: 1 + deg_bits, 2^deg_bits > its most arcs of a state
// (at most 32: the codes themselves; CUWFST_PRUNE_CODE=arc keeps them, for A/B runs).
int32_t PrCodeBits(const GpuGraph& G) {
  const char* env = std::getenv("CUWFST_PRUNE_CODE");
  if (env && std::strcmp(env, "arc") == 0) return 32;
  int32_t deg_bits = 0;
  while (deg_bits < 30 && (1ll << deg_bits) <= G.max_degree) ++deg_bits;
  return std::min<int32_t>(deg_bits + 1, 32);
}

// The bucketing's cursor updates: per warp group (WarpBucketPlace, the default) or per record
// (CUWFST_PRUNE_BUCKET=atomic, for A/B runs).
bool PrBucketPerWarp() {
  const char* env = std::getenv("CUWFST_PRUNE_BUCKET");
  return !(env && std::strcmp(env, "atomic") == 0);
}

int GridFor(int64_t n) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + kPrThreads - 1) / kPrThreads, 65535)));
}

double Ms(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// The rank sort of each time, for PruneLattice and IncPass alike. By default none: the per-lane
// kernels (`lanes`, PrLaneForwardKernel) rank by counting inside their one launch. Otherwise a
// forward launch and a rank a time: in shared memory, one CTA a lane (PrBlockRankKernel,
// CUWFST_PRUNE_SORT=block, for the times whose lanes hold at most kPrBlockRankCap tokens each),
// else one device-wide radix sort of (lane, key) (CUWFST_PRUNE_SORT=radix: every time), or a
// segmented sort by lane (CUWFST_PRUNE_SORT=segmented: every time; cub sorts each of B < 300
// segments in one block, ~300 us for the full tier's largest times). All give the same ranks.
// (A per-time counting kernel, CUWFST_PRUNE_SORT=count, was measured at 35-37 ms of forward and
// ranks a batch against the block sort's 17-18 and removed: docs/speed-notes.md.)
// Keys: rank << code_bits | code (PrKeyCode) with rank below `rank_most` (the most tokens of a
// time whose ranks the keys carry), so the first key_bits bits hold them. MakeRankSort plans it and gives it
// its buffers; then Run it each time.
struct PrRankSort {
  bool radix = true;
  bool block = true;    // PrBlockRankKernel for the times whose lanes fit it
  bool block8k = true;  // its 8K size (the dynamic shared memory it needs was granted)
  bool lanes = false;   // PrLaneForwardKernel and PrLaneWindowsKernel (CUWFST_PRUNE_SORT=lanes): Run is not used
  int32_t lane_cap = 0; // their shared-memory rank's size (lane-times and sources up to it)
  int32_t key_bits = 33, lane_bits = 0;
  unsigned long long* s_keys = nullptr;  // [max_m] the sorted keys (unused after the sort)
  int32_t* s_vals_in = nullptr;          // [max_m] the tokens' global indices
  int32_t* s_vals_out = nullptr;         // [max_m] the tokens in rank order, lane by lane
  unsigned long long* ck = nullptr;      // [max_m] radix only: PrLaneKeys' keys
  void* temp = nullptr;
  size_t temp_bytes = 0;

  int32_t code_bits = 32;

  PrRankSort(int64_t rank_most, int32_t B, int32_t code) : code_bits(code) {
    key_bits = code_bits + 1;
    while (key_bits < 64 && (1ll << (key_bits - code_bits)) < rank_most) ++key_bits;
    while ((1 << lane_bits) < B) ++lane_bits;
    const char* env = std::getenv("CUWFST_PRUNE_SORT");
    radix = !(env && std::strcmp(env, "segmented") == 0) && key_bits + lane_bits < 64;
    block = !(env && (std::strcmp(env, "radix") == 0 || std::strcmp(env, "segmented") == 0)) &&
            key_bits + 1 + PrBlockRank8K::kIdxBitsOf <= 64;  // the largest size's index bits
    // the per-lane kernels are the default (CUWFST_PRUNE_SORT unset or "lanes"); "block" keeps the
    // per-time forward and block sort, "radix" / "segmented" the others (A/B runs)
    lanes = (env == nullptr || *env == '\0' || std::strcmp(env, "lanes") == 0) && key_bits < 64;
    if (lanes) {
      // 12,288 entries (193 KiB) where the device grants more than the 48 KiB default, else 2,048
      lane_cap = 12288;
      const cudaError_t e = cudaFuncSetAttribute(PrLaneForwardKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(PrLaneSmem(lane_cap)));
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        lane_cap = 2048;
      }
      // CUWFST_PRUNE_LANE_CAP=N (tests): a smaller shared-memory size, so lane-times past N rank in
      // the global scratch
      if (const char* cap = std::getenv("CUWFST_PRUNE_LANE_CAP")) {
        const long v = std::strtol(cap, nullptr, 10);
        if (v >= 1 && v < lane_cap) lane_cap = static_cast<int32_t>(v);
      }
      return;  // (no sort of any kind runs)
    }
    // the 8K size's shared memory is over the 48 KiB default: ask for it (per device, so per
    // pruning); a device that refuses ranks those times by the sort
    block8k = false;
    if (block) {
      const cudaError_t e = cudaFuncSetAttribute(
          PrBlockRankKernel<PrBlockRank8K::kThreadsOf, PrBlockRank8K::kItemsOf, PrBlockRank8K::kIdxBitsOf>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(PrBlockRank8K::kSmem));
      if (e != cudaSuccess) (void)cudaGetLastError();  // (not sticky; cleared so later checks do not see it)
      block8k = e == cudaSuccess;
    }
  }
  // the temporary bytes the sort needs for up to max_m keys (size queries: nothing runs)
  size_t TempBytes(int64_t max_m, int32_t B, const unsigned long long* key, const int32_t* seg, cudaStream_t s) const {
    size_t bytes = 0, radix_bytes = 0;
    CUWFST_CUDA(cub::DeviceSegmentedSort::SortPairs(nullptr, bytes, key, s_keys, s_vals_in, s_vals_out,
                                                    static_cast<int>(max_m), B, seg, seg + 1, s));
    if (radix) {
      CUWFST_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, radix_bytes, ck, s_keys, s_vals_in, s_vals_out,
                                                  static_cast<int>(max_m), 0, key_bits + lane_bits, s));
      bytes = std::max(bytes, radix_bytes);
    }
    return bytes;
  }
  // A time's m tokens from global index `base`, its lanes' segments sr[0 .. B] relative to
  // base (`most`: the largest): rank[token] = its place in its lane's order of `key`.
  // Returns how the time was ranked: 1 by the block sort, 0 by a device sort.
  int Run(cudaStream_t s, int32_t B, int64_t base, int32_t m, int32_t most, const int32_t* sr,
          const unsigned long long* key, int32_t* rank) const {
    if (block && most <= PrBlockRank1K::kSlots) {
      LaunchBlockRank<PrBlockRank1K>(s, B, base, sr, key, rank, key_bits);
      return 1;
    }
    if (block && most <= PrBlockRank4K::kSlots) {
      LaunchBlockRank<PrBlockRank4K>(s, B, base, sr, key, rank, key_bits);
      return 1;
    }
    if (block8k && most <= PrBlockRank8K::kSlots) {
      LaunchBlockRank<PrBlockRank8K>(s, B, base, sr, key, rank, key_bits);
      return 1;
    }
    size_t tb = temp_bytes;
    if (radix) {
      PrLaneKeys<<<dim3(GridFor(most), B), kPrThreads, 0, s>>>(B, base, sr, key, ck, s_vals_in, key_bits);
      CUWFST_CUDA(cub::DeviceRadixSort::SortPairs(temp, tb, ck, s_keys, s_vals_in, s_vals_out, m, 0,
                                                  key_bits + lane_bits, s));
    } else {
      PrIota<<<GridFor(m), kPrThreads, 0, s>>>(s_vals_in, base, m);
      CUWFST_CUDA(cub::DeviceSegmentedSort::SortPairs(temp, tb, key + base, s_keys, s_vals_in, s_vals_out, m, B, sr,
                                                      sr + 1, s));
    }
    PrRankKernel<<<dim3(GridFor(most), B), kPrThreads, 0, s>>>(sr, s_vals_out, rank);
    return 0;
  }
  // counts a Run's answer into the decoder's counters
  static void Count(int how, int64_t* block_times, int64_t* sort_times) { ++*(how == 1 ? block_times : sort_times); }
};

// The per-lane forward and ranks of steps [ta, tb) (PrLaneForwardKernel; CUWFST_PRUNE_SORT=lanes)
// over a layout of token buckets tok_off (host copy; bucket (tau - R) * B + b) and records:
// one launch, one CTA a lane. Lane-times or sources past the shared-memory size rank in global
// scratch: g_cnt from buffer(scratch_k, ...), and grp in g_grp (a [M] array free until the
// windows: bwd). Returns the times ranked (those with tokens), for MemStats.
template <class Buffer>
int64_t LaneForward(cudaStream_t s, const DeviceGraph& g, int32_t B, int32_t R, int32_t ta, int32_t tb,
                    const std::vector<int64_t>& tok_off, const int64_t* d_tok_off, const int64_t* d_rec_off,
                    const int32_t* p_src, const int32_t* p_dst, const int32_t* p_code, const float* p_score,
                    const uint8_t* p_flags, int32_t* fwd, unsigned long long* key, int32_t* rank, int32_t* state,
                    int32_t* g_grp, const PrRankSort& sorter, int scratch_k, Buffer&& buffer,
                    unsigned long long* clk = nullptr) {
  if (tb <= ta) return 0;
  const int64_t nb = static_cast<int64_t>(tok_off.size()) - 1;  // buckets
  int64_t most = 0, times = 0;
  for (int64_t k = static_cast<int64_t>(ta - R) * B; k < nb; ++k) most = std::max(most, tok_off[k + 1] - tok_off[k]);
  for (int32_t t = ta; t < tb; ++t) {
    const int64_t k1 = static_cast<int64_t>(t + 1 - R) * B;
    times += tok_off[k1 + B] > tok_off[k1] ? 1 : 0;
  }
  int32_t* g_cnt = nullptr;
  uint32_t *g_code = nullptr, *g_bits = nullptr;
  if (most > sorter.lane_cap) {  // [M + nb] counts, [M] codes, [M] bitmaps
    const int64_t M = tok_off[nb];
    g_cnt = static_cast<int32_t*>(buffer(scratch_k, (M + nb + 2 * M) * 4));
    g_code = reinterpret_cast<uint32_t*>(g_cnt + M + nb);
    g_bits = g_code + M;
  } else {
    g_grp = nullptr;
  }
  PrLaneForwardKernel<<<B, kPrLaneThreads, PrLaneSmem(sorter.lane_cap), s>>>(
      g, B, R, ta, tb, d_tok_off, d_rec_off, p_src, p_dst, p_code, p_score, p_flags, fwd, key, rank, sorter.code_bits,
      sorter.key_bits, sorter.lane_cap, g_cnt, g_grp, g_code, g_bits, clk);
  CUWFST_CUDA(cudaGetLastError());
  return times;
}

// A PrRankSort planned for `rank_most` and given its buffers for up to max_m tokens a time from
// buffer(k, bytes) (GpuDecoder::PruneBuffer) at k = {keys, values in, values out, radix keys,
// temporary}; key and seg as Run's (the size queries read no data).
template <class Buffer>
PrRankSort MakeRankSort(int64_t rank_most, int64_t max_m, int32_t B, int32_t code_bits, const int (&k)[5],
                        Buffer&& buffer, const unsigned long long* key, const int32_t* seg, cudaStream_t s) {
  PrRankSort r(rank_most, B, code_bits);
  if (r.lanes) return r;  // the per-lane kernels sort nothing
  r.s_keys = static_cast<unsigned long long*>(buffer(k[0], max_m * 8));
  r.s_vals_in = static_cast<int32_t*>(buffer(k[1], max_m * 4));
  r.s_vals_out = static_cast<int32_t*>(buffer(k[2], max_m * 4));
  if (r.radix) r.ck = static_cast<unsigned long long*>(buffer(k[3], max_m * 8));
  r.temp_bytes = r.TempBytes(max_m, B, key, seg, s);
  r.temp = buffer(k[4], r.temp_bytes);
  return r;
}

// ---- Epsilon graphs (PruneJob::eps; docs/design.md "Lattices on the GPU"): the CPU twin is
// tests/eps_prune_twin.py, held to the CPU LatticeBuilder's lattices array for array. What the
// decode leaves: the step's records (every arc whose destination is in the new frontier, as on
// an epsilon-free graph) and the frontier log (LatFrontierLogKernel: every token's graph state).
// With the exact closure (the search's eps_iterations covers the graph's longest epsilon chain)
// the CPU records exactly the epsilon arcs of S_t's states that end in S_t; the pruning lists
// them here from the log (PrEpsCount, PrEpsFill), into their own arrays bucketed by (time, lane)
// as the step's records are. Then, one CTA a lane: a time's epsilon layers (the longest epsilon
// path inside it) by rounds of atomicMax until none changes, the forward (the step's records,
// then the epsilon arcs by their destination's layer), k2's windows (the step's records, then the
// epsilon arcs by their source's layer, highest first); every value is the CPU's (max is
// order-free; the float expressions are the CPU's). The output numbers a time's states by
// (layer, graph state), the CPU's order on epsilon graphs, so no first-admission rank is needed:
// rank = layer << state_bits | state.
constexpr unsigned long long kEpsErrStart = 1, kEpsErrCycle = 2, kEpsErrLog = 4;

// Every token's graph state: token i of bucket k = tau * B + lane is log entry log_off[k] + (i -
// tok_off[k]) for tau < last_tau[lane] (S_0 .. S_n), the final state for tau = last_tau (S_{n+1});
// -1 (and not alive) on skipped lanes. err: token 0 of S_0 is not the start state (the forward starts there).
__global__ void PrEpsStates(DeviceGraph g, int64_t M, int32_t nb, int32_t B, const int64_t* tok_off,
                            const int64_t* log_off, const int32_t* log_state, const float* log_score,
                            const int32_t* last_tau, const uint8_t* skip, int32_t* state, float* score, uint8_t* alive,
                            unsigned long long* err) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < M;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t k = BucketOf(tok_off, nb, i);
    const int32_t lane = k % B, tau = k / B;
    int32_t st = -1;
    // (the search's score: the records' filter's guard; none for S_{n+1}, which no filtered step has)
    score[i] = !skip[lane] && tau < last_tau[lane] ? log_score[log_off[k] + (i - tok_off[k])] : NAN;
    if (!skip[lane]) {
      st = tau >= last_tau[lane] ? g.num_states - 1 : log_state[log_off[k] + (i - tok_off[k])];
      if (st < 0 || st >= g.num_states) {
        atomicOr(err, kEpsErrLog);
        st = -1;
      } else if (tau == 0 && i == tok_off[k] && st != g.start_state) {
        atomicOr(err, kEpsErrStart);
      }
    }
    state[i] = st;
    if (st < 0) alive[i] = 0;  // (a skipped lane's tokens: none is output)
  }
}

// The segmented sort's input: (state, token) of every token (a state -1 sorts first: it matches
// no arc's destination).
__global__ void PrEpsSortIn(int64_t M, const int32_t* state, int32_t* keys, int32_t* vals) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < M;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    keys[i] = state[i];
    vals[i] = static_cast<int32_t>(i);
  }
}

// The token of state `d` in bucket [b0, b1) of the sorted states, -1 when it has none.
__device__ __forceinline__ int32_t PrEpsFind(const int32_t* sorted, const int32_t* toks, int64_t b0, int64_t b1,
                                             int32_t d) {
  int64_t lo = b0, hi = b1;
  while (lo < hi) {
    const int64_t mid = (lo + hi) >> 1;
    if (sorted[mid] < d) lo = mid + 1;
    else hi = mid;
  }
  return lo < b1 && sorted[lo] == d ? toks[lo] : -1;
}

// Each token's epsilon arcs that end in its own time (times below last_tau: S_{n+1} has no
// closure): counted (out == nullptr: into cnt[i]) or written from start[i] on (src, dst tokens,
// arc id, score = 0 + weight as the CPU adds it; flags 0).
__global__ void PrEpsArcs(DeviceGraph g, int64_t M, int32_t nb, int32_t B, const int64_t* tok_off,
                          const int32_t* last_tau, const int32_t* state, const int32_t* sorted, const int32_t* toks,
                          int64_t* cnt, const int64_t* start, int32_t* e_src, int32_t* e_dst, int32_t* e_code,
                          float* e_score) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < M;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t s = state[i];
    int32_t n = 0;
    if (s >= 0) {
      const int32_t k = BucketOf(tok_off, nb, i);
      if (k / B < last_tau[k % B]) {
        const StateArcs sa = ArcsOf(g, s);
        const int32_t a0 = sa.EpsBegin(), a1 = a0 + sa.eps_count;
        int64_t at = start != nullptr ? start[i] : 0;
        for (int32_t a = a0; a < a1; ++a) {
          const int32_t d = PrEpsFind(sorted, toks, tok_off[k], tok_off[k + 1], ArcDest(g, a));
          if (d < 0) continue;
          if (start != nullptr) {
            e_src[at] = static_cast<int32_t>(i);
            e_dst[at] = d;
            e_code[at] = a;
            e_score[at] = 0.0f + g.arc_weight[a];
            ++at;
          }
          ++n;
        }
      }
    }
    if (start == nullptr) cnt[i] = n;
  }
}

// The epsilon arcs' bucket offsets: e_off[k] = start of bucket k's first token (e_total past the
// last bucket).
__global__ void PrEpsOffsets(int32_t nb, const int64_t* tok_off, const int64_t* start, int64_t M, int64_t total,
                             int64_t* e_off) {
  for (int32_t k = blockIdx.x * blockDim.x + threadIdx.x; k <= nb; k += gridDim.x * blockDim.x)
    e_off[k] = tok_off[k] < M ? start[tok_off[k]] : total;
}

// Time tau's epsilon layers and forward, and its tokens' ranks (layer << sb | state), in one CTA
// of a lane (PrEpsLaneForwardKernel's phases after the step's records).
__device__ void PrEpsTime(int32_t b, int32_t B, int32_t tau, const int64_t* tok_off, const int64_t* e_off,
                          const int32_t* e_src, const int32_t* e_dst, const float* e_score, const uint8_t* e_flags,
                          int32_t* fwd, int32_t* layer, int32_t* lmax, int32_t* rank, const int32_t* state, int32_t sb,
                          unsigned long long* err, int32_t* s_flag) {
  // (err[1]: the highest layer of any time, atomicMax)
  const int64_t k = static_cast<int64_t>(tau) * B + b;
  const int64_t e0 = e_off[k], e1 = e_off[k + 1];
  const int32_t ntok = static_cast<int32_t>(tok_off[k + 1] - tok_off[k]);
  int32_t top = 0;
  if (e1 > e0) {
    // layers: rounds until none changes (at most the longest epsilon path + 1 on an acyclic graph)
    for (int32_t round = 0;; ++round) {
      if (threadIdx.x == 0) s_flag[0] = 0;
      __syncthreads();
      for (int64_t i = e0 + threadIdx.x; i < e1; i += blockDim.x) {
        if (e_flags[i] & kPrInvalid) continue;
        const int32_t l = layer[e_src[i]] + 1;
        if (l > layer[e_dst[i]]) {
          atomicMax(&layer[e_dst[i]], l);
          s_flag[0] = 1;
        }
      }
      __syncthreads();
      const int32_t changed = s_flag[0];
      __syncthreads();
      if (!changed) break;
      if (round > ntok + 1) {  // (an epsilon cycle: the host refuses those graphs)
        if (threadIdx.x == 0) atomicOr(err, kEpsErrCycle);
        break;
      }
    }
    if (threadIdx.x == 0) s_flag[1] = 0;
    __syncthreads();
    for (int64_t i = e0 + threadIdx.x; i < e1; i += blockDim.x)
      if (!(e_flags[i] & kPrInvalid)) atomicMax(&s_flag[1], layer[e_dst[i]]);
    __syncthreads();
    top = s_flag[1];
    // the forward inside the time: the epsilon arcs by their destination's layer
    for (int32_t l = 1; l <= top; ++l) {
      for (int64_t i = e0 + threadIdx.x; i < e1; i += blockDim.x) {
        if ((e_flags[i] & kPrInvalid) || layer[e_dst[i]] != l) continue;
        const float v = OrderedIntToFloat(fwd[e_src[i]]) + e_score[i];
        atomicMax(&fwd[e_dst[i]], FloatToOrderedInt(v));
      }
      __syncthreads();
    }
  }
  if (threadIdx.x == 0) {
    lmax[k] = top;
    if (top > 0) atomicMax(&err[1], static_cast<unsigned long long>(top));
  }
  for (int64_t i = tok_off[k] + threadIdx.x; i < tok_off[k + 1]; i += blockDim.x)
    rank[i] = state[i] < 0 ? 0 : (layer[i] << sb) | state[i];
  __syncthreads();
}

// The records' filter's guard on a time (a_step: each (lane, step)'s assumed magnitude A, 0 where the
// step was not filtered; nullptr: no filter): the CPU builder's checks of a producer's filter
// (reference_lattice.cc AddTime) on the GPU: a filtered step's new time has forward >= the search's
// score on every token, a filtered step's sources forward <= it; else broken[b]. And the time's
// largest finite |forward| (fmag, which the windows' magnitude check reads).
__device__ void PrEpsGuardTime(int32_t b, int32_t B, int32_t tau, const int64_t* tok_off, const int32_t* fwd,
                               const float* score, const float* a_step, int64_t seg, const int32_t* last_tau,
                               float* fmag, int32_t* broken, int32_t* s_int) {
  const int64_t k = static_cast<int64_t>(tau) * B + b;
  const bool into = tau >= 1 && tau - 1 < seg && a_step[b * seg + tau - 1] > 0.f;
  const bool out = tau < last_tau[b] && tau < seg && a_step[b * seg + tau] > 0.f;
  if (threadIdx.x == 0) s_int[0] = 0, s_int[1] = 0;
  __syncthreads();
  for (int64_t i = tok_off[k] + threadIdx.x; i < tok_off[k + 1]; i += blockDim.x) {
    const float f = OrderedIntToFloat(fwd[i]);
    if (isfinite(f)) atomicMax(&s_int[0], __float_as_int(fabsf(f)));
    if ((into && !(f >= score[i])) || (out && f > score[i])) s_int[1] = 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    fmag[k] = __int_as_float(s_int[0]);
    if (s_int[1]) broken[b] = 1;
  }
  __syncthreads();
}

// Every time of every lane, one CTA a lane (blockIdx.x): S_0's epsilon layers and forward, then for
// tau = 1 .. Tmax the step's records into S_tau (bucket (tau - 1) B + b) and S_tau's epsilon arcs;
// with the records' filter (a_step), each time's guard (PrEpsGuardTime).
// layer [M] is 0 and fwd [M] -inf before (fwd 0 at each lane's start token).
__global__ void __launch_bounds__(kPrLaneThreads)
PrEpsLaneForwardKernel(int32_t B, int32_t Tmax, const int64_t* tok_off, const int64_t* rec_off, const int32_t* p_src,
                       const int32_t* p_dst, const float* p_score, const uint8_t* p_flags, const int64_t* e_off,
                       const int32_t* e_src, const int32_t* e_dst, const float* e_score, const uint8_t* e_flags,
                       int32_t* fwd, int32_t* layer, int32_t* lmax, int32_t* rank, const int32_t* state, int32_t sb,
                       unsigned long long* err, const float* score, const float* a_step, int64_t seg,
                       const int32_t* last_tau, float* fmag, int32_t* broken) {
  __shared__ int32_t s_flag[2];
  const int32_t b = blockIdx.x;
  PrEpsTime(b, B, 0, tok_off, e_off, e_src, e_dst, e_score, e_flags, fwd, layer, lmax, rank, state, sb, err, s_flag);
  if (a_step != nullptr) PrEpsGuardTime(b, B, 0, tok_off, fwd, score, a_step, seg, last_tau, fmag, broken, s_flag);
  for (int32_t tau = 1; tau <= Tmax; ++tau) {
    const int64_t kr = static_cast<int64_t>(tau - 1) * B + b;
    for (int64_t i = rec_off[kr] + threadIdx.x; i < rec_off[kr + 1]; i += blockDim.x) {
      if (p_flags[i] & kPrInvalid) continue;
      const float v = OrderedIntToFloat(fwd[p_src[i]]) + p_score[i];
      atomicMax(&fwd[p_dst[i]], FloatToOrderedInt(v));
    }
    __syncthreads();
    PrEpsTime(b, B, tau, tok_off, e_off, e_src, e_dst, e_score, e_flags, fwd, layer, lmax, rank, state, sb, err,
              s_flag);
    if (a_step != nullptr) PrEpsGuardTime(b, B, tau, tok_off, fwd, score, a_step, seg, last_tau, fmag, broken, s_flag);
  }
}

// One arc of a window's backward (PrEpsLaneWindowsKernel): kept or dropped, as the CPU's
// PruneWindow tests it.
__device__ __forceinline__ void PrEpsBackArc(uint8_t* flags, int64_t i, int32_t src, int32_t dst, float score,
                                             const int32_t* fwd, const uint8_t* alive, int32_t* bwd, float neg_beam) {
  if ((flags[i] & (kPrInvalid | kPrDropped)) || !alive[src]) return;
  const float arc_bwd = score + OrderedIntToFloat(bwd[dst]);  // k2: arc_loglike + backward[dest]
  if (arc_bwd + OrderedIntToFloat(fwd[src]) >= neg_beam)
    atomicMax(&bwd[src], FloatToOrderedInt(arc_bwd));
  else
    flags[i] |= kPrDropped;
}

// Every window of every lane in order, one CTA a lane, as PrLaneWindowsKernel, each time t of a
// window: the step's records (into time t + 1), then time t's epsilon arcs by their source's layer,
// highest first (a source's arcs into higher layers see their destinations' backward complete).
// With the records' filter (a_step), each window's guard as the CPU builder's PruneWindow checks it:
// the largest finite |backward| of its times [begin, E) and |forward| of [begin, E] within every
// filtered step's A of [begin, E], and the epsilon layers of the times after a filtered step within
// eps_layers (the search's eps_iterations); else broken[b].
__global__ void __launch_bounds__(kPrLaneThreads)
PrEpsLaneWindowsKernel(int32_t B, int32_t K, const int32_t* win_begin, const int32_t* win_end, const int64_t* tok_off,
                       const int64_t* rec_off, const int32_t* p_src, const int32_t* p_dst, const float* p_score,
                       uint8_t* p_flags, const int64_t* e_off, const int32_t* e_src, const int32_t* e_dst,
                       const float* e_score, uint8_t* e_flags, const int32_t* layer, const int32_t* lmax,
                       const int32_t* fwd, uint8_t* alive, int32_t* bwd, float neg_beam, const float* a_step,
                       int64_t seg, const float* fmag, int32_t eps_layers, int32_t* broken) {
  __shared__ int32_t s_bmag;
  const int32_t b = blockIdx.x;
  for (int32_t k = 0; k < K; ++k) {
    const int32_t E = win_end[static_cast<int64_t>(k) * B + b], begin = win_begin[k];
    if (E < 0) continue;
    if (threadIdx.x == 0) s_bmag = 0;
    for (int32_t tau = begin; tau <= E; ++tau) {
      const int64_t kt = static_cast<int64_t>(tau) * B + b;
      for (int64_t i = tok_off[kt] + threadIdx.x; i < tok_off[kt + 1]; i += blockDim.x)
        bwd[i] = FloatToOrderedInt(tau == E && alive[i] ? -OrderedIntToFloat(fwd[i]) : -INFINITY);
    }
    __syncthreads();
    for (int32_t t = E - 1; t >= begin; --t) {
      const int64_t kr = static_cast<int64_t>(t) * B + b;
      for (int64_t i = rec_off[kr] + threadIdx.x; i < rec_off[kr + 1]; i += blockDim.x)
        PrEpsBackArc(p_flags, i, p_src[i], p_dst[i], p_score[i], fwd, alive, bwd, neg_beam);
      __syncthreads();
      const int64_t e0 = e_off[kr], e1 = e_off[kr + 1];
      for (int32_t l = e1 > e0 ? lmax[kr] : -1; l >= 0; --l) {
        for (int64_t i = e0 + threadIdx.x; i < e1; i += blockDim.x)
          if (layer[e_src[i]] == l) PrEpsBackArc(e_flags, i, e_src[i], e_dst[i], e_score[i], fwd, alive, bwd, neg_beam);
        __syncthreads();
      }
      if (a_step != nullptr)
        for (int64_t i = tok_off[kr] + threadIdx.x; i < tok_off[kr + 1]; i += blockDim.x) {
          const float x = OrderedIntToFloat(bwd[i]);
          if (isfinite(x)) atomicMax(&s_bmag, __float_as_int(fabsf(x)));
        }
    }
    if (a_step != nullptr) {
      __syncthreads();
      if (threadIdx.x == 0) {
        float bm = __int_as_float(s_bmag);
        for (int32_t t = begin; t <= E; ++t) bm = fmaxf(bm, fmag[static_cast<int64_t>(t) * B + b]);
        int32_t layers = 0;
        for (int32_t t = E; t >= begin; --t) {
          const float a = t < seg ? a_step[b * seg + t] : 0.f;
          if (a > 0.f && (!(bm <= a) || layers > eps_layers)) broken[b] = 1;
          layers = max(layers, lmax[static_cast<int64_t>(t) * B + b]);
        }
      }
    }
    for (int32_t tau = begin + 1; tau < E; ++tau) {
      const int64_t kt = static_cast<int64_t>(tau) * B + b;
      for (int64_t i = tok_off[kt] + threadIdx.x; i < tok_off[kt + 1]; i += blockDim.x)
        if (OrderedIntToFloat(bwd[i]) == -INFINITY) alive[i] = 0;
    }
    __syncthreads();
  }
}

// The kept epsilon arcs (counted, or written at the cursor PrOutArcs left): {lane, time, source and
// destination tokens, arc id, acoustic 0, weight, score}.
__global__ void PrEpsOutArcs(DeviceGraph g, int64_t E, int32_t nbt, int32_t B, const int64_t* tok_off,
                             const int32_t* e_src, const int32_t* e_dst, const int32_t* e_code, const float* e_score,
                             const uint8_t* e_flags, const uint8_t* alive, unsigned long long* cursor,
                             PrunedArcOut* out, unsigned long long cap) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < E;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (e_flags[i] & (kPrInvalid | kPrDropped)) continue;
    const int32_t s = e_src[i];
    if (!alive[s]) continue;
    const unsigned long long k = atomicAdd(cursor, 1ull);
    if (out == nullptr || k >= cap) continue;
    const int32_t bucket = BucketOf(tok_off, nbt, s);
    out[k] = {bucket % B, bucket / B, s, e_dst[i], e_code[i], 0.0f, g.arc_weight[e_code[i]], e_score[i]};
  }
}

// The kept states' levels: tops[lane (Tmax + 1) + tau] = the highest layer of a kept state of the
// time (PrEpsTops, rank >> sb), then each lane's running level (PrEpsLevels: level[tau] = the sum
// over earlier times of top + 1, as the CPU's Finish counts it; level[Tmax + 1 slot] unused).
__global__ void PrEpsTops(const PrunedStateOut* st, int64_t S, int32_t Tmax, int32_t sb, int32_t* tops) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < S;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const PrunedStateOut x = st[i];
    if (x.lane < 0 || x.tau < 0 || x.tau > Tmax) continue;
    atomicMax(&tops[static_cast<int64_t>(x.lane) * (Tmax + 2) + x.tau], x.rank >> sb);
  }
}
__global__ void PrEpsLevels(int32_t B, int32_t Tmax, const int32_t* tops, int32_t* levels) {
  const int32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= B) return;
  int32_t acc = 0;
  for (int32_t tau = 0; tau <= Tmax + 1; ++tau) {
    const int64_t k = static_cast<int64_t>(b) * (Tmax + 2) + tau;
    levels[k] = acc;
    acc += tops[k] + 1;
  }
}

// ---- The numbering on the device (PruneLattice's default; CUWFST_LATTICE_NUMBER=host keeps
// lattice_number.h's host numbering, the reference it must equal). The same arrays, bit for
// bit: each row's kept states sorted by (tau, rank) and numbered in that order, a final state
// {T, -1, T + 1} appended when no kept state has tau == T; its kept arcs sorted by (source
// number, code without the redirect bit), ties in input order (a stable radix sort; ties never
// occur: a token records each arc once). Keys: the states' (lane, tau, rank) and the arcs'
// (lane, source number, code) in 64 bits (PrNumberBits; else the host numbering runs). Errors
// (decoder bugs) as the host's: bits of err[0].
constexpr int32_t kNumErrLane = 1, kNumErrDupState = 2, kNumErrDupToken = 4, kNumErrEndpoint = 8;

// States: keys (lane << (tb + rb) | tau << rb | rank) and their indices; a state out of range
// gets the largest key (it sorts last, past every lane) and an error bit.
__global__ void PrNumStateKeys(const PrunedStateOut* st, int64_t S, int32_t B, int32_t Tmax, int32_t M, int32_t tb,
                               int32_t rb, unsigned long long* keys, int32_t* vals, int32_t* err) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < S;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const PrunedStateOut x = st[i];
    vals[i] = static_cast<int32_t>(i);
    if (x.lane < 0 || x.lane >= B || x.tau < 0 || x.tau > Tmax || x.rank < 0 || x.rank >= (1 << rb) || x.tok < 0 ||
        x.tok >= M) {
      atomicOr(err, kNumErrLane);
      keys[i] = ~0ull;
      continue;
    }
    keys[i] = (static_cast<unsigned long long>(x.lane) << (tb + rb)) |
              (static_cast<unsigned long long>(x.tau) << rb) | static_cast<unsigned long long>(x.rank);
  }
}

// starts[b] = the first position of lane b in the sorted keys (lane = key >> shift), b in
// [0, B]; a lower bound by binary search, thread per lane.
__global__ void PrNumLaneStarts(const unsigned long long* sorted, int64_t n, int32_t B, int32_t shift,
                                int64_t* starts) {
  const int32_t b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b > B) return;
  const unsigned long long want = static_cast<unsigned long long>(b) << shift;
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (sorted[mid] < want) lo = mid + 1;
    else hi = mid;
  }
  starts[b] = lo;
}

// One thread: each row's states (n_b and, unless the last kept state is at T = lengths[b] +
// 1, the final one; none on skipped rows), their offsets (exclusive scan) and the final
// states' entries. sizes[4 b ..] = {S_b, A_b, state offset, arc offset} (A_b: PrNumArcSizes).
__global__ void PrNumStateSizes(const unsigned long long* sorted, const int64_t* s_start, int32_t B, int32_t tb,
                                int32_t rb, const int32_t* lengths, const uint8_t* skip, int64_t* sizes,
                                int32_t* out_states, const int32_t* eps_levels, int32_t Tmax) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  int64_t at = 0;
  for (int32_t b = 0; b < B; ++b) {
    const int64_t n = s_start[b + 1] - s_start[b];
    const int32_t T = lengths[b] + 1;
    const bool has_final =
        n > 0 && static_cast<int32_t>((sorted[s_start[b + 1] - 1] >> rb) & ((1ull << tb) - 1ull)) == T;
    const int64_t S_b = skip[b] ? 0 : n + (has_final ? 0 : 1);
    sizes[4 * b] = S_b;
    sizes[4 * b + 2] = at;
    if (S_b > n) {  // the final state k2 adds: {T, -1, T + 1} (epsilon graphs: past every time's layers)
      int32_t* rs = out_states + 3 * at;
      rs[S_b - 1] = T;
      rs[2 * S_b - 1] = -1;
      rs[3 * S_b - 1] = eps_levels != nullptr ? eps_levels[static_cast<int64_t>(b) * (Tmax + 2) + T] + 1 : T + 1;
    }
    at += S_b;
  }
}

// Each sorted state: its number in its row, the row's arrays {tau, graph state, level = tau}
// and the token's number and lane (tok_num must be -1 before; two states of one token, or of
// one (tau, rank) in a row, raise an error bit).
__global__ void PrNumStatesOut(const PrunedStateOut* st, const unsigned long long* sorted, const int32_t* order,
                               int64_t S, int32_t tb, int32_t rb, const int64_t* s_start, const int64_t* sizes,
                               const uint8_t* skip, int32_t* out_states, int32_t* tok_num, int32_t* tok_lane,
                               int32_t* err, const int32_t* eps_levels, int32_t Tmax, int32_t sb) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < S;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long key = sorted[j];
    if (key == ~0ull) continue;  // (an error already)
    const int32_t lane = static_cast<int32_t>(key >> (tb + rb));
    if (j > 0 && sorted[j - 1] == key) atomicOr(err, kNumErrDupState);
    const PrunedStateOut x = st[order[j]];
    const int32_t i = static_cast<int32_t>(j - s_start[lane]);
    if (atomicCAS(&tok_num[x.tok], -1, i) != -1) atomicOr(err, kNumErrDupToken);
    tok_lane[x.tok] = lane;
    if (skip[lane]) continue;
    const int64_t S_b = sizes[4 * lane];
    int32_t* rs = out_states + 3 * sizes[4 * lane + 2];
    rs[i] = x.tau;
    rs[S_b + i] = x.state;
    // epsilon-free: level = time; epsilon graphs: the time's level (PrEpsLevels) + the state's layer
    rs[2 * S_b + i] = eps_levels != nullptr ? eps_levels[static_cast<int64_t>(lane) * (Tmax + 2) + x.tau] + (x.rank >> sb)
                                            : x.tau;
  }
}

// Arcs: keys (lane << (nb + 30) | source number << 30 | code without the redirect bit), their
// indices and their destinations' numbers; an endpoint that is no kept state of the arc's row
// raises an error bit (and the arc sorts last).
__global__ void PrNumArcKeys(const PrunedArcOut* ar, int64_t A, int32_t B, int32_t M, int32_t nb,
                             const int32_t* tok_num, const int32_t* tok_lane, unsigned long long* keys, int32_t* vals,
                             int32_t* a_dst, int32_t* err, const uint16_t* src_place, int32_t cb) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < A;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const PrunedArcOut x = ar[k];
    vals[k] = static_cast<int32_t>(k);
    const bool lane_ok = x.lane >= 0 && x.lane < B;
    const bool ends_ok = x.src >= 0 && x.src < M && x.dst >= 0 && x.dst < M;
    const int32_t s = ends_ok ? tok_num[x.src] : -1, d = ends_ok ? tok_num[x.dst] : -1;
    if (!lane_ok || s < 0 || d < 0 || tok_lane[x.src] != x.lane || tok_lane[x.dst] != x.lane) {
      atomicOr(err, lane_ok ? kNumErrEndpoint : kNumErrLane);
      keys[k] = ~0ull;
      continue;
    }
    a_dst[k] = d;
    // a state's arcs in the source graph's order (src_place: their places there, where the image
    // moved arcs; a kept state's arcs all leave one graph state), else the image's
    const int32_t arc = x.code & ~kRedirectArcBit;
    // (cb 31, epsilon graphs: the redirect bit below the place, so an epsilon arc sorts before
    // allow_partial's redirect of the same arc, as the CPU's stable merge leaves them)
    const unsigned long long place = src_place != nullptr ? src_place[arc] : arc;
    const unsigned long long part = cb == 31 ? (place << 1) | ((x.code & kRedirectArcBit) ? 1ull : 0ull) : place;
    keys[k] = (static_cast<unsigned long long>(x.lane) << (nb + cb)) | (static_cast<unsigned long long>(s) << cb) | part;
  }
}

// One thread: each row's arcs (none on skipped rows) and their offsets, into sizes[4 b + 1],
// sizes[4 b + 3].
__global__ void PrNumArcSizes(const int64_t* a_start, int32_t B, const uint8_t* skip, int64_t* sizes) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  int64_t at = 0;
  for (int32_t b = 0; b < B; ++b) {
    const int64_t A_b = skip[b] ? 0 : a_start[b + 1] - a_start[b];
    sizes[4 * b + 1] = A_b;
    sizes[4 * b + 3] = at;
    at += A_b;
  }
}

// Each sorted arc into its row's arrays: arcs [4, A_b] = {src, dst, t, code}, scores [3, A_b].
__global__ void PrNumArcsOut(const PrunedArcOut* ar, const unsigned long long* sorted, const int32_t* order, int64_t A,
                             int32_t nb, const int64_t* a_start, const int64_t* sizes, const uint8_t* skip,
                             const int32_t* a_dst, int32_t* out_arcs, float* out_scores, int32_t cb) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < A;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long key = sorted[j];
    if (key == ~0ull) continue;
    const int32_t lane = static_cast<int32_t>(key >> (nb + cb));
    if (skip[lane]) continue;
    const int32_t k = order[j];
    const PrunedArcOut x = ar[k];
    const int64_t A_b = sizes[4 * lane + 1], i = j - a_start[lane];
    int32_t* ra = out_arcs + 4 * sizes[4 * lane + 3];
    float* sc = out_scores + 3 * sizes[4 * lane + 3];
    ra[i] = static_cast<int32_t>((key >> cb) & ((1ull << nb) - 1ull));
    ra[A_b + i] = a_dst[k];
    ra[2 * A_b + i] = x.t;
    ra[3 * A_b + i] = x.code;
    sc[i] = x.acoustic;
    sc[A_b + i] = x.graph;
    sc[2 * A_b + i] = x.score;
  }
}

}  // namespace

// The incremental pruning's host state (bounded lattice memory; see IncPass below).
struct IncPrune {
  bool active = false;
  int32_t B = 0;
  int64_t seg = 0;
  float neg_beam = 0.f;
  std::vector<int32_t> len, next_win, kept_from;
  std::vector<uint8_t> done;         // every window of the lane applied (all of it emitted)
  int32_t t_done = 0;                // records of steps < t_done consumed; times <= t_done exist
  int32_t R = 0;                     // the next pass's first time
  int32_t R_layout = 0;              // the current generation's first time
  int gen = 0;
  bool has_layout = false;
  std::vector<int64_t> tok_off, rec_off;  // the current generation's offsets
  std::vector<int32_t> count, size;       // [B, seg] the per-step arrays read so far
  std::vector<PrunedArcOut> arcs;         // emitted: src, dst are ranks (times t, t + 1)
  std::vector<PrunedStateOut> states;
  double ms[3] = {0, 0, 0};
};

void* GpuDecoder::PruneBuffer(int k, size_t bytes) { return PruneBufferIn(0, k, bytes); }

// Buffer k of set `set` (0: pr_buf_; 1: pr_buf1_, which holds PruneLattice's [0, 24) and 62, 63
// only) of at least `bytes`, grown by a quarter more; the growth under pr_mu_, which
// lattice_prune_bytes reads the sizes under.
void* GpuDecoder::PruneBufferIn(int set, int k, size_t bytes) {
  DeviceBuffer* buf = nullptr;
  if (set == 0 && k >= 0 && k < 72) buf = &pr_buf_[k];
  if (set == 1 && k >= 0 && k < 24) buf = &pr_buf1_[k];
  if (set == 1 && (k == 62 || k == 63)) buf = &pr_buf1_[24 + (k - 62)];
  if ((set == 0 || set == 1) && k >= 72 && k < 96) buf = &pr_eps_buf_[set][k - 72];
  if (!buf) throw std::logic_error("PruneBufferIn: no buffer " + std::to_string(k) + " in set " + std::to_string(set));
  bytes = std::max<size_t>(bytes, 16);
  if (buf->amount() < static_cast<int64_t>(bytes)) {
    {
      std::lock_guard<std::mutex> lock(pr_mu_);
      *buf = DeviceBuffer();
    }
    DeviceBuffer b;
    cudaError_t e = TryDeviceAlloc(bytes + bytes / 4, &b);
    if (e != cudaSuccess) {
      std::ostringstream os;
      os << "cannot allocate " << FormatBytes(static_cast<int64_t>(bytes)) << " for the GPU lattice pruning on cuda:"
         << device() << "; the decoder keeps its records and stays usable; decode fewer rows at a time (max_lanes, now "
         << cfg_.max_lanes << "), lower max_active_states, or set CUWFST_LATTICE_PRUNE=replay";
      ThrowAcquireFailure(e, os.str());
    }
    std::lock_guard<std::mutex> lock(pr_mu_);
    *buf = std::move(b);
  }
  return buf->get();
}

// Threads for the host's numbering of the kept states (NumberPrunedRows): 1 for small
// batches; else the CPUs this process may run on (its affinity mask: a container's
// hardware_concurrency can name every CPU of the host, far more than it may use), at most 8
// as the decoder's own num_threads default. CUWFST_NUMBER_THREADS overrides it (A/B runs).
static int32_t NumberingWorkers(int64_t arcs) {
  if (const char* env = std::getenv("CUWFST_NUMBER_THREADS")) {
    const int v = std::atoi(env);
    if (v >= 1 && v <= 256) return v;
  }
  if (arcs < 20000) return 1;
  return std::min(HostCpus(), 8);
}

// A pruning job's device arrays in its buffer set: PruneBegin sizes and fills them, PruneFinish
// reads what PruneBegin left.
struct PrJobBufs {
  int64_t* rec_off = nullptr;  // [Tmax B + 1] records' offsets by (time, lane)
  int32_t* rec_cur = nullptr;  // the bucketing's cursors
  int64_t* tok_off = nullptr;  // [(Tmax + 1) B + 1] tokens' offsets by (time, lane)
  int32_t *src = nullptr, *dst = nullptr, *code = nullptr;  // [N] the bucketed records
  float *ac = nullptr, *score = nullptr;
  uint8_t* flags = nullptr;
  int32_t *fwd = nullptr, *bwd = nullptr, *rank = nullptr, *state = nullptr;  // [M] the tokens
  unsigned long long* key = nullptr;
  uint8_t* alive = nullptr;
  // small arrays: counters [2], last_tau [B], win_end [K B], seg_rel, win_begin [K], skip [B]
  unsigned long long* cnt = nullptr;
  int32_t *last_tau = nullptr, *win_end = nullptr, *seg_rel = nullptr, *win_begin = nullptr;
  uint8_t* skip = nullptr;
  // an epsilon graph's (PruneJob::eps): its epsilon arcs [E] by (time, lane) (e_off [nt + 1]),
  // the tokens' epsilon layers [M] and each (time, lane)'s highest layer [nt]
  int64_t* e_off = nullptr;
  int32_t *e_src = nullptr, *e_dst = nullptr, *e_code = nullptr, *layer = nullptr, *lmax = nullptr;
  float* e_score = nullptr;
  uint8_t* e_flags = nullptr;
  // with the records' filter on an epsilon graph (PruneJob::eps_filter): the tokens' search scores [M],
  // each (lane, step)'s assumed magnitude [B seg], each (time, lane)'s largest |forward| [nt], and the
  // lanes whose guard broke [B]
  float *tok_score = nullptr, *a_step = nullptr, *fmag = nullptr;
  int32_t* broken = nullptr;
};

// What a pruning needs of its decode, snapshotted by PruneBegin (the next decode overwrites
// the decoder's own copies), and its buffer set.
struct GpuDecoder::PruneJob {
  int64_t id = 0;
  int state = 0;  // kJobFree, kJobPending (begun), kJobRunning (a finisher has it)
  int32_t set = 0, B = 0, Tmax = 0;
  int64_t seg = 0, M = 0, N = 0, nt = 0, max_m = 1;
  float output_beam = 0.f;
  bool trimmed = false;
  // a graph with epsilon arcs (the frontier log's states, the epsilon arcs listed on the device;
  // "Epsilon graphs" above): E epsilon arcs, e_off their (time, lane) offsets, sb the state bits
  bool eps = false, eps_filter = false;
  int32_t sb = 0;
  int64_t E = 0;
  std::vector<int64_t> e_off;
  std::vector<int32_t> lengths, all, win_end, win_begin, seg_rel, last_tau;
  std::vector<uint8_t> skip;
  std::vector<int64_t> tok_off, rec_off;
  Event bucket_done;  // recorded after PrBucketKernel (on its stream: stream_, or pr_bucket_stream_ when side)
  double begin_ms = 0.0;
  PrJobBufs d;  // its arrays on the device (set `set`)
};
namespace {
constexpr int kJobFree = 0, kJobPending = 1, kJobRunning = 2;
}

void GpuDecoder::PruneLattice(int32_t B, const int32_t* lengths, const uint8_t* skip_in, float output_beam,
                              int64_t* sizes_out) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  if (inc_ && inc_->active) {  // a bounded decode pruned as it ran: number what it kept
    std::lock_guard<std::mutex> fin(pr_fin_mu_);
    IncFinish(B, lengths, skip_in, sizes_out);
    return;
  }
  // set 0, so a decoder that never pipelines holds one set of buffers (set 1 while a
  // pipelined finisher still has set 0)
  int32_t set = 0;
  {
    std::lock_guard<std::mutex> l(pr_mu_);
    if (pr_job_[0] && pr_job_[0]->state == kJobRunning) set = 1;
  }
  const int64_t id = PruneBeginLocked(B, lengths, skip_in, output_beam, set);
  std::lock_guard<std::mutex> fin(pr_fin_mu_);
  PruneFinishLocked(TakePruneJob(id), sizes_out);
}

int64_t GpuDecoder::PruneBegin(int32_t B, const int32_t* lengths, const uint8_t* skip_in, float output_beam) {
  std::lock_guard<std::mutex> lock(mu_);
  CheckAlive();
  DeviceGuard guard(graph_->device);
  if (inc_ && inc_->active)
    throw std::invalid_argument("PruneBegin: a bounded lattice decode is pruned by PruneLattice");
  const int32_t set = pr_job_turn_;
  pr_job_turn_ = 1 - set;
  return PruneBeginLocked(B, lengths, skip_in, output_beam, set);
}

void GpuDecoder::PruneFinish(int64_t id, int64_t* sizes_out, int64_t rows, double* ms_out) {
  std::lock_guard<std::mutex> fin(pr_fin_mu_);  // not mu_: the next decode holds it
  DeviceGuard guard(graph_->device);
  PruneJob& job = TakePruneJob(id);
  if (rows != job.B) {
    std::lock_guard<std::mutex> l(pr_mu_);
    job.state = kJobPending;  // untouched: the right call may still finish it
    throw std::invalid_argument("PruneFinish: the job has " + std::to_string(job.B) + " rows, not " +
                                std::to_string(rows));
  }
  PruneFinishLocked(job, sizes_out);
  std::copy(prune_ms_, prune_ms_ + 3, ms_out);
}

// The pending job `id`, now running (the caller holds pr_fin_mu_); throws if it is not pending.
GpuDecoder::PruneJob& GpuDecoder::TakePruneJob(int64_t id) {
  std::lock_guard<std::mutex> l(pr_mu_);
  for (auto& j : pr_job_)
    if (j && j->id == id && j->state == kJobPending) {
      j->state = kJobRunning;
      return *j;
    }
  throw std::invalid_argument("PruneFinish: no pending pruning " + std::to_string(id) +
                              " (finished already, or dropped by a later decode's PruneBegin)");
}

// PruneBegin's work (the caller holds mu_): the job's host arrays, its buffers, the records
// copied into them (PrBucketKernel) on stream_, and the event the finisher waits for.
int64_t GpuDecoder::PruneBeginLocked(int32_t B, const int32_t* lengths, const uint8_t* skip_in, float output_beam,
                                     int32_t set) {
  if (pr_B_ != B) throw std::invalid_argument("PruneLattice: the last decode was not a mode-2 lattice decode of these rows");
  const bool eps = cfg_.eps_iterations > 0;
  if (eps && (!pr_flog_ || static_cast<int32_t>(pr_ftotal_.size()) != B))
    throw std::invalid_argument("PruneLattice: the last decode logged no frontiers (an epsilon graph's GPU pruning "
                                "needs its mode-2 decode)");
  const auto c0 = std::chrono::steady_clock::now();
  // a stream or event the pruning could not have: what to say (the fault tests read it)
  auto cannot = [&](const char* what) {
    return std::string("cannot create a CUDA ") + what + " for the GPU lattice pruning on cuda:" +
           std::to_string(device()) + "; the decoder stays usable; free GPU memory, decode fewer rows at a time " +
           "(max_lanes, now " + std::to_string(cfg_.max_lanes) + "), or set CUWFST_LATTICE_PRUNE=replay";
  };
  if (!pr_stream_owned_) {
    Stream st;
    cudaError_t e = TryStreamCreate(cudaStreamNonBlocking, &st, prune_priority_);
    if (e != cudaSuccess) ThrowAcquireFailure(e, cannot("stream"));
    pr_stream_owned_ = std::move(st);
  }
  {
    std::lock_guard<std::mutex> l(pr_mu_);
    if (!pr_job_[set]) pr_job_[set] = std::make_shared<PruneJob>();
    if (pr_job_[set]->state == kJobRunning)
      throw std::logic_error("PruneBegin: the pruning of the batch before last is still running (finish it first)");
    pr_job_[set]->state = kJobFree;  // a pending job nobody finished is dropped here
    pr_job_[set]->id = 0;
  }
  PruneJob& J = *pr_job_[set];
  if (!J.bucket_done) {
    Event ev;
    cudaError_t e = TryEventCreate(cudaEventDisableTiming, &ev);
    if (e != cudaSuccess) ThrowAcquireFailure(e, cannot("event"));
    J.bucket_done = std::move(ev);
  }
  J.set = set;
  J.B = B;
  J.output_beam = output_beam;
  J.lengths.assign(lengths, lengths + B);
  J.skip.assign(skip_in, skip_in + B);
  J.all = pr_all_;
  J.eps = eps;
  // (an epsilon graph's records' filter: J.all holds each step's assumed magnitude A, not counts;
  // the rows' recorded arcs are then unknown, as the replay's filtered rows')
  J.eps_filter = eps && lat_filter_host_[7] != 0.f;
  J.trimmed = lat_trim_used_ || J.eps_filter;
  const int64_t seg = J.seg = ws_.seg_cap;
  const DeviceGraph g = graph_->view;
  int32_t Tmax = 0;  // times 0 .. Tmax; steps (record times) 0 .. Tmax - 1
  for (int32_t b = 0; b < B; ++b) Tmax = std::max(Tmax, lengths[b] + 1);
  J.Tmax = Tmax;
  // Token offsets, tau-major: size(b, 0) = 1 (the start), size(b, tau) = the frontier after step tau - 1.
  const int64_t nt = J.nt = static_cast<int64_t>(Tmax + 1) * B;
  std::vector<int64_t>& tok_off = J.tok_off;
  std::vector<int64_t>& rec_off = J.rec_off;
  tok_off.assign(nt + 1, 0);
  rec_off.assign(static_cast<int64_t>(Tmax) * B + 1, 0);
  // (an epsilon graph: S_0 is the start's closure, its size what the lane's frontier log holds
  // before S_1; log_off: where each S_tau, tau <= n, starts in the log)
  std::vector<int64_t> s0(B, 1), log_off(eps ? nt : 0, 0);
  for (int32_t b = 0; b < B && eps; ++b) {
    long long later = 0;
    for (int32_t t = 0; t < lengths[b]; ++t) later += std::max(pr_size_[b * seg + t], 0);
    const long long n0 = pr_ftotal_[b] - later;
    if (!skip_in[b] && (n0 < 1 || pr_ftotal_[b] > ws_.lat_log_lane))
      throw std::runtime_error("GPU lattice pruning: lane " + std::to_string(b) + "'s frontier log holds " +
                               std::to_string(pr_ftotal_[b]) + " tokens against its frontiers' " + std::to_string(later) +
                               " after the start (a decoder bug)");
    s0[b] = skip_in[b] ? 1 : n0;
  }
  for (int32_t tau = 0; tau <= Tmax; ++tau)
    for (int32_t b = 0; b < B; ++b) {
      const int64_t k = static_cast<int64_t>(tau) * B + b;
      const int64_t n = tau == 0 ? s0[b] : (tau <= lengths[b] + 1 ? pr_size_[b * seg + tau - 1] : 0);
      tok_off[k + 1] = tok_off[k] + std::max<int64_t>(n, 0);
      if (eps && tau <= lengths[b])  // S_tau after S_{tau - 1} in the lane's log
        log_off[k] = tau == 0 ? static_cast<int64_t>(b) * ws_.lat_log_lane
                              : log_off[k - B] + (tok_off[k - B + 1] - tok_off[k - B]);
    }
  for (int32_t t = 0; t < Tmax; ++t)
    for (int32_t b = 0; b < B; ++b) {
      const int64_t k = static_cast<int64_t>(t) * B + b;
      rec_off[k + 1] = rec_off[k] + (t <= lengths[b] ? pr_count_[b * seg + t] : 0);
    }
  const int64_t M = J.M = tok_off[nt], N = J.N = rec_off[static_cast<int64_t>(Tmax) * B];
  if (M >= (1ll << 31)) throw std::runtime_error("GPU lattice pruning: more than 2^31 tokens in one batch");
  // Windows (PruneWindows per lane): win_end[k * B + b], -1 when lane b has no window k.
  std::vector<int32_t>& win_end = J.win_end;
  std::vector<int32_t>& win_begin = J.win_begin;
  win_end.clear();
  win_begin.clear();
  for (int32_t k = 0;; ++k) {
    const int32_t b0 = -10 + 20 * k;
    bool any = false;
    for (int32_t b = 0; b < B; ++b) {
      const int32_t T = lengths[b] + 1;
      const int32_t prev_end = b0 - 20 + 30;  // window k - 1's end, unclipped
      const bool has = k == 0 || prev_end < T;
      win_end.push_back(has ? std::min(b0 + 30, T) : -1);
      any |= has;
    }
    if (!any) {
      win_end.resize(win_end.size() - B);
      break;
    }
    win_begin.push_back(std::max(0, b0));
  }
  // per-time segment offsets of the sort (relative to the time's first token)
  std::vector<int32_t>& seg_rel = J.seg_rel;
  seg_rel.assign(static_cast<int64_t>(Tmax + 1) * (B + 1), 0);
  int64_t max_m = 1;
  for (int32_t tau = 0; tau <= Tmax; ++tau) {
    const int64_t base = tok_off[static_cast<int64_t>(tau) * B];
    for (int32_t b = 0; b <= B; ++b)
      seg_rel[static_cast<int64_t>(tau) * (B + 1) + b] = static_cast<int32_t>(tok_off[static_cast<int64_t>(tau) * B + b] - base);
    max_m = std::max<int64_t>(max_m, tok_off[static_cast<int64_t>(tau) * B + B] - base);
  }
  J.max_m = max_m;
  J.last_tau.resize(B);
  for (int32_t b = 0; b < B; ++b) J.last_tau[b] = lengths[b] + 1;
  const std::vector<int32_t>& last_tau = J.last_tau;

  const auto c1 = std::chrono::steady_clock::now();  // (the host's offsets and windows done)
  auto buf = [&](int k, int64_t bytes) { return PruneBufferIn(set, k, static_cast<size_t>(bytes)); };
  PrJobBufs& d = J.d;
  d.rec_off = static_cast<int64_t*>(buf(0, rec_off.size() * 8));
  d.rec_cur = static_cast<int32_t*>(buf(1, rec_off.size() * 4));
  d.tok_off = static_cast<int64_t*>(buf(2, tok_off.size() * 8));
  d.src = static_cast<int32_t*>(buf(3, N * 4));
  d.dst = static_cast<int32_t*>(buf(4, N * 4));
  d.code = static_cast<int32_t*>(buf(5, N * 4));
  d.ac = static_cast<float*>(buf(6, N * 4));
  d.score = static_cast<float*>(buf(7, N * 4));
  d.flags = static_cast<uint8_t*>(buf(8, N));
  d.fwd = static_cast<int32_t*>(buf(9, M * 4));
  d.bwd = static_cast<int32_t*>(buf(10, M * 4));
  d.key = static_cast<unsigned long long*>(buf(11, M * 8));
  d.rank = static_cast<int32_t*>(buf(12, M * 4));
  d.alive = static_cast<uint8_t*>(buf(13, M));
  d.state = static_cast<int32_t*>(buf(14, M * 4));
  const size_t small_bytes = 64 + B + 4 * B + 4 * win_end.size() + 4 * seg_rel.size() + 4 * win_begin.size() + 64;
  char* small = static_cast<char*>(buf(15, small_bytes));
  d.cnt = reinterpret_cast<unsigned long long*>(small);
  d.last_tau = reinterpret_cast<int32_t*>(small + 64);
  d.win_end = d.last_tau + B;
  d.seg_rel = d.win_end + win_end.size();
  d.win_begin = d.seg_rel + seg_rel.size();
  d.skip = reinterpret_cast<uint8_t*>(d.win_begin + win_begin.size());
  auto *d_rec_off = d.rec_off, *d_tok_off = d.tok_off;
  auto* d_rec_cur = d.rec_cur;
  auto *p_src = d.src, *p_dst = d.dst, *p_code = d.code;
  auto *p_ac = d.ac, *p_score = d.score;
  auto* p_flags = d.flags;
  auto *fwd = d.fwd, *rank = d.rank, *state = d.state;
  auto* key = d.key;
  auto* alive = d.alive;
  auto* d_cnt = d.cnt;
  auto *d_last_tau = d.last_tau, *d_win_end = d.win_end, *d_seg_rel = d.seg_rel, *d_win_begin = d.win_begin;
  auto* d_skip = d.skip;

  // kPrBeginSide (epsilon-free graphs): the copies and kernels below on the bucketing's own stream,
  // after the records the decode wrote on stream_ (pr_records_ready_); the next decode's records pass
  // waits for pr_records_read_ (WaitRecordReaders), its search does not. Else on stream_.
  const bool side = pr_begin_mode_ == kPrBeginSide && !eps;
  if (side) {
    if (!pr_bucket_stream_owned_) {
      Stream st;
      cudaError_t e = TryStreamCreate(cudaStreamNonBlocking, &st, prune_priority_);
      if (e != cudaSuccess) ThrowAcquireFailure(e, cannot("stream"));
      pr_bucket_stream_owned_ = std::move(st);
    }
    for (Event* ev : {&pr_records_ready_, &pr_records_read_})
      if (!*ev) {
        Event made;
        cudaError_t e = TryEventCreate(cudaEventDisableTiming, &made);
        if (e != cudaSuccess) ThrowAcquireFailure(e, cannot("event"));
        *ev = std::move(made);
      }
    CUWFST_CUDA(cudaEventRecord(pr_records_ready_.get(), stream_));
    CUWFST_CUDA(cudaStreamWaitEvent(pr_bucket_stream_owned_.get(), pr_records_ready_.get(), 0));
  }
  cudaStream_t s = side ? pr_bucket_stream_owned_.get() : stream_;
  const auto c2 = std::chrono::steady_clock::now();  // (the job's buffers in hand)
  CUWFST_CUDA(cudaMemcpyAsync(d_rec_off, rec_off.data(), rec_off.size() * 8, cudaMemcpyHostToDevice, s));
  CUWFST_CUDA(cudaMemsetAsync(d_rec_cur, 0, rec_off.size() * 4, s));
  CUWFST_CUDA(cudaMemcpyAsync(d_tok_off, tok_off.data(), tok_off.size() * 8, cudaMemcpyHostToDevice, s));
  CUWFST_CUDA(cudaMemsetAsync(d_cnt, 0, 64, s));
  CUWFST_CUDA(cudaMemcpyAsync(d_last_tau, last_tau.data(), 4 * B, cudaMemcpyHostToDevice, s));
  if (!win_end.empty())
    CUWFST_CUDA(cudaMemcpyAsync(d_win_end, win_end.data(), 4 * win_end.size(), cudaMemcpyHostToDevice, s));
  CUWFST_CUDA(cudaMemcpyAsync(d_seg_rel, seg_rel.data(), 4 * seg_rel.size(), cudaMemcpyHostToDevice, s));
  if (!win_begin.empty())
    CUWFST_CUDA(cudaMemcpyAsync(d_win_begin, win_begin.data(), 4 * win_begin.size(), cudaMemcpyHostToDevice, s));
  CUWFST_CUDA(cudaMemcpyAsync(d_skip, J.skip.data(), B, cudaMemcpyHostToDevice, s));

  const auto c3 = std::chrono::steady_clock::now();  // (the copies queued)
  // CUWFST_DECODE_SPLIT=1: the device's time of the kernels too (timing events around them)
  const bool split = std::getenv("CUWFST_DECODE_SPLIT") != nullptr;
  Event ev[3];
  if (split)
    for (Event& e : ev) CUWFST_CUDA(TryEventCreate(cudaEventDefault, &e));
  if (split) CUWFST_CUDA(cudaEventRecord(ev[0].get(), s));
  PrFillFlags<<<GridFor(N), kPrThreads, 0, s>>>(p_flags, N);
  // the tokens first: the bucketing gives the admitted records' destinations their states
  PrInitTokens<<<GridFor(M), kPrThreads, 0, s>>>(M, fwd, key, alive, rank, state);
  PrInitStart<<<(B + 127) / 128, 128, 0, s>>>(g, B, d_tok_off, fwd, rank, state);
  if (split) CUWFST_CUDA(cudaEventRecord(ev[1].get(), s));
  // every slot the decode's records took: its records, and under CUWFST_LATTICE_RESERVE=chunk the
  // holes between them (lane -1, skipped); N elsewhere, where the cursor took one slot a record
  // (tests: a side bucketing that starts late, so a decode that did not wait would overwrite its records
  // first; after the copies, which may wait for the stream where their host memory is pageable)
  if (side && pr_side_delay_us_ > 0) PrSpinKernel<<<1, 32, 0, s>>>(pr_side_delay_us_ * 1000);
  const bool holes = lat_reserve_ && lat_after_used_;
  const int64_t slots = holes ? std::max<int64_t>(N, std::min<int64_t>(static_cast<int64_t>(pr_slots_), ws_.lat_cap)) : N;
  if (N > 0)
    PrBucketKernel<<<GridFor(slots), kPrThreads, 0, s>>>(g, ws_.lat, ws_.lat_ext, slots, B, Tmax, d_rec_off, d_rec_cur,
                                                     d_tok_off, d_skip, p_src, p_dst, p_code, p_ac, p_score, p_flags,
                                                     PrBucketPerWarp(), state, PrCodeBits(*graph_));
  CUWFST_CUDA(cudaGetLastError());
  if (split) CUWFST_CUDA(cudaEventRecord(ev[2].get(), s));
  if (eps) PruneEpsBegin(J, log_off, s);
  CUWFST_CUDA(cudaEventRecord(J.bucket_done.get(), s));
  if (side) {
    CUWFST_CUDA(cudaEventRecord(pr_records_read_.get(), s));
    lat_read_pending_ = true;
  }
  const auto c4 = std::chrono::steady_clock::now();  // (the kernels queued)
  // No wait for the bucketing unless kPrBeginSync: the copies read the job's own host arrays, which
  // live until its finish; the next decode's writes of the records the bucketing reads follow it
  // (on stream_ itself, or, side, behind pr_records_read_); the finisher waits for bucket_done; and a
  // buffer the next begin frees goes through cudaFree, and a growth of the records waits for
  // pr_records_read_ (GrowLattice). So the calling thread goes on to its next decode while the device
  // buckets. (An epsilon graph's PruneEpsBegin has synced already: its arcs' count sizes their arrays.)
  if (pr_begin_mode_ == kPrBeginSync) CUWFST_CUDA(cudaStreamSynchronize(s));
  {
    std::lock_guard<std::mutex> l(pr_mu_);
    J.id = ++pr_job_ids_;
    J.state = kJobPending;
  }
  const auto c5 = std::chrono::steady_clock::now();
  J.begin_ms = Ms(c0, c5);
  // CUWFST_DECODE_SPLIT=1 (diagnostics, as the Decode's phases): where this begin's time goes on the
  // decode call's path (scripts/decode_split.py reads the line; on an epsilon graph "kernels" holds
  // PruneEpsBegin, which syncs)
  if (split) {  // (the device's times: a wait here, after the begin's own stamps)
    CUWFST_CUDA(cudaEventSynchronize(ev[2].get()));
    float init_ms = 0.f, bucket_ms = 0.f;
    CUWFST_CUDA(cudaEventElapsedTime(&init_ms, ev[0].get(), ev[1].get()));
    CUWFST_CUDA(cudaEventElapsedTime(&bucket_ms, ev[1].get(), ev[2].get()));
    std::fprintf(stderr, "prune begin ms: host %.3f, buffers %.3f, copies %.3f, kernels %.3f, sync %.3f; records %lld, "
                 "tokens %lld; device init %.3f, bucket %.3f\n", Ms(c0, c1), Ms(c1, c2), Ms(c2, c3), Ms(c3, c4),
                 Ms(c4, c5), static_cast<long long>(N), static_cast<long long>(M), init_ms, bucket_ms);
  }
  return J.id;
}

// An epsilon graph's part of PruneBegin, on stream `s` after the bucketing (which gave the
// records' destinations their states): every token's state from the frontier log (PrEpsStates),
// the tokens of each (time, lane) sorted by state, and the epsilon arcs inside each time
// (PrEpsArcs: counted, offsets, written), in the job's buffers [72, 96), so the next decode may
// overwrite the log. Syncs (the arcs' count sizes their arrays).
void GpuDecoder::PruneEpsBegin(PruneJob& J, const std::vector<int64_t>& log_off, cudaStream_t s) {
  const int32_t B = J.B, set = J.set;
  const int64_t M = J.M, nt = J.nt;
  const DeviceGraph g = graph_->view;
  auto buf = [&](int k, int64_t bytes) { return PruneBufferIn(set, k, static_cast<size_t>(bytes)); };
  PrJobBufs& d = J.d;
  int32_t sb = 1;
  while (sb < 31 && (int64_t{1} << sb) < g.num_states) ++sb;
  J.sb = sb;
  auto* d_log_off = static_cast<int64_t*>(buf(72, std::max<int64_t>(nt, 1) * 8));
  if (nt > 0) CUWFST_CUDA(cudaMemcpyAsync(d_log_off, log_off.data(), nt * 8, cudaMemcpyHostToDevice, s));
  unsigned long long* err = d.cnt + 4;  // (d.cnt[4..5]: zeroed by the begin; [5] the finish's top layer)
  d.tok_score = static_cast<float*>(buf(90, M * 4));
  PrEpsStates<<<GridFor(M), kPrThreads, 0, s>>>(g, M, static_cast<int32_t>(nt), B, d.tok_off, d_log_off,
                                                ws_.lat_log_state, ws_.lat_log_score, d.last_tau, d.skip, d.state,
                                                d.tok_score, d.alive, err);
  if (J.eps_filter) {  // the steps' assumed magnitudes (J.all: float bits) for the guard
    d.a_step = static_cast<float*>(buf(91, static_cast<int64_t>(J.all.size()) * 4));
    if (!J.all.empty())
      CUWFST_CUDA(cudaMemcpyAsync(d.a_step, J.all.data(), J.all.size() * 4, cudaMemcpyHostToDevice, s));
    d.fmag = static_cast<float*>(buf(92, std::max<int64_t>(nt, 1) * 4));
    d.broken = static_cast<int32_t*>(buf(93, static_cast<int64_t>(B) * 4));
    CUWFST_CUDA(cudaMemsetAsync(d.broken, 0, static_cast<size_t>(B) * 4, s));
  }
  // the tokens of each (time, lane) by state
  auto* keys_in = static_cast<int32_t*>(buf(73, M * 4));
  auto* vals_in = static_cast<int32_t*>(buf(74, M * 4));
  auto* sorted = static_cast<int32_t*>(buf(75, M * 4));
  auto* toks = static_cast<int32_t*>(buf(76, M * 4));
  PrEpsSortIn<<<GridFor(M), kPrThreads, 0, s>>>(M, d.state, keys_in, vals_in);
  size_t temp = 0;
  CUWFST_CUDA(cub::DeviceSegmentedSort::SortPairs(nullptr, temp, keys_in, sorted, vals_in, toks, static_cast<int>(M),
                                                  static_cast<int>(nt), d.tok_off, d.tok_off + 1, s));
  void* tmp = buf(77, static_cast<int64_t>(temp));
  CUWFST_CUDA(cub::DeviceSegmentedSort::SortPairs(tmp, temp, keys_in, sorted, vals_in, toks, static_cast<int>(M),
                                                  static_cast<int>(nt), d.tok_off, d.tok_off + 1, s));
  // the epsilon arcs: counted, their offsets, written
  auto* cnt = static_cast<int64_t*>(buf(78, (M + 1) * 8));
  auto* start = static_cast<int64_t*>(buf(79, (M + 1) * 8));
  PrEpsArcs<<<GridFor(M), kPrThreads, 0, s>>>(g, M, static_cast<int32_t>(nt), B, d.tok_off, d.last_tau, d.state, sorted,
                                              toks, cnt, nullptr, nullptr, nullptr, nullptr, nullptr);
  size_t scan_temp = 0;
  CUWFST_CUDA(cub::DeviceScan::ExclusiveSum(nullptr, scan_temp, cnt, start, static_cast<int>(M), s));
  void* scan_tmp = buf(77, static_cast<int64_t>(std::max(temp, scan_temp)));
  CUWFST_CUDA(cub::DeviceScan::ExclusiveSum(scan_tmp, scan_temp, cnt, start, static_cast<int>(M), s));
  int64_t tail[2] = {0, 0};
  unsigned long long h_err = 0;
  {
    Readback rb(h_readback_, s, readback_staged_);  // (the begin's: under mu_)
    if (M > 0) {
      CUWFST_CUDA(rb.Copy(&tail[0], start + M - 1, 8));
      CUWFST_CUDA(rb.Copy(&tail[1], cnt + M - 1, 8));
    }
    CUWFST_CUDA(rb.Copy(&h_err, err, 8));
    CUWFST_CUDA(rb.Sync());
  }
  if (h_err & kEpsErrLog)
    throw std::runtime_error("GPU lattice pruning: a frontier log entry names no graph state (a decoder bug)");
  if (h_err & kEpsErrStart)
    throw std::runtime_error("GPU lattice pruning: a lane's first token is not the start state (a decoder bug)");
  const int64_t E = J.E = tail[0] + tail[1];
  d.e_src = static_cast<int32_t*>(buf(80, E * 4));
  d.e_dst = static_cast<int32_t*>(buf(81, E * 4));
  d.e_code = static_cast<int32_t*>(buf(82, E * 4));
  d.e_score = static_cast<float*>(buf(83, E * 4));
  d.e_flags = static_cast<uint8_t*>(buf(84, E));
  d.e_off = static_cast<int64_t*>(buf(85, (nt + 1) * 8));
  d.layer = static_cast<int32_t*>(buf(86, M * 4));
  d.lmax = static_cast<int32_t*>(buf(87, std::max<int64_t>(nt, 1) * 4));
  if (E > 0) {
    PrEpsArcs<<<GridFor(M), kPrThreads, 0, s>>>(g, M, static_cast<int32_t>(nt), B, d.tok_off, d.last_tau, d.state,
                                                sorted, toks, nullptr, start, d.e_src, d.e_dst, d.e_code, d.e_score);
    CUWFST_CUDA(cudaMemsetAsync(d.e_flags, 0, E, s));
  }
  PrEpsOffsets<<<GridFor(nt + 1), kPrThreads, 0, s>>>(static_cast<int32_t>(nt), d.tok_off, start, M, E, d.e_off);
  CUWFST_CUDA(cudaMemsetAsync(d.layer, 0, M * 4, s));
  J.e_off.resize(nt + 1);
  CUWFST_CUDA(cudaMemcpyAsync(J.e_off.data(), d.e_off, (nt + 1) * 8, cudaMemcpyDeviceToHost, s));
  CUWFST_CUDA(cudaGetLastError());
}

// An epsilon graph's PruneFinish (PruneFinishLocked's for J.eps): one CTA a lane for the layers and
// the forward (PrEpsLaneForwardKernel), one for k2's windows (PrEpsLaneWindowsKernel), the kept
// arcs and states, and the device numbering with the layers' levels.
void GpuDecoder::PruneEpsFinish(PruneJob& J, int64_t* sizes_out, std::chrono::steady_clock::time_point c0) {
  const int32_t set = J.set, B = J.B, Tmax = J.Tmax;
  const int32_t* lengths = J.lengths.data();
  const int64_t M = J.M, N = J.N, nt = J.nt, E = J.E;
  const int32_t K = static_cast<int32_t>(J.win_begin.size());
  const DeviceGraph g = graph_->view;
  auto buf = [&](int k, int64_t bytes) { return PruneBufferIn(set, k, static_cast<size_t>(bytes)); };
  const PrJobBufs& d = J.d;
  cudaStream_t s = pr_stream_owned_.get();
  CUWFST_CUDA(cudaStreamWaitEvent(s, J.bucket_done.get(), 0));
  unsigned long long* err = d.cnt + 4;
  PrEpsLaneForwardKernel<<<B, kPrLaneThreads, 0, s>>>(B, Tmax, d.tok_off, d.rec_off, d.src, d.dst, d.score, d.flags,
                                                       d.e_off, d.e_src, d.e_dst, d.e_score, d.e_flags, d.fwd, d.layer,
                                                       d.lmax, d.rank, d.state, J.sb, err, d.tok_score,
                                                       J.eps_filter ? d.a_step : nullptr, J.seg, d.last_tau, d.fmag,
                                                       d.broken);
  if (K > 0)
    PrEpsLaneWindowsKernel<<<B, kPrLaneThreads, 0, s>>>(B, K, d.win_begin, d.win_end, d.tok_off, d.rec_off, d.src,
                                                         d.dst, d.score, d.flags, d.e_off, d.e_src, d.e_dst, d.e_score,
                                                         d.e_flags, d.layer, d.lmax, d.fwd, d.alive, d.bwd,
                                                         -J.output_beam, J.eps_filter ? d.a_step : nullptr, J.seg,
                                                         d.fmag, cfg_.eps_iterations, d.broken);
  const int32_t nbr = Tmax * B, nbt = static_cast<int32_t>(nt);
  PrOutArcs<<<GridFor(N), kPrThreads, 0, s>>>(g, N, nbr, d.rec_off, B, d.src, d.dst, d.code, d.ac, d.score, d.flags,
                                              d.alive, d.cnt, nullptr, 0, d.state, PrCodeBits(*graph_));
  PrEpsOutArcs<<<GridFor(E), kPrThreads, 0, s>>>(g, E, nbt, B, d.tok_off, d.e_src, d.e_dst, d.e_code, d.e_score,
                                                 d.e_flags, d.alive, d.cnt, nullptr, 0);
  PrOutStates<<<GridFor(M), kPrThreads, 0, s>>>(M, nbt, d.tok_off, B, d.last_tau, d.alive, d.rank, d.state, d.cnt + 1,
                                                nullptr, 0);
  unsigned long long cnt[6] = {0, 0, 0, 0, 0, 0};
  std::vector<int32_t> broken(J.eps_filter ? B : 0, 0);
  {
    Readback rb(pr_readback_, s, readback_staged_);
    CUWFST_CUDA(rb.Copy(cnt, d.cnt, sizeof(cnt)));
    if (J.eps_filter) CUWFST_CUDA(rb.Copy(broken.data(), d.broken, B * 4));
    CUWFST_CUDA(rb.Sync());
  }
  if (cnt[4] & kEpsErrCycle)
    throw std::runtime_error("GPU lattice pruning: an epsilon cycle inside a time (the graph's epsilon arcs must be "
                             "acyclic)");
  const int64_t top = static_cast<int64_t>(cnt[5]);
  if (J.sb + 1 + [&] { int32_t k = 0; while ((int64_t{1} << k) <= top) ++k; return k; }() > 30)
    throw std::runtime_error("GPU lattice pruning: " + std::to_string(top) + " epsilon layers and " +
                             std::to_string(g.num_states) + " graph states do not fit a state's 30-bit rank; "
                             "set CUWFST_LATTICE_PRUNE=replay");
  const auto c1 = std::chrono::steady_clock::now();
  const int64_t A = static_cast<int64_t>(cnt[0]), S = static_cast<int64_t>(cnt[1]);
  auto* o_arcs = static_cast<PrunedArcOut*>(buf(20, A * sizeof(PrunedArcOut)));
  auto* o_states = static_cast<PrunedStateOut*>(buf(21, S * sizeof(PrunedStateOut)));
  CUWFST_CUDA(cudaMemsetAsync(d.cnt, 0, 64, s));
  PrOutArcs<<<GridFor(N), kPrThreads, 0, s>>>(g, N, nbr, d.rec_off, B, d.src, d.dst, d.code, d.ac, d.score, d.flags,
                                              d.alive, d.cnt, o_arcs, static_cast<unsigned long long>(A), d.state,
                                              PrCodeBits(*graph_));
  PrEpsOutArcs<<<GridFor(E), kPrThreads, 0, s>>>(g, E, nbt, B, d.tok_off, d.e_src, d.e_dst, d.e_code, d.e_score,
                                                 d.e_flags, d.alive, d.cnt, o_arcs, static_cast<unsigned long long>(A));
  PrOutStates<<<GridFor(M), kPrThreads, 0, s>>>(M, nbt, d.tok_off, B, d.last_tau, d.alive, d.rank, d.state, d.cnt + 1,
                                                o_states, static_cast<unsigned long long>(S));
  // each time's level: the kept states' highest layers, then each lane's running sum
  const int64_t nl = static_cast<int64_t>(B) * (Tmax + 2);
  auto* tops = static_cast<int32_t*>(buf(88, nl * 4));
  auto* levels = static_cast<int32_t*>(buf(89, nl * 4));
  CUWFST_CUDA(cudaMemsetAsync(tops, 0, nl * 4, s));
  PrEpsTops<<<GridFor(S), kPrThreads, 0, s>>>(o_states, S, Tmax, J.sb, tops);
  PrEpsLevels<<<(B + 127) / 128, 128, 0, s>>>(B, Tmax, tops, levels);
  CUWFST_CUDA(cudaGetLastError());
  const int64_t max_rank = (top + 1) << J.sb;
  if (!NumberOnDevice(o_arcs, A, o_states, S, B, lengths, d.skip, Tmax, max_rank, M, s, levels, J.sb))
    throw std::runtime_error("GPU lattice pruning: an epsilon graph's lattice keys do not fit 64 bits; set "
                             "CUWFST_LATTICE_PRUNE=replay");
  const auto c2 = std::chrono::steady_clock::now();
  PrunedSizes(B, lengths, J.seg, J.all, J.trimmed, sizes_out);
  // k2's recorded arcs: the step's and, on an epsilon graph, the closure's epsilon arcs inside each time
  for (int32_t b = 0; b < B && !J.trimmed; ++b) {
    int64_t n = 0;
    for (int32_t tau = 0; tau <= Tmax; ++tau) {
      const int64_t k = static_cast<int64_t>(tau) * B + b;
      n += J.e_off[k + 1] - J.e_off[k];
    }
    pr_rows_[b].recorded += n;
    sizes_out[3 * b + 2] = pr_rows_[b].recorded;
  }
  // rows whose records' filter broke its guard: -2, decoded again without the filter (decoder/gpu.py)
  for (int32_t b = 0; b < static_cast<int32_t>(broken.size()); ++b)
    if (broken[b] && !J.skip[b]) sizes_out[3 * b + 2] = -2;
  const auto c3 = std::chrono::steady_clock::now();
  prune_ms_[0] = J.begin_ms + Ms(c0, c1);
  prune_ms_[1] = 0.0;
  prune_ms_[2] = Ms(c1, c3);
  (void)c2;
}

// The rest of a pruning on pr_stream_ (the caller holds pr_fin_mu_ and has marked the job
// running; it is free again when this returns or throws).
void GpuDecoder::PruneFinishLocked(PruneJob& J, int64_t* sizes_out) {
  struct Release {
    GpuDecoder* d;
    PruneJob* j;
    ~Release() {
      std::lock_guard<std::mutex> l(d->pr_mu_);
      j->state = kJobFree;
      j->id = 0;
    }
  } release{this, &J};
  const auto c0 = std::chrono::steady_clock::now();
  if (J.eps) {
    PruneEpsFinish(J, sizes_out, c0);
    return;
  }
  const int32_t set = J.set, B = J.B, Tmax = J.Tmax;
  const int32_t* lengths = J.lengths.data();
  const int64_t seg = J.seg, M = J.M, N = J.N, nt = J.nt, max_m = J.max_m;
  const std::vector<int64_t>& tok_off = J.tok_off;
  const std::vector<int64_t>& rec_off = J.rec_off;
  const std::vector<int32_t>& win_end = J.win_end;
  const std::vector<int32_t>& win_begin = J.win_begin;
  const int32_t K = static_cast<int32_t>(win_begin.size());
  const DeviceGraph g = graph_->view;
  auto buffer = [&](int k, int64_t bytes) { return PruneBufferIn(set, k, static_cast<size_t>(bytes)); };
  // the arrays the begin sized and filled
  const PrJobBufs& d = J.d;
  auto *d_rec_off = d.rec_off, *d_tok_off = d.tok_off;
  auto *p_src = d.src, *p_dst = d.dst, *p_code = d.code;
  auto *p_ac = d.ac, *p_score = d.score;
  auto* p_flags = d.flags;
  auto *fwd = d.fwd, *bwd = d.bwd, *rank = d.rank, *state = d.state;
  auto* key = d.key;
  auto* alive = d.alive;
  auto* d_cnt = d.cnt;
  auto *d_last_tau = d.last_tau, *d_win_end = d.win_end, *d_seg_rel = d.seg_rel, *d_win_begin = d.win_begin;
  auto* d_skip = d.skip;

  cudaStream_t s = pr_stream_owned_.get();
  CUWFST_CUDA(cudaStreamWaitEvent(s, J.bucket_done.get(), 0));
  // the rank sort of each time (PrRankSort; the ranks are below the largest time's tokens)
  const PrRankSort sorter = MakeRankSort(max_m, max_m, B, PrCodeBits(*graph_), {16, 17, 18, 22, 19}, buffer, key,
                                         d_seg_rel, s);
  int64_t lane_times = 0, block_times = 0, sort_times = 0;
  // CUWFST_PRUNE_SPLIT=1: the device passes timed phase by phase (a sync after each), to stderr
  const bool split = std::getenv("CUWFST_PRUNE_SPLIT") != nullptr;
  auto mark = [&](std::chrono::steady_clock::time_point* at) {
    if (!split) return;
    CUWFST_CUDA(cudaStreamSynchronize(s));
    *at = std::chrono::steady_clock::now();
  };
  std::chrono::steady_clock::time_point m0 = std::chrono::steady_clock::now(), m1 = m0, m2 = m0, m3 = m0;
  mark(&m1);  // the begin's bucketing, if it is still running
  // forward, time by time, and the CPU's token order of each new time: one CTA a lane over
  // every time (CUWFST_PRUNE_SORT=lanes), or a forward and a rank launch a time
  // the lane kernels' phase clocks under CUWFST_PRUNE_SPLIT
  unsigned long long* lane_clk = nullptr;
  if (sorter.lanes && split) {
    lane_clk = static_cast<unsigned long long*>(buffer(63, 8 * kPrLaneClocks));
    CUWFST_CUDA(cudaMemsetAsync(lane_clk, 0, 8 * kPrLaneClocks, s));
  }
  if (sorter.lanes)
    lane_times += LaneForward(s, g, B, 0, 0, Tmax, tok_off, d_tok_off, d_rec_off, p_src, p_dst, p_code, p_score,
                              p_flags, fwd, key, rank, state, bwd, sorter, 62, buffer, lane_clk);
  for (int32_t t = 0; t < Tmax && !sorter.lanes; ++t) {
    const int64_t r0 = rec_off[static_cast<int64_t>(t) * B], r1 = rec_off[static_cast<int64_t>(t + 1) * B];
    if (r1 > r0)
      PrForwardKernel<<<GridFor(r1 - r0), kPrThreads, 0, s>>>(r0, r1, p_src, p_dst, p_code, p_score, p_flags, fwd,
                                                              key, rank, sorter.code_bits,
                                                              PrPlaceShift(g, sorter.code_bits),
                                                              PrKeyPlaces(g, sorter.code_bits));
    const int64_t base = tok_off[static_cast<int64_t>(t + 1) * B];
    const int32_t m = static_cast<int32_t>(tok_off[static_cast<int64_t>(t + 1) * B + B] - base);
    if (m == 0) continue;
    const int32_t* sr = d_seg_rel + static_cast<int64_t>(t + 1) * (B + 1);
    int32_t most = 0;
    for (int32_t b = 0; b < B; ++b)
      most = std::max<int32_t>(most, static_cast<int32_t>(tok_off[static_cast<int64_t>(t + 1) * B + b + 1] -
                                                          tok_off[static_cast<int64_t>(t + 1) * B + b]));
    PrRankSort::Count(sorter.Run(s, B, base, m, most, sr, key, rank), &block_times, &sort_times);
  }
  CUWFST_CUDA(cudaGetLastError());
  mark(&m2);
  // k2's windows, in order, every lane's window k at once
  const float neg_beam = -J.output_beam;
  if (sorter.lanes && K > 0)
    PrLaneWindowsKernel<<<B, kPrLaneThreads, 0, s>>>(B, K, d_win_begin, d_win_end, d_tok_off, d_rec_off, p_src, p_dst,
                                                     p_score, p_flags, fwd, alive, bwd, neg_beam, lane_clk);
  for (int32_t k = 0; k < K && !sorter.lanes; ++k) {
    const int32_t begin = win_begin[k];
    const int32_t* we = d_win_end + static_cast<int64_t>(k) * B;
    int32_t emax = -1, most_tok = 1;
    for (int32_t b = 0; b < B; ++b) emax = std::max(emax, win_end[static_cast<int64_t>(k) * B + b]);
    if (emax < 0) continue;
    for (int32_t b = 0; b < B; ++b)
      for (int32_t tau = begin; tau <= emax && tau <= Tmax; ++tau)
        most_tok = std::max<int32_t>(most_tok, static_cast<int32_t>(tok_off[static_cast<int64_t>(tau) * B + b + 1] -
                                                                    tok_off[static_cast<int64_t>(tau) * B + b]));
    const int gx = std::min(GridFor(most_tok), 64);
    PrWindowInit<<<dim3(gx, B), kPrThreads, 0, s>>>(B, begin, we, d_tok_off, fwd, alive, bwd);
    for (int32_t t = emax - 1; t >= begin; --t) {
      int64_t most = 0;
      for (int32_t b = 0; b < B; ++b)
        most = std::max(most, rec_off[static_cast<int64_t>(t) * B + b + 1] - rec_off[static_cast<int64_t>(t) * B + b]);
      if (most == 0) continue;
      PrBackwardKernel<<<dim3(std::min(GridFor(most), 1024), B), kPrThreads, 0, s>>>(
          t, B, we, d_rec_off, p_src, p_dst, p_score, p_flags, fwd, alive, bwd, neg_beam);
    }
    PrWindowEnd<<<dim3(gx, B), kPrThreads, 0, s>>>(B, begin, we, d_tok_off, bwd, alive);
  }
  CUWFST_CUDA(cudaGetLastError());
  mark(&m3);
  // count, then compact what is kept
  const int32_t nbr = Tmax * B, nbt = static_cast<int32_t>(nt);
  PrOutArcs<<<GridFor(N), kPrThreads, 0, s>>>(g, N, nbr, d_rec_off, B, p_src, p_dst, p_code, p_ac, p_score,
                                              p_flags, alive, d_cnt, nullptr, 0, state, sorter.code_bits);
  PrOutStates<<<GridFor(M), kPrThreads, 0, s>>>(M, nbt, d_tok_off, B, d_last_tau, alive, rank, state, d_cnt + 1,
                                                nullptr, 0);
  unsigned long long cnt[2] = {0, 0};
  {
    // (pinned: a pageable copy would block the decoding thread's record on the legacy default stream)
    Readback rb(pr_readback_, s, readback_staged_);
    CUWFST_CUDA(rb.Copy(cnt, d_cnt, sizeof(cnt)));
    CUWFST_CUDA(rb.Sync());
  }
  {
    std::lock_guard<std::mutex> l(pr_mu_);
    prune_lane_times_ += lane_times;
    prune_block_times_ += block_times;
    prune_sort_times_ += sort_times;
  }
  const auto c1 = std::chrono::steady_clock::now();
  if (split)
    std::fprintf(stderr,
                 "prune split ms: setup %.2f, bucket+init %.2f, forward+rank %.2f (%d times), windows %.2f (%d), "
                 "count %.2f; records %lld, tokens %lld, B %d\n",
                 J.begin_ms, Ms(m0, m1), Ms(m1, m2), Tmax, Ms(m2, m3), K, Ms(m3, c1), static_cast<long long>(N),
                 static_cast<long long>(M), B);
  if (split && lane_clk) {  // cycles summed over the lanes -> ms a lane on average
    unsigned long long clk[kPrLaneClocks];
    CUWFST_CUDA(cudaMemcpyAsync(clk, lane_clk, sizeof(clk), cudaMemcpyDeviceToHost, s));
    CUWFST_CUDA(cudaStreamSynchronize(s));
    int khz = 1;
    CUWFST_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, graph_->device));
    auto ms = [&](int k) { return static_cast<double>(clk[k]) / B / std::max(khz, 1); };
    std::fprintf(stderr,
                 "prune lane ms a lane (SM clocks at %d MHz): forward %.2f, count+scan %.2f, scatter %.2f, in-group "
                 "%.2f, others %.2f; windows: init %.2f, backward %.2f, end %.2f\n",
                 khz / 1000, ms(kClkForward), ms(kClkCount), ms(kClkScatter), ms(kClkGroup), ms(kClkOthers),
                 ms(kClkWinInit), ms(kClkWinBack), ms(kClkWinEnd));
  }
  const int64_t A = static_cast<int64_t>(cnt[0]), S = static_cast<int64_t>(cnt[1]);
  auto* o_arcs = static_cast<PrunedArcOut*>(buffer(20, A * sizeof(PrunedArcOut)));
  auto* o_states = static_cast<PrunedStateOut*>(buffer(21, S * sizeof(PrunedStateOut)));
  CUWFST_CUDA(cudaMemsetAsync(d_cnt, 0, 64, s));
  PrOutArcs<<<GridFor(N), kPrThreads, 0, s>>>(g, N, nbr, d_rec_off, B, p_src, p_dst, p_code, p_ac, p_score,
                                              p_flags, alive, d_cnt, o_arcs, static_cast<unsigned long long>(A), state,
                                              sorter.code_bits);
  PrOutStates<<<GridFor(M), kPrThreads, 0, s>>>(M, nbt, d_tok_off, B, d_last_tau, alive, rank, state, d_cnt + 1,
                                                o_states, static_cast<unsigned long long>(S));
  CUWFST_CUDA(cudaGetLastError());
  // ---- number each row's kept states by (time, rank) and sort its arcs: on the device
  // (NumberOnDevice, the default) or on the host (lattice_number.h; CUWFST_LATTICE_NUMBER=host,
  // or keys past 64 bits)
  const char* num_env = std::getenv("CUWFST_LATTICE_NUMBER");
  const bool host_numbering = num_env && std::strcmp(num_env, "host") == 0;
  auto c2 = std::chrono::steady_clock::now();
  double number_ms = 0.0;
  if (!host_numbering && NumberOnDevice(o_arcs, A, o_states, S, B, lengths, d_skip, Tmax, max_m, M, s)) {
    c2 = std::chrono::steady_clock::now();
    number_ms = pr_num_ms_;
  } else {
    pr_on_device_ = false;
    PinnedFor(0, A * static_cast<int64_t>(sizeof(PrunedArcOut)));
    PinnedFor(1, S * static_cast<int64_t>(sizeof(PrunedStateOut)));
    if (A > 0) CUWFST_CUDA(cudaMemcpyAsync(pr_host_[0].get(), o_arcs, A * sizeof(PrunedArcOut), cudaMemcpyDeviceToHost, s));
    if (S > 0) CUWFST_CUDA(cudaMemcpyAsync(pr_host_[1].get(), o_states, S * sizeof(PrunedStateOut), cudaMemcpyDeviceToHost, s));
    CUWFST_CUDA(cudaStreamSynchronize(s));
    c2 = std::chrono::steady_clock::now();
    const auto* ha = static_cast<const PrunedArcOut*>(pr_host_[0].get());
    const auto* hs = static_cast<const PrunedStateOut*>(pr_host_[1].get());
    NumberOnHost(ha, A, hs, S, B, lengths, J.skip.data(), PrunedEndpoints::kToken);
  }
  PrunedSizes(B, lengths, seg, J.all, J.trimmed, sizes_out);
  const auto c3 = std::chrono::steady_clock::now();
  // {device passes, readback, numbering}: the device numbering's kernels count as numbering;
  // the device passes from the begin's (its bucketing) and this call's start
  prune_ms_[0] = J.begin_ms + Ms(c0, c1);
  prune_ms_[1] = Ms(c1, c2) - number_ms;
  prune_ms_[2] = Ms(c2, c3) + number_ms;
}

// The kept arcs and states of B rows numbered on the host (lattice_number.h NumberPrunedRows, on
// NumberingWorkers' threads) into pr_rows_; a numbering error is a runtime_error.
void GpuDecoder::NumberOnHost(const PrunedArcOut* arcs, int64_t A, const PrunedStateOut* states, int64_t S, int32_t B,
                              const int32_t* lengths, const uint8_t* skip, PrunedEndpoints ends) {
  pr_number_.src_place = graph_->src_place.empty() ? nullptr : graph_->src_place.data();  // (k2's arc order)
  const std::string err =
      NumberPrunedRows(arcs, A, states, S, B, lengths, skip, ends, NumberingWorkers(A), &pr_number_, &pr_rows_);
  if (!err.empty()) throw std::runtime_error(err);
}

// sizes_out [B, 3] = {states, arcs, recorded arcs} of pr_rows_ (recorded: the rows' record counts
// pr_all_, seg entries a row; -1 where the lattice trim left arcs uncounted, LatticeOutputs::trim).
void GpuDecoder::PrunedSizes(int32_t B, const int32_t* lengths, int64_t seg, const std::vector<int32_t>& all,
                             bool trimmed, int64_t* sizes_out) {
  for (int32_t b = 0; b < B; ++b) {
    PrunedRow& row = pr_rows_[b];
    row.recorded = 0;
    for (int32_t t = 0; t <= lengths[b] && !trimmed; ++t) row.recorded += all[b * seg + t];
    if (trimmed) row.recorded = -1;
    sizes_out[3 * b] = row.num_states;
    sizes_out[3 * b + 1] = row.num_arcs;
    sizes_out[3 * b + 2] = row.recorded;
  }
}

// Pinned host buffer k (pr_host_) of at least `want` bytes (a quarter more when it grows).
void GpuDecoder::PinnedFor(int k, int64_t want) {
  if (pr_host_[k].amount() >= want) return;
  pr_host_[k] = PinnedBuffer();
  PinnedBuffer fresh;
  cudaError_t e = TryPinnedAlloc(static_cast<size_t>(want + want / 4), &fresh);
  if (e != cudaSuccess) {
    std::ostringstream os;
    os << "cannot allocate " << FormatBytes(want) << " of pinned host memory for the pruned lattices of a decode on cuda:"
       << device() << "; the decoder stays usable; decode fewer rows at a time (max_lanes, now " << cfg_.max_lanes << ")";
    ThrowAcquireFailure(e, os.str());
  }
  pr_host_[k] = std::move(fresh);
}

// The numbering on the device (the PrNum* kernels): the rows' arrays into pinned memory
// (pr_host_[1]: states, pr_host_[0]: arcs then scores; pr_num_sizes_: per row {states, arcs,
// state offset, arc offset}), pr_rows_' counts, pr_num_ms_ its kernels' and readback's time.
// False (nothing done) when its keys do not fit 64 bits: the host numbering runs then.
// max_rank: above every rank of a kept state (the most tokens of a time); M: the tokens.
bool GpuDecoder::NumberOnDevice(const PrunedArcOut* o_arcs, int64_t A, const PrunedStateOut* o_states, int64_t S,
                                int32_t B, const int32_t* lengths, const uint8_t* d_skip, int32_t Tmax, int64_t max_rank,
                                int64_t M, cudaStream_t s, const int32_t* eps_levels, int32_t eps_sb) {
  auto bits = [](int64_t n) {  // the least k with 2^k >= n
    int32_t k = 0;
    while (k < 62 && (int64_t{1} << k) < n) ++k;
    return k;
  };
  const int32_t lb = bits(B + 1), tb = std::max(1, bits(Tmax + 1)), rb = std::max(1, bits(max_rank)),
                nb = std::max(1, bits(S + 1));
  const int32_t cb = eps_levels != nullptr ? 31 : 30;  // the arc keys' code part (PrNumArcKeys)
  if (lb + tb + rb > 63 || lb + nb + cb > 63 || rb > 30 || M >= (int64_t{1} << 31) || S >= (int64_t{1} << 31) ||
      A >= (int64_t{1} << 31))
    return false;
  const auto n0 = std::chrono::steady_clock::now();
  const int64_t n = std::max<int64_t>(std::max(S, A), 1);
  auto* k_in = static_cast<unsigned long long*>(PruneBuffer(64, n * 8));
  auto* k_out = static_cast<unsigned long long*>(PruneBuffer(65, n * 8));
  auto* v_in = static_cast<int32_t*>(PruneBuffer(66, n * 4));
  auto* v_out = static_cast<int32_t*>(PruneBuffer(67, n * 4));
  auto* tok_num = static_cast<int32_t*>(PruneBuffer(68, 2 * std::max<int64_t>(M, 1) * 4));
  int32_t* tok_lane = tok_num + M;
  auto* a_dst = static_cast<int32_t*>(PruneBuffer(69, std::max<int64_t>(A, 1) * 4));
  // small: lane starts of the states and arcs [B + 1] each, sizes [4 B], err, the lengths [B]
  char* small = static_cast<char*>(PruneBuffer(70, (2 * (B + 1) + 4 * B) * 8 + 16 + 4 * B));
  auto* s_start = reinterpret_cast<int64_t*>(small);
  int64_t* a_start = s_start + B + 1;
  int64_t* sizes = a_start + B + 1;
  auto* err = reinterpret_cast<int32_t*>(sizes + 4 * B);
  int32_t* d_len = err + 4;
  // the rows' arrays: states [3, S_b] (at most S + B entries: each row's final), arcs [4, A_b], scores [3, A_b]
  auto* out_states = static_cast<int32_t*>(PruneBuffer(71, (3 * (S + B) + 7 * A) * 4));
  int32_t* out_arcs = out_states + 3 * (S + B);
  auto* out_scores = reinterpret_cast<float*>(out_arcs + 4 * A);
  size_t temp = 0;
  CUWFST_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, temp, k_in, k_out, v_in, v_out, static_cast<int>(n), 0, 64, s));
  void* tmp = PruneBuffer(23, temp);
  temp = static_cast<size_t>(pr_buf_[23].amount());
  CUWFST_CUDA(cudaMemsetAsync(tok_num, 0xFF, 2 * M * 4, s));  // -1: no state
  CUWFST_CUDA(cudaMemsetAsync(err, 0, 16, s));
  CUWFST_CUDA(cudaMemcpyAsync(d_len, lengths, 4 * B, cudaMemcpyHostToDevice, s));
  PrNumStateKeys<<<GridFor(S), kPrThreads, 0, s>>>(o_states, S, B, Tmax, static_cast<int32_t>(M), tb, rb, k_in, v_in,
                                                   err);
  if (S > 0) {
    size_t tb_bytes = temp;
    CUWFST_CUDA(cub::DeviceRadixSort::SortPairs(tmp, tb_bytes, k_in, k_out, v_in, v_out, static_cast<int>(S), 0,
                                                lb + tb + rb, s));
  }
  PrNumLaneStarts<<<(B + 1 + 127) / 128, 128, 0, s>>>(k_out, S, B, tb + rb, s_start);
  PrNumStateSizes<<<1, 1, 0, s>>>(k_out, s_start, B, tb, rb, d_len, d_skip, sizes, out_states, eps_levels, Tmax);
  PrNumStatesOut<<<GridFor(S), kPrThreads, 0, s>>>(o_states, k_out, v_out, S, tb, rb, s_start, sizes, d_skip,
                                                   out_states, tok_num, tok_lane, err, eps_levels, Tmax, eps_sb);
  PrNumArcKeys<<<GridFor(A), kPrThreads, 0, s>>>(o_arcs, A, B, static_cast<int32_t>(M), nb, tok_num, tok_lane, k_in,
                                                 v_in, a_dst, err, graph_->view.arc_src_place, cb);
  if (A > 0) {
    size_t tb_bytes = temp;
    CUWFST_CUDA(cub::DeviceRadixSort::SortPairs(tmp, tb_bytes, k_in, k_out, v_in, v_out, static_cast<int>(A), 0,
                                                lb + nb + cb, s));
  }
  PrNumLaneStarts<<<(B + 1 + 127) / 128, 128, 0, s>>>(k_out, A, B, nb + cb, a_start);
  PrNumArcSizes<<<1, 1, 0, s>>>(a_start, B, d_skip, sizes);
  PrNumArcsOut<<<GridFor(A), kPrThreads, 0, s>>>(o_arcs, k_out, v_out, A, nb, a_start, sizes, d_skip, a_dst, out_arcs,
                                                 out_scores, cb);
  CUWFST_CUDA(cudaGetLastError());
  pr_num_sizes_.resize(4 * static_cast<size_t>(B));
  int32_t h_err = 0;
  {
    Readback rb(pr_readback_, s, readback_staged_);
    CUWFST_CUDA(rb.Copy(pr_num_sizes_.data(), sizes, 4 * B * 8));
    CUWFST_CUDA(rb.Copy(&h_err, err, 4));
    CUWFST_CUDA(rb.Sync());
  }
  if (h_err & kNumErrLane) throw std::runtime_error("GPU lattice pruning: a kept arc or state of no row (a decoder bug)");
  if (h_err & kNumErrDupState)
    throw std::runtime_error("GPU lattice pruning: two kept states share a time and rank (a decoder bug)");
  if (h_err & kNumErrDupToken)
    throw std::runtime_error("GPU lattice pruning: two kept states share a token (a decoder bug)");
  if (h_err & kNumErrEndpoint)
    throw std::runtime_error("GPU lattice pruning: a kept arc leaves or enters a pruned state (a decoder bug)");
  const auto n1 = std::chrono::steady_clock::now();
  int64_t st_total = 0, arc_total = 0;
  pr_rows_.resize(B);
  for (int32_t b = 0; b < B; ++b) {
    pr_rows_[b].num_states = static_cast<int32_t>(pr_num_sizes_[4 * b]);
    pr_rows_[b].num_arcs = static_cast<int32_t>(pr_num_sizes_[4 * b + 1]);
    st_total += pr_num_sizes_[4 * b];
    arc_total += pr_num_sizes_[4 * b + 1];
  }
  pr_num_arcs_ = arc_total;
  PinnedFor(1, std::max<int64_t>(3 * st_total * 4, 4));
  PinnedFor(0, std::max<int64_t>(7 * arc_total * 4, 4));
  if (st_total > 0)
    CUWFST_CUDA(cudaMemcpyAsync(pr_host_[1].get(), out_states, 3 * st_total * 4, cudaMemcpyDeviceToHost, s));
  if (arc_total > 0) {
    auto* h = static_cast<int32_t*>(pr_host_[0].get());
    CUWFST_CUDA(cudaMemcpyAsync(h, out_arcs, 4 * arc_total * 4, cudaMemcpyDeviceToHost, s));
    CUWFST_CUDA(cudaMemcpyAsync(h + 4 * arc_total, out_scores, 3 * arc_total * 4, cudaMemcpyDeviceToHost, s));
  }
  CUWFST_CUDA(cudaStreamSynchronize(s));
  pr_on_device_ = true;
  pr_num_ms_ = Ms(n0, n1);
  return true;
}

// Every asked row is checked before any is copied; the copies (the rows' arrays, about 1 MB a
// row of 30,000 arcs on the full tier) run on NumberingWorkers' threads, a row a thread at a
// time, largest first: one call for the batch instead of one a row, and the first touch of
// the caller's fresh arrays spread over the threads.
void GpuDecoder::TakePrunedRows(int64_t n, const int32_t* rows, const int64_t* S, const int64_t* A,
                                int32_t* const* states, int32_t* const* arcs, float* const* scores) {
  // the finisher's lock, not mu_: a pipelined pruning's rows are taken while the next decode runs
  std::lock_guard<std::mutex> lock(pr_fin_mu_);
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (rows[i] < 0 || rows[i] >= static_cast<int32_t>(pr_rows_.size()))
      throw std::invalid_argument("TakePrunedRows: no such row");
    const PrunedRow& r = pr_rows_[rows[i]];
    if (S[i] != r.num_states || A[i] != r.num_arcs)
      throw std::invalid_argument("TakePrunedRows: wrong state or arc count");
    total += A[i];
  }
  const auto* hs = static_cast<const int32_t*>(pr_on_device_ ? pr_host_[1].get() : nullptr);
  const auto* ha = static_cast<const int32_t*>(pr_on_device_ ? pr_host_[0].get() : nullptr);
  const auto* hc = pr_on_device_ ? reinterpret_cast<const float*>(ha + 4 * pr_num_arcs_) : nullptr;
  auto copy = [&](int64_t i) {
    const int32_t b = rows[i];
    if (pr_on_device_) {  // the device numbering's rows, in pinned memory (NumberOnDevice)
      const int64_t so = pr_num_sizes_[4 * b + 2], ao = pr_num_sizes_[4 * b + 3];
      std::copy(hs + 3 * so, hs + 3 * (so + S[i]), states[i]);
      std::copy(ha + 4 * ao, ha + 4 * (ao + A[i]), arcs[i]);
      std::copy(hc + 3 * ao, hc + 3 * (ao + A[i]), scores[i]);
      return;
    }
    const PrunedRow& r = pr_rows_[b];
    std::copy(r.states.begin(), r.states.end(), states[i]);
    std::copy(r.arcs.begin(), r.arcs.end(), arcs[i]);
    std::copy(r.scores.begin(), r.scores.end(), scores[i]);
  };
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return A[x] > A[y]; });
  const int64_t workers = std::min<int64_t>(NumberingWorkers(total), n);
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t k = next++; k < n; k = next++) copy(order[k]);
  };
  if (workers <= 1) {
    work();
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t w = 1; w < workers; ++w) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {  // no thread to be had: fewer copiers, the same copies
      break;
    }
  }
  work();
  for (auto& t : pool) t.join();
}

// ---------------------------------------------------------------- bounded lattice memory
// LatticeOutputs::chunk > 0 (GpuDecoder::RunBoundedLattice): the batch runs chunk steps at a
// time and IncPass prunes each run's records as k2 does during its forward pass. Why this is
// PruneLattice's result exactly (and the CPU LatticeBuilder's, which prunes the same way):
//  * forward scores and ranks of time tau + 1 read only the records of step tau, which no
//    window has touched yet when they are computed (a window ending at E touches records of
//    times < E; step E's records arrive after it) -- the same unpruned records PruneLattice
//    reads;
//  * k2's window k is [max(0, 20k - 10), E_k), E_k = 20k + 20 (the lane's T for its last
//    window); it runs as soon as time E_k exists, windows in order, each on what the
//    earlier ones kept: the order PruneLattice and the CPU use. Non-last windows depend on
//    T only through "E_k < T", known from the lengths;
//  * after windows 0 .. k - 1 of a lane, window k (and every later one) starts at
//    R = begin_k: records of times < R are never read or dropped again, and tokens of times
//    <= R never die again (a window keeps every state of its first time). So those records'
//    kept/dropped flags and those tokens' alive bits are final: IncPass writes the kept ones
//    to the host and keeps only times >= R on the device (tokens of time R stay too: the
//    records of time R leave them).
// Live device records: one run's in the arena plus, in the pruning's buffers, times [R, t1)
// (chunk + 10 times when the chunk is a multiple of 20), in two generations (the carry is
// copied from one to the other, compacted, at the start of each pass).

namespace {
int32_t WindowBegin(int32_t k) { return std::max(0, -10 + 20 * k); }
}  // namespace

void GpuDecoder::IncReset(int32_t B, const int32_t* lengths, float output_beam) {
  if (!inc_) inc_ = std::make_shared<IncPrune>();
  IncPrune& P = *inc_;
  P = IncPrune();
  P.active = true;
  P.B = B;
  P.seg = ws_.seg_cap;
  P.neg_beam = -output_beam;
  P.len.assign(lengths, lengths + B);
  P.next_win.assign(B, 0);
  P.kept_from.assign(B, 0);
  P.done.assign(B, 0);
  P.count.assign(static_cast<size_t>(B) * P.seg, 0);
  P.size.assign(static_cast<size_t>(B) * P.seg, 0);
  lat_live_high_ = 0;
}

void GpuDecoder::IncPass(int32_t t1, unsigned long long n_arena) {
  IncPrune& P = *inc_;
  const int32_t t0 = P.t_done;
  if (t1 <= t0) return;
  const auto c0 = std::chrono::steady_clock::now();
  const int32_t B = P.B;
  const int64_t seg = P.seg;
  const DeviceGraph g = graph_->view;
  cudaStream_t s = stream_;
  // 1. the per-step arrays of steps [t0, t1)
  CUWFST_CUDA(cudaMemcpy2DAsync(P.count.data() + t0, seg * 4, ws_.lat_count + t0, ws_.seg_cap * 4, (t1 - t0) * 4, B,
                                cudaMemcpyDeviceToHost, s));
  CUWFST_CUDA(cudaMemcpy2DAsync(P.size.data() + t0, seg * 4, ws_.lat_size + t0, ws_.seg_cap * 4, (t1 - t0) * 4, B,
                                cudaMemcpyDeviceToHost, s));
  CUWFST_CUDA(cudaStreamSynchronize(s));
  {  // the arena holds exactly the run's records: its step counts add up to the cursor
    const LatticeRunNeed r = LatticeNeedOfRun(P.count.data(), B, seg, t0, t1, 0);
    if (static_cast<unsigned long long>(r.made) != n_arena) {
      std::ostringstream os;
      os << "bounded lattice pruning: the cursor counted " << n_arena << " records but the step counts of steps "
         << t0 << " .. " << t1 - 1 << " add up to " << r.made << " (a decoder bug; please report it)";
      throw std::logic_error(os.str());
    }
  }
  // 2. this pass's layout: tokens of times [R, t1], records of times [R, t1)
  const int32_t R = P.R;
  const int64_t nbt = static_cast<int64_t>(t1 - R + 1) * B, nbr = static_cast<int64_t>(t1 - R) * B;
  std::vector<int64_t> tok_off(nbt + 1, 0), rec_off(nbr + 1, 0);
  for (int32_t tau = R; tau <= t1; ++tau)
    for (int32_t b = 0; b < B; ++b) {
      const int64_t k = static_cast<int64_t>(tau - R) * B + b;
      int64_t n = 0;
      if (tau >= P.kept_from[b] && tau <= P.len[b] + 1) n = tau == 0 ? 1 : std::max<int32_t>(0, P.size[b * seg + tau - 1]);
      tok_off[k + 1] = tok_off[k] + n;
    }
  for (int32_t t = R; t < t1; ++t)
    for (int32_t b = 0; b < B; ++b) {
      const int64_t k = static_cast<int64_t>(t - R) * B + b;
      const int64_t n = t >= P.kept_from[b] && t <= P.len[b] ? std::max<int32_t>(0, P.count[b * seg + t]) : 0;
      rec_off[k + 1] = rec_off[k] + n;
    }
  const int64_t M = tok_off[nbt], N = rec_off[nbr];
  if (M >= (1ll << 31) || N >= (1ll << 31))
    throw std::runtime_error("GPU lattice pruning: more than 2^31 tokens or records in one pass; lower the chunk");
  const int64_t nbt_c = static_cast<int64_t>(t0 - R + 1) * B, nbr_c = static_cast<int64_t>(t0 - R) * B;
  const int64_t Mc = P.has_layout ? tok_off[nbt_c] : 0, Nc = P.has_layout ? rec_off[nbr_c] : 0;
  const int64_t shift = static_cast<int64_t>(R - P.R_layout) * B;
  // buffers: generation g at 24 + 12 g (records 0-5, tokens 6-9, offsets 10-11); shared at 48+
  const int g0 = 24 + 12 * P.gen, g1 = 24 + 12 * (P.gen ^ 1);
  auto* src1 = static_cast<int32_t*>(PruneBuffer(g1 + 0, N * 4));
  auto* dst1 = static_cast<int32_t*>(PruneBuffer(g1 + 1, N * 4));
  auto* code1 = static_cast<int32_t*>(PruneBuffer(g1 + 2, N * 4));
  auto* ac1 = static_cast<float*>(PruneBuffer(g1 + 3, N * 4));
  auto* score1 = static_cast<float*>(PruneBuffer(g1 + 4, N * 4));
  auto* flags1 = static_cast<uint8_t*>(PruneBuffer(g1 + 5, N));
  auto* fwd1 = static_cast<int32_t*>(PruneBuffer(g1 + 6, M * 4));
  auto* rank1 = static_cast<int32_t*>(PruneBuffer(g1 + 7, M * 4));
  auto* alive1 = static_cast<uint8_t*>(PruneBuffer(g1 + 8, M));
  auto* state1 = static_cast<int32_t*>(PruneBuffer(g1 + 9, M * 4));
  auto* d_tok1 = static_cast<int64_t*>(PruneBuffer(g1 + 10, tok_off.size() * 8));
  auto* d_rec1 = static_cast<int64_t*>(PruneBuffer(g1 + 11, rec_off.size() * 8));
  auto* bwd = static_cast<int32_t*>(PruneBuffer(48, M * 4));
  auto* key = static_cast<unsigned long long*>(PruneBuffer(49, M * 8));
  auto* rec_cur = static_cast<int32_t*>(PruneBuffer(50, static_cast<size_t>(t1 - t0) * B * 4));
  // small: counter [8 x u64], lo, hi_rec, hi_tok, last_tau [B each], seg_rel [(t1 - t0) x (B + 1)],
  // win_end [windows x B] (at most (t1 - R) / 20 + 2 windows), win_begin [windows]
  const int64_t max_windows = (t1 - R) / 20 + 3;
  const size_t small_bytes = 64 + 4 * (4 * static_cast<size_t>(B) + static_cast<size_t>(t1 - t0) * (B + 1) +
                                       static_cast<size_t>(max_windows) * (B + 1));
  char* small = static_cast<char*>(PruneBuffer(51, small_bytes));
  auto* d_cnt = reinterpret_cast<unsigned long long*>(small);
  auto* d_lo = reinterpret_cast<int32_t*>(small + 64);
  auto* d_hi_rec = d_lo + B;
  auto* d_hi_tok = d_hi_rec + B;
  auto* d_last_tau = d_hi_tok + B;
  auto* d_seg_rel = d_last_tau + B;
  auto* d_win_end = d_seg_rel + static_cast<int64_t>(t1 - t0) * (B + 1);
  auto* d_win_begin = d_win_end + max_windows * B;

  CUWFST_CUDA(cudaMemcpyAsync(d_tok1, tok_off.data(), tok_off.size() * 8, cudaMemcpyHostToDevice, s));
  CUWFST_CUDA(cudaMemcpyAsync(d_rec1, rec_off.data(), rec_off.size() * 8, cudaMemcpyHostToDevice, s));
  if (Mc > 0) {
    IncMoveTokens<<<GridFor(Mc), kPrThreads, 0, s>>>(
        Mc, static_cast<int32_t>(nbt_c), shift, d_tok1, static_cast<const int64_t*>(pr_buf_[g0 + 10].get()),
        static_cast<const int32_t*>(pr_buf_[g0 + 6].get()), static_cast<const int32_t*>(pr_buf_[g0 + 7].get()),
        static_cast<const uint8_t*>(pr_buf_[g0 + 8].get()), static_cast<const int32_t*>(pr_buf_[g0 + 9].get()), fwd1,
        rank1, alive1, state1);
  }
  if (M > Mc) PrInitTokens<<<GridFor(M - Mc), kPrThreads, 0, s>>>(M - Mc, fwd1 + Mc, key + Mc, alive1 + Mc, rank1 + Mc, state1 + Mc);
  if (!P.has_layout) PrInitStart<<<(B + 127) / 128, 128, 0, s>>>(g, B, d_tok1, fwd1, rank1, state1);
  if (Nc > 0) {
    IncMoveRecords<<<GridFor(Nc), kPrThreads, 0, s>>>(
        Nc, static_cast<int32_t>(nbr_c), B, shift, d_rec1, static_cast<const int64_t*>(pr_buf_[g0 + 11].get()), d_tok1,
        static_cast<const int64_t*>(pr_buf_[g0 + 10].get()), static_cast<const int32_t*>(pr_buf_[g0 + 0].get()),
        static_cast<const int32_t*>(pr_buf_[g0 + 1].get()), static_cast<const int32_t*>(pr_buf_[g0 + 2].get()),
        static_cast<const float*>(pr_buf_[g0 + 3].get()), static_cast<const float*>(pr_buf_[g0 + 4].get()),
        static_cast<const uint8_t*>(pr_buf_[g0 + 5].get()), src1, dst1, code1, ac1, score1, flags1);
  }
  if (N > Nc) PrFillFlags<<<GridFor(N - Nc), kPrThreads, 0, s>>>(flags1 + Nc, N - Nc);
  CUWFST_CUDA(cudaMemsetAsync(rec_cur, 0, static_cast<size_t>(t1 - t0) * B * 4, s));
  if (n_arena > 0)
    IncBucketKernel<<<GridFor(static_cast<int64_t>(n_arena)), kPrThreads, 0, s>>>(
        g, ws_.lat, ws_.lat_ext, static_cast<int64_t>(n_arena), B, R, t0, t1, d_rec1, rec_cur, d_tok1, src1, dst1,
        code1, ac1, score1, flags1, PrBucketPerWarp(), state1, PrCodeBits(*graph_));
  CUWFST_CUDA(cudaGetLastError());

  // 3. forward scores and the CPU's token order of times t0 + 1 .. t1 (PruneLattice's loop)
  std::vector<int32_t> seg_rel(static_cast<size_t>(t1 - t0) * (B + 1));
  int64_t max_m = 1;
  for (int32_t tau = t0 + 1; tau <= t1; ++tau) {
    const int64_t k0 = static_cast<int64_t>(tau - R) * B, base = tok_off[k0];
    for (int32_t b = 0; b <= B; ++b)
      seg_rel[static_cast<size_t>(tau - t0 - 1) * (B + 1) + b] = static_cast<int32_t>(tok_off[k0 + b] - base);
    max_m = std::max<int64_t>(max_m, tok_off[k0 + B] - base);
  }
  CUWFST_CUDA(cudaMemcpyAsync(d_seg_rel, seg_rel.data(), seg_rel.size() * 4, cudaMemcpyHostToDevice, s));
  // the rank sort as PruneLattice's (PrRankSort); the key bits cover the ranks of times t0 ..
  // t1 (the sources of time t0 were ranked by an earlier pass)
  int64_t rank_most = max_m;
  for (int32_t tau = std::max(t0, R); tau <= t1; ++tau) {
    const int64_t k0 = static_cast<int64_t>(tau - R) * B;
    rank_most = std::max<int64_t>(rank_most, tok_off[k0 + B] - tok_off[k0]);
  }
  auto buffer = [&](int k, int64_t bytes) { return PruneBuffer(k, static_cast<size_t>(bytes)); };
  const PrRankSort sorter = MakeRankSort(rank_most, max_m, B, PrCodeBits(*graph_), {52, 53, 54, 58, 55}, buffer, key,
                                         d_seg_rel, s);
  int64_t lane_times = 0, block_times = 0, sort_times = 0;
  if (sorter.lanes)
    lane_times += LaneForward(s, g, B, R, t0, t1, tok_off, d_tok1, d_rec1, src1, dst1, code1, score1, flags1, fwd1,
                              key, rank1, state1, bwd, sorter, 59, buffer);
  for (int32_t t = t0; t < t1 && !sorter.lanes; ++t) {
    const int64_t r0 = rec_off[static_cast<int64_t>(t - R) * B], r1 = rec_off[static_cast<int64_t>(t + 1 - R) * B];
    if (r1 > r0)
      PrForwardKernel<<<GridFor(r1 - r0), kPrThreads, 0, s>>>(r0, r1, src1, dst1, code1, score1, flags1, fwd1, key,
                                                              rank1, sorter.code_bits,
                                                              PrPlaceShift(g, sorter.code_bits),
                                                              PrKeyPlaces(g, sorter.code_bits));
    const int64_t k0 = static_cast<int64_t>(t + 1 - R) * B, base = tok_off[k0];
    const int32_t m = static_cast<int32_t>(tok_off[k0 + B] - base);
    if (m == 0) continue;
    const int32_t* sr = d_seg_rel + static_cast<int64_t>(t - t0) * (B + 1);
    int32_t most = 0;
    for (int32_t b = 0; b < B; ++b) most = std::max<int32_t>(most, static_cast<int32_t>(tok_off[k0 + b + 1] - tok_off[k0 + b]));
    PrRankSort::Count(sorter.Run(s, B, base, m, most, sr, key, rank1), &block_times, &sort_times);
  }
  CUWFST_CUDA(cudaGetLastError());
  {
    std::lock_guard<std::mutex> l(pr_mu_);  // MemStats reads them under it
    prune_lane_times_ += lane_times;
    prune_block_times_ += block_times;
    prune_sort_times_ += sort_times;
  }

  // 4. every window whose end exists, in order (win_end relative to R, -1: not this pass)
  std::vector<int32_t> win_end, win_begin;
  {
    int32_t kmin = INT32_MAX;
    for (int32_t b = 0; b < B; ++b)
      if (!P.done[b]) kmin = std::min(kmin, P.next_win[b]);
    for (int32_t k = kmin; kmin != INT32_MAX; ++k) {
      bool any = false;
      for (int32_t b = 0; b < B; ++b) {
        int32_t we = -1;
        if (!P.done[b] && k >= P.next_win[b]) {
          const int32_t T = P.len[b] + 1;
          int32_t E = -10 + 20 * k + 30;
          const bool last = E >= T;
          if (last) E = T;
          if (E <= t1) {
            we = E - R;
            P.next_win[b] = k + 1;
            if (last) P.done[b] = 1;
          }
        }
        win_end.push_back(we);
        any |= we >= 0;
      }
      if (!any) {
        win_end.resize(win_end.size() - B);
        break;
      }
      if (WindowBegin(k) < R) throw std::logic_error("bounded lattice pruning: a window starts before the pass (a bug)");
      win_begin.push_back(WindowBegin(k) - R);
    }
  }
  if (static_cast<int64_t>(win_begin.size()) > max_windows)
    throw std::logic_error("bounded lattice pruning: more windows than room (a bug)");
  if (!win_end.empty())
    CUWFST_CUDA(cudaMemcpyAsync(d_win_end, win_end.data(), 4 * win_end.size(), cudaMemcpyHostToDevice, s));
  if (sorter.lanes && !win_begin.empty()) {
    CUWFST_CUDA(cudaMemcpyAsync(d_win_begin, win_begin.data(), 4 * win_begin.size(), cudaMemcpyHostToDevice, s));
    PrLaneWindowsKernel<<<B, kPrLaneThreads, 0, s>>>(B, static_cast<int32_t>(win_begin.size()), d_win_begin, d_win_end,
                                                     d_tok1, d_rec1, src1, dst1, score1, flags1, fwd1, alive1, bwd,
                                                     P.neg_beam, nullptr);
  }
  for (size_t k = 0; k < win_begin.size() && !sorter.lanes; ++k) {
    const int32_t begin = win_begin[k];
    const int32_t* we = d_win_end + static_cast<int64_t>(k) * B;
    int32_t emax = -1, most_tok = 1;
    for (int32_t b = 0; b < B; ++b) emax = std::max(emax, win_end[k * B + b]);
    if (emax < 0) continue;
    for (int32_t b = 0; b < B; ++b)
      for (int32_t tau = begin; tau <= emax; ++tau)
        most_tok = std::max<int32_t>(most_tok, static_cast<int32_t>(tok_off[static_cast<int64_t>(tau) * B + b + 1] -
                                                                    tok_off[static_cast<int64_t>(tau) * B + b]));
    const int gx = std::min(GridFor(most_tok), 64);
    PrWindowInit<<<dim3(gx, B), kPrThreads, 0, s>>>(B, begin, we, d_tok1, fwd1, alive1, bwd);
    for (int32_t t = emax - 1; t >= begin; --t) {
      int64_t most = 0;
      for (int32_t b = 0; b < B; ++b)
        most = std::max(most, rec_off[static_cast<int64_t>(t) * B + b + 1] - rec_off[static_cast<int64_t>(t) * B + b]);
      if (most == 0) continue;
      PrBackwardKernel<<<dim3(std::min(GridFor(most), 1024), B), kPrThreads, 0, s>>>(
          t, B, we, d_rec1, src1, dst1, score1, flags1, fwd1, alive1, bwd, P.neg_beam);
    }
    PrWindowEnd<<<dim3(gx, B), kPrThreads, 0, s>>>(B, begin, we, d_tok1, bwd, alive1);
  }
  CUWFST_CUDA(cudaGetLastError());

  // 5. what no later window touches leaves: a finished lane all of it, the others times < R_new
  int32_t R_new = t1;
  for (int32_t b = 0; b < B; ++b)
    if (!P.done[b]) R_new = std::min(R_new, WindowBegin(P.next_win[b]));
  std::vector<int32_t> lanes(4 * static_cast<size_t>(B));  // lo, hi_rec, hi_tok, last_tau
  for (int32_t b = 0; b < B; ++b) {
    const int32_t T = P.len[b] + 1;
    lanes[b] = P.kept_from[b];
    lanes[B + b] = P.done[b] ? T : std::max(P.kept_from[b], R_new);
    lanes[2 * B + b] = P.done[b] ? T + 1 : std::max(P.kept_from[b], R_new);
    lanes[3 * B + b] = T;
  }
  CUWFST_CUDA(cudaMemcpyAsync(d_lo, lanes.data(), lanes.size() * 4, cudaMemcpyHostToDevice, s));
  CUWFST_CUDA(cudaMemsetAsync(d_cnt, 0, 64, s));
  const int32_t nbr32 = static_cast<int32_t>(nbr), nbt32 = static_cast<int32_t>(nbt);
  if (N > 0)
    IncEmitArcs<<<GridFor(N), kPrThreads, 0, s>>>(g, N, nbr32, d_rec1, B, R, d_lo, d_hi_rec, src1, dst1, code1, ac1,
                                                  score1, flags1, alive1, rank1, d_cnt, nullptr, 0, state1, sorter.code_bits);
  IncEmitStates<<<GridFor(M), kPrThreads, 0, s>>>(M, nbt32, d_tok1, B, R, d_lo, d_hi_tok, d_last_tau, alive1, rank1,
                                                  state1, d_cnt + 1, nullptr, 0);
  unsigned long long cnt[2] = {0, 0};
  CUWFST_CUDA(cudaMemcpyAsync(cnt, d_cnt, sizeof(cnt), cudaMemcpyDeviceToHost, s));
  CUWFST_CUDA(cudaStreamSynchronize(s));
  const auto c1 = std::chrono::steady_clock::now();
  const int64_t A = static_cast<int64_t>(cnt[0]), S = static_cast<int64_t>(cnt[1]);
  auto* o_arcs = static_cast<PrunedArcOut*>(PruneBuffer(56, A * sizeof(PrunedArcOut)));
  auto* o_states = static_cast<PrunedStateOut*>(PruneBuffer(57, S * sizeof(PrunedStateOut)));
  CUWFST_CUDA(cudaMemsetAsync(d_cnt, 0, 64, s));
  if (N > 0)
    IncEmitArcs<<<GridFor(N), kPrThreads, 0, s>>>(g, N, nbr32, d_rec1, B, R, d_lo, d_hi_rec, src1, dst1, code1, ac1,
                                                  score1, flags1, alive1, rank1, d_cnt, o_arcs,
                                                  static_cast<unsigned long long>(A), state1, sorter.code_bits);
  IncEmitStates<<<GridFor(M), kPrThreads, 0, s>>>(M, nbt32, d_tok1, B, R, d_lo, d_hi_tok, d_last_tau, alive1, rank1,
                                                  state1, d_cnt + 1, o_states, static_cast<unsigned long long>(S));
  CUWFST_CUDA(cudaGetLastError());
  const size_t a0 = P.arcs.size(), s0 = P.states.size();
  P.arcs.resize(a0 + A);
  P.states.resize(s0 + S);
  // straight into the host vectors (pageable: a synchronous copy; these are the kept arcs only)
  if (A > 0) CUWFST_CUDA(cudaMemcpyAsync(P.arcs.data() + a0, o_arcs, A * sizeof(PrunedArcOut), cudaMemcpyDeviceToHost, s));
  if (S > 0) CUWFST_CUDA(cudaMemcpyAsync(P.states.data() + s0, o_states, S * sizeof(PrunedStateOut), cudaMemcpyDeviceToHost, s));
  CUWFST_CUDA(cudaStreamSynchronize(s));
  const auto c2 = std::chrono::steady_clock::now();
  for (int32_t b = 0; b < B; ++b) P.kept_from[b] = lanes[2 * B + b];
  P.tok_off.swap(tok_off);
  P.rec_off.swap(rec_off);
  P.R_layout = R;
  P.R = R_new;
  P.gen ^= 1;
  P.has_layout = true;
  P.t_done = t1;
  lat_live_high_ = std::max<int64_t>(lat_live_high_, N + static_cast<int64_t>(n_arena));
  P.ms[0] += Ms(c0, c1);
  P.ms[1] += Ms(c1, c2);
}

// The rows of a bounded decode from what its passes emitted: as PruneLattice's host part,
// with states found by (time, rank) (a token's index does not survive the passes):
// NumberPrunedRows under PrunedEndpoints::kTimeRank.
void GpuDecoder::IncFinish(int32_t B, const int32_t* lengths, const uint8_t* skip_in, int64_t* sizes_out) {
  IncPrune& P = *inc_;
  const auto c0 = std::chrono::steady_clock::now();
  if (P.B != B) throw std::invalid_argument("PruneLattice: the last bounded lattice decode had other rows");
  for (int32_t b = 0; b < B; ++b)
    if (lengths[b] != P.len[b] || (!skip_in[b] && (!P.done[b] || P.kept_from[b] != lengths[b] + 2)))
      throw std::runtime_error("bounded lattice pruning: a row was not pruned to its end (a decoder bug)");
  const int64_t seg = ws_.seg_cap;
  const PrunedArcOut* ha = P.arcs.data();
  const PrunedStateOut* hs = P.states.data();
  const int64_t A = static_cast<int64_t>(P.arcs.size()), S = static_cast<int64_t>(P.states.size());
  pr_on_device_ = false;
  NumberOnHost(ha, A, hs, S, B, lengths, skip_in, PrunedEndpoints::kTimeRank);
  PrunedSizes(B, lengths, seg, pr_all_, lat_trim_used_, sizes_out);
  // the emitted arcs and states are in the rows now
  std::vector<PrunedArcOut>().swap(P.arcs);
  std::vector<PrunedStateOut>().swap(P.states);
  P.active = false;
  prune_ms_[0] = P.ms[0];
  prune_ms_[1] = P.ms[1];
  prune_ms_[2] = Ms(c0, std::chrono::steady_clock::now());
}

}  // namespace cuwfst
