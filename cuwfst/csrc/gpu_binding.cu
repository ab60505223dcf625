// TVM-FFI exports of the GPU decoder. Every tensor a launcher reads or writes is checked
// here (device, dtype, packing, shapes), and so is every graph index the kernels follow
// (CheckGraph): the kernels trust these checks, not the Python layer's.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuwfst/expand.cuh"
#include "cuwfst/tensor_checks.h"
#include "gpu_decoder.cuh"

namespace {

using tvm::ffi::TensorView;
using cuwfst::GpuDecoder;
using cuwfst::GpuGraph;

using cuwfst::CheckHostTensor;
using cuwfst::IsType;

// Turns the exception in flight into Python's: out of memory -> MemoryError (the object
// that asked is unchanged), a dead CUDA context -> RuntimeError that says to restart, bad
// arguments -> ValueError, anything else -> RuntimeError.
[[noreturn]] void RethrowForPython() {
  try {
    throw;
  } catch (const tvm::ffi::Error&) {
    throw;
  } catch (const cuwfst::CudaOutOfMemory& e) {
    TVM_FFI_THROW(MemoryError) << e.what();
  } catch (const cuwfst::CudaContextLost& e) {
    TVM_FFI_THROW(RuntimeError) << e.what();
  } catch (const cuwfst::CudaError& e) {
    if (cuwfst::IsStickyError(e.code()))
      TVM_FFI_THROW(RuntimeError) << "fatal CUDA fault: " << e.what()
                                  << ". The CUDA context of this process is dead: every later CUDA call "
                                     "in this process fails, PyTorch's included. Restart the process.";
    TVM_FFI_THROW(RuntimeError) << e.what();
  } catch (const std::bad_alloc&) {
    TVM_FFI_THROW(MemoryError) << "out of host memory";
  } catch (const std::invalid_argument& e) {
    TVM_FFI_THROW(ValueError) << e.what();
  } catch (const std::exception& e) {
    TVM_FFI_THROW(RuntimeError) << e.what();
  }
  throw;  // not reached (every handler throws); says so to compilers that cannot tell
}

// Runs a native call with RethrowForPython's error mapping.
template <typename F>
auto Guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    RethrowForPython();
  }
}

template <typename T>
T* Upload(GpuGraph* g, const void* host, size_t count, const char* what, int64_t total_bytes) {
  cuwfst::DeviceBuffer buf;
  const size_t bytes = count * sizeof(T);
  cudaError_t e = cuwfst::TryDeviceAlloc(bytes, &buf);
  if (e != cudaSuccess)
    cuwfst::ThrowAcquireFailure(e, "cannot allocate " + cuwfst::FormatBytes(static_cast<int64_t>(bytes)) +
                                       " for the graph's " + what + " on cuda:" + std::to_string(g->device) +
                                       " (the graph needs " + cuwfst::FormatBytes(total_bytes) +
                                       " in all); free GPU memory or decode a smaller graph");
  if (count) CUWFST_CUDA(cudaMemcpy(buf.get(), host, bytes, cudaMemcpyHostToDevice));
  T* p = static_cast<T*>(buf.get());
  g->buffers.push_back(std::move(buf));
  return p;
}

// Everything the kernels follow without a bounds check, checked here whatever the Python
// layer did (issue 14, finding 11): CSR shape, states, the final range of each state
// (ilabel -1 into the last state, which has no out-arcs), the epsilon range (ilabel -2,
// right after the finals-at-start or at the start) and the emitting range (a token id <
// vocab_size: the column of log_probs it reads). Weights may not be NaN or +inf.
// ec: epsilon arcs per state, or nullptr on an epsilon-free graph.
void CheckGraph(int64_t n, int64_t a, const int32_t* rs, const int32_t* fc, const int32_t* ec,
                const int32_t* dest, const int32_t* il, const float* w, int64_t vocab_size,
                int64_t start_state, bool finals_at_end) {
  if (start_state < 0 || start_state >= n)
    TVM_FFI_THROW(ValueError) << "start state " << start_state << " outside [0, " << n << ")";
  if (rs[0] != 0 || rs[n] != a)
    TVM_FFI_THROW(ValueError) << "row_splits must run from 0 to num_arcs=" << a << ", got " << rs[0] << ".." << rs[n];
  // the whole CSR first: the arc loop below indexes with it
  for (int64_t s = 0; s < n; ++s)
    if (rs[s + 1] < rs[s]) TVM_FFI_THROW(ValueError) << "row_splits decreases at state " << s;
  const int32_t final_state = static_cast<int32_t>(n - 1);
  bool any_final = false;
  for (int64_t s = 0; s < n; ++s) {
    const int32_t deg = rs[s + 1] - rs[s];
    if (fc[s] < 0 || fc[s] > deg)
      TVM_FFI_THROW(ValueError) << "final_count of state " << s << " is " << fc[s] << ", outside [0, " << deg << "]";
    const int32_t ne = ec ? ec[s] : 0;
    if (ne < 0 || ne > deg - fc[s])
      TVM_FFI_THROW(ValueError) << "eps_count of state " << s << " is " << ne << ", outside [0, " << deg - fc[s] << "]";
    any_final |= fc[s] > 0;
    const int32_t fb = finals_at_end ? rs[s + 1] - fc[s] : rs[s];
    const int32_t fe = fb + fc[s];
    const int32_t eb = finals_at_end ? rs[s] : rs[s] + fc[s];
    const int32_t ee = eb + ne;
    for (int32_t i = rs[s]; i < rs[s + 1]; ++i) {
      if (dest[i] < 0 || dest[i] >= n)
        TVM_FFI_THROW(ValueError) << "arc " << i << " has destination " << dest[i] << " outside [0, " << n << ")";
      if (!(w[i] < std::numeric_limits<float>::infinity()))  // NaN and +inf
        TVM_FFI_THROW(ValueError) << "arc " << i << " has weight " << w[i];
      if (i >= fb && i < fe) {
        if (il[i] != -1 || dest[i] != final_state)
          TVM_FFI_THROW(ValueError) << "arc " << i << " of state " << s << " sits in the final range but has ilabel "
                                    << il[i] << " and destination " << dest[i] << " (expected -1 into state "
                                    << final_state << ")";
      } else if (i >= eb && i < ee) {
        if (il[i] != -2)
          TVM_FFI_THROW(ValueError) << "arc " << i << " of state " << s << " sits in the epsilon range but has ilabel "
                                    << il[i] << " (expected -2)";
      } else if (il[i] < 0 || il[i] >= vocab_size) {
        TVM_FFI_THROW(ValueError) << "arc " << i << " of state " << s << " has ilabel " << il[i]
                                  << " outside [0, vocab_size=" << vocab_size << ")"
                                  << (il[i] == -2 ? " (an epsilon arc outside its state's epsilon range)" : "");
      }
    }
  }
  if (any_final && rs[n] != rs[n - 1])
    TVM_FFI_THROW(ValueError) << "the final state " << final_state << " has out-arcs";
}

