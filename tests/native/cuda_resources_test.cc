// Host-only test of cuwfst/csrc/cuda_resources.cuh against a stub CUDA runtime (defined
// below, so no GPU and no libcudart are needed): owners free exactly once and on their own
// device, moves transfer ownership, the live counters return to zero, fault injection fails
// exactly the n-th acquisition and leaves no error pending, guards never throw from
// destructors. Built and run by tests/test_cuda_resources.py.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cuda_resources.cuh"

// ---------------------------------------------------------------- the stub runtime
namespace stub {
int current = 0;                      // the current device
int devices = 2;                      // cudaSetDevice(d >= devices) fails
cudaError_t pending = cudaSuccess;    // the thread's last error
std::map<void*, int> device_mem;      // pointer -> device it was allocated on
std::set<void*> pinned_mem;
std::map<void*, int> freed_on;        // pointer -> current device at cudaFree
int streams = 0, events = 0, execs = 0;
std::map<char*, size_t> pinned_size;  // pinned block -> its bytes (is a copy's destination pinned?)
struct Copy {
  void* dst;
  const void* src;
  size_t n;
};
std::vector<Copy> queued;  // copies into pinned memory: done at the stream's synchronize
int pageable_copies = 0;   // copies into pageable memory: done at once (the real driver waits for them)
bool Pinned(const void* p) {
  const char* c = static_cast<const char*>(p);
  for (const auto& [base, n] : pinned_size)
    if (c >= base && c < base + n) return true;
  return false;
}
cudaError_t fail(cudaError_t e) {
  pending = e;
  return e;
}
}  // namespace stub

extern "C" {
cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (bytes > (size_t{1} << 40)) return stub::fail(cudaErrorMemoryAllocation);
  *p = std::malloc(bytes);
  stub::device_mem[*p] = stub::current;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (!stub::device_mem.count(p)) return stub::fail(cudaErrorInvalidValue);
  stub::freed_on[p] = stub::current;
  stub::device_mem.erase(p);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = std::malloc(bytes);
  stub::pinned_mem.insert(*p);
  stub::pinned_size[static_cast<char*>(*p)] = bytes;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  if (!stub::pinned_mem.erase(p)) return stub::fail(cudaErrorInvalidValue);
  stub::pinned_size.erase(static_cast<char*>(p));
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int) {
  *s = reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x1000 + ++stub::streams));
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t) {
  --stub::streams;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = reinterpret_cast<cudaEvent_t>(static_cast<uintptr_t>(0x2000 + ++stub::events));
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t) {
  --stub::events;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* g, cudaGraph_t, unsigned long long) {
  *g = reinterpret_cast<cudaGraphExec_t>(static_cast<uintptr_t>(0x3000 + ++stub::execs));
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) {
  --stub::execs;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  *d = stub::current;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= stub::devices) return stub::fail(cudaErrorInvalidDevice);
  stub::current = d;
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
  cudaError_t e = stub::pending;
  stub::pending = cudaSuccess;
  return e;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind, cudaStream_t) {
  if (stub::Pinned(dst)) {
    stub::queued.push_back({dst, src, n});
  } else {
    std::memcpy(dst, src, n);
    ++stub::pageable_copies;
  }
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  for (const auto& c : stub::queued) std::memcpy(c.dst, c.src, c.n);
  stub::queued.clear();
  return cudaSuccess;
}
const char* cudaGetErrorName(cudaError_t e) { return e == cudaErrorMemoryAllocation ? "cudaErrorMemoryAllocation" : "cudaError"; }
const char* cudaGetErrorString(cudaError_t) { return "stub"; }
}

// ---------------------------------------------------------------- checks
#include "check.h"

using namespace cuwfst;

static bool AllLiveZero() {
  return live::device_bytes.load() == 0 && live::pinned_bytes.load() == 0 && live::handles.load() == 0;
}

