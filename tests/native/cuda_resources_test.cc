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
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  if (!stub::pinned_mem.erase(p)) return stub::fail(cudaErrorInvalidValue);
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
  CHECK(AllLiveZero());
  std::printf("%s\n", failures ? "FAILED" : "ALL OK");
  return failures ? 1 : 0;
}
