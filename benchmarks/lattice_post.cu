// The lattice records as one bulk pass after the search (issue 10; benchmarks/lattice_post.py
// drives it): what it costs on the GPU to find every step's records at once, given the search's
// frontiers, instead of a stage of every step's latency-bound loop.
//
// A real step t -> t + 1 of a row records every emitting arc of a token of S_t whose destination is
// in S_{t+1} and which the records' filter keeps (lattice.cuh's rule): end = (score + weight) +
// acoustic; admitted = end > cutoff; kept = admitted or !(end < (s(dst) - output_beam) - slack)
// where the step is filtered; arcs ending below pre_low = (cutoff - output_beam) - slack are
// dropped unprobed. Those records depend on S_t, S_{t+1} and the step's scalars alone, so every
// step of a batch can be recorded in one pass: a CTA a row-step and 1,024 tokens of S_t, S_{t+1} as
// a hash table in shared memory (state -> index; past 8,192 tokens in global memory, built first),
// the frame's log-prob row in shared memory, a warp a token walking its emitting arcs (label-0 arcs
// first, then the others by weight, best first: the graph image's order) until (score + weight) +
// the row's best non-blank log-prob falls below pre_low; four launches by table size, in turn or
// on streams of their own. Counts and an order-free checksum of the kept records come back for the
// driver's check against numpy; the records themselves are written as the decoder's LatRecord +
// LatRecordExt (32 bytes), a warp's at one atomicAdd on one cursor or on 64, so the bytes are the
// real ones.
//
// Built by the driver: nvcc -O3 -arch=sm_90 -shared -Xcompiler -fPIC; called through ctypes.
// Not part of the package (no Python binding, no torch).
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include "../cuwfst/csrc/include/cuwfst/state_table.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace lpost {  // (named: the exported functions take its types)

struct RowStep {        // one real step t -> t + 1 of one row (the driver fills them)
  int64_t src_off;      // S_t in the batch's frontier arrays
  int64_t dst_off;      // S_{t+1}
  int64_t lp_off;       // the frame's log-prob row in the batch's log-probs
  int64_t tab_off;      // a large S_{t+1}'s table in global memory (tab_bits > 0), else unused
  int32_t src_n, dst_n;
  float cutoff, pre_low, slack, lp_rest;
  int32_t filter_on, row, t, tab_bits;
};

struct Rec {            // LatRecord + LatRecordExt's layout (lattice records, 32 bytes)
  int32_t state, arc;
  float acoustic;
  int32_t lane, t, tok, dst_pos, admitted;
};

struct Counts {         // per pass, summed over its CTAs
  unsigned long long tokens, chunks, slots, cands, survived, kept, checksum, cursor;
};

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 1024;  // S_t's tokens a CTA (a row-step's larger frontiers take several CTAs)


__device__ __forceinline__ unsigned long long Mix(unsigned long long x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// a kept record's checksum term (the driver's numpy computes the same)
__device__ __forceinline__ unsigned long long RecKey(int32_t row, int32_t t, int32_t arc, int32_t pos) {
  unsigned long long x = static_cast<unsigned long long>(static_cast<uint32_t>(row));
  x = x * 1000003ull + static_cast<uint32_t>(t);
  x = x * 2000003ull + static_cast<uint32_t>(arc);
  x = x * 3000017ull + static_cast<uint32_t>(pos);
  return Mix(x);
}

// the frontier tables: the package's (state_table.cuh), as the decoder's records pass builds them
using cuwfst::StateTableFind;
using cuwfst::StateTableHash;
using cuwfst::StateTableInsert;

// An item's setup: the frame's log-prob row into shared memory and, kBits > 0, its row-step's
// S_{t+1} as a table there (every CTA of the row-step builds its own).
template <int kBits>
__device__ __forceinline__ void ItemSetup(const RowStep& rs, int32_t V, const float* lp, const int32_t* st,
                                          int32_t* keys, uint16_t* pos16, float* lps) {
  for (int i = threadIdx.x; i < V; i += kThreads) lps[i] = lp[rs.lp_off + i];
  if constexpr (kBits > 0) {
    for (int i = threadIdx.x; i < (1 << kBits); i += kThreads) keys[i] = -1;
    __syncthreads();
    for (int i = threadIdx.x; i < rs.dst_n; i += kThreads) StateTableInsert(keys, pos16, kBits, st[rs.dst_off + i], i);
  }
}

struct Segment {  // a CTA's cursor and the records its segment holds (from cur * seg)
  int32_t cur;
  unsigned long long seg;
};

// n_cursors segments of cap / n_cursors records, a CTA's at cursor blockIdx.x % n_cursors (one
// address takes 1 / n_cursors of the atomics)
__device__ __forceinline__ Segment SegmentOf(int32_t n_cursors, unsigned long long cap) {
  return {static_cast<int32_t>(blockIdx.x % static_cast<unsigned>(n_cursors)),
          cap / static_cast<unsigned long long>(n_cursors)};
}

// A warp's kept records at consecutive places of its CTA's segment: one atomicAdd a warp; records
// past the segment are counted, not written. where() gives the Segment and make() a lane's record,
// both called only where needed (a round without a kept record computes neither; nothing is held in
// registers through the ballot: computed before it, they made the pipelined kernel spill).
template <typename Where, typename Make>
__device__ __forceinline__ void WarpWrite(bool keep, int lane, Rec* recs, unsigned long long* cursors, Where where,
                                          Make make) {
  const unsigned km = __ballot_sync(0xFFFFFFFFu, keep);
  if (km == 0u) return;
  const Segment sg = where();
  const int32_t cur = sg.cur;
  const unsigned long long seg = sg.seg;
  const int leader = __ffs(km) - 1;
  unsigned long long base = 0;
  if (lane == leader) base = atomicAdd(&cursors[cur], static_cast<unsigned long long>(__popc(km)));
  base = __shfl_sync(0xFFFFFFFFu, base, leader);
  const unsigned long long r = base + static_cast<unsigned long long>(__popc(km & ((1u << lane) - 1u)));
  if (keep && r < seg) recs[cur * seg + r] = make();
}

// A CTA's counters into the pass's (s_c: the CTA's shared sums, zeroed before)
__device__ __forceinline__ void FlushCounts(unsigned long long* s_c, Counts* counts, unsigned long long n_tokens,
                                            unsigned long long n_chunks, unsigned long long n_slots,
                                            unsigned long long n_cands, unsigned long long n_surv,
                                            unsigned long long n_kept, unsigned long long sum) {
  atomicAdd(&s_c[0], n_chunks);
  atomicAdd(&s_c[1], n_slots);
  atomicAdd(&s_c[2], n_cands);
  atomicAdd(&s_c[3], n_surv);
  atomicAdd(&s_c[4], n_kept);
  atomicAdd(&s_c[5], sum);
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(&counts->tokens, n_tokens);
    atomicAdd(&counts->chunks, s_c[0]);
    atomicAdd(&counts->slots, s_c[1]);
    atomicAdd(&counts->cands, s_c[2]);
    atomicAdd(&counts->survived, s_c[3]);
    atomicAdd(&counts->kept, s_c[4]);
    atomicAdd(&counts->checksum, s_c[5]);
  }
}