int main() {
  {  // an owner frees once, counts its bytes, and a move transfers it
    DeviceBuffer a;
    CHECK(TryDeviceAlloc(100, &a) == cudaSuccess && a && a.amount() == 100);
    CHECK(live::device_bytes.load() == 100);
    DeviceBuffer b = std::move(a);
    CHECK(!a && b && live::device_bytes.load() == 100 && stub::device_mem.size() == 1);
    DeviceBuffer c;
    CHECK(TryDeviceAlloc(0, &c) == cudaSuccess && c.amount() == 1);  // empty arrays still get a pointer
    c = std::move(b);  // c's old buffer is freed, b's moves in
    CHECK(stub::device_mem.size() == 1 && live::device_bytes.load() == 100);
  }
  CHECK(stub::device_mem.empty() && AllLiveZero());

  {  // fault injection: exactly the n-th attempt fails, once; nothing stays pending
    fault::Arm(0);
    CHECK(fault::Arm(3) == 0);
    DeviceBuffer x, y, z, w;
    PinnedBuffer h;
    CHECK(TryDeviceAlloc(8, &x) == cudaSuccess);
    CHECK(TryPinnedAlloc(8, &h) == cudaSuccess);
    void* before = z.get();
    CHECK(TryDeviceAlloc(8, &z) == cudaErrorMemoryAllocation);
    CHECK(z.get() == before && !z);         // the target is untouched
    CHECK(cudaGetLastError() == cudaSuccess);  // the failure's error was taken out
    CHECK(TryDeviceAlloc(8, &w) == cudaSuccess);  // fires once
    CHECK(fault::Arm(0) == 4);
    Stream s;
    Event e;
    GraphExec g;
    fault::Arm(2);
    CHECK(TryStreamCreate(0, &s) == cudaSuccess);
    CHECK(TryEventCreate(0, &e) == cudaErrorMemoryAllocation && !e);
    CHECK(TryGraphInstantiate(nullptr, &g) == cudaSuccess);
    CHECK(live::handles.load() == 2 && stub::streams == 1 && stub::execs == 1 && stub::events == 0);
    CHECK(fault::Arm(0) == 3);
  }
  CHECK(AllLiveZero() && stub::streams == 0 && stub::execs == 0 && stub::pinned_mem.empty());

  {  // a buffer is freed on the device it was allocated on, and the current device restored
    DeviceBuffer on1;
    CHECK(cudaSetDevice(1) == cudaSuccess);
    CHECK(TryDeviceAlloc(16, &on1) == cudaSuccess);
    void* p = on1.get();
    CHECK(cudaSetDevice(0) == cudaSuccess);
    on1.Reset();
    CHECK(stub::freed_on.at(p) == 1 && stub::current == 0);
  }

  {  // guards: the throwing one switches and restores; the non-throwing one survives a bad device
    {
      DeviceGuard g(1);
      CHECK(stub::current == 1);
    }
    CHECK(stub::current == 0);
    bool threw = false;
    try {
      DeviceGuard g(7);
    } catch (const CudaError& e) {
      threw = e.code() == cudaErrorInvalidDevice;
    }
    CHECK(threw && cudaGetLastError() == cudaSuccess);
    {
      NoThrowDeviceGuard g(7);  // cannot switch: stays put, leaves nothing pending
      CHECK(stub::current == 0);
    }
    CHECK(cudaGetLastError() == cudaSuccess);
  }

  {  // error classes
    CHECK(IsStickyError(cudaErrorIllegalAddress) && IsStickyError(cudaErrorLaunchFailure));
    CHECK(!IsStickyError(cudaErrorMemoryAllocation) && !IsStickyError(cudaErrorInvalidValue));
    bool oom = false, other = false;
    try {
      ThrowAcquireFailure(cudaErrorMemoryAllocation, "x");
    } catch (const CudaOutOfMemory&) {
      oom = true;
    }
    try {
      ThrowAcquireFailure(cudaErrorInvalidValue, "x");
    } catch (const CudaOutOfMemory&) {
    } catch (const CudaError&) {
      other = true;
    }
    CHECK(oom && other);
    bool macro = false;
    try {
      CUWFST_CUDA(cudaFree(reinterpret_cast<void*>(0x1)));  // not ours: invalid value
    } catch (const CudaError& e) {
      macro = e.code() == cudaErrorInvalidValue && std::string(e.what()).find("cudaFree") != std::string::npos;
    }
    CHECK(macro && cudaGetLastError() == cudaSuccess);
    CHECK(FormatBytes(512) == "512 B" && FormatBytes(3 << 20) == "3.0 MiB");
  }
  {  // Readback: staged copies land at Sync; past the slab's room or entries, or under
     // not staged, a copy goes straight to its destination
    PinnedBuffer slab;
    CHECK(TryPinnedAlloc(64, &slab) == cudaSuccess);
    unsigned long long dev[8] = {1, 2, 3, 4, 5, 6, 7, 8};  // the "device" (the stub copies host to host)
    unsigned long long a = 0, b[2] = {0, 0}, big[8] = {};
    cudaStream_t st = reinterpret_cast<cudaStream_t>(0x77);
    {
      Readback rb(slab, st);
      CHECK(rb.Copy(&a, &dev[0], 8) == cudaSuccess && rb.Copy(b, &dev[1], 16) == cudaSuccess);
      CHECK(a == 0 && b[0] == 0 && rb.staged() == 2 && stub::pageable_copies == 0);  // nothing lands before Sync
      CHECK(rb.Copy(big, dev, 64) == cudaSuccess);  // at 32, past the 64 bytes: straight
      CHECK(rb.staged() == 2 && stub::pageable_copies == 1 && big[7] == 8);
      CHECK(rb.Sync() == cudaSuccess);
      CHECK(a == 1 && b[0] == 2 && b[1] == 3 && rb.staged() == 0);
      a = 0;  // the slab is free again after Sync
      CHECK(rb.Copy(&a, &dev[4], 8) == cudaSuccess && rb.staged() == 1 && rb.Sync() == cudaSuccess && a == 5);
    }
    PinnedBuffer wide;
    CHECK(TryPinnedAlloc(4096, &wide) == cudaSuccess);
    {
      Readback rb(wide, st);
      unsigned long long out[9] = {};
      for (int i = 0; i < 9; ++i) CHECK(rb.Copy(&out[i], &dev[i % 8], 8) == cudaSuccess);
      CHECK(rb.staged() == 8 && stub::pageable_copies == 2 && out[8] == 1 && out[0] == 0);  // the 9th: straight
      CHECK(rb.Sync() == cudaSuccess);
      for (int i = 0; i < 9; ++i) CHECK(out[i] == dev[i % 8]);
    }
    {
      Readback rb(wide, st, false);  // not staged (CUWFST_READBACK=pageable)
      a = 0;
      CHECK(rb.Copy(&a, &dev[2], 8) == cudaSuccess && rb.staged() == 0 && a == 3 && stub::pageable_copies == 3);
      CHECK(rb.Sync() == cudaSuccess && a == 3);
    }
  }
  CHECK(AllLiveZero());
  std::printf("%s\n", failures ? "FAILED" : "ALL OK");
  return failures ? 1 : 0;
}