// Uploads a graph (CPU arrays) to `device`; returns a handle owning a shared_ptr, so
// decoders keep the device arrays alive after the handle is freed. eps_count: int32 [N]
// epsilon arcs per state, or an empty tensor on an epsilon-free graph.
// source_arc: [num_arcs] i32, each image arc's source arc id, or [0] where the image kept the
// source order (the CPU's GraphView::source_arc: k2's order of a token's arcs, which numbers the
// lattice's states and orders their arcs): each arc's place in that order is uploaded
// (DeviceGraph::arc_src_place) where the image moved arcs.
int64_t GpuGraphUpload(TensorView row_splits, TensorView final_count, TensorView eps_count,
                       TensorView dest, TensorView ilabel, TensorView weight, TensorView source_arc,
                       int64_t vocab_size, int64_t start_state, bool finals_at_end, int64_t device, bool pack) {
  int64_t n = final_count.ndim() == 1 ? final_count.shape()[0] : -1;
  int64_t a = dest.ndim() == 1 ? dest.shape()[0] : -1;
  if (n < 1 || a < 0) TVM_FFI_THROW(ValueError) << "final_count and dest must be 1-D with at least one state";
  if (a >= cuwfst::kRedirectArcBit) TVM_FFI_THROW(ValueError) << "the GPU decoder takes < 2^30 arcs";
  if (vocab_size < 1 || vocab_size >= 65535) TVM_FFI_THROW(ValueError) << "vocab_size must be in [1, 65534]";
  CheckHostTensor(row_splits, "row_splits", kDLInt, 32, {n + 1});
  CheckHostTensor(final_count, "final_count", kDLInt, 32, {n});
  CheckHostTensor(dest, "dest", kDLInt, 32, {a});
  CheckHostTensor(ilabel, "ilabel", kDLInt, 32, {a});
  CheckHostTensor(weight, "weight", kDLFloat, 32, {a});
  if (source_arc.ndim() != 1 || (source_arc.shape()[0] != 0 && source_arc.shape()[0] != a))
    TVM_FFI_THROW(ValueError) << "source_arc must be [num_arcs] or empty";
  if (source_arc.shape()[0] != 0) CheckHostTensor(source_arc, "source_arc", kDLInt, 32, {a});
  const bool has_eps = eps_count.ndim() == 1 && eps_count.shape()[0] > 0;
  if (has_eps) CheckHostTensor(eps_count, "eps_count", kDLInt, 32, {n});
  const int32_t* ec = has_eps ? static_cast<const int32_t*>(eps_count.data_ptr()) : nullptr;
  const int32_t* rs = static_cast<const int32_t*>(row_splits.data_ptr());
  const int32_t* fc = static_cast<const int32_t*>(final_count.data_ptr());
  const int32_t* dst = static_cast<const int32_t*>(dest.data_ptr());
  const int32_t* il = static_cast<const int32_t*>(ilabel.data_ptr());
  const float* w = static_cast<const float*>(weight.data_ptr());
  CheckGraph(n, a, rs, fc, ec, dst, il, w, vocab_size, start_state, finals_at_end);
  return Guarded([&]() -> int64_t {
    int count = 0;
    CUWFST_CUDA(cudaGetDeviceCount(&count));
    if (device < 0 || device >= count) TVM_FFI_THROW(ValueError) << "no CUDA device " << device;
    cuwfst::DeviceGuard guard(static_cast<int>(device));
    auto g = std::make_shared<GpuGraph>();
    g->device = static_cast<int>(device);
    // the upper-bound ingredient of the walkers: max weight over each state's emitting arcs
    std::vector<float> emit_maxw(n, -std::numeric_limits<float>::infinity());
    for (int64_t s = 0; s < n; ++s) {
      int32_t b = (finals_at_end ? rs[s] : rs[s] + fc[s]) + (ec ? ec[s] : 0);
      int32_t e = finals_at_end ? rs[s + 1] - fc[s] : rs[s + 1];
      for (int32_t i = b; i < e; ++i) emit_maxw[s] = std::max(emit_maxw[s], w[i]);
    }
    // the epsilon closure's list filter: max weight over each state's epsilon arcs (-inf: none)
    std::vector<float> eps_maxw(has_eps ? n : 0, -std::numeric_limits<float>::infinity());
    int32_t max_eps_degree = 0;
    for (int64_t s = 0; has_eps && s < n; ++s) {
      const int32_t b = finals_at_end ? rs[s] : rs[s] + fc[s];
      for (int32_t i = b; i < b + ec[s]; ++i) eps_maxw[s] = std::max(eps_maxw[s], w[i]);
      max_eps_degree = std::max(max_eps_degree, ec[s]);
    }
    g->max_eps_degree = max_eps_degree;
    // closure = chain's own check (the host's is in gpu.py): with one epsilon arc a state, the
    // longest epsilon chain, or -1 when the epsilon arcs form a cycle (the chains' winners
    // entries would then point in a circle and the backtrace would never end)
    int32_t max_eps_chain = -1;
    if (has_eps && max_eps_degree == 1) {
      std::vector<int32_t> depth(n, -2);  // hops to the chain's end; -2 unknown, -3 on this walk
      std::vector<int64_t> walk;
      max_eps_chain = 0;
      for (int64_t s0 = 0; s0 < n && max_eps_chain >= 0; ++s0) {
        if (depth[s0] != -2) continue;
        walk.clear();
        int64_t s = s0;
        int32_t tail = -1;  // the depth of the state after walk.back() (-1: walk.back() has no arc)
        for (;;) {
          if (depth[s] >= 0) {
            tail = depth[s];
            break;
          }
          if (depth[s] == -3) {  // back on this walk: a cycle
            max_eps_chain = -1;
            break;
          }
          depth[s] = -3;
          walk.push_back(s);
          if (ec[s] == 0) break;
          s = dst[finals_at_end ? rs[s] : rs[s] + fc[s]];  // its one epsilon arc's destination
        }
        if (max_eps_chain < 0) break;
        for (auto it = walk.rbegin(); it != walk.rend(); ++it) {
          depth[*it] = ++tail;
          max_eps_chain = std::max(max_eps_chain, tail);
        }
      }
    }
    g->max_eps_chain = max_eps_chain;
    int32_t max_degree = 0;  // the lattice pruning's rank keys (gpu_lattice_prune.cu PrCodeBits)
    for (int64_t s = 0; s < n; ++s) max_degree = std::max(max_degree, rs[s + 1] - rs[s]);
    g->max_degree = max_degree;
    // each arc's place among its state's arcs in the source order (DeviceGraph::arc_src_place):
    // only where the image moved an arc, and where a place fits the pruning's packed codes
    int32_t place_bits = 0;
    while (place_bits < 30 && (1ll << place_bits) <= max_degree) ++place_bits;
    if (source_arc.shape()[0] != 0 && place_bits <= 15) {
      const int32_t* sa = static_cast<const int32_t*>(source_arc.data_ptr());
      std::vector<uint8_t> seen(static_cast<size_t>(a), 0);
      for (int64_t i = 0; i < a; ++i) {
        if (sa[i] < 0 || sa[i] >= a || seen[sa[i]])
          TVM_FFI_THROW(ValueError) << "source_arc must be a permutation of the arc ids (arc " << i << ")";
        seen[sa[i]] = 1;
      }
      g->src_place.resize(static_cast<size_t>(a));
      bool moved = false;
      std::vector<int32_t> idx;
      for (int64_t s = 0; s < n; ++s) {
        const int32_t b = rs[s], e = rs[s + 1];
        if (e <= b) continue;
        int32_t lo = sa[b], hi = sa[b];
        for (int32_t i = b; i < e; ++i) lo = std::min(lo, sa[i]), hi = std::max(hi, sa[i]);
        if (hi - lo == e - b - 1) {  // (the usual: the state's source ids are one run)
          for (int32_t i = b; i < e; ++i) g->src_place[i] = static_cast<uint16_t>(sa[i] - lo);
        } else {
          idx.resize(e - b);
          for (int32_t i = b; i < e; ++i) idx[i - b] = i;
          std::sort(idx.begin(), idx.end(), [&](int32_t x, int32_t y) { return sa[x] < sa[y]; });
          for (int32_t k = 0; k < e - b; ++k) g->src_place[idx[k]] = static_cast<uint16_t>(k);
        }
        for (int32_t i = b; i < e && !moved; ++i) moved = g->src_place[i] != i - b;
      }
      if (!moved) g->src_place.clear();
    }
    // sorted emitting arcs (DeviceGraph::emit_sorted): label 0 first, then the others by
    // weight, non-increasing, none NaN, in every state
    bool sorted = true;
    for (int64_t s = 0; s < n && sorted; ++s) {
      int32_t i = (finals_at_end ? rs[s] : rs[s] + fc[s]) + (ec ? ec[s] : 0);
      const int32_t e = finals_at_end ? rs[s + 1] - fc[s] : rs[s + 1];
      while (i < e && il[i] == 0) ++i;
      for (; i < e && sorted; ++i)
        sorted = il[i] != 0 && !std::isnan(w[i]) && (i + 1 == e || w[i] >= w[i + 1]);
    }
    // The label bound's tables (types.cuh DeviceGraph::heavy_bits; scan.cuh LabelBitLoads, LabelBound), where
    // the scans can trim (sorted arcs) and the vocabulary has two labels >= 1: the states with more
    // than kHeavyLabels distinct labels >= 1 on their emitting arcs, and each one's labels folded
    // into label_words x 32 bits. Distinct labels counted with a stamp a label (the state's id).
    const int64_t hwords = (n + 31) / 32;
    std::vector<uint32_t> heavy_bits, heavy_labels;
    std::vector<int32_t> heavy_rank;
    int32_t label_words = 0;
    if (sorted && vocab_size >= 3) {
      label_words = static_cast<int32_t>(std::min<int64_t>((vocab_size + 31) / 32, cuwfst::kMaxLabelWords));
      const int32_t fold = label_words * 32;
      heavy_bits.assign(hwords, 0u);
      heavy_rank.assign(hwords, 0);
      std::vector<int64_t> stamp(vocab_size, -1);
      int32_t heavy = 0;
      for (int64_t s = 0; s < n; ++s) {
        if ((s & 31) == 0) heavy_rank[s >> 5] = heavy;
        const int32_t b = (finals_at_end ? rs[s] : rs[s] + fc[s]) + (ec ? ec[s] : 0);
        const int32_t e = finals_at_end ? rs[s + 1] - fc[s] : rs[s + 1];
        if (e - b <= cuwfst::kHeavyLabels) continue;  // at most that many labels
        int32_t distinct = 0;
        for (int32_t i = b; i < e; ++i)
          if (il[i] > 0 && stamp[il[i]] != s) {
            stamp[il[i]] = s;
            ++distinct;
          }
        if (distinct <= cuwfst::kHeavyLabels) continue;
        heavy_bits[s >> 5] |= 1u << (s & 31);
        heavy_labels.resize(static_cast<size_t>(heavy + 1) * label_words, 0u);
        uint32_t* bits = heavy_labels.data() + static_cast<size_t>(heavy) * label_words;
        for (int32_t i = b; i < e; ++i)
          if (il[i] > 0) bits[(il[i] % fold) >> 5] |= 1u << ((il[i] % fold) & 31);
        ++heavy;
      }
      if (heavy == 0) label_words = 0;  // nothing to bound tighter
      g->heavy_states = label_words ? heavy : 0;
    }
    // the label-0 arcs at the front of each state's emitting arcs (DeviceGraph::emit_blank),
    // where the arcs are sorted and every count fits a byte below 255
    std::vector<uint8_t> blank;
    if (sorted) {
      blank.assign(n, 0);
      for (int64_t s = 0; s < n && !blank.empty(); ++s) {
        int32_t i = (finals_at_end ? rs[s] : rs[s] + fc[s]) + (ec ? ec[s] : 0);
        const int32_t e = finals_at_end ? rs[s + 1] - fc[s] : rs[s + 1], b = i;
        while (i < e && il[i] == 0) ++i;
        if (i - b >= cuwfst::kBigCount) blank.clear();
        else blank[s] = static_cast<uint8_t>(i - b);
      }
    }
    // the counts a byte a state (DeviceGraph::final_count / eps_count), 255 or more in the
    // big-count table
    std::vector<uint8_t> fc8(n), ec8(has_eps ? n : 0);
    std::vector<int32_t> big_state, big_final, big_eps;
    for (int64_t s = 0; s < n; ++s) {
      const int32_t f = fc[s], ne = has_eps ? ec[s] : 0;
      fc8[s] = static_cast<uint8_t>(std::min<int32_t>(f, cuwfst::kBigCount));
      if (has_eps) ec8[s] = static_cast<uint8_t>(std::min<int32_t>(ne, cuwfst::kBigCount));
      if (f >= cuwfst::kBigCount || ne >= cuwfst::kBigCount) {
        big_state.push_back(static_cast<int32_t>(s));
        big_final.push_back(f);
        big_eps.push_back(ne);
      }
    }
    const int64_t nb = static_cast<int64_t>(big_state.size());
    // the arcs' destination and label in one uint32 (DeviceGraph::arc_packed) where both fit:
    // label bits for the largest ordinary label and the two special codes above it, the rest
    // for the destinations (every one < n)
    int32_t label_bits = 1;
    {
      uint32_t most = 0;
      for (int64_t i = 0; i < a; ++i)
        if (il[i] >= 0) most = std::max(most, static_cast<uint32_t>(il[i]));
      while ((1ull << label_bits) < static_cast<unsigned long long>(most) + 3ull) ++label_bits;
    }
    const bool packed = pack && label_bits < 32 && static_cast<unsigned long long>(n) <= (1ull << (32 - label_bits));
    const int64_t total = (n + 1) * 4 + n + (packed ? a * 4 : a * 4 + a * 2) + a * 4 + n * 4 +
                          (has_eps ? n + n * 4 : 0) + nb * 4 * (has_eps ? 3 : 2) +
                          (label_words ? hwords * 8 + static_cast<int64_t>(heavy_labels.size()) * 4 : 0) +
                          static_cast<int64_t>(blank.size());
    cuwfst::DeviceGraph& v = g->view;
    v.num_states = static_cast<int32_t>(n);
    v.num_arcs = static_cast<int32_t>(a);
    v.vocab_size = static_cast<int32_t>(vocab_size);
    v.start_state = static_cast<int32_t>(start_state);
    v.finals_at_end = finals_at_end ? 1 : 0;
    // On a failure `g` goes out of scope and its buffers free themselves.
    v.row_splits = Upload<int32_t>(g.get(), rs, n + 1, "row_splits", total);
    v.final_count = Upload<uint8_t>(g.get(), fc8.data(), n, "final counts", total);
    v.eps_count = has_eps ? Upload<uint8_t>(g.get(), ec8.data(), n, "epsilon counts", total) : nullptr;
    v.num_big = static_cast<int32_t>(nb);
    v.big_state = nb ? Upload<int32_t>(g.get(), big_state.data(), nb, "big-count states", total) : nullptr;
    v.big_final = nb ? Upload<int32_t>(g.get(), big_final.data(), nb, "big final counts", total) : nullptr;
    v.big_eps = nb && has_eps ? Upload<int32_t>(g.get(), big_eps.data(), nb, "big epsilon counts", total) : nullptr;
    v.arc_dest = nullptr;
    v.arc_ilabel = nullptr;
    v.arc_packed = nullptr;
    v.dest_bits = 32 - label_bits;
    v.label_special = static_cast<uint32_t>((1ull << label_bits) - 2ull);
    if (packed) {
      std::vector<uint32_t> arcs(a);
      for (int64_t i = 0; i < a; ++i) {
        const uint32_t code = il[i] == -2 ? v.label_special : il[i] == -1 ? v.label_special + 1u
                                                                          : static_cast<uint32_t>(il[i]);
        arcs[i] = (code << v.dest_bits) | static_cast<uint32_t>(dst[i]);
      }
      v.arc_packed = Upload<uint32_t>(g.get(), arcs.data(), a, "packed arcs", total);
    } else {
      std::vector<uint16_t> il16(a);
      for (int64_t i = 0; i < a; ++i)
        il16[i] = il[i] == -1 ? cuwfst::kFinalIlabel : il[i] == -2 ? cuwfst::kEpsIlabel : static_cast<uint16_t>(il[i]);
      v.arc_dest = Upload<int32_t>(g.get(), dst, a, "arc destinations", total);
      v.arc_ilabel = Upload<uint16_t>(g.get(), il16.data(), a, "arc ilabels", total);
    }
    v.arc_weight = Upload<float>(g.get(), w, a, "arc weights", total);
    v.emit_maxw = Upload<float>(g.get(), emit_maxw.data(), n, "per-state max weights", total);
    v.eps_maxw = has_eps ? Upload<float>(g.get(), eps_maxw.data(), n, "per-state max epsilon weights", total) : nullptr;
    v.max_eps_degree = max_eps_degree;
    v.emit_sorted = sorted ? 1 : 0;
    float max_abs_weight = 0.f;  // (NaN weights: CheckGraph refuses them)
    for (int64_t i = 0; i < a; ++i) max_abs_weight = std::max(max_abs_weight, std::fabs(w[i]));
    v.max_abs_weight = max_abs_weight;
    v.label_words = label_words;
    v.heavy_bits = nullptr;
    v.heavy_rank = nullptr;
    v.heavy_labels = nullptr;
    if (label_words) {
      v.heavy_bits = Upload<uint32_t>(g.get(), heavy_bits.data(), hwords, "heavy-state bits", total);
      v.heavy_rank = Upload<int32_t>(g.get(), heavy_rank.data(), hwords, "heavy-state ranks", total);
      v.heavy_labels = Upload<uint32_t>(g.get(), heavy_labels.data(), heavy_labels.size(), "heavy-state labels", total);
    }
    v.emit_blank = blank.empty() ? nullptr : Upload<uint8_t>(g.get(), blank.data(), n, "per-state blank counts", total);
    v.arc_src_place = g->src_place.empty() ? nullptr
                                           : Upload<uint16_t>(g.get(), g->src_place.data(), a, "source arc places", total);
    v.place_bits = g->src_place.empty() ? 0 : place_bits;
    return reinterpret_cast<int64_t>(new std::shared_ptr<GpuGraph>(std::move(g)));
  });
}