struct QEnt {  // a queued candidate (kQueue): its arc, token index in S_t, state, end and acoustic
  int32_t arc, tok, s;
  float end, ac;
};
constexpr int kQ = 64;  // a warp's queue: fewer than 32 waiting and a round's 32 added

// The pass kernels' parameters (PostKernel, FlatKernel: one launch signature, lp_pass's Launch)
#define PASS_KERNEL_PARAMS                                                                              \
  const RowStep *steps, const int2 *items, const int32_t *st, const float *sc, const float *lp, int32_t V, \
      const int32_t *dest, const int32_t *ilabel, const float *weight, const int64_t *emit_b,              \
      const int32_t *emit_n, const uint8_t *emit_n0, const int32_t *gkeys, const int32_t *gpos,            \
      float output_beam, Rec *recs, unsigned long long cap, Counts *counts, int32_t write,                  \
      unsigned long long *cursors, int32_t n_cursors, int32_t n_items

// The large S_{t+1}'s tables in global memory (cleared by a memset before): a CTA a work item
// (row-step index, first token of its chunk of S_{t+1}), kChunk tokens inserted.
__global__ void __launch_bounds__(kThreads) BuildKernel(const RowStep* steps, const int2* items, const int32_t* st,
                                                         int32_t* gkeys, int32_t* gpos, int32_t n_items) {
  for (int32_t w = blockIdx.x; w < n_items; w += gridDim.x) {  // (a capped grid: CTAs take items in turn)
    const int2 item = items[w];
    const RowStep rs = steps[item.x];
    const int32_t last = min(rs.dst_n, item.y + kChunk);
    for (int32_t i = item.y + threadIdx.x; i < last; i += kThreads)
      StateTableInsert(gkeys + rs.tab_off, gpos + rs.tab_off, rs.tab_bits, st[rs.dst_off + i], i);
  }
}

