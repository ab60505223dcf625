// TVM-FFI exports of the GPU decoder. Every tensor a launcher reads or writes is checked
// here (device, dtype, packing, shapes); the kernels trust these checks and the graph
// validation done at load (cuwfst/graph/image.py).
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
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

#define CUDA_OR_THROW(expr)                                                              \
  do {                                                                                   \
    cudaError_t e__ = (expr);                                                            \
    if (e__ != cudaSuccess) TVM_FFI_THROW(RuntimeError) << cuwfst::CudaErrorString(e__, #expr); \
  } while (0)

template <typename T>
T* Upload(GpuGraph* g, const void* host, size_t count) {
  void* p = nullptr;
  size_t bytes = std::max<size_t>(1, count * sizeof(T));
  CUDA_OR_THROW(cudaMalloc(&p, bytes));
  g->buffers.push_back(p);
  if (count) CUDA_OR_THROW(cudaMemcpy(p, host, count * sizeof(T), cudaMemcpyHostToDevice));
  return static_cast<T*>(p);
}

// Uploads a validated graph (CPU arrays) to `device`; returns a handle owning a
// shared_ptr, so decoders keep the device arrays alive after the handle is freed.
// eps_count: int32 [N] epsilon arcs per state, or an empty tensor on epsilon-free graphs.
int64_t GpuGraphUpload(TensorView row_splits, TensorView final_count, TensorView eps_count,
                       TensorView dest, TensorView ilabel, TensorView weight, int64_t vocab_size,
                       int64_t start_state, bool finals_at_end, int64_t device) {
  int64_t n = final_count.ndim() == 1 ? final_count.shape()[0] : -1;
  int64_t a = dest.ndim() == 1 ? dest.shape()[0] : -1;
  if (n < 1 || a < 0) TVM_FFI_THROW(ValueError) << "final_count and dest must be 1-D";
  if (a >= cuwfst::kRedirectArcBit) TVM_FFI_THROW(ValueError) << "the GPU decoder takes < 2^30 arcs";
  if (vocab_size < 1 || vocab_size >= 65535) TVM_FFI_THROW(ValueError) << "vocab_size must be in [1, 65534]";
  CheckHostTensor(row_splits, "row_splits", kDLInt, 32, {n + 1});
  CheckHostTensor(final_count, "final_count", kDLInt, 32, {n});
  CheckHostTensor(dest, "dest", kDLInt, 32, {a});
  CheckHostTensor(ilabel, "ilabel", kDLInt, 32, {a});
  CheckHostTensor(weight, "weight", kDLFloat, 32, {a});
  const bool has_eps = eps_count.ndim() == 1 && eps_count.shape()[0] > 0;
  if (has_eps) CheckHostTensor(eps_count, "eps_count", kDLInt, 32, {n});
  int count = 0;
  CUDA_OR_THROW(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) TVM_FFI_THROW(ValueError) << "no CUDA device " << device;
  int prev = 0;
  CUDA_OR_THROW(cudaGetDevice(&prev));
  CUDA_OR_THROW(cudaSetDevice(static_cast<int>(device)));
  auto g = std::make_shared<GpuGraph>();
  g->device = static_cast<int>(device);
  const int32_t* rs = static_cast<const int32_t*>(row_splits.data_ptr());
  const int32_t* fc = static_cast<const int32_t*>(final_count.data_ptr());
  const int32_t* il = static_cast<const int32_t*>(ilabel.data_ptr());
  const float* w = static_cast<const float*>(weight.data_ptr());
  const int32_t* ec = has_eps ? static_cast<const int32_t*>(eps_count.data_ptr()) : nullptr;
  std::vector<uint16_t> il16(a);
  for (int64_t i = 0; i < a; ++i) {
    if (il[i] == -1) il16[i] = cuwfst::kFinalIlabel;
    else if (il[i] == -2 && has_eps) il16[i] = cuwfst::kEpsIlabel;
    else if (il[i] >= 0 && il[i] < vocab_size) il16[i] = static_cast<uint16_t>(il[i]);
    else TVM_FFI_THROW(ValueError) << "arc " << i << " has ilabel " << il[i] << " outside [0, " << vocab_size
                                   << ") and not -1 (final)" << (has_eps ? " or -2 (epsilon)" : "");
  }
  // the upper-bound ingredient of the walkers: max weight over each state's emitting arcs
  std::vector<float> emit_maxw(n, -std::numeric_limits<float>::infinity());
  for (int64_t s = 0; s < n; ++s) {
    const int32_t e_cnt = ec ? ec[s] : 0;
    int32_t b = (finals_at_end ? rs[s] : rs[s] + fc[s]) + e_cnt;
    int32_t e = finals_at_end ? rs[s + 1] - fc[s] : rs[s + 1];
    for (int32_t i = b; i < e; ++i) emit_maxw[s] = std::max(emit_maxw[s], w[i]);
  }
  cuwfst::DeviceGraph& v = g->view;
  v.num_states = static_cast<int32_t>(n);
  v.num_arcs = static_cast<int32_t>(a);
  v.vocab_size = static_cast<int32_t>(vocab_size);
  v.start_state = static_cast<int32_t>(start_state);
  v.finals_at_end = finals_at_end ? 1 : 0;
  try {
    v.row_splits = Upload<int32_t>(g.get(), rs, n + 1);
    v.final_count = Upload<int32_t>(g.get(), fc, n);
    v.eps_count = has_eps ? Upload<int32_t>(g.get(), ec, n) : nullptr;
    v.arc_dest = Upload<int32_t>(g.get(), dest.data_ptr(), a);
    v.arc_ilabel = Upload<uint16_t>(g.get(), il16.data(), a);
    v.arc_weight = Upload<float>(g.get(), w, a);
    v.emit_maxw = Upload<float>(g.get(), emit_maxw.data(), n);
  } catch (...) {
    cudaSetDevice(prev);
    throw;
  }
  cudaSetDevice(prev);
  return reinterpret_cast<int64_t>(new std::shared_ptr<GpuGraph>(std::move(g)));
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
                         int64_t eps_iterations) {
  if (!graph_h) TVM_FFI_THROW(ValueError) << "null graph handle";
  auto g = *reinterpret_cast<std::shared_ptr<GpuGraph>*>(graph_h);
  if (!(search_beam > 0) || !(output_beam > 0)) TVM_FFI_THROW(ValueError) << "beams must be > 0";
  if (min_active < 0 || max_active <= min_active)
    TVM_FFI_THROW(ValueError) << "max_active_states must be greater than min_active_states";
  if (max_lanes < 1 || max_lanes > 1024) TVM_FFI_THROW(ValueError) << "max_lanes must be in [1, 1024]";
  if (main_q < 1 || main_q > (1 << 28)) TVM_FFI_THROW(ValueError) << "main_q must be in [1, 2^28]";
  if (claims_cap < 1 || claims_cap > (1 << 30)) TVM_FFI_THROW(ValueError) << "claims_cap out of range";
  if (hash_cap < 2 || (hash_cap & (hash_cap - 1)) || hash_cap > (1ll << 30))
    TVM_FFI_THROW(ValueError) << "hash_cap must be a power of two <= 2^30";
  if (arena_cap < 1 || arena_max < arena_cap || arena_max > (1ll << 31) - 1)
    TVM_FFI_THROW(ValueError) << "arena capacities out of range";
  if (max_frames < 1 || max_frames > (1 << 24)) TVM_FFI_THROW(ValueError) << "max_frames out of range";
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
  if (walker != cuwfst::kWalkWarp && walker != cuwfst::kWalkThread)
    TVM_FFI_THROW(ValueError) << "walker must be 0 (warp strips) or 1 (thread cursors)";
  c.walker = static_cast<int32_t>(walker);
  if (walk_blocks < 0 || walk_blocks > (1 << 20)) TVM_FFI_THROW(ValueError) << "walk_blocks out of range";
  c.walk_blocks = static_cast<int32_t>(walk_blocks);
  if (eps_iterations < 0 || eps_iterations > 64) TVM_FFI_THROW(ValueError) << "eps_iterations must be in [0, 64]";
  if (eps_iterations > 0 && g->view.eps_count == nullptr)
    TVM_FFI_THROW(ValueError) << "eps_iterations > 0 on a graph without epsilon arcs";
  c.eps_iterations = static_cast<int32_t>(eps_iterations);
  GpuDecoder* d = nullptr;
  try {
    d = new GpuDecoder(std::move(g), c);
  } catch (const std::exception& e) {
    TVM_FFI_THROW(RuntimeError) << e.what();
  }
  return reinterpret_cast<int64_t>(d);
}

void GpuDecoderFree(int64_t h) { delete GetDecoder(h); }

// log_probs: [B, T, V] float32 or float16 on the decoder's CUDA device, rows packed
// (last dim contiguous); lengths: CPU int32 [B] in [0, T]; outputs: dense CPU tensors
// out_arcs int32 [B, cap], out_len int32 [B] (the TRUE path length), out_score float32
// [B], out_meta int32 [B, 4] = {reached_final, redirected, overflow bits, max frontier},
// out_stats int64 [B, 2] = {frontier_total, closure_added}.
void GpuDecode(int64_t h, TensorView log_probs, TensorView lengths, bool online, int64_t caller_stream,
               TensorView out_arcs, TensorView out_len, TensorView out_score, TensorView out_meta,
               TensorView out_stats) {
  GpuDecoder* d = GetDecoder(h);
  if (log_probs.device().device_type != kDLCUDA || log_probs.device().device_id != d->device())
    TVM_FFI_THROW(ValueError) << "log_probs must be on cuda:" << d->device();
  bool f16 = IsType(log_probs.dtype(), kDLFloat, 16);
  if (!f16 && !IsType(log_probs.dtype(), kDLFloat, 32))
    TVM_FFI_THROW(TypeError) << "log_probs must be float32 or float16";
  if (log_probs.ndim() != 3) TVM_FFI_THROW(ValueError) << "log_probs must be [B, T, V]";
  const int64_t B = log_probs.shape()[0], T = log_probs.shape()[1], V = log_probs.shape()[2];
  if (V > 1 && log_probs.strides()[2] != 1) TVM_FFI_THROW(ValueError) << "log_probs rows must be contiguous";
  if (B < 1) TVM_FFI_THROW(ValueError) << "empty batch";
  if (T > (1 << 24)) TVM_FFI_THROW(ValueError) << "T too large";
  if (log_probs.strides()[0] < 0 || log_probs.strides()[1] < 0)
    TVM_FFI_THROW(ValueError) << "log_probs must have non-negative strides";
  CheckHostTensor(lengths, "lengths", kDLInt, 32, {B});
  if (out_arcs.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_arcs must be [B, cap]";
  const int64_t cap = out_arcs.shape()[1];
  CheckHostTensor(out_arcs, "out_arcs", kDLInt, 32, {B, cap});
  CheckHostTensor(out_len, "out_len", kDLInt, 32, {B});
  CheckHostTensor(out_score, "out_score", kDLFloat, 32, {B});
  CheckHostTensor(out_meta, "out_meta", kDLInt, 32, {B, 4});
  CheckHostTensor(out_stats, "out_stats", kDLInt, 64, {B, 2});
  const int32_t* len = static_cast<const int32_t*>(lengths.data_ptr());
  for (int64_t b = 0; b < B; ++b)
    if (len[b] < 0 || len[b] > T) TVM_FFI_THROW(ValueError) << "lengths[" << b << "] outside [0, " << T << "]";
  const char* base = static_cast<const char*>(log_probs.data_ptr()) + log_probs.byte_offset();
  cuwfst::DecodeOutputs out{static_cast<int32_t*>(out_arcs.data_ptr()), cap,
                            static_cast<int32_t*>(out_len.data_ptr()),
                            static_cast<float*>(out_score.data_ptr()),
                            static_cast<int32_t*>(out_meta.data_ptr()),
                            static_cast<int64_t*>(out_stats.data_ptr())};
  try {
    d->Decode(base, f16, log_probs.strides()[0], log_probs.strides()[1], static_cast<int32_t>(B),
              static_cast<int32_t>(T), len, online, caller_stream, out);
  } catch (const std::exception& e) {
    TVM_FFI_THROW(RuntimeError) << e.what();
  }
}

// Debug snapshots of one row (see GpuDecoder::DecodeSnapshots). log_probs [1, T, V] on
// the decoder's device; outputs as the CPU reference's ref_decode_snapshots.
void GpuDecodeSnapshots(int64_t h, TensorView log_probs, int64_t length, int64_t caller_stream,
                        TensorView out_count, TensorView out_state, TensorView out_score,
                        TensorView out_arc, TensorView out_step) {
  GpuDecoder* d = GetDecoder(h);
  if (log_probs.device().device_type != kDLCUDA || log_probs.device().device_id != d->device())
    TVM_FFI_THROW(ValueError) << "log_probs must be on cuda:" << d->device();
  bool f16 = IsType(log_probs.dtype(), kDLFloat, 16);
  if (!f16 && !IsType(log_probs.dtype(), kDLFloat, 32)) TVM_FFI_THROW(TypeError) << "log_probs dtype";
  if (log_probs.ndim() != 3 || log_probs.shape()[0] != 1) TVM_FFI_THROW(ValueError) << "log_probs must be [1, T, V]";
  const int64_t T = log_probs.shape()[1];
  if (log_probs.shape()[2] > 1 && log_probs.strides()[2] != 1) TVM_FFI_THROW(ValueError) << "rows must be contiguous";
  if (length < 0 || length > T) TVM_FFI_THROW(ValueError) << "length outside [0, T]";
  const int64_t K = length + 2;
  if (out_state.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_state must be [K, cap]";
  const int64_t cap = out_state.shape()[1];
  CheckHostTensor(out_count, "out_count", kDLInt, 32, {K});
  CheckHostTensor(out_state, "out_state", kDLInt, 32, {K, cap});
  CheckHostTensor(out_score, "out_score", kDLFloat, 32, {K, cap});
  CheckHostTensor(out_arc, "out_arc", kDLInt, 32, {K, cap});
  CheckHostTensor(out_step, "out_step", kDLFloat, 32, {K, 4});
  const char* base = static_cast<const char*>(log_probs.data_ptr()) + log_probs.byte_offset();
  std::vector<GpuDecoder::Snapshot> snaps;
  try {
    snaps = d->DecodeSnapshots(base, f16, log_probs.strides()[1], static_cast<int32_t>(T),
                               static_cast<int32_t>(length), caller_stream);
  } catch (const std::exception& e) {
    TVM_FFI_THROW(RuntimeError) << e.what();
  }
  int32_t* cnt = static_cast<int32_t*>(out_count.data_ptr());
  int32_t* st = static_cast<int32_t*>(out_state.data_ptr());
  float* sc = static_cast<float*>(out_score.data_ptr());
  int32_t* ar = static_cast<int32_t*>(out_arc.data_ptr());
  float* step = static_cast<float*>(out_step.data_ptr());
  for (int64_t k = 0; k < K; ++k) {
    const auto& s = snaps[k];
    int64_t n = std::min<int64_t>(cap, s.state.size());
    cnt[k] = static_cast<int32_t>(n);
    step[k * 4] = static_cast<float>(s.phase);
    step[k * 4 + 1] = s.beam;
    step[k * 4 + 2] = s.cutoff;
    step[k * 4 + 3] = static_cast<float>(s.before_closure);
    for (int64_t i = 0; i < n; ++i) {
      st[k * cap + i] = s.state[i];
      sc[k * cap + i] = s.score[i];
      ar[k * cap + i] = s.arc[i];
    }
  }
}

// Profiling mode: enable = 1 makes later decodes run launch by launch with CUDA events;
// out f64[12] = accumulated ms of {init, scan, lane_scan, max, expand, finalize, backtrack,
// sanitize, eps_scan, eps_expand, eps_resolve, clear_claims} since the decoder was built.
void GpuDecoderProfile(int64_t h, int64_t enable, TensorView out) {
  CheckHostTensor(out, "out", kDLFloat, 64, {cuwfst::kProfileKinds});
  GpuDecoder* d = GetDecoder(h);
  if (enable >= 0) d->SetProfiling(enable != 0);
  d->Profile(static_cast<double*>(out.data_ptr()));
}

void GpuDecoderMemStats(int64_t h, TensorView out) {
  CheckHostTensor(out, "out", kDLInt, 64, {4});
  GetDecoder(h)->MemStats(static_cast<int64_t*>(out.data_ptr()));
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_graph_upload, GpuGraphUpload);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_graph_free, GpuGraphFree);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_create, GpuDecoderCreate);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_free, GpuDecoderFree);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode, GpuDecode);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_mem_stats, GpuDecoderMemStats);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decode_snapshots, GpuDecodeSnapshots);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gpu_decoder_profile, GpuDecoderProfile);