// 1 when the uploaded graph's arcs are packed (DeviceGraph::arc_packed: a destination and a
// label in one uint32).
int64_t GpuGraphPacked(int64_t h) {
  if (!h) TVM_FFI_THROW(ValueError) << "null graph handle";
  return (*reinterpret_cast<std::shared_ptr<GpuGraph>*>(h))->view.arc_packed != nullptr ? 1 : 0;
}

// 1 when the uploaded graph's emitting arcs are sorted (DeviceGraph::emit_sorted): decoders on
// it trim their steps' slots unless built with trim_arcs off.
int64_t GpuGraphEmitSorted(int64_t h) {
  if (!h) TVM_FFI_THROW(ValueError) << "null graph handle";
  return (*reinterpret_cast<std::shared_ptr<GpuGraph>*>(h))->view.emit_sorted;
}

// The label bound's tables of an uploaded graph (DeviceGraph::heavy_bits): heavy states * 256 +
// label_words (0: no tables).
int64_t GpuGraphLabelTables(int64_t h) {
  if (!h) TVM_FFI_THROW(ValueError) << "null graph handle";
  const auto& g = *reinterpret_cast<std::shared_ptr<GpuGraph>*>(h);
  return static_cast<int64_t>(g->heavy_states) * 256 + g->view.label_words;
}

void GpuGraphFree(int64_t h) {
  if (h) delete reinterpret_cast<std::shared_ptr<GpuGraph>*>(h);
}

GpuDecoder* GetDecoder(int64_t h) {
  if (!h) TVM_FFI_THROW(ValueError) << "null decoder handle";
  return reinterpret_cast<GpuDecoder*>(h);
}