// grid: one CTA a work item (row-step index, first token of its chunk of S_t). kBits > 0: S_{t+1}
// in a table of 2^kBits in shared memory (at least twice its tokens), built by every CTA of the
// row-step; kBits == 0: the row-step's global table (BuildKernel). kPipe: a warp loads its next
// token's range and the state and score of the one after while it walks the current one (the
// token's two dependent round trips off the chain), registers held to 64 (4 CTAs a multiprocessor).
// kStats false (lean): no per-arc counters and no checksum term a kept record, as a pass inside the
// decoder would run; its records are checked by reading them back (lp_records). kQueue (with kPipe
// and lean): a round only tests its arcs (weight, label, acoustic) and queues its candidates in the
// warp's shared-memory queue; 32 queued candidates at a time are probed, filtered and written by
// the whole warp (drain), where the other kernels run the probe and the record's write for every
// round holding any candidate (a round holds ~2 in c11, ~6 in c13, of 32 arcs read).
template <int kBits, bool kPipe = false, bool kStats = true, bool kQueue = false>
__global__ void __launch_bounds__(kThreads, kPipe ? 4 : 1) PostKernel(PASS_KERNEL_PARAMS) {
  constexpr int H = kBits > 0 ? 1 << kBits : 0;
  extern __shared__ __align__(16) unsigned char smem[];
  int32_t* keys = reinterpret_cast<int32_t*>(smem);
  uint16_t* pos16 = reinterpret_cast<uint16_t*>(keys + H);  // (|S_{t+1}| <= H / 2 <= 32,768)
  float* lps = reinterpret_cast<float*>(pos16 + H);
  __shared__ unsigned long long s_c[6];
  if (threadIdx.x < 6) s_c[threadIdx.x] = 0;
  __shared__ QEnt q[kQueue ? kWarps : 1][kQueue ? kQ : 1];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  unsigned long long n_chunks = 0, n_slots = 0, n_cands = 0, n_surv = 0, n_kept = 0, sum = 0, n_tokens = 0;
  // The lean kernels find their Segment once: in the loop the compiler keeps a 64-bit division a
  // round with a kept record (seen in the PTX); hoisted in the others it spills (64 registers), so
  // they keep their code of the calls before (SegmentOf where a round keeps a record).
  const Segment seg0 = kStats ? Segment{0, 0} : SegmentOf(n_cursors, cap);
  // grid-stride over the work items: a grid of one CTA an item runs each once; a capped grid
  // (lp_set_grid_cap, fewer CTAs than the GPU holds) leaves multiprocessors to other work
  for (int32_t w = blockIdx.x; w < n_items; w += gridDim.x) {
    __syncthreads();  // (the last item's table and log-prob row read by every warp)
    const int2 item = items[w];
    const RowStep rs = steps[item.x];
    ItemSetup<kBits>(rs, V, lp, st, keys, pos16, lps);
    __syncthreads();
    const int32_t* tkeys = kBits > 0 ? keys : gkeys + rs.tab_off;
    const int32_t* tpos = gpos + rs.tab_off;
    const float* dsc = sc + rs.dst_off;
    const int32_t last = min(rs.src_n, item.y + kChunk);
    const int64_t so = rs.src_off;
    QEnt* wq = q[kQueue ? wid : 0];
    int32_t qn = 0;  // (warp-uniform)
    // kQueue: the first m (<= 32) queued candidates, lane l the l-th: probe, filter, record
    auto drain = [&](int32_t m) {
      bool keep = false, admitted = false;
      int32_t p = -1;
      QEnt e = {0, 0, 0, 0.f, 0.f};
      if (lane < m) {
        e = wq[lane];
        const int32_t d = dest[e.arc];
        if constexpr (kBits > 0) p = StateTableFind(tkeys, pos16, kBits, d);
        else p = StateTableFind(tkeys, tpos, rs.tab_bits, d);
        if (p >= 0) {
          admitted = e.end > rs.cutoff;
          keep = admitted || !rs.filter_on || !(e.end < (dsc[p] - output_beam) - rs.slack);
        }
      }
      if (write)
        WarpWrite(keep, lane, recs, cursors, [&] { return seg0; },
                  [&] { return Rec{e.s, e.arc, e.ac, rs.row, rs.t, e.tok, p, admitted ? 1 : 0}; });
    };
    int32_t s = 0, n = 0, n0 = 0, s1 = 0;
    float a = 0.f, a1 = 0.f;
    int64_t b = 0;
    if (kPipe) {
      const int32_t i = item.y + wid;
      if (i < last) {
        s = st[so + i];
        a = sc[so + i];
      }
      if (i + kWarps < last) {
        s1 = st[so + i + kWarps];
        a1 = sc[so + i + kWarps];
      }
      if (i < last) {
        b = emit_b[s];
        n = emit_n[s];
        n0 = emit_n0[s];
      }
    }
    for (int i = item.y + wid; i < last; i += kWarps) {
      int64_t b1 = 0;
      int32_t n1 = 0, n01 = 0, s2 = 0;
      float a2 = 0.f;
      if (kPipe) {  // the next token's range, the one after's state and score: in flight during the walk
        if (i + kWarps < last) {
          b1 = emit_b[s1];
          n1 = emit_n[s1];
          n01 = emit_n0[s1];
        }
        if (i + 2 * kWarps < last) {
          s2 = st[so + i + 2 * kWarps];
          a2 = sc[so + i + 2 * kWarps];
        }
      } else {
        s = st[so + i];
        a = sc[so + i];
        b = emit_b[s];
        n = emit_n[s];
        n0 = emit_n0[s];
      }
      for (int32_t k = 0; k < n; k += 32) {
        const int32_t j = k + lane;
        bool read = false;
        const int64_t arc = b + j;
        float w = 0.f;
        int32_t lab = 0, d = 0;
        if (j < n) {  // (the three loads at once: one round trip a chunk)
          w = weight[arc];
          lab = ilabel[arc];
          if constexpr (!kQueue) d = dest[arc];
          read = j < n0 || (a + w) + rs.lp_rest >= rs.pre_low;  // (label-0 arcs: always read)
        }
        if constexpr (kStats) {
          n_chunks += lane == 0;
          n_slots += read;
        }
        bool keep = false, admitted = false, cand = false;
        int32_t p = -1;
        float ac = 0.f, end = 0.f;
        if (read) {
          ac = lps[lab];
          end = (a + w) + ac;
          if constexpr (kQueue) {
            cand = end >= rs.pre_low;
          } else if (end >= rs.pre_low) {
            if constexpr (kStats) ++n_cands;
            if constexpr (kBits > 0) p = StateTableFind(tkeys, pos16, kBits, d);
            else p = StateTableFind(tkeys, tpos, rs.tab_bits, d);
            if (p >= 0) {
              if constexpr (kStats) ++n_surv;
              admitted = end > rs.cutoff;
              keep = admitted || !rs.filter_on || !(end < (dsc[p] - output_beam) - rs.slack);
            }
          }
        }
        if constexpr (kQueue) {  // the round's candidates onto the queue; 32 of them drained at once
          const unsigned cm = __ballot_sync(0xFFFFFFFFu, cand);
          if (cm != 0u) {
            if (cand) wq[qn + __popc(cm & ((1u << lane) - 1u))] = {static_cast<int32_t>(arc), i, s, end, ac};
            qn += __popc(cm);
            __syncwarp();
            if (qn >= 32) {
              drain(32);
              const QEnt moved = lane < qn - 32 ? wq[32 + lane] : QEnt{};
              __syncwarp();
              if (lane < qn - 32) wq[lane] = moved;
              qn -= 32;
              __syncwarp();
            }
          }
        } else if (write) {
          WarpWrite(keep, lane, recs, cursors, [&] { return kStats ? SegmentOf(n_cursors, cap) : seg0; },
                    [&] { return Rec{s, static_cast<int32_t>(arc), ac, rs.row, rs.t, i, p, admitted ? 1 : 0}; });
        }
        if (kStats && keep) {
          ++n_kept;
          sum += RecKey(rs.row, rs.t, static_cast<int32_t>(arc), p);
        }
        // past the label-0 arcs the weights fall: a lane that did not read leaves every later one unread
        if (__ballot_sync(0xFFFFFFFFu, j < n && j >= n0 && !read) != 0u) break;
      }
      if (kPipe) {
        s = s1;
        a = a1;
        b = b1;
        n = n1;
        n0 = n01;
        s1 = s2;
        a1 = a2;
      }
    }
    if constexpr (kQueue) {  // the item's last candidates (its table and row stay until the next item)
      if (qn > 0) drain(qn);
      __syncwarp();
    }
    n_tokens += static_cast<unsigned long long>(last - item.y);
  }  // (the work items)
  FlushCounts(s_c, counts, n_tokens, n_chunks, n_slots, n_cands, n_surv, n_kept, sum);
}

