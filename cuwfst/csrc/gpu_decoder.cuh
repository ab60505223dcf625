// Host objects of the GPU decoder: the uploaded graph (shared by every decoder on its
// device) and the decoder instance (workspace, stream, captured CUDA graphs, mutex).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuwfst/types.cuh"

namespace cuwfst {

std::string CudaErrorString(cudaError_t e, const char* what);

struct GpuGraph {
  int device = 0;
  DeviceGraph view{};
  std::vector<void*> buffers;  // device allocations, freed in the destructor
  ~GpuGraph();
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
  int64_t arena_cap = 64ll << 20;
  int64_t arena_max = 512ll << 20;
  bool use_cuda_graphs = true;
  int32_t walker = 0;  // kWalkWarp or kWalkThread (expand.cuh)
  int32_t walk_blocks = 0;  // grid of Max/Expand; 0: ExpandBlocksFor(max_lanes)
  int32_t eps_iterations = 0;  // epsilon-closure passes per real step (0: none)
};

// Kernel kinds timed by the profiling mode, in Profile()'s order.
constexpr int kProfileKinds = 12;

// Results of one decode, on the host.
struct DecodeOutputs {
  int32_t* arcs;        // [B, cap]
  int64_t cap;
  int32_t* path_len;    // [B]
  float* score;         // [B]
  int32_t* meta;        // [B, 4] {reached_final, redirected, overflow, max_frontier}
  int64_t* stats;       // [B, 2] {frontier_total, closure_added}
};

class GpuDecoder {
 public:
  GpuDecoder(std::shared_ptr<GpuGraph> graph, const DecoderConfig& cfg);
  ~GpuDecoder();
  // log_probs: device pointer to a packed [B, T, V'] tensor (strides in elements).
  void Decode(const void* lp, bool lp_f16, int64_t stride_b, int64_t stride_t, int32_t B,
              int32_t T, const int32_t* lengths, bool online, int64_t caller_stream, DecodeOutputs out);
  // Debug: one row (lane 0), launch by launch; after step t copies the frontier of
  // buffer (t + 1) & 1. Snapshot 0 is the start token. Returns the number of snapshots.
  struct Snapshot {
    int32_t phase;
    float beam;
    float cutoff;
    int32_t before_closure;  // frontier size before the step's epsilon closure
    std::vector<int32_t> state, arc;
    std::vector<float> score;
  };
  std::vector<Snapshot> DecodeSnapshots(const void* lp, bool lp_f16, int64_t stride_t, int32_t T,
                                        int32_t length, int64_t caller_stream);
  void MemStats(int64_t out[4]) const;
  // Profiling: decode launch by launch with CUDA events around every kernel; Profile()
  // returns the accumulated milliseconds per kernel kind (kProfileKinds entries).
  void SetProfiling(bool on) { profiling_ = on; }
  void Profile(double out[kProfileKinds]) const;
  int device() const { return graph_->device; }

 private:
  void Allocate();
  void AllocatePath(int32_t max_frames);
  void EnqueueClosure(int32_t buf);
  StepParams Params(bool f16) const;
  void FreeGraphs();
  void Enqueue(int32_t steps, bool f16);
  void EnqueueStep(int32_t t, bool f16);
  void RunOnce(int32_t steps, bool f16);
  template <typename T>
  T* Alloc(size_t count, const char* what);

  std::shared_ptr<GpuGraph> graph_;
  DecoderConfig cfg_;
  Workspace ws_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::mutex mu_;
  std::map<std::pair<int32_t, int32_t>, cudaGraphExec_t> graphs_;  // (steps, fp16 | online << 1)
  bool online_ = false;  // the current decode's beam mode (k2's online mode: T unknown)
  std::vector<void*> buffers_;
  WinnerEntry* arena_ = nullptr;
  int32_t* out_path_ = nullptr;
  int32_t* out_path_len_ = nullptr;
  int32_t* d_lengths_ = nullptr;
  LpDesc* d_lp_desc_ = nullptr;
  LpDesc* h_lp_desc_ = nullptr;       // pinned
  int32_t* h_lengths_ = nullptr;      // pinned
  LaneCounters* h_lanes_ = nullptr;   // pinned
  int32_t* h_path_ = nullptr;         // pinned [max_lanes, path_cap]
  int32_t* h_path_len_ = nullptr;     // pinned
  int64_t fixed_bytes_ = 0;
  bool profiling_ = false;
  // init, scan, lane_scan, max, expand, finalize, backtrack, sanitize, eps_scan, eps_expand,
  // eps_resolve, clear_claims
  double profile_ms_[kProfileKinds] = {0};
  std::vector<std::pair<int, std::pair<cudaEvent_t, cudaEvent_t>>> pending_;
  std::vector<cudaEvent_t> event_pool_;
  cudaEvent_t NextEvent();
  template <typename F>
  void Timed(int kind, F&& launch);
  void CollectProfile();
  unsigned long long arena_high_water_ = 0;
};

}  // namespace cuwfst
