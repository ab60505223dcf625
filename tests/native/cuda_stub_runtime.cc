// A stub CUDA runtime for host-logic tests (see cuda_stub.h), compiled by the host compiler
// so that its definitions do not meet the device runtime's declarations.
#include "cuda_stub.h"

#include <cuda.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cuwfst/types.cuh"

using cuwfst::LaneCounters;
using cuwfst::Workspace;

namespace stub {
cudaError_t pending = cudaSuccess;
std::set<void*> device_mem, pinned_mem;
std::map<const void*, size_t> sizes;  // live device allocations and their bytes
bool bad_access = false;
int64_t g_need = 0;
int64_t g_pool_need[3] = {0, 0, 0};
bool sticky = false;
int64_t copy2d_width = -1, copy2d_height = -1;
int captures_begun = 0, launches = 0;
int32_t lat_extra = 0;
int lattice_runs = 0;
int32_t lat_pause_step = 2;
int32_t steps_per_run = 0;
bool vmm = true;
int last_stream_priority = 0;
size_t vmm_granularity = 4096;
std::set<void*> vmm_reserved;
int64_t vmm_pieces = 0;
static std::map<void*, size_t> vmm_size;  // reservation -> bytes
struct Node {
  const void* fun;
  Workspace ws;
  // a memset node (fun null): captured like a kernel and replayed with the graph, as CUDA
  // does (the lattice records' cursor and counts are zeroed by memset nodes of a batch)
  void* mem = nullptr;
  int value = 0;
  size_t bytes = 0;
};
static std::vector<Node>* capturing = nullptr;  // the graph being captured, if any
static cudaError_t fail(cudaError_t e) {
  pending = e;
  return e;
}
static bool Sticky(cudaError_t e) { return e == cudaErrorIllegalAddress; }
// The simulated kernel reads and writes through these: each must be a live allocation
// large enough for the capacity the workspace claims (a freed arena, or a path buffer
// smaller than path_cap says, is what issue 14's findings 1 and 2 were).
static void Touch(const void* p, size_t bytes) {
  auto it = sizes.find(p);
  if (it == sizes.end() || it->second < bytes) bad_access = true;
}
static void Backtrack(const Workspace& ws) {
  const size_t L = static_cast<size_t>(ws.max_lanes);
  Touch(ws.arena_limit, sizeof(long long));
  if (bad_access) return;
  const long long limit = *ws.arena_limit;  // the capacity the host published
  Touch(ws.arena, static_cast<size_t>(limit) * sizeof(cuwfst::WinnerEntry));
  // a pooled batch: every pool must be backed up to the capacity the host published, and
  // a need past it pauses the batch (ScanKernel's last block sets the pause flag; the lanes
  // keep their counters and finish only in the run that resumes them, SeqKind::kResume)
  bool pause = false;
  if (ws.pooled) {
    Touch(ws.pool_cap, 3 * sizeof(long long));
    Touch(ws.pool_need, cuwfst::kPoolNeedSlots * sizeof(unsigned long long));
    if (bad_access) return;
    Touch(ws.tok_state[1], static_cast<size_t>(ws.pool_cap[cuwfst::kPoolTokens]) * 4);
    Touch(ws.tok_hint, static_cast<size_t>(ws.pool_cap[cuwfst::kPoolTokens]) * 16);
    Touch(ws.claims, static_cast<size_t>(ws.pool_cap[cuwfst::kPoolClaims]) * 8);
    Touch(ws.hash_payload, static_cast<size_t>(ws.pool_cap[cuwfst::kPoolHash]) * 8);
    for (int k = 0; k < 3; ++k) {
      ws.pool_need[k] = static_cast<unsigned long long>(g_pool_need[k]);
      pause |= g_pool_need[k] > ws.pool_cap[k];
    }
    ws.pool_need[cuwfst::kPoolPauseSlot] = pause ? 1ull : 0ull;
  }
  Touch(ws.out_path, L * static_cast<size_t>(ws.path_cap) * sizeof(int32_t));
  Touch(ws.out_path_len, L * sizeof(int32_t));
  Touch(ws.lanes, L * sizeof(LaneCounters));
  Touch(ws.commands, L * sizeof(cuwfst::LaneCommand));
  if (bad_access) return;
  for (int32_t l = 0; l < ws.max_lanes; ++l) {
    LaneCounters& lc = ws.lanes[l];
    // a batch initializes every lane (Decode orders kCmdInit for all); a resumed pooled batch
    // (no order) and continuous batching's kept lanes go on with their own
    if (ws.commands[l].op & cuwfst::kCmdInit) {
      lc.length = ws.commands[l].length;
      lc.overflow = 0;
      lc.t = 0;
    }
    const int32_t len = lc.length;
    if (len >= 0 && g_need > limit) lc.overflow |= cuwfst::kOverflowArena;
    lc.final_winner = len >= 0 && !pause ? 0 : -2;  // paused: no lane has finished
    lc.final_score = -static_cast<float>(len);
    lc.reached_final = len >= 0 && !pause;
    lc.redirected = 0;
    lc.max_frontier = 1;
    // the steps the lane has taken: its final one is step length (continuous batching's host
    // harvests lanes with t > length); steps_per_run > 0: a run moves each lane that many
    if (len < 0 || pause) lc.t = 0;
    else lc.t = steps_per_run > 0 ? std::min(len + 1, lc.t + steps_per_run) : len + 1;
    const int32_t n = len >= 0 && !pause ? len + 1 : 0;
    ws.out_path_len[l] = n;
    for (int32_t k = 0; k < n && k < ws.path_cap; ++k)
      ws.out_path[static_cast<int64_t>(l) * ws.path_cap + k] = 1000 * l + k;
  }
  *ws.arena_cursor = static_cast<unsigned long long>(g_need);
  if (!ws.lattice) return;
  // The lattice stage's outputs: records of step t of lane l, lanes interleaved step by step.
  ++lattice_runs;
  const size_t seg = static_cast<size_t>(ws.seg_cap);
  Touch(ws.lat_cursor, sizeof(unsigned long long));
  Touch(ws.lat, static_cast<size_t>(ws.lat_cap) * sizeof(cuwfst::LatRecord));
  Touch(ws.lat_count, L * seg * sizeof(int32_t));
  Touch(ws.lat_cutoff, L * seg * sizeof(float));
  Touch(ws.lat_size, L * seg * sizeof(int32_t));
  if (bad_access) return;
  // a batch's run starts at the cursor the host zeroed; a resumed pooled batch goes on from
  // where the paused run left it (its records and counts of the earlier steps must stay)
  unsigned long long cur = *ws.lat_cursor;
  for (int32_t t = 0; t < ws.seg_cap; ++t) {
    for (int32_t l = 0; l < ws.max_lanes; ++l) {
      const int32_t len = ws.lanes[l].length;
      const bool resumed = ws.pooled && !(ws.commands[l].op & cuwfst::kCmdInit);
      if (len < 0 || t > len) continue;
      if ((pause && t >= lat_pause_step) || (resumed && t < lat_pause_step)) continue;
      const int32_t n = (t + l) % 3 + lat_extra;
      ws.lat_count[l * seg + t] = n;
      ws.lat_cutoff[l * seg + t] = static_cast<float>(t) - 0.5f;
      ws.lat_size[l * seg + t] = n + 1;
      for (int32_t k = 0; k < n; ++k, ++cur)
        if (cur < static_cast<unsigned long long>(ws.lat_cap))
          ws.lat[cur] = {t, 1000 * l + 10 * t + k, static_cast<float>(k), l};
    }
  }
  *ws.lat_cursor = cur;
}
// ---------------------------------------------------------------- the stub driver (VMM)
static void* Reservation(CUdeviceptr p) {
  for (auto& r : vmm_size) {
    const CUdeviceptr b = reinterpret_cast<CUdeviceptr>(r.first);
    if (p >= b && p < b + r.second) return r.first;
  }
  return nullptr;
}
static CUresult CUDAAPI AddressReserve(CUdeviceptr* p, size_t size, size_t, CUdeviceptr, unsigned long long) {
  if (size % vmm_granularity) return CUDA_ERROR_INVALID_VALUE;
  void* m = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  vmm_reserved.insert(m);
  vmm_size[m] = size;
  sizes[m] = 0;  // mapped bytes from the base (LazyRegion maps contiguously)
  *p = reinterpret_cast<CUdeviceptr>(m);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI AddressFree(CUdeviceptr p, size_t size) {
  void* m = reinterpret_cast<void*>(p);
  if (!vmm_reserved.count(m) || vmm_size[m] != size || sizes[m] != 0) return CUDA_ERROR_INVALID_VALUE;
  munmap(m, size);
  vmm_reserved.erase(m);
  vmm_size.erase(m);
  sizes.erase(m);
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI Create(CUmemGenericAllocationHandle* h, size_t size, const CUmemAllocationProp*,
                               unsigned long long) {
  if (size == 0 || size % vmm_granularity) return CUDA_ERROR_INVALID_VALUE;
  *h = static_cast<CUmemGenericAllocationHandle>(size);
  ++vmm_pieces;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI Release(CUmemGenericAllocationHandle) {
  --vmm_pieces;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI Map(CUdeviceptr p, size_t size, size_t, CUmemGenericAllocationHandle h, unsigned long long) {
  void* r = Reservation(p);
  if (!r || size != static_cast<size_t>(h)) return CUDA_ERROR_INVALID_VALUE;
  const size_t off = p - reinterpret_cast<CUdeviceptr>(r);
  if (off != sizes[r] || off + size > vmm_size[r]) return CUDA_ERROR_INVALID_VALUE;  // contiguous growth only
  sizes[r] = off + size;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI SetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc*, size_t) {
  return mprotect(reinterpret_cast<void*>(p), size, PROT_READ | PROT_WRITE) == 0 ? CUDA_SUCCESS
                                                                                 : CUDA_ERROR_INVALID_VALUE;
}
static CUresult CUDAAPI Unmap(CUdeviceptr p, size_t size) {
  void* r = Reservation(p);
  if (!r) return CUDA_ERROR_INVALID_VALUE;
  const size_t off = p - reinterpret_cast<CUdeviceptr>(r);
  if (off + size != sizes[r]) return CUDA_ERROR_INVALID_VALUE;  // the top piece only
  mprotect(reinterpret_cast<void*>(p), size, PROT_NONE);
  madvise(reinterpret_cast<void*>(p), size, MADV_DONTNEED);
  sizes[r] = off;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI Granularity(size_t* g, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) {
  *g = vmm_granularity;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI DeviceGet(CUdevice* d, int ordinal) {
  *d = ordinal;
  return CUDA_SUCCESS;
}
static CUresult CUDAAPI DeviceAttribute(int* v, CUdevice_attribute a, CUdevice) {
  *v = a == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ? (vmm ? 1 : 0) : 0;
  return CUDA_SUCCESS;
}

static void Run(const Node& n) {
  if (n.mem) {
    std::memset(n.mem, n.value, n.bytes);
    return;
  }
  ++launches;
  if (n.fun == cuwfst_test_backtrack_kernel()) Backtrack(n.ws);
}
}  // namespace stub

extern "C" {

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (bytes > (size_t{1} << 40)) return stub::fail(cudaErrorMemoryAllocation);
  *p = std::calloc(1, bytes);
  stub::device_mem.insert(*p);
  stub::sizes[*p] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (!stub::device_mem.erase(p)) return stub::fail(cudaErrorInvalidValue);
  stub::sizes.erase(p);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = std::calloc(1, bytes);
  stub::pinned_mem.insert(*p);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  if (!stub::pinned_mem.erase(p)) return stub::fail(cudaErrorInvalidValue);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = reinterpret_cast<cudaStream_t>(new int(0));
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned flags, int priority) {
  stub::last_stream_priority = priority;  // (CUWFST_STREAM_PRIORITY)
  return cudaStreamCreateWithFlags(s, flags);
}
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {  // an H200's
  *least = 0;
  *greatest = -5;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete reinterpret_cast<int*>(s);
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = reinterpret_cast<cudaEvent_t>(new int(0));
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete reinterpret_cast<int*>(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0.5f;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return stub::sticky ? stub::fail(cudaErrorIllegalAddress) : cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {  // (GrowLattice waits for a side bucketing's event)
  return stub::sticky ? stub::fail(cudaErrorIllegalAddress) : cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) {
  if (stub::capturing) {
    stub::Node node{nullptr, {}};
    node.mem = p;
    node.value = v;
    node.bytes = n;
    stub::capturing->push_back(node);
  } else {
    std::memset(p, v, n);
  }
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) {
  std::memcpy(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  std::memcpy(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind,
                              cudaStream_t) {
  stub::copy2d_width = static_cast<int64_t>(w);
  stub::copy2d_height = static_cast<int64_t>(h);
  for (size_t r = 0; r < h; ++r) std::memcpy(static_cast<char*>(d) + r * dp, static_cast<const char*>(s) + r * sp, w);
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
  cudaError_t e = stub::pending;
  if (!stub::Sticky(e)) stub::pending = cudaSuccess;
  return e;
}
cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : stub::fail(cudaErrorInvalidDevice); }
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int d) {
  if (d != 0) return stub::fail(cudaErrorInvalidDevice);
  *v = attr == cudaDevAttrMultiProcessorCount ? 132 : attr == cudaDevAttrComputeCapabilityMajor ? 9 : 0;  // an H200's
  return cudaSuccess;
}
// the records pass's kernels' dynamic shared memory (GpuDecoder::EnsureLatticeAfter)
cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute, int) { return cudaSuccess; }
// CoopWalkKernel's co-resident CTAs (GpuDecoder::Allocate under the cooperative walkers); the
// stub's device reports no cooperative launch (attribute 0), so Max and Expand run instead
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* n, const void*, int, size_t, unsigned int) {
  *n = 4;
  return cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaErrorMemoryAllocation ? "cudaErrorMemoryAllocation"
         : e == cudaErrorIllegalAddress ? "cudaErrorIllegalAddress" : "cudaError";
}
const char* cudaGetErrorString(cudaError_t) { return "stub"; }
cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  ++stub::captures_begun;
  stub::capturing = new std::vector<stub::Node>();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  *g = reinterpret_cast<cudaGraph_t>(stub::capturing);
  stub::capturing = nullptr;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long) {
  *e = reinterpret_cast<cudaGraphExec_t>(new std::vector<stub::Node>(*reinterpret_cast<std::vector<stub::Node>*>(g)));
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
  delete reinterpret_cast<std::vector<stub::Node>*>(g);
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
  delete reinterpret_cast<std::vector<stub::Node>*>(e);
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t) {
  for (const auto& n : *reinterpret_cast<std::vector<stub::Node>*>(e)) stub::Run(n);
  return cudaSuccess;
}
// kernel launches: the Workspace is every kernel's first or second argument; only
// BacktrackKernel (Workspace first) is simulated
cudaError_t __cudaGetKernel(cudaKernel_t* k, const void* fun) {
  *k = reinterpret_cast<cudaKernel_t>(const_cast<void*>(fun));
  return cudaSuccess;
}
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3, dim3, void** args, size_t, cudaStream_t) {
  stub::Node n{reinterpret_cast<const void*>(k), {}};
  if (n.fun == cuwfst_test_backtrack_kernel()) n.ws = *static_cast<Workspace*>(args[0]);
  if (stub::capturing) stub::capturing->push_back(n);
  else stub::Run(n);
  return cudaSuccess;
}
cudaError_t cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** args, size_t s, cudaStream_t st) {
  return __cudaLaunchKernel(reinterpret_cast<cudaKernel_t>(const_cast<void*>(f)), g, b, args, s, st);
}
// launches with attributes (GpuDecoder::LaunchStep, programmatic dependent launch): as above
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* c, const void* f, void** args) {
  return __cudaLaunchKernel(reinterpret_cast<cudaKernel_t>(const_cast<void*>(f)), c->gridDim, c->blockDim, args,
                            c->dynamicSmemBytes, c->stream);
}
static void* g_handle[1];
void** __cudaRegisterFatBinary(void*) { return g_handle; }
void __cudaRegisterFatBinaryEnd(void**) {}
void __cudaUnregisterFatBinary(void**) {}
void __cudaRegisterFunction(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*, int*) {}
void __cudaRegisterVar(void**, char*, char*, const char*, int, size_t, int, int) {}
static dim3 g_grid, g_block;
static size_t g_shm;
static void* g_stream;
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shm, struct CUstream_st* s) {
  g_grid = grid, g_block = block, g_shm = shm, g_stream = s;
  return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shm, void* s) {
  *grid = g_grid, *block = g_block, *shm = g_shm;
  *static_cast<void**>(s) = g_stream;
  return cudaSuccess;
}
char __cudaInitModule(void**) { return 1; }

cudaError_t cudaGetDriverEntryPointByVersion(const char* name, void** fn, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  static const std::map<std::string, void*> table = {
      {"cuMemAddressReserve", reinterpret_cast<void*>(&stub::AddressReserve)},
      {"cuMemAddressFree", reinterpret_cast<void*>(&stub::AddressFree)},
      {"cuMemCreate", reinterpret_cast<void*>(&stub::Create)},
      {"cuMemRelease", reinterpret_cast<void*>(&stub::Release)},
      {"cuMemMap", reinterpret_cast<void*>(&stub::Map)},
      {"cuMemUnmap", reinterpret_cast<void*>(&stub::Unmap)},
      {"cuMemSetAccess", reinterpret_cast<void*>(&stub::SetAccess)},
      {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&stub::Granularity)},
      {"cuDeviceGet", reinterpret_cast<void*>(&stub::DeviceGet)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&stub::DeviceAttribute)},
  };
  auto it = table.find(name);
  *fn = it == table.end() ? nullptr : it->second;
  if (status) *status = it == table.end() ? cudaDriverEntryPointSymbolNotFound : cudaDriverEntryPointSuccess;
  return cudaSuccess;
}
}