// The flat walk (mode bit 16): PostKernel's rule over the same work items, but a thread an arc
// instead of a warp a token. Each token's read arcs are a prefix of its emitting arcs (its label-0
// arcs, then those past them while (a + w) + lp_rest >= pre_low: the weights fall past the label-0
// arcs, so a binary search finds the end); a CTA scan of the tokens' prefix lengths numbers the
// item's read arcs, and the CTA's threads take them 256 at a time, a thread finding its token by a
// binary search of the scan. Every thread's chain (arc, probe, destination's score, record) is in
// flight at once, where the warp walk waits a round trip a chunk with most lanes idle on the many
// tokens of few arcs (median out-degree 4). Counts as PostKernel (chunks: the warp walk's, from
// each token's prefix).
constexpr int kPer = kChunk / kThreads;  // a thread's tokens in the scan (a blocked arrangement)

template <int kBits, int kU>
__global__ void __launch_bounds__(kThreads, 2) FlatKernel(PASS_KERNEL_PARAMS) {
  using Scan = cub::BlockScan<int32_t, kThreads>;
  constexpr int H = kBits > 0 ? 1 << kBits : 0;
  extern __shared__ __align__(16) unsigned char smem[];
  int32_t* keys = reinterpret_cast<int32_t*>(smem);
  uint16_t* pos16 = reinterpret_cast<uint16_t*>(keys + H);
  float* lps = reinterpret_cast<float*>(pos16 + H);
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int32_t f_off[kChunk + 1];  // the item's tokens' first read arc in the item's numbering
  __shared__ int64_t f_b[kChunk];        // a token's first emitting arc
  __shared__ int32_t f_s[kChunk];
  __shared__ float f_a[kChunk];
  __shared__ unsigned long long s_c[6];
  if (threadIdx.x < 6) s_c[threadIdx.x] = 0;
  const int lane = threadIdx.x & 31;
  unsigned long long n_chunks = 0, n_slots = 0, n_cands = 0, n_surv = 0, n_kept = 0, sum = 0, n_tokens = 0;
  for (int32_t w = blockIdx.x; w < n_items; w += gridDim.x) {
    __syncthreads();  // (the last item's table, row and numbering read by every thread)
    const int2 item = items[w];
    const RowStep rs = steps[item.x];
    ItemSetup<kBits>(rs, V, lp, st, keys, pos16, lps);
    const int32_t last = min(rs.src_n, item.y + kChunk);
    const int64_t so = rs.src_off;
    int32_t cnt[kPer];
#pragma unroll
    for (int q = 0; q < kPer; ++q) {
      const int32_t k = threadIdx.x * kPer + q, i = item.y + k;
      cnt[q] = 0;
      if (i < last) {
        const int32_t s = st[so + i];
        const float a = sc[so + i];
        const int64_t b = emit_b[s];
        const int32_t n = emit_n[s];
        int32_t lo = emit_n0[s], hi = n;  // the first arc past the label-0 ones that is not read
        while (lo < hi) {
          const int32_t mid = (lo + hi) >> 1;
          if ((a + weight[b + mid]) + rs.lp_rest >= rs.pre_low) lo = mid + 1;
          else hi = mid;
        }
        cnt[q] = lo;
        n_chunks += n == 0 ? 0 : (lo >= n ? (n + 31) / 32 : lo / 32 + 1);
        f_s[k] = s;
        f_a[k] = a;
        f_b[k] = b;
      }
    }
    int32_t total = 0;
    Scan(scan_tmp).ExclusiveSum(cnt, cnt, total);
#pragma unroll
    for (int q = 0; q < kPer; ++q) f_off[threadIdx.x * kPer + q] = cnt[q];
    if (threadIdx.x == 0) f_off[kChunk] = total;
    __syncthreads();
    const int32_t* tkeys = kBits > 0 ? keys : gkeys + rs.tab_off;
    const int32_t* tpos = gpos + rs.tab_off;
    const float* dsc = sc + rs.dst_off;
    const int32_t n_tok = last - item.y;
    // kU arcs a thread at once (threads' arcs f, f + 256, ...): each step of their chains issued for
    // all kU before the next (the arcs' loads, the tables' first slots, the destinations' scores)
    for (int32_t base = 0; base < total; base += kThreads * kU) {
      bool keep[kU], admitted[kU], cand[kU];
      int32_t p[kU], sv[kU], kk[kU], d[kU];
      uint32_t hh[kU];
      int64_t arc[kU];
      float ac[kU], end[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int32_t f = base + u * kThreads + static_cast<int32_t>(threadIdx.x);
        keep[u] = admitted[u] = cand[u] = false;
        p[u] = -1;
        sv[u] = kk[u] = d[u] = 0;
        arc[u] = -1;
        ac[u] = end[u] = 0.f;
        if (f < total) {
          int32_t lo = 0, hi = n_tok;  // the last token whose first read arc is <= f
          while (hi - lo > 1) {
            const int32_t mid = (lo + hi) >> 1;
            if (f_off[mid] <= f) lo = mid;
            else hi = mid;
          }
          kk[u] = lo;
          sv[u] = f_s[lo];
          arc[u] = f_b[lo] + (f - f_off[lo]);
        }
      }
      float wt[kU];
      int32_t lab[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (arc[u] >= 0) {
          wt[u] = weight[arc[u]];
          lab[u] = ilabel[arc[u]];
          d[u] = dest[arc[u]];
        }
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (arc[u] >= 0) {
          ++n_slots;
          ac[u] = lps[lab[u]];
          end[u] = (f_a[kk[u]] + wt[u]) + ac[u];
          cand[u] = end[u] >= rs.pre_low;
          n_cands += cand[u];
        }
      if constexpr (kBits > 0) {
#pragma unroll
        for (int u = 0; u < kU; ++u)
          if (cand[u]) p[u] = StateTableFind(tkeys, pos16, kBits, d[u]);
      } else {  // the global table: every arc's first slot loaded at once, then the rest of the probes
        const uint32_t mask = (1u << rs.tab_bits) - 1u;
        int32_t key[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u)
          if (cand[u]) {
            hh[u] = StateTableHash(d[u], rs.tab_bits);
            key[u] = tkeys[hh[u]];
          }
#pragma unroll
        for (int u = 0; u < kU; ++u)
          if (cand[u]) {
            while (key[u] != d[u] && key[u] != -1) {
              hh[u] = (hh[u] + 1) & mask;
              key[u] = tkeys[hh[u]];
            }
            if (key[u] == d[u]) p[u] = tpos[hh[u]];
          }
      }
      float ds[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (p[u] >= 0) {
          admitted[u] = end[u] > rs.cutoff;
          if (!admitted[u] && rs.filter_on) ds[u] = dsc[p[u]];
        }
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (p[u] >= 0) {
          ++n_surv;
          keep[u] = admitted[u] || !rs.filter_on || !(end[u] < (ds[u] - output_beam) - rs.slack);
        }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        if (write)
          WarpWrite(keep[u], lane, recs, cursors, [&] { return SegmentOf(n_cursors, cap); }, [&] {
                      return Rec{sv[u], static_cast<int32_t>(arc[u]), ac[u], rs.row, rs.t, item.y + kk[u], p[u],
                                 admitted[u] ? 1 : 0};
                    });
        if (keep[u]) {
          ++n_kept;
          sum += RecKey(rs.row, rs.t, static_cast<int32_t>(arc[u]), p[u]);
        }
      }
    }
    n_tokens += static_cast<unsigned long long>(n_tok);
  }
  FlushCounts(s_c, counts, n_tokens, n_chunks, n_slots, n_cands, n_surv, n_kept, sum);
}

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "lattice_post: %s: %s\n", #x, cudaGetErrorString(e_)); \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

struct Dev {
  int32_t* dest = nullptr;
  int32_t* ilabel = nullptr;
  float* weight = nullptr;
  int64_t* emit_b = nullptr;
  int32_t* emit_n = nullptr;
  uint8_t* emit_n0 = nullptr;
  int32_t V = 0;
} g_dev;

template <typename T>
int Upload(T** d, const T* h, int64_t n) {
  CK(cudaMalloc(d, sizeof(T) * std::max<int64_t>(n, 1)));
  CK(cudaMemcpy(*d, h, sizeof(T) * n, cudaMemcpyHostToDevice));
  return 0;
}

using Launch = void (*)(cudaStream_t, int, size_t, const RowStep*, const int2*, const int32_t*, const float*,
                        const float*, const int32_t*, const int32_t*, float, Rec*, unsigned long long, Counts*,
                        int32_t, unsigned long long*, int32_t);

int g_grid_cap = 0;  // lp_set_grid_cap: at most this many CTAs a launch (0: one an item)
inline int GridFor(int n) { return g_grid_cap > 0 ? std::min(n, g_grid_cap) : n; }

// the keys (int32), their frontier indices (uint16) and the log-prob row
size_t SmemFor(int bits) {
  return (bits > 0 ? size_t{6} << bits : 0) + sizeof(float) * static_cast<size_t>(g_dev.V);
}

template <int kBits, bool kPipe = false, bool kStats = true, bool kQueue = false>
void LaunchBits(cudaStream_t stream, int grid, size_t smem, const RowStep* steps, const int2* items,
                const int32_t* st, const float* sc, const float* lp, const int32_t* gkeys, const int32_t* gpos,
                float ob, Rec* recs, unsigned long long cap, Counts* counts, int32_t write,
                unsigned long long* cursors, int32_t n_cursors) {
  PostKernel<kBits, kPipe, kStats, kQueue><<<GridFor(grid), kThreads, smem, stream>>>(steps, items, st, sc, lp, g_dev.V, g_dev.dest,
                                                              g_dev.ilabel,
                                               g_dev.weight, g_dev.emit_b, g_dev.emit_n, g_dev.emit_n0, gkeys, gpos,
                                               ob, recs, cap, counts, write, cursors, n_cursors, grid);
}

template <int kBits, int kU>
void LaunchFlat(cudaStream_t stream, int grid, size_t smem, const RowStep* steps, const int2* items,
                const int32_t* st, const float* sc, const float* lp, const int32_t* gkeys, const int32_t* gpos,
                float ob, Rec* recs, unsigned long long cap, Counts* counts, int32_t write,
                unsigned long long* cursors, int32_t n_cursors) {
  FlatKernel<kBits, kU><<<GridFor(grid), kThreads, smem, stream>>>(steps, items, st, sc, lp, g_dev.V, g_dev.dest,
                                                              g_dev.ilabel, g_dev.weight, g_dev.emit_b,
                                                              g_dev.emit_n, g_dev.emit_n0, gkeys, gpos, ob, recs,
                                                              cap, counts, write, cursors, n_cursors, grid);
}

template <int kBits>
int Prepare() {
  for (auto fn : {FlatKernel<kBits, 1>, FlatKernel<kBits, 2>, FlatKernel<kBits, 4>})
    CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(SmemFor(kBits))));
  CK(cudaFuncSetAttribute(PostKernel<kBits, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(SmemFor(kBits))));
  CK(cudaFuncSetAttribute(PostKernel<kBits, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(SmemFor(kBits))));
  CK(cudaFuncSetAttribute(PostKernel<kBits, true, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(SmemFor(kBits))));
  CK(cudaFuncSetAttribute(PostKernel<kBits, true, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(SmemFor(kBits))));
  return 0;
}