int64_t GpuDecoderCreate(int64_t graph_h, double search_beam, double output_beam, int64_t min_active,
                         int64_t max_active, bool allow_partial, int64_t max_lanes, int64_t max_frames,
                         int64_t main_q, int64_t claims_cap, int64_t hash_cap, int64_t arena_cap,
                         int64_t arena_max, bool use_cuda_graphs, int64_t walker, int64_t walk_blocks,
                         int64_t graph_cache_size, int64_t graph_max_steps, int64_t eps_iterations, bool lazy,
                         int64_t lane_pool, int64_t scan_split, int64_t closure_lists, int64_t eps_blocks,
                         int64_t finalize_split, bool fused_max, int64_t lattice_entries, int64_t pool_bound,
                         bool pool_hints, bool arena_ahead, int64_t pool_handout,
                         bool trim_arcs, bool pdl, int64_t scan_round, int64_t scan_order, bool refill_kernel,
                         bool winners_host, bool graph_chunks, bool payload_tokens, int64_t pool_full,
                         int64_t pool_q) {
  if (!graph_h) TVM_FFI_THROW(ValueError) << "null graph handle";
  auto g = *reinterpret_cast<std::shared_ptr<GpuGraph>*>(graph_h);
  if (!(search_beam > 0) || !(output_beam > 0)) TVM_FFI_THROW(ValueError) << "beams must be > 0";
  if (min_active < 0 || max_active <= min_active)
    TVM_FFI_THROW(ValueError) << "max_active_states must be greater than min_active_states";
  if (max_lanes < 1 || max_lanes > cuwfst::kMaxLanes)
    TVM_FFI_THROW(ValueError) << "max_lanes must be in [1, " << cuwfst::kMaxLanes << "]";
  if (main_q < 1 || main_q > (1 << 28)) TVM_FFI_THROW(ValueError) << "main_q must be in [1, 2^28]";
  if (claims_cap < 1 || claims_cap > (1 << 30)) TVM_FFI_THROW(ValueError) << "claims_cap out of range";
  if (hash_cap < 2 || (hash_cap & (hash_cap - 1)) || hash_cap > (1ll << 30))
    TVM_FFI_THROW(ValueError) << "hash_cap must be a power of two <= 2^30";
  // winners ids are int32 (tok_winner, WinnerEntry::prev), so the arena holds < 2^31 entries
  if (arena_cap < 1 || arena_max < arena_cap || arena_max > (1ll << 31) - 1)
    TVM_FFI_THROW(ValueError) << "arena capacities out of range: 1 <= arena_cap <= arena_max < 2^31";
  if (max_frames < 1 || max_frames > (1 << 24)) TVM_FFI_THROW(ValueError) << "max_frames out of range";
  if (graph_cache_size < 0 || graph_cache_size > 1024)
    TVM_FFI_THROW(ValueError) << "graph_cache_size must be in [0, 1024]";
  if (graph_max_steps < 0 || graph_max_steps > (1 << 24))
    TVM_FFI_THROW(ValueError) << "graph_max_steps must be in [0, 2^24]";
  cuwfst::DecoderConfig c;
  c.search_beam = static_cast<float>(search_beam);
  c.output_beam = static_cast<float>(output_beam);
  c.min_active = static_cast<int32_t>(min_active);
  c.max_active = static_cast<int32_t>(std::min<int64_t>(max_active, INT32_MAX));
  c.allow_partial = allow_partial;
  c.max_lanes = static_cast<int32_t>(max_lanes);
  c.max_frames = static_cast<int32_t>(max_frames);
  c.main_q = static_cast<int32_t>(main_q);
  c.claims_cap = static_cast<int32_t>(claims_cap);
  c.hash_cap = static_cast<int32_t>(hash_cap);
  c.arena_cap = arena_cap;
  c.arena_max = arena_max;
  c.use_cuda_graphs = use_cuda_graphs;
  if (walker < cuwfst::kWalkWarp || walker > cuwfst::kWalkWarpCoopPdl)
    TVM_FFI_THROW(ValueError) << "walker must be 0 (warp strips), 1 (thread cursors), 2 (warp strips, lanes entered by "
                                 "binary searches), 3 (warp strips, Max and Expand in one cooperative kernel) or 4 (3 with "
                                 "programmatic dependent launch)";
  c.walker = static_cast<int32_t>(walker);
  if (walk_blocks < 0 || walk_blocks > (1 << 20)) TVM_FFI_THROW(ValueError) << "walk_blocks out of range";
  c.walk_blocks = static_cast<int32_t>(walk_blocks);
  c.graph_cache_size = static_cast<int32_t>(graph_cache_size);
  c.graph_max_steps = static_cast<int32_t>(graph_max_steps);
  if (eps_iterations < 0 || eps_iterations > 64) TVM_FFI_THROW(ValueError) << "eps_iterations must be in [0, 64]";
  if (eps_iterations > 0 && g->view.eps_count == nullptr)
    TVM_FFI_THROW(ValueError) << "eps_iterations > 0 on a graph without epsilon arcs";
  c.eps_iterations = static_cast<int32_t>(eps_iterations);
  c.lazy = lazy;
  if (lane_pool < 0 || lane_pool > 2) TVM_FFI_THROW(ValueError) << "lane_pool must be 0 (off), 1 (on) or 2 (auto)";
  c.lane_pool = static_cast<int32_t>(lane_pool);
  if (scan_split < 0 || scan_split > 64) TVM_FFI_THROW(ValueError) << "scan_split must be in [0, 64] (0: auto)";
  c.scan_split = static_cast<int32_t>(scan_split);
  if (closure_lists < 0 || closure_lists > cuwfst::kClosureChain)
    TVM_FFI_THROW(ValueError) << "closure must be 0 (scan), 1 (lists) or 2 (chain)";
  c.closure_lists = static_cast<int32_t>(closure_lists);
  if (eps_blocks < 0 || eps_blocks > (1 << 20)) TVM_FFI_THROW(ValueError) << "eps_blocks out of range";
  c.eps_blocks = static_cast<int32_t>(eps_blocks);
  if (finalize_split < 0 || finalize_split > 64)
    TVM_FFI_THROW(ValueError) << "finalize_split must be in [0, 64] (0: auto)";
  c.finalize_split = static_cast<int32_t>(finalize_split);
  c.fused_max = fused_max ? 1 : 0;
  if (lattice_entries < 0 || lattice_entries > (1ll << 36))
    TVM_FFI_THROW(ValueError) << "lattice_entries must be in [0 (the default), 2^36]";
  c.lattice_cap = lattice_entries;
  if (pool_bound < cuwfst::kPoolBoundAdmit || pool_bound > cuwfst::kPoolBoundClaimsFinalizeAhead)
    TVM_FFI_THROW(ValueError) << "pool_bound must be 0 (admit), 1 (slots), 2 (bins), 3 (anchor), 4 (claims), "
                                 "5 (claims-finalize) or 6 (claims-finalize-ahead)";
  c.pool_bound = static_cast<int32_t>(pool_bound);
  c.pool_hints = pool_hints ? 1 : 0;
  if (pool_handout < 0 || pool_handout > 1)
    TVM_FFI_THROW(ValueError) << "pool_handout must be 0 (MaxKernel's last block) or 1 (a kernel of its own)";
  c.pool_handout = static_cast<int32_t>(pool_handout);
  c.payload_tokens = payload_tokens ? 1 : 0;
  if (pool_full < 0 || pool_full > cuwfst::kPoolFullMask)
    TVM_FFI_THROW(ValueError) << "pool_full must be a mask of 1 (claims), 2 (hash), 4 (tokens), 8 (hash tables 2x) and "
                                 "16 (hash tables 4x)";
  c.pool_full = static_cast<int32_t>(pool_full);
  if (pool_q < 0 || pool_q > (1 << 28)) TVM_FFI_THROW(ValueError) << "pool_q must be in [0 (main_q), 2^28]";
  c.pool_q = static_cast<int32_t>(pool_q);
  c.arena_ahead = arena_ahead;
  c.trim_arcs = trim_arcs ? 1 : 0;
  c.pdl = pdl ? 1 : 0;
  if (scan_round != 0 && (scan_round < 32 || scan_round > cuwfst::kScanRoundTokens))
    TVM_FFI_THROW(ValueError) << "scan_round must be 0 (the default, " << cuwfst::kScanRoundTokens << ") or in [32, "
                              << cuwfst::kScanRoundTokens << "]";
  c.scan_round = static_cast<int32_t>(scan_round);
  if (scan_order < 0 || scan_order > 3)
    TVM_FFI_THROW(ValueError) << "scan_order must be 0 (lane-major), 1 (chunk-major), 2 (persistent) or 3 (persistent, "
                                 "tokens read after the trim's anchor walk)";
  c.scan_order = static_cast<int32_t>(scan_order);
  c.refill_kernel = refill_kernel ? 1 : 0;
  c.winners_host = winners_host;
  c.graph_chunks = graph_chunks;
  return Guarded([&]() { return reinterpret_cast<int64_t>(new GpuDecoder(std::move(g), c)); });
}

void GpuDecoderFree(int64_t h) { delete GetDecoder(h); }

// The checks every launcher makes of a log-prob tensor: on the decoder's device, float32
// or float16, [B, T, V] with V >= the graph's vocab_size (the kernels read columns
// 0..vocab_size-1), rows packed (last dim contiguous), non-negative strides.
struct LogProbs {
  int64_t B, T, V;
  bool f16;
  const char* base;
};

LogProbs CheckLogProbs(GpuDecoder* d, const TensorView& log_probs) {
  if (log_probs.device().device_type != kDLCUDA || log_probs.device().device_id != d->device())
    TVM_FFI_THROW(ValueError) << "log_probs must be on cuda:" << d->device();
  const bool f16 = IsType(log_probs.dtype(), kDLFloat, 16);
  if (!f16 && !IsType(log_probs.dtype(), kDLFloat, 32))
    TVM_FFI_THROW(TypeError) << "log_probs must be float32 or float16";
  if (log_probs.ndim() != 3) TVM_FFI_THROW(ValueError) << "log_probs must be [B, T, V]";
  const int64_t B = log_probs.shape()[0], T = log_probs.shape()[1], V = log_probs.shape()[2];
  if (V < d->vocab_size())
    TVM_FFI_THROW(ValueError) << "log_probs has " << V << " columns but the graph's vocab_size is "
                              << d->vocab_size() << ": every token id of the graph needs a column";
  if (V > 1 && log_probs.strides()[2] != 1) TVM_FFI_THROW(ValueError) << "log_probs rows must be contiguous";
  if (B < 1) TVM_FFI_THROW(ValueError) << "empty batch";
  if (T > (1 << 24)) TVM_FFI_THROW(ValueError) << "T too large (at most 2^24 frames)";
  if (log_probs.strides()[0] < 0 || log_probs.strides()[1] < 0)
    TVM_FFI_THROW(ValueError) << "log_probs must have non-negative strides";
  return {B, T, V, f16, static_cast<const char*>(log_probs.data_ptr()) + log_probs.byte_offset()};
}

// A sub-batch of log_probs' rows without a copy (the decode's lanes read them in place): rows
// int32 [n] on the host, each in [0, B) of log_probs; returns lp with B = n (the base stays).
LogProbs CheckRows(LogProbs lp, const TensorView& rows) {
  if (rows.ndim() != 1) TVM_FFI_THROW(ValueError) << "rows must be 1-D";
  const int64_t n = rows.shape()[0];
  CheckHostTensor(rows, "rows", kDLInt, 32, {n});
  if (n < 1) TVM_FFI_THROW(ValueError) << "empty batch";
  const int32_t* r = static_cast<const int32_t*>(rows.data_ptr());
  for (int64_t i = 0; i < n; ++i)
    if (r[i] < 0 || r[i] >= lp.B)
      TVM_FFI_THROW(ValueError) << "rows[" << i << "] = " << r[i] << " is not a row of log_probs (B = " << lp.B << ")";
  lp.B = n;
  return lp;
}

// Result tensors of a decode of B rows: out_arcs int32 [B, cap], out_len int32 [B] (the
// TRUE path length), out_score float32 [B], out_meta int32 [B, 4] = {reached_final,
// redirected, overflow bits, max frontier}, out_stats int64 [B, 2] = {frontier_total,
// closure_added}; dense CPU tensors.
cuwfst::DecodeOutputs CheckOutputs(int64_t B, const TensorView& out_arcs, const TensorView& out_len,
                                   const TensorView& out_score, const TensorView& out_meta,
                                   const TensorView& out_stats) {
  if (out_arcs.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_arcs must be [B, cap]";
  const int64_t cap = out_arcs.shape()[1];
  CheckHostTensor(out_arcs, "out_arcs", kDLInt, 32, {B, cap});
  CheckHostTensor(out_len, "out_len", kDLInt, 32, {B});
  CheckHostTensor(out_score, "out_score", kDLFloat, 32, {B});
  CheckHostTensor(out_meta, "out_meta", kDLInt, 32, {B, 4});
  CheckHostTensor(out_stats, "out_stats", kDLInt, 64, {B, 2});
  return {static_cast<int32_t*>(out_arcs.data_ptr()), cap, static_cast<int32_t*>(out_len.data_ptr()),
          static_cast<float*>(out_score.data_ptr()), static_cast<int32_t*>(out_meta.data_ptr()),
          static_cast<int64_t*>(out_stats.data_ptr())};
}

const int32_t* CheckLengths(const TensorView& lengths, int64_t B, int64_t T) {
  CheckHostTensor(lengths, "lengths", kDLInt, 32, {B});
  const int32_t* len = static_cast<const int32_t*>(lengths.data_ptr());
  for (int64_t b = 0; b < B; ++b)
    if (len[b] < 0 || len[b] > T) TVM_FFI_THROW(ValueError) << "lengths[" << b << "] outside [0, " << T << "]";
  return len;
}

// log_probs [B, T, V] (CheckLogProbs), B <= max_lanes; lengths: CPU int32 [B] in [0, T];
// outputs as CheckOutputs.
void GpuDecode(int64_t h, TensorView log_probs, TensorView lengths, bool online, int64_t caller_stream,
               TensorView out_arcs, TensorView out_len, TensorView out_score, TensorView out_meta,
               TensorView out_stats) {
  GpuDecoder* d = GetDecoder(h);
  const LogProbs lp = CheckLogProbs(d, log_probs);
  const int32_t* len = CheckLengths(lengths, lp.B, lp.T);
  cuwfst::DecodeOutputs out = CheckOutputs(lp.B, out_arcs, out_len, out_score, out_meta, out_stats);
  Guarded([&] {
    d->Decode(lp.base, lp.f16, log_probs.strides()[0], log_probs.strides()[1], static_cast<int32_t>(lp.B),
              static_cast<int32_t>(lp.T), static_cast<int32_t>(lp.V), len, online, caller_stream, out);
  });
}

// GpuDecode of the rows `rows` (int32 [n], host) of log_probs, read in place (CheckRows):
// lengths and the outputs are the n rows'.
void GpuDecodeRows(int64_t h, TensorView log_probs, TensorView rows, TensorView lengths, bool online,
                   int64_t caller_stream, TensorView out_arcs, TensorView out_len, TensorView out_score,
                   TensorView out_meta, TensorView out_stats) {
  GpuDecoder* d = GetDecoder(h);
  const LogProbs lp = CheckRows(CheckLogProbs(d, log_probs), rows);
  const int32_t* len = CheckLengths(lengths, lp.B, lp.T);
  cuwfst::DecodeOutputs out = CheckOutputs(lp.B, out_arcs, out_len, out_score, out_meta, out_stats);
  Guarded([&] {
    d->Decode(lp.base, lp.f16, log_probs.strides()[0], log_probs.strides()[1], static_cast<int32_t>(lp.B),
              static_cast<int32_t>(lp.T), static_cast<int32_t>(lp.V), len, online, caller_stream, out, nullptr,
              static_cast<const int32_t*>(rows.data_ptr()));
  });
}

// The lattice stage's per-step outputs of gpu_decode_lattice and gpu_decode_lattice_pruned:
// counts, cutoffs, sizes [B, S] (S >= the longest row + 1) and the records' total [1] i64;
// mode 1: the records are read back, 2: pruned on the device (LatticeOutputs::mode).
cuwfst::LatticeOutputs CheckLatticeOutputs(const LogProbs& lp, const int32_t* len, TensorView out_lat_counts,
                                           TensorView out_lat_cutoffs, TensorView out_lat_sizes,
                                           TensorView out_lat_total, int32_t mode) {
  if (out_lat_counts.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_lat_counts must be [B, S]";
  const int64_t S = out_lat_counts.shape()[1];
  int32_t max_len = 0;
  for (int64_t b = 0; b < lp.B; ++b) max_len = std::max(max_len, len[b]);
  if (S < max_len + 1) TVM_FFI_THROW(ValueError) << "out_lat_counts has " << S << " columns for rows of up to " << max_len << " frames";
  CheckHostTensor(out_lat_counts, "out_lat_counts", kDLInt, 32, {lp.B, S});
  CheckHostTensor(out_lat_cutoffs, "out_lat_cutoffs", kDLFloat, 32, {lp.B, S});
  CheckHostTensor(out_lat_sizes, "out_lat_sizes", kDLInt, 32, {lp.B, S});
  CheckHostTensor(out_lat_total, "out_lat_total", kDLInt, 64, {1});
  return cuwfst::LatticeOutputs{S, static_cast<int32_t*>(out_lat_counts.data_ptr()),
                                static_cast<float*>(out_lat_cutoffs.data_ptr()),
                                static_cast<int32_t*>(out_lat_sizes.data_ptr()),
                                static_cast<int64_t*>(out_lat_total.data_ptr()), mode};
}

// GpuDecode with lattice records (lattice.cuh): as GpuDecode, plus out_lat_counts [B, S]
// i32 (records of step t of row b), out_lat_cutoffs [B, S] f32, out_lat_sizes [B, S] i32
// (frontier size after each step and its closure), S >= the longest row + 1, and
// out_lat_total [1] i64 (the records, which gpu_lattice_records then copies out). eps_filter:
// the records' filter on epsilon graphs (LatticeOutputs::eps_filter; ignored on epsilon-free
// ones), filter_pad added to its offset; out_lat_producer_a [B, S] f32 each step's assumed
// magnitude (0: the step kept every record).
void GpuDecodeLattice(int64_t h, TensorView log_probs, TensorView lengths, bool online, int64_t caller_stream,
                      TensorView out_arcs, TensorView out_len, TensorView out_score, TensorView out_meta,
                      TensorView out_stats, TensorView out_lat_counts, TensorView out_lat_cutoffs,
                      TensorView out_lat_sizes, TensorView out_lat_total, int64_t eps_filter, double output_beam,
                      double filter_pad, TensorView out_lat_producer_a) {
  GpuDecoder* d = GetDecoder(h);
  const LogProbs lp = CheckLogProbs(d, log_probs);
  const int32_t* len = CheckLengths(lengths, lp.B, lp.T);
  cuwfst::DecodeOutputs out = CheckOutputs(lp.B, out_arcs, out_len, out_score, out_meta, out_stats);
  cuwfst::LatticeOutputs lat = CheckLatticeOutputs(lp, len, out_lat_counts, out_lat_cutoffs, out_lat_sizes,
                                                    out_lat_total, 1);
  CheckHostTensor(out_lat_producer_a, "out_lat_producer_a", kDLFloat, 32, {lp.B, lat.S});
  lat.eps_filter = eps_filter != 0 ? 1 : 0;
  lat.output_beam = static_cast<float>(output_beam);
  lat.filter_pad = static_cast<float>(filter_pad);
  lat.producer_a = static_cast<float*>(out_lat_producer_a.data_ptr());
  Guarded([&] {
    d->Decode(lp.base, lp.f16, log_probs.strides()[0], log_probs.strides()[1], static_cast<int32_t>(lp.B),
              static_cast<int32_t>(lp.T), static_cast<int32_t>(lp.V), len, online, caller_stream, out, &lat);
  });
}

// The last gpu_decode_lattice's records: out_records [N, 3] i32 = {source state, image arc
// | redirect bit, acoustic bits}, row by row, each row's step by step (N = its out_lat_total).
void GpuLatticeRecords(int64_t h, TensorView out_records) {
  if (out_records.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_records must be [N, 3]";
  const int64_t N = out_records.shape()[0];
  CheckHostTensor(out_records, "out_records", kDLInt, 32, {N, 3});
  Guarded([&] { GetDecoder(h)->TakeLatticeRecords(static_cast<int32_t*>(out_records.data_ptr()), N); });
}

// The GPU-pruned decodes' options (gpu_decode_lattice_pruned and its begin), checked.
void SetPrunedOptions(cuwfst::LatticeOutputs* lat, double output_beam, int64_t filter, double filter_pad,
                      int64_t trim) {
  lat->output_beam = static_cast<float>(output_beam);
  if (filter != 0 && filter != 1) TVM_FFI_THROW(ValueError) << "filter must be 0 or 1";
  if (!std::isfinite(filter_pad)) TVM_FFI_THROW(ValueError) << "filter_pad must be finite";
  lat->filter = static_cast<int32_t>(filter);
  lat->filter_pad = static_cast<float>(filter_pad);
  // (bit 0: the lattice trim of epsilon-free graphs; bit 1: the lattice trim on epsilon graphs,
  // common.cuh LatEpsTrimOn, which only GpuBackend.lattice_eps_trim_on asks for)
  if (trim < 0 || trim > 3) TVM_FFI_THROW(ValueError) << "trim must be 0 to 3 (bit 0: the lattice trim, bit 1: on epsilon graphs)";
  lat->trim = static_cast<int32_t>(trim & 1);
  lat->eps_trim = static_cast<int32_t>((trim >> 1) & 1);
}

// The rows a decode flagged with a rescue overflow bit (RESCUE_BITS of decoder/rescue.py): their
// records are not trusted, so the pruning gives them empty lattices.
std::vector<uint8_t> RescueSkips(const cuwfst::DecodeOutputs& out, int64_t B) {
  constexpr int32_t kRescueBits = cuwfst::kOverflowHash | cuwfst::kOverflowClaims | cuwfst::kOverflowKept |
                                  cuwfst::kOverflowSlots | cuwfst::kOverflowArena | cuwfst::kOverflowPool;
  std::vector<uint8_t> skip(B);
  for (int64_t b = 0; b < B; ++b) skip[b] = (out.meta[b * 4 + 2] & kRescueBits) != 0;
  return skip;
}

// gpu_decode_lattice with the GPU's own output-beam pruning (LatticeOutputs::mode 2,
// gpu_lattice_prune.cu; epsilon graphs with the exact closure too, whole batches without the
// lattice trim: "Epsilon graphs" there): the decode, then the pruning of every row
// that has no rescue overflow bit (RESCUE_BITS of decoder/rescue.py; those rows get empty
// lattices); out_lat_sizes2 [B, 3] i64 = {states, arcs, recorded arcs} per row (each row
// then by gpu_lattice_pruned_rows), out_prune_ms [3] f64 = {device passes, readback, host};
// chunk > 0: bounded lattice memory, the batch in runs of `chunk` steps, each run's records
// pruned before the next (GpuDecoder::RunBoundedLattice); 0: the whole batch, then pruned.
// filter: the records' filter (lattice.cuh LatFilterFor; on an epsilon graph the records' filter on
// epsilon graphs, common.cuh LatEpsFilterFor, whose guard the pruning checks: a row that breaks it
// gets recorded arcs -2), filter_pad added to its pad (tests);
// trim: with the filter, the lattice trim (common.cuh LatTrimLow; recorded arcs then -1).
void GpuDecodeLatticePruned(int64_t h, TensorView log_probs, TensorView lengths, bool online, int64_t caller_stream,
                            TensorView out_arcs, TensorView out_len, TensorView out_score, TensorView out_meta,
                            TensorView out_stats, TensorView out_lat_counts, TensorView out_lat_cutoffs,
                            TensorView out_lat_sizes, TensorView out_lat_total, double output_beam,
                            TensorView out_lat_sizes2, TensorView out_prune_ms, int64_t chunk, int64_t filter,
                            double filter_pad, int64_t trim) {
  GpuDecoder* d = GetDecoder(h);
  const LogProbs lp = CheckLogProbs(d, log_probs);
  const int32_t* len = CheckLengths(lengths, lp.B, lp.T);
  cuwfst::DecodeOutputs out = CheckOutputs(lp.B, out_arcs, out_len, out_score, out_meta, out_stats);
  cuwfst::LatticeOutputs lat = CheckLatticeOutputs(lp, len, out_lat_counts, out_lat_cutoffs, out_lat_sizes,
                                                    out_lat_total, 2);
  CheckHostTensor(out_lat_sizes2, "out_lat_sizes2", kDLInt, 64, {lp.B, 3});
  CheckHostTensor(out_prune_ms, "out_prune_ms", kDLFloat, 64, {3});
  if (chunk < 0 || chunk > 4096) TVM_FFI_THROW(ValueError) << "chunk must be in [0, 4096] steps (0: the whole batch)";
  lat.chunk = static_cast<int32_t>(chunk);
  SetPrunedOptions(&lat, output_beam, filter, filter_pad, trim);
  Guarded([&] {
    d->Decode(lp.base, lp.f16, log_probs.strides()[0], log_probs.strides()[1], static_cast<int32_t>(lp.B),
              static_cast<int32_t>(lp.T), static_cast<int32_t>(lp.V), len, online, caller_stream, out, &lat);
    const std::vector<uint8_t> skip = RescueSkips(out, lp.B);
    d->PruneLattice(static_cast<int32_t>(lp.B), len, skip.data(), static_cast<float>(output_beam),
                    static_cast<int64_t*>(out_lat_sizes2.data_ptr()));
    double* ms = static_cast<double*>(out_prune_ms.data_ptr());
    for (int k = 0; k < 3; ++k) ms[k] = d->prune_ms_[k];
  });
}

// gpu_decode_lattice_pruned in two halves, so the pruning runs beside the next decode
// (GpuDecoder::PruneBegin / PruneFinish): the whole-batch decode (chunk 0) of the rows `rows`
// of log_probs (read in place: CheckRows) and the records copied into a pruning job; returns
// the job's id for gpu_lattice_prune_finish, which prunes and numbers on its own stream (on any
// one thread at a time) and fills out_lat_sizes2 and out_prune_ms as gpu_decode_lattice_pruned
// does; the rows then by gpu_lattice_pruned_rows.
int64_t GpuDecodeLatticePrunedBegin(int64_t h, TensorView log_probs, TensorView rows, TensorView lengths, bool online,
                                    int64_t caller_stream, TensorView out_arcs, TensorView out_len,
                                    TensorView out_score, TensorView out_meta, TensorView out_stats,
                                    TensorView out_lat_counts, TensorView out_lat_cutoffs, TensorView out_lat_sizes,
                                    TensorView out_lat_total, double output_beam, int64_t filter, double filter_pad,
                                    int64_t trim) {
  GpuDecoder* d = GetDecoder(h);
  const LogProbs lp = CheckRows(CheckLogProbs(d, log_probs), rows);
  const int32_t* len = CheckLengths(lengths, lp.B, lp.T);
  cuwfst::DecodeOutputs out = CheckOutputs(lp.B, out_arcs, out_len, out_score, out_meta, out_stats);
  cuwfst::LatticeOutputs lat = CheckLatticeOutputs(lp, len, out_lat_counts, out_lat_cutoffs, out_lat_sizes,
                                                    out_lat_total, 2);
  lat.chunk = 0;
  SetPrunedOptions(&lat, output_beam, filter, filter_pad, trim);
  return Guarded([&]() -> int64_t {
    d->Decode(lp.base, lp.f16, log_probs.strides()[0], log_probs.strides()[1], static_cast<int32_t>(lp.B),
              static_cast<int32_t>(lp.T), static_cast<int32_t>(lp.V), len, online, caller_stream, out, &lat,
              static_cast<const int32_t*>(rows.data_ptr()));
    const std::vector<uint8_t> skip = RescueSkips(out, lp.B);
    return d->PruneBegin(static_cast<int32_t>(lp.B), len, skip.data(), static_cast<float>(output_beam));
  });
}

void GpuLatticePruneFinish(int64_t h, int64_t job, TensorView out_lat_sizes2, TensorView out_prune_ms) {
  GpuDecoder* d = GetDecoder(h);
  if (out_lat_sizes2.ndim() != 2 || out_lat_sizes2.shape()[1] != 3)
    TVM_FFI_THROW(ValueError) << "out_lat_sizes2 must be [B, 3]";
  CheckHostTensor(out_lat_sizes2, "out_lat_sizes2", kDLInt, 64, {out_lat_sizes2.shape()[0], 3});
  CheckHostTensor(out_prune_ms, "out_prune_ms", kDLFloat, 64, {3});
  Guarded([&] {
    d->PruneFinish(job, static_cast<int64_t*>(out_lat_sizes2.data_ptr()), out_lat_sizes2.shape()[0],
                   static_cast<double*>(out_prune_ms.data_ptr()));
  });
}

// Rows of the last gpu_decode_lattice_pruned: rows [n] i32 (batch rows), arrays 3 a row at
// [3 i, 3 i + 3): states [3, S] i32, arcs [4, A] i32, scores [3, A] f32 (S, A from its
// out_lat_sizes2), all checked before any is written; one call for the batch.
void GpuLatticePrunedRows(int64_t h, TensorView rows, tvm::ffi::Array<tvm::ffi::Tensor> arrays) {
  if (rows.ndim() != 1) TVM_FFI_THROW(ValueError) << "rows must be 1-D";
  const int64_t n = rows.shape()[0];
  CheckHostTensor(rows, "rows", kDLInt, 32, {n});
  if (static_cast<int64_t>(arrays.size()) != 3 * n) TVM_FFI_THROW(ValueError) << "arrays must hold 3 arrays a row";
  std::vector<int64_t> S(n), A(n);
  std::vector<int32_t*> states(n), arcs(n);
  std::vector<float*> scores(n);
  for (int64_t i = 0; i < n; ++i) {
    TensorView st = arrays[3 * i], ar = arrays[3 * i + 1], sc = arrays[3 * i + 2];
    if (st.ndim() != 2 || ar.ndim() != 2 || sc.ndim() != 2)
      TVM_FFI_THROW(ValueError) << "states, arcs and scores must be 2-d";
    S[i] = st.shape()[1];
    A[i] = ar.shape()[1];
    CheckHostTensor(st, "states", kDLInt, 32, {3, S[i]});
    CheckHostTensor(ar, "arcs", kDLInt, 32, {4, A[i]});
    CheckHostTensor(sc, "scores", kDLFloat, 32, {3, A[i]});
    states[i] = static_cast<int32_t*>(st.data_ptr());
    arcs[i] = static_cast<int32_t*>(ar.data_ptr());
    scores[i] = static_cast<float*>(sc.data_ptr());
  }
  Guarded([&] {
    GetDecoder(h)->TakePrunedRows(n, static_cast<const int32_t*>(rows.data_ptr()), S.data(), A.data(), states.data(),
                                  arcs.data(), scores.data());
  });
}

// Continuous batching a segment at a time (GpuDecoder::ManyBegin / ManyLaunch / ManyWait /
// ManyAbort): begin takes the rows, lengths and outputs, which the caller keeps alive until
// launch returns false or abort; wait writes the indices of the rows it finished into
// rows_out (int32 [N]) and returns how many.
void GpuDecodeManyBegin(int64_t h, TensorView log_probs, TensorView lengths, bool online, int64_t segment,
                        bool gc_every_segment, bool refill, int64_t caller_stream, TensorView out_arcs,
                        TensorView out_len, TensorView out_score, TensorView out_meta, TensorView out_stats) {
  GpuDecoder* d = GetDecoder(h);
  const LogProbs lp = CheckLogProbs(d, log_probs);
  if (lp.B > INT32_MAX) TVM_FFI_THROW(ValueError) << "too many rows";
  if (segment < 1 || segment > 4096) TVM_FFI_THROW(ValueError) << "segment must be in [1, 4096] steps";
  const int32_t* len = CheckLengths(lengths, lp.B, lp.T);
  cuwfst::DecodeOutputs out = CheckOutputs(lp.B, out_arcs, out_len, out_score, out_meta, out_stats);
  Guarded([&] {
    d->ManyBegin(lp.base, lp.f16, log_probs.strides()[0], log_probs.strides()[1], static_cast<int32_t>(lp.B),
                 static_cast<int32_t>(lp.T), static_cast<int32_t>(lp.V), len, online, static_cast<int32_t>(segment),
                 gc_every_segment, caller_stream, out, refill);
  });
}

// Continuous batching in one call (the long-form gc_interval segments; tests): any number of
// rows; as GpuDecode otherwise. gc_every_segment: a winners-log GC round after every segment
// (long-form offline decodes); refill: lanes take the next row on the device as soon as theirs
// ends (finalize.cuh).
void GpuDecodeMany(int64_t h, TensorView log_probs, TensorView lengths, bool online, int64_t segment,
                   bool gc_every_segment, bool refill, int64_t caller_stream, TensorView out_arcs, TensorView out_len,
                   TensorView out_score, TensorView out_meta, TensorView out_stats) {
  GpuDecodeManyBegin(h, log_probs, lengths, online, segment, gc_every_segment, refill, caller_stream, out_arcs,
                     out_len, out_score, out_meta, out_stats);
  GpuDecoder* d = GetDecoder(h);
  Guarded([&] {
    while (d->ManyLaunch()) d->ManyWait(nullptr);
  });
}

bool GpuDecodeManyLaunch(int64_t h) {
  bool more = false;
  Guarded([&] { more = GetDecoder(h)->ManyLaunch(); });
  return more;
}

int64_t GpuDecodeManyWait(int64_t h, TensorView rows_out) {
  if (rows_out.ndim() != 1) TVM_FFI_THROW(ValueError) << "rows_out must be 1-D";
  CheckHostTensor(rows_out, "rows_out", kDLInt, 32, {rows_out.shape()[0]});
  GpuDecoder* d = GetDecoder(h);
  int32_t n = 0;
  Guarded([&] {
    // (a wait writes at most every row of the run)
    if (rows_out.shape()[0] < d->ManyRows()) throw std::invalid_argument("rows_out is shorter than the run's rows");
    n = d->ManyWait(static_cast<int32_t*>(rows_out.data_ptr()));
  });
  return n;
}

void GpuDecodeManyAbort(int64_t h) {
  Guarded([&] { GetDecoder(h)->ManyAbort(); });
}

const int32_t* CheckLanesTensor(const TensorView& lanes, int64_t* n) {
  if (lanes.ndim() != 1) TVM_FFI_THROW(ValueError) << "lanes must be 1-D";
  *n = lanes.shape()[0];
  CheckHostTensor(lanes, "lanes", kDLInt, 32, {*n});
  return static_cast<const int32_t*>(lanes.data_ptr());
}

void GpuStreamOpen(int64_t h, TensorView lanes) {
  int64_t n = 0;
  const int32_t* l = CheckLanesTensor(lanes, &n);
  Guarded([&] { GetDecoder(h)->StreamOpen(l, static_cast<int32_t>(n)); });
}

// lanes [S]; log_probs [S, Tc, V] on the device (row i feeds lanes[i]); lengths [S] in [0, Tc].
void GpuStreamAdvance(int64_t h, TensorView lanes, TensorView log_probs, TensorView lengths, int64_t caller_stream) {
  GpuDecoder* d = GetDecoder(h);
  int64_t S = 0;
  const int32_t* l = CheckLanesTensor(lanes, &S);
  const LogProbs lp = CheckLogProbs(d, log_probs);
  if (lp.B != S) TVM_FFI_THROW(ValueError) << "log_probs has " << lp.B << " rows for " << S << " lanes";
  const int32_t* len = CheckLengths(lengths, S, lp.T);
  Guarded([&] {
    d->StreamAdvance(l, static_cast<int32_t>(S), lp.base, lp.f16, log_probs.strides()[0], log_probs.strides()[1],
                     static_cast<int32_t>(lp.T), static_cast<int32_t>(lp.V), len, caller_stream);
  });
}

// out_arcs int32 [n, cap], out_len int32 [n] (true length), out_committed int32 [n],
// out_score float32 [n], out_meta int32 [n, 2] = {ok, overflow}.
void GpuStreamPartial(int64_t h, TensorView lanes, TensorView out_arcs, TensorView out_len, TensorView out_committed,
                      TensorView out_score, TensorView out_meta) {
  int64_t n = 0;
  const int32_t* l = CheckLanesTensor(lanes, &n);
  if (out_arcs.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_arcs must be [n, cap]";
  const int64_t cap = out_arcs.shape()[1];
  CheckHostTensor(out_arcs, "out_arcs", kDLInt, 32, {n, cap});
  CheckHostTensor(out_len, "out_len", kDLInt, 32, {n});
  CheckHostTensor(out_committed, "out_committed", kDLInt, 32, {n});
  CheckHostTensor(out_score, "out_score", kDLFloat, 32, {n});
  CheckHostTensor(out_meta, "out_meta", kDLInt, 32, {n, 2});
  cuwfst::PartialOutputs out{static_cast<int32_t*>(out_arcs.data_ptr()), cap, static_cast<int32_t*>(out_len.data_ptr()),
                             static_cast<int32_t*>(out_committed.data_ptr()), static_cast<float*>(out_score.data_ptr()),
                             static_cast<int32_t*>(out_meta.data_ptr())};
  Guarded([&] { GetDecoder(h)->StreamPartial(l, static_cast<int32_t>(n), out); });
}

void GpuStreamFinalize(int64_t h, TensorView lanes, TensorView out_arcs, TensorView out_len, TensorView out_score,
                       TensorView out_meta, TensorView out_stats) {
  int64_t n = 0;
  const int32_t* l = CheckLanesTensor(lanes, &n);
  cuwfst::DecodeOutputs out = CheckOutputs(n, out_arcs, out_len, out_score, out_meta, out_stats);
  Guarded([&] { GetDecoder(h)->StreamFinalize(l, static_cast<int32_t>(n), out); });
}

void GpuStreamRelease(int64_t h, TensorView lanes) {
  int64_t n = 0;
  const int32_t* l = CheckLanesTensor(lanes, &n);
  Guarded([&] { GetDecoder(h)->StreamRelease(l, static_cast<int32_t>(n)); });
}

// out int64 [3] = {frames fed, winners entries the decoder holds, committed arcs on the host}
void GpuStreamStats(int64_t h, int64_t lane, TensorView out) {
  CheckHostTensor(out, "out", kDLInt, 64, {3});
  Guarded([&] { GetDecoder(h)->StreamStats(static_cast<int32_t>(lane), static_cast<int64_t*>(out.data_ptr())); });
}

// Debug snapshots of one row (see GpuDecoder::DecodeSnapshots). log_probs [1, T, V] on
// the decoder's device; outputs as the CPU reference's ref_decode_snapshots, plus
// out_overflow int32 [K]: lane 0's overflow bits after each step (Snapshot::overflow).
void GpuDecodeSnapshots(int64_t h, TensorView log_probs, int64_t length, int64_t caller_stream,
                        TensorView out_count, TensorView out_state, TensorView out_score,
                        TensorView out_arc, TensorView out_step, TensorView out_overflow) {
  GpuDecoder* d = GetDecoder(h);
  if (log_probs.device().device_type != kDLCUDA || log_probs.device().device_id != d->device())
    TVM_FFI_THROW(ValueError) << "log_probs must be on cuda:" << d->device();
  bool f16 = IsType(log_probs.dtype(), kDLFloat, 16);
  if (!f16 && !IsType(log_probs.dtype(), kDLFloat, 32)) TVM_FFI_THROW(TypeError) << "log_probs dtype";
  if (log_probs.ndim() != 3 || log_probs.shape()[0] != 1) TVM_FFI_THROW(ValueError) << "log_probs must be [1, T, V]";
  const int64_t T = log_probs.shape()[1], V = log_probs.shape()[2];
  if (V < d->vocab_size())
    TVM_FFI_THROW(ValueError) << "log_probs has " << V << " columns but the graph's vocab_size is " << d->vocab_size();
  if (T > (1 << 24)) TVM_FFI_THROW(ValueError) << "T too large (at most 2^24 frames)";
  if (V > 1 && log_probs.strides()[2] != 1) TVM_FFI_THROW(ValueError) << "rows must be contiguous";
  if (log_probs.strides()[1] < 0) TVM_FFI_THROW(ValueError) << "log_probs must have non-negative strides";
  if (length < 0 || length > T) TVM_FFI_THROW(ValueError) << "length outside [0, T]";
  const int64_t K = length + 2;
  if (out_state.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_state must be [K, cap]";
  const int64_t cap = out_state.shape()[1];
  CheckHostTensor(out_count, "out_count", kDLInt, 32, {K});
  CheckHostTensor(out_state, "out_state", kDLInt, 32, {K, cap});
  CheckHostTensor(out_score, "out_score", kDLFloat, 32, {K, cap});
  CheckHostTensor(out_arc, "out_arc", kDLInt, 32, {K, cap});
  CheckHostTensor(out_step, "out_step", kDLFloat, 32, {K, 4});
  CheckHostTensor(out_overflow, "out_overflow", kDLInt, 32, {K});
  const char* base = static_cast<const char*>(log_probs.data_ptr()) + log_probs.byte_offset();
  std::vector<GpuDecoder::Snapshot> snaps = Guarded([&] {
    return d->DecodeSnapshots(base, f16, log_probs.strides()[1], static_cast<int32_t>(T),
                              static_cast<int32_t>(V), static_cast<int32_t>(length), caller_stream);
  });
  int32_t* cnt = static_cast<int32_t*>(out_count.data_ptr());
  int32_t* st = static_cast<int32_t*>(out_state.data_ptr());
  float* sc = static_cast<float*>(out_score.data_ptr());
  int32_t* ar = static_cast<int32_t*>(out_arc.data_ptr());
  float* step = static_cast<float*>(out_step.data_ptr());
  int32_t* ovf = static_cast<int32_t*>(out_overflow.data_ptr());
  for (int64_t k = 0; k < K; ++k) {
    const auto& s = snaps[k];
    int64_t n = std::min<int64_t>(cap, s.state.size());
    cnt[k] = static_cast<int32_t>(n);
    step[k * 4] = static_cast<float>(s.phase);
    step[k * 4 + 1] = s.beam;
    step[k * 4 + 2] = s.cutoff;
    step[k * 4 + 3] = static_cast<float>(s.before_closure);
    ovf[k] = s.overflow;
    for (int64_t i = 0; i < n; ++i) {
      st[k * cap + i] = s.state[i];
      sc[k * cap + i] = s.score[i];
      ar[k * cap + i] = s.arc[i];
    }
  }
}

// Profiling mode: enable = 1 makes later decodes run launch by launch with CUDA events;
// out f64[kProfileKinds] = accumulated ms of {init, scan, lane_scan, max, expand, finalize,
// backtrack, sanitize, eps_scan, eps_expand, eps_resolve, clear_claims, lat_persist,
// lat_step_end, handout, eps_link} since the decoder was built.
void GpuDecoderProfile(int64_t h, int64_t enable, TensorView out) {
  CheckHostTensor(out, "out", kDLFloat, 64, {cuwfst::kProfileKinds});
  GpuDecoder* d = GetDecoder(h);
  if (enable >= 0) d->SetProfiling(enable != 0);
  d->Profile(static_cast<double*>(out.data_ptr()));
}

// out i64[GpuDecoder::kMemStats]: see GpuDecoder::MemStats.
void GpuDecoderMemStats(int64_t h, TensorView out) {
  CheckHostTensor(out, "out", kDLInt, 64, {GpuDecoder::kMemStats});
  GetDecoder(h)->MemStats(static_cast<int64_t*>(out.data_ptr()));
}

// The persistent scan's phase trace (GpuDecoder::ScanTrace; CUWFST_SCAN_TRACE): out i64[n] on
// the host takes the header and as much of the ring as fits; returns the words it all takes
// (0: the trace is off).
int64_t GpuDecoderScanTrace(int64_t h, TensorView out) {
  CheckHostTensor(out, "out", kDLInt, 64, {-1});
  return Guarded([&]() {
    return GetDecoder(h)->ScanTrace(static_cast<uint64_t*>(out.data_ptr()), out.shape()[0]);
  });
}

// The input check (GpuDecoder::FirstNonFinite): log_probs [B, T, V] on the decoder's device
// (CheckLogProbs; B may exceed max_lanes), lengths CPU int32 [B] in [0, T], on the caller's
// stream; returns b * T + t of the first frame within a row's length holding a NaN or +inf, or -1.
int64_t GpuCheckFinite(int64_t h, TensorView log_probs, TensorView lengths, int64_t caller_stream) {
  GpuDecoder* d = GetDecoder(h);
  const LogProbs lp = CheckLogProbs(d, log_probs);
  if (lp.B > INT32_MAX || lp.V > INT32_MAX) TVM_FFI_THROW(ValueError) << "log_probs has too many rows or columns";
  const int32_t* len = CheckLengths(lengths, lp.B, lp.T);
  return Guarded([&]() {
    return d->FirstNonFinite(lp.base, lp.f16, log_probs.strides()[0], log_probs.strides()[1],
                             static_cast<int32_t>(lp.B), static_cast<int32_t>(lp.T), static_cast<int32_t>(lp.V), len,
                             caller_stream);
  });
}

// Gives back the lane pools' growth and, with log, the winners log's (GpuDecoder::TrimWorkspace);
// returns the bytes given back.
int64_t GpuDecoderTrim(int64_t h, bool log) {
  return Guarded([&]() { return GetDecoder(h)->TrimWorkspace(log); });
}

// Test hooks (tests/test_gpu_faults.py). gpu_fault_injection(n): the n-th CUDA resource
// acquisition from now (device or pinned allocation, stream, event, graph instantiation)
// fails once as an out-of-memory; n = 0 disarms. Returns the acquisitions counted since
// the previous call, so a test can count the sites of a run and then fail each in turn.
int64_t GpuFaultInjection(int64_t n) {
  if (n < 0) TVM_FFI_THROW(ValueError) << "n must be >= 0 (0 disarms)";
  return cuwfst::fault::Arm(n);
}

// The decoder's next decode reads its log-probs through an address no allocation has,
// which kills this process's CUDA context: run it in a process of its own.
void GpuDecoderInjectIllegalAddress(int64_t h) { GetDecoder(h)->InjectIllegalAddress(); }

// out i64[5] = {free, total} device bytes (cudaMemGetInfo on `device`), then what this
// module holds right now, process-wide: device bytes, pinned host bytes, and handles
// (streams + events + CUDA-graph executables). Needs no PyTorch.
void GpuMemoryInfo(int64_t device, TensorView out) {
  CheckHostTensor(out, "out", kDLInt, 64, {5});
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  Guarded([&] {
    int count = 0;
    CUWFST_CUDA(cudaGetDeviceCount(&count));
    if (device < 0 || device >= count) TVM_FFI_THROW(ValueError) << "no CUDA device " << device;
    cuwfst::DeviceGuard guard(static_cast<int>(device));
    size_t free_b = 0, total_b = 0;
    CUWFST_CUDA(cudaMemGetInfo(&free_b, &total_b));
    o[0] = static_cast<int64_t>(free_b);
    o[1] = static_cast<int64_t>(total_b);
  });
  o[2] = cuwfst::live::device_bytes.load();
  o[3] = cuwfst::live::pinned_bytes.load();
  o[4] = cuwfst::live::handles.load();
}

// The most device bytes the module held at once (every decoder and graph, all devices) since
// the last reset; reset: start over from what it holds now.
int64_t GpuMemoryPeak(bool reset) {
  if (reset) cuwfst::live::device_peak.store(cuwfst::live::device_bytes.load());
  return cuwfst::live::device_peak.load();
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_memory_peak, GpuMemoryPeak);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_graph_upload, GpuGraphUpload);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_graph_free, GpuGraphFree);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_graph_emit_sorted, GpuGraphEmitSorted);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_graph_label_tables, GpuGraphLabelTables);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_graph_packed, GpuGraphPacked);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_create, GpuDecoderCreate);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_free, GpuDecoderFree);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode, GpuDecode);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_many, GpuDecodeMany);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_many_begin, GpuDecodeManyBegin);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_many_launch, GpuDecodeManyLaunch);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_many_wait, GpuDecodeManyWait);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_many_abort, GpuDecodeManyAbort);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_lattice, GpuDecodeLattice);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_lattice_records, GpuLatticeRecords);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_lattice_pruned, GpuDecodeLatticePruned);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_lattice_pruned_rows, GpuLatticePrunedRows);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_lattice_pruned_begin, GpuDecodeLatticePrunedBegin);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_rows, GpuDecodeRows);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_lattice_prune_finish, GpuLatticePruneFinish);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_stream_open, GpuStreamOpen);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_stream_advance, GpuStreamAdvance);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_stream_partial, GpuStreamPartial);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_stream_finalize, GpuStreamFinalize);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_stream_release, GpuStreamRelease);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_stream_stats, GpuStreamStats);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_mem_stats, GpuDecoderMemStats);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_trim, GpuDecoderTrim);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_check_finite, GpuCheckFinite);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_scan_trace, GpuDecoderScanTrace);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_snapshots, GpuDecodeSnapshots);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_profile, GpuDecoderProfile);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_fault_injection, GpuFaultInjection);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_inject_illegal_address, GpuDecoderInjectIllegalAddress);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_memory_info, GpuMemoryInfo);