constexpr int kClasses = 4;
constexpr int kBitsOf[kClasses] = {11, 13, 14, 0};  // shared tables up to 8,192 tokens, then global
constexpr int kCursors = 64;

}  // namespace lpost

using namespace lpost;

// The graph's emitting arcs (the image's order) and, a state, its emitting range and label-0 count.
extern "C" int lp_upload_graph(const int32_t* dest, const int32_t* ilabel, const float* weight, int64_t num_arcs,
                    const int64_t* emit_b, const int32_t* emit_n, const uint8_t* emit_n0, int64_t num_states,
                    int32_t V) {
  g_dev.V = V;
  if (Upload(&g_dev.dest, dest, num_arcs) || Upload(&g_dev.ilabel, ilabel, num_arcs) ||
      Upload(&g_dev.weight, weight, num_arcs) || Upload(&g_dev.emit_b, emit_b, num_states) ||
      Upload(&g_dev.emit_n, emit_n, num_states) || Upload(&g_dev.emit_n0, emit_n0, num_states))
    return 1;
  if (Prepare<11>() || Prepare<13>() || Prepare<14>() || Prepare<0>()) return 1;
  return 0;
}

namespace lpost {

// A batch on the device (lp_prepare_batch): its row-steps, work items, frontiers, log-prob rows,
// tables and records, and the pass's own non-blocking streams (so a pass runs beside other work on
// the GPU, a decoder's included: nothing is on the legacy default stream).
struct Batch {
  int off[kClasses + 1] = {};
  int n_build = 0;
  int64_t tab = 0, rec_cap = 0;
  RowStep* steps = nullptr;
  int2 *items = nullptr, *build = nullptr;
  int32_t *st = nullptr, *gkeys = nullptr, *gpos = nullptr;
  float *sc = nullptr, *lp = nullptr;
  Rec* recs = nullptr;
  Counts* counts = nullptr;
  unsigned long long* cursors = nullptr;
  cudaStream_t main = nullptr, side[kClasses] = {};
  cudaEvent_t ev[kClasses + 2] = {}, done[kClasses] = {};
  int32_t last_cursors = 1;  // the last pass's cursors (lp_records)
};

}  // namespace lpost

extern "C" {

void lp_free(void* handle);

// One batch onto the device: its row-steps (their tab_off / tab_bits are set here), frontiers and
// log-prob rows. info_out[8]: items a class, global row-steps, global table entries, build items.
// Returns the handle, nullptr on an error.
void* lp_prepare_batch(RowStep* steps, int32_t num_steps, const int32_t* st, const float* sc, int64_t num_tokens,
                       const float* lp, int64_t lp_len, int64_t rec_cap, int64_t* info_out) {
  std::vector<int2> cls[kClasses], build;
  int64_t tab = 0, n_big = 0;
  for (int32_t i = 0; i < num_steps; ++i) {
    const int32_t n = steps[i].dst_n;
    int c = 0;
    while (c < kClasses - 1 && 2 * static_cast<int64_t>(n) > (int64_t{1} << kBitsOf[c])) ++c;
    steps[i].tab_bits = 0;
    if (kBitsOf[c] == 0) {
      int bits = 1;
      while ((int64_t{1} << bits) < 2 * static_cast<int64_t>(n)) ++bits;
      steps[i].tab_bits = bits;
      steps[i].tab_off = tab;
      tab += int64_t{1} << bits;
      ++n_big;
      for (int32_t f = 0; f < n; f += kChunk) build.push_back(make_int2(i, f));
    }
    for (int32_t f = 0; f < steps[i].src_n; f += kChunk) cls[c].push_back(make_int2(i, f));
  }
  Batch* h = new Batch;
  std::vector<int2> items;
  for (int c = 0; c < kClasses; ++c) {
    h->off[c] = static_cast<int>(items.size());
    items.insert(items.end(), cls[c].begin(), cls[c].end());
    info_out[c] = static_cast<int64_t>(cls[c].size());
  }
  h->off[kClasses] = static_cast<int>(items.size());
  h->n_build = static_cast<int>(build.size());
  h->tab = tab;
  h->rec_cap = rec_cap;
  info_out[4] = n_big;
  info_out[5] = tab;
  info_out[6] = static_cast<int64_t>(build.size());
  auto fail = [&]() -> void* {
    lp_free(h);
    return nullptr;
  };
  if (Upload(&h->steps, steps, num_steps) || Upload(&h->items, items.data(), static_cast<int64_t>(items.size())) ||
      Upload(&h->build, build.data(), static_cast<int64_t>(build.size())) || Upload(&h->st, st, num_tokens) ||
      Upload(&h->sc, sc, num_tokens) || Upload(&h->lp, lp, lp_len))
    return fail();
  int least = 0, greatest = 0;
  if (cudaMalloc(&h->gkeys, sizeof(int32_t) * std::max<int64_t>(tab, 1)) != cudaSuccess ||
      cudaMalloc(&h->gpos, sizeof(int32_t) * std::max<int64_t>(tab, 1)) != cudaSuccess ||
      cudaMalloc(&h->recs, sizeof(Rec) * std::max<int64_t>(rec_cap, 1)) != cudaSuccess ||
      cudaMalloc(&h->counts, sizeof(Counts)) != cudaSuccess ||
      cudaMalloc(&h->cursors, sizeof(unsigned long long) * kCursors) != cudaSuccess ||
      cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
      cudaStreamCreateWithPriority(&h->main, cudaStreamNonBlocking, least) != cudaSuccess)
    return fail();
  // (the passes' streams at the device's least priority: a decoder at a greater one, beside them,
  // has its kernels dispatched first; --overlap)
  for (auto& x : h->side)
    if (cudaStreamCreateWithPriority(&x, cudaStreamNonBlocking, least) != cudaSuccess) return fail();
  for (auto& e : h->ev)
    if (cudaEventCreate(&e) != cudaSuccess) return fail();
  for (auto& e : h->done)
    if (cudaEventCreate(&e) != cudaSuccess) return fail();
  return h;
}

void lp_free(void* handle) {
  Batch* h = static_cast<Batch*>(handle);
  if (h == nullptr) return;
  for (void* p : {static_cast<void*>(h->steps), static_cast<void*>(h->items), static_cast<void*>(h->build),
                  static_cast<void*>(h->st), static_cast<void*>(h->sc), static_cast<void*>(h->lp),
                  static_cast<void*>(h->gkeys), static_cast<void*>(h->gpos), static_cast<void*>(h->recs),
                  static_cast<void*>(h->counts), static_cast<void*>(h->cursors)})
    if (p != nullptr) cudaFree(p);
  for (auto& e : h->ev)
    if (e != nullptr) cudaEventDestroy(e);
  for (auto& e : h->done)
    if (e != nullptr) cudaEventDestroy(e);
  for (auto& x : h->side)
    if (x != nullptr) cudaStreamDestroy(x);
  if (h->main != nullptr) cudaStreamDestroy(h->main);
  delete h;
}

// One pass over a prepared batch; waits for it (its own events only). mode bits: 1 the records
// stored (else counted only, a diagnostic), 2 each class on a stream of its own (the global one
// after the tables; split then holds each stream's end from the pass's start), 4 the records'
// cursor spread over kCursors addresses (segments of rec_cap / kCursors), 8 the pipelined kernel
// (PostKernel kPipe), 16 the flat walk (FlatKernel, over 8; 32: two arcs a thread at once, 64: four),
// 128 the pipelined kernel without its counters and checksum (kStats false; over 8), 256 and its
// candidates queued (kQueue; with 128 and 8). ms: the pass's time (CUDA events);
// split[5]: its parts (clear + build, then the classes from the global one down). Records past
// their segment are counted, not written.
int lp_pass(void* handle, int32_t mode, float output_beam, float* ms, float* split) {
  Batch* h = static_cast<Batch*>(handle);
  const int32_t write = mode & 1, streams = (mode & 2) != 0, n_cursors = (mode & 4) ? kCursors : 1;
  const Launch plain[kClasses] = {LaunchBits<11>, LaunchBits<13>, LaunchBits<14>, LaunchBits<0>};
  const Launch piped[kClasses] = {LaunchBits<11, true>, LaunchBits<13, true>, LaunchBits<14, true>,
                                  LaunchBits<0, true>};
  const Launch flat[3][kClasses] = {{LaunchFlat<11, 1>, LaunchFlat<13, 1>, LaunchFlat<14, 1>, LaunchFlat<0, 1>},
                                    {LaunchFlat<11, 2>, LaunchFlat<13, 2>, LaunchFlat<14, 2>, LaunchFlat<0, 2>},
                                    {LaunchFlat<11, 4>, LaunchFlat<13, 4>, LaunchFlat<14, 4>, LaunchFlat<0, 4>}};
  const Launch lean[kClasses] = {LaunchBits<11, true, false>, LaunchBits<13, true, false>,
                                 LaunchBits<14, true, false>, LaunchBits<0, true, false>};
  const Launch queued[kClasses] = {LaunchBits<11, true, false, true>, LaunchBits<13, true, false, true>,
                                   LaunchBits<14, true, false, true>, LaunchBits<0, true, false, true>};
  const Launch* fns = (mode & 16)    ? flat[(mode & 64) ? 2 : (mode & 32) ? 1 : 0]
                      : (mode & 256) ? queued
                      : (mode & 128) ? lean
                      : (mode & 8)   ? piped
                                     : plain;
  h->last_cursors = n_cursors;
  cudaEvent_t* ev = h->ev;
  CK(cudaMemsetAsync(h->counts, 0, sizeof(Counts), h->main));
  CK(cudaMemsetAsync(h->cursors, 0, sizeof(unsigned long long) * kCursors, h->main));
  CK(cudaEventRecord(ev[0], h->main));
  if (streams)  // the shared classes start with the pass; the global class waits for the tables
    for (int c = 0; c < kClasses - 1; ++c) CK(cudaStreamWaitEvent(h->side[c], ev[0]));
  if (h->n_build > 0) {
    CK(cudaMemsetAsync(h->gkeys, 0xFF, sizeof(int32_t) * h->tab, h->main));  // (every key -1)
    BuildKernel<<<GridFor(h->n_build), kThreads, 0, h->main>>>(h->steps, h->build, h->st, h->gkeys, h->gpos,
                                                               h->n_build);
  }
  CK(cudaEventRecord(ev[1], h->main));
  if (streams) CK(cudaStreamWaitEvent(h->side[kClasses - 1], ev[1]));
  for (int c = kClasses - 1; c >= 0; --c) {  // (the large frontiers first: their CTAs are the longest)
    const int n = h->off[c + 1] - h->off[c];
    cudaStream_t x = streams ? h->side[c] : h->main;
    if (n > 0)
      fns[c](x, n, SmemFor(kBitsOf[c]), h->steps, h->items + h->off[c], h->st, h->sc, h->lp, h->gkeys, h->gpos,
             output_beam, h->recs, static_cast<unsigned long long>(h->rec_cap), h->counts, write, h->cursors,
             n_cursors);
    CK(cudaEventRecord(streams ? h->done[c] : ev[2 + (kClasses - 1 - c)], x));
  }
  if (streams) {
    for (int c = 0; c < kClasses; ++c) CK(cudaStreamWaitEvent(h->main, h->done[c]));
    CK(cudaEventRecord(ev[kClasses + 1], h->main));
  }
  CK(cudaGetLastError());
  CK(cudaEventSynchronize(ev[kClasses + 1]));
  CK(cudaEventElapsedTime(ms, ev[0], ev[kClasses + 1]));
  if (streams) {
    CK(cudaEventElapsedTime(&split[0], ev[0], ev[1]));
    for (int c = kClasses - 1; c >= 0; --c) CK(cudaEventElapsedTime(&split[kClasses - c], ev[0], h->done[c]));
  } else {
    for (int k = 0; k <= kClasses; ++k) CK(cudaEventElapsedTime(&split[k], ev[k], ev[k + 1]));
  }
  return 0;
}

// The last pass's records, each cursor's segment's written part one after another, into out (at
// most max_n); *n_out: how many the cursors counted (more than were written when a segment filled).
int lp_records(void* handle, Rec* out, int64_t max_n, int64_t* n_out) {
  Batch* h = static_cast<Batch*>(handle);
  CK(cudaStreamSynchronize(h->main));
  unsigned long long cur[kCursors];
  CK(cudaMemcpy(cur, h->cursors, sizeof(cur), cudaMemcpyDeviceToHost));
  const int64_t seg = h->rec_cap / h->last_cursors;
  int64_t n = 0, counted = 0;
  for (int k = 0; k < h->last_cursors; ++k) {
    counted += static_cast<int64_t>(cur[k]);
    const int64_t m = std::min<int64_t>({static_cast<int64_t>(cur[k]), seg, max_n - n});
    if (m > 0) CK(cudaMemcpy(out + n, h->recs + k * seg, sizeof(Rec) * m, cudaMemcpyDeviceToHost));
    n += std::max<int64_t>(m, 0);
  }
  *n_out = counted;
  return 0;
}

// At most cap CTAs a launch from here on (0: one an item, the default).
int lp_set_grid_cap(int32_t cap) {
  g_grid_cap = std::max(cap, 0);
  return 0;
}

// The last pass's Counts (counts_out[7]: the cursors summed).
int lp_counts(void* handle, unsigned long long* counts_out) {
  Batch* h = static_cast<Batch*>(handle);
  CK(cudaStreamSynchronize(h->main));
  CK(cudaMemcpy(counts_out, h->counts, sizeof(Counts), cudaMemcpyDeviceToHost));
  unsigned long long cur[kCursors];
  CK(cudaMemcpy(cur, h->cursors, sizeof(cur), cudaMemcpyDeviceToHost));
  counts_out[7] = 0;
  for (int k = 0; k < kCursors; ++k) counts_out[7] += cur[k];
  return 0;
}

// the layout the driver must match
int lp_sizes(int32_t* out) {
  out[0] = static_cast<int32_t>(sizeof(RowStep));
  out[1] = static_cast<int32_t>(sizeof(Rec));
  out[2] = static_cast<int32_t>(sizeof(Counts));
  return 0;
}

}  // extern "C"
