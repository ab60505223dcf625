// Ownership of every CUDA resource the host objects hold: device buffers, pinned host
// buffers, streams, events and graph executables. Each owner frees its resource on the
// device it was made on, never throws from its destructor, and is counted, so a test can
// prove that a failure path gave back everything it took. All acquisitions go through the
// Try* functions below, which is where the fault-injection hook sits.
//
// Why this shape: a constructor that throws half way must free what it already holds, and
// a buffer that is replaced must stay valid until its successor exists (issue 14, findings
// 1, 2 and 4): owners that free themselves give both for free, and `Try*` returning the
// error lets the caller keep the old resource when the new one cannot be had.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace cuwfst {

inline std::string CudaErrorString(cudaError_t e, const char* what) {
  std::ostringstream os;
  os << what << ": " << cudaGetErrorName(e) << " (" << cudaGetErrorString(e) << ")";
  return os.str();
}

// A CUDA call that failed. The bindings turn it into a Python exception.
class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// An allocation that failed for lack of memory: the object that asked is unchanged and
// usable. Python sees MemoryError.
class CudaOutOfMemory : public CudaError {
 public:
  using CudaError::CudaError;
};

// A fault that killed the process's CUDA context (see IsStickyError). Python sees
// RuntimeError with a message that says to restart.
class CudaContextLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Errors after which the CUDA context is unusable for the rest of the process: the
// runtime's documentation of each says "any further CUDA work will return the same error.
// To continue using CUDA, the process must be terminated and relaunched" (driver_types.h,
// CUDA 13.0). Numeric codes so this compiles against toolkits that lack the newer names.
inline bool IsStickyError(cudaError_t e) {
  switch (static_cast<int>(e)) {
    case 214:  // cudaErrorECCUncorrectable
    case 225:  // cudaErrorUnsupportedDevSideSync
    case 226:  // cudaErrorContained
    case 700:  // cudaErrorIllegalAddress
    case 702:  // cudaErrorLaunchTimeout
    case 710:  // cudaErrorAssert
    case 714:  // cudaErrorHardwareStackError
    case 715:  // cudaErrorIllegalInstruction
    case 716:  // cudaErrorMisalignedAddress
    case 717:  // cudaErrorInvalidAddressSpace
    case 718:  // cudaErrorInvalidPc
    case 719:  // cudaErrorLaunchFailure
    case 721:  // cudaErrorTensorMemoryLeak
    case 810:  // cudaErrorMpsClientTerminated
    case 911:  // cudaErrorExternalDevice
      return true;
    default:
      return false;
  }
}

// A failed cudaMalloc (and most failed calls) also leaves its error pending in the
// calling thread's last-error slot, where the next unrelated cudaGetLastError — ours after
// a launch, or PyTorch's — would report it as its own failure. After a failure we handled,
// take it out. A sticky error cannot be cleared and is left for the next check to see.
inline void ClearHandledError() { (void)cudaGetLastError(); }

// Throws for a failed call: CudaContextLost text for sticky errors is added by the decoder,
// which knows the decode's shape; here the code travels in the exception.
#define CUWFST_CUDA(expr)                                                                       \
  do {                                                                                          \
    cudaError_t err__ = (expr);                                                                 \
    if (err__ != cudaSuccess) {                                                                 \
      if (!::cuwfst::IsStickyError(err__)) ::cuwfst::ClearHandledError();                      \
      throw ::cuwfst::CudaError(err__, ::cuwfst::CudaErrorString(err__, #expr));                \
    }                                                                                           \
  } while (0)

// ---------------------------------------------------------------- fault injection
// Test hook (gpu_fault_injection in the bindings): arm(n) makes the n-th acquisition
// attempt from now (device or pinned allocation, stream, event, graph instantiation) fail
// once, as an out-of-memory. The failure is produced by a real impossible cudaMalloc, so
// the runtime's pending-error state is exactly what a real out-of-memory leaves.
namespace fault {
inline std::atomic<int64_t> armed_at{0};  // 0: off
inline std::atomic<int64_t> attempts{0};  // acquisition attempts since the last Arm

// Returns the attempts counted since the previous Arm (so Arm(0) after a run reads how
// many acquisition sites the run went through).
inline int64_t Arm(int64_t n) {
  const int64_t seen = attempts.exchange(0);
  armed_at.store(n > 0 ? n : 0);
  return seen;
}

inline bool Fire() {
  const int64_t k = attempts.fetch_add(1) + 1;
  int64_t want = k;
  return armed_at.load() == k && armed_at.compare_exchange_strong(want, 0);
}

inline cudaError_t Failure() {
  void* p = nullptr;
  // No device has 2^62 bytes: the runtime refuses and leaves its error pending.
  if (cudaMalloc(&p, size_t{1} << 62) == cudaSuccess) cudaFree(p);
  return cudaErrorMemoryAllocation;
}
}  // namespace fault

// ---------------------------------------------------------------- live counters
// What the owners below hold right now, process-wide (gpu_memory_info in the bindings).
namespace live {
inline std::atomic<int64_t> device_bytes{0};
// The most device_bytes held at once since the last reset (gpu_memory_peak): a transient
// (a rescue's growth, given back milliseconds later) that a sampler of cudaMemGetInfo can miss.
inline std::atomic<int64_t> device_peak{0};
inline void AddDeviceBytes(int64_t n) {
  const int64_t now = device_bytes.fetch_add(n) + n;
  int64_t peak = device_peak.load();
  while (now > peak && !device_peak.compare_exchange_weak(peak, now)) {
  }
}
inline std::atomic<int64_t> pinned_bytes{0};
inline std::atomic<int64_t> handles{0};  // streams + events + graph executables
}  // namespace live

// ---------------------------------------------------------------- device guards
// Switches the current device for a scope; for entry points, which may throw.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    CUWFST_CUDA(cudaGetDevice(&prev_));
    if (prev_ != device) {
      CUWFST_CUDA(cudaSetDevice(device));
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_ && cudaSetDevice(prev_) != cudaSuccess) ClearHandledError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool switched_ = false;
};

// The same for destructors and cleanup paths: never throws. If the device cannot be
// selected (a dead context, or the runtime unloading at process exit) the frees that
// follow fail quietly, which is all that is left to do then.
class NoThrowDeviceGuard {
 public:
  explicit NoThrowDeviceGuard(int device) noexcept {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      ClearHandledError();
      return;
    }
    if (prev_ != device) {
      if (cudaSetDevice(device) == cudaSuccess) switched_ = true;
      else ClearHandledError();
    }
  }
  ~NoThrowDeviceGuard() {
    if (switched_ && cudaSetDevice(prev_) != cudaSuccess) ClearHandledError();
  }
  NoThrowDeviceGuard(const NoThrowDeviceGuard&) = delete;
  NoThrowDeviceGuard& operator=(const NoThrowDeviceGuard&) = delete;

 private:
  int prev_ = 0;
  bool switched_ = false;
};

// ---------------------------------------------------------------- owners
enum class ResourceKind { kDevice, kPinned, kStream, kEvent, kGraphExec };

template <ResourceKind K>
struct ResourceTraits;
template <>
struct ResourceTraits<ResourceKind::kDevice> {
  using Handle = void*;
  static cudaError_t Free(Handle h) { return cudaFree(h); }
  static std::atomic<int64_t>& Counter() { return live::device_bytes; }
};
template <>
struct ResourceTraits<ResourceKind::kPinned> {
  using Handle = void*;
  static cudaError_t Free(Handle h) { return cudaFreeHost(h); }
  static std::atomic<int64_t>& Counter() { return live::pinned_bytes; }
};
template <>
struct ResourceTraits<ResourceKind::kStream> {
  using Handle = cudaStream_t;
  static cudaError_t Free(Handle h) { return cudaStreamDestroy(h); }
  static std::atomic<int64_t>& Counter() { return live::handles; }
};
template <>
struct ResourceTraits<ResourceKind::kEvent> {
  using Handle = cudaEvent_t;
  static cudaError_t Free(Handle h) { return cudaEventDestroy(h); }
  static std::atomic<int64_t>& Counter() { return live::handles; }
};
template <>
struct ResourceTraits<ResourceKind::kGraphExec> {
  using Handle = cudaGraphExec_t;
  static cudaError_t Free(Handle h) { return cudaGraphExecDestroy(h); }
  static std::atomic<int64_t>& Counter() { return live::handles; }
};

// Move-only owner of one resource; `amount` is bytes for buffers and 1 for handles.
template <ResourceKind K>
class Owned {
 public:
  using Traits = ResourceTraits<K>;
  using Handle = typename Traits::Handle;

  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Owned(Owned&& o) noexcept { Swap(o); }
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      Reset();
      Swap(o);
    }
    return *this;
  }
  ~Owned() { Reset(); }

  Handle get() const { return h_; }
  int64_t amount() const { return amount_; }
  explicit operator bool() const { return h_ != Handle{}; }

  // Takes a freshly made resource (made on the current device).
  void Adopt(Handle h, int64_t amount) noexcept {
    Reset();
    h_ = h;
    amount_ = amount;
    if (cudaGetDevice(&device_) != cudaSuccess) ClearHandledError();
    if constexpr (K == ResourceKind::kDevice) live::AddDeviceBytes(amount_);
    else Traits::Counter().fetch_add(amount_);
  }

  void Reset() noexcept {
    if (h_ == Handle{}) return;
    {
      NoThrowDeviceGuard guard(device_);
      if (Traits::Free(h_) != cudaSuccess) ClearHandledError();
    }
    Traits::Counter().fetch_sub(amount_);
    h_ = Handle{};
    amount_ = 0;
  }

 private:
  void Swap(Owned& o) noexcept {
    std::swap(h_, o.h_);
    std::swap(amount_, o.amount_);
    std::swap(device_, o.device_);
  }
  Handle h_{};
  int64_t amount_ = 0;
  int device_ = 0;
};

using DeviceBuffer = Owned<ResourceKind::kDevice>;
using PinnedBuffer = Owned<ResourceKind::kPinned>;
using Stream = Owned<ResourceKind::kStream>;
using Event = Owned<ResourceKind::kEvent>;
using GraphExec = Owned<ResourceKind::kGraphExec>;

// Acquisitions: on failure `out` is untouched, the pending error is cleared (unless it is
// sticky) and the error is returned, so the caller decides what to keep and what to say.
namespace detail {
inline cudaError_t Finish(cudaError_t e) {
  if (e != cudaSuccess && !IsStickyError(e)) ClearHandledError();
  return e;
}
}  // namespace detail

inline cudaError_t TryDeviceAlloc(size_t bytes, DeviceBuffer* out) {
  if (bytes == 0) bytes = 1;  // a real, distinct pointer even for an empty array
  void* p = nullptr;
  cudaError_t e = fault::Fire() ? fault::Failure() : cudaMalloc(&p, bytes);
  if (e == cudaSuccess) out->Adopt(p, static_cast<int64_t>(bytes));
  return detail::Finish(e);
}

inline cudaError_t TryPinnedAlloc(size_t bytes, PinnedBuffer* out) {
  if (bytes == 0) bytes = 1;
  void* p = nullptr;
  cudaError_t e = fault::Fire() ? fault::Failure() : cudaMallocHost(&p, bytes);
  if (e == cudaSuccess) out->Adopt(p, static_cast<int64_t>(bytes));
  return detail::Finish(e);
}

// Small device-to-host readbacks (counters, cursors, sizes) staged in a pinned slab. A
// cudaMemcpyAsync into pageable memory returns only once the copy is done, so it waits inside the
// driver for everything queued on its stream, and while it waits another thread's call on the
// legacy default stream blocks behind it: Wait's event record on the caller's stream, where the
// caller is on PyTorch's default stream (s182: 11.9 ms of a lattice sub-batch's setup, while the
// finish thread read its counts back; none with the caller on a stream of its own). Copy queues
// a copy into the slab (or, past its room or its entries, or with `staged` false, straight into
// dst, as before; the decoder's CUWFST_READBACK=pageable); Sync waits for the stream, then moves
// the staged bytes to their destinations. One Readback at a time a slab: its owner's lock guards it.
class Readback {
 public:
  Readback(const PinnedBuffer& slab, cudaStream_t stream, bool staged = true)
      : base_(staged ? static_cast<char*>(slab.get()) : nullptr),
        room_(static_cast<size_t>(slab.amount())),
        stream_(stream) {}
  Readback(const Readback&) = delete;
  Readback& operator=(const Readback&) = delete;

  cudaError_t Copy(void* dst, const void* src, size_t bytes) {
    const size_t at = (used_ + 15) & ~size_t{15};
    if (base_ == nullptr || n_ == kEntries || at + bytes > room_)
      return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_);
    const cudaError_t e = cudaMemcpyAsync(base_ + at, src, bytes, cudaMemcpyDeviceToHost, stream_);
    if (e == cudaSuccess) {
      pend_[n_++] = {dst, at, bytes};
      used_ = at + bytes;
    }
    return e;
  }
  cudaError_t Sync() {
    const cudaError_t e = cudaStreamSynchronize(stream_);
    if (e == cudaSuccess)
      for (int i = 0; i < n_; ++i) std::memcpy(pend_[i].dst, base_ + pend_[i].at, pend_[i].bytes);
    n_ = 0;
    used_ = 0;
    return e;
  }
  // how many copies went through the slab since the last Sync (tests)
  int staged() const { return n_; }

 private:
  static constexpr int kEntries = 8;
  struct Entry {
    void* dst;
    size_t at, bytes;
  };
  char* base_;
  size_t room_;
  cudaStream_t stream_;
  Entry pend_[kEntries] = {};
  int n_ = 0;
  size_t used_ = 0;
};

// priority: cudaDeviceGetStreamPriorityRange's numbers (smaller is sooner; 0 the default)
inline cudaError_t TryStreamCreate(unsigned flags, Stream* out, int priority = 0) {
  cudaStream_t s = nullptr;
  cudaError_t e = fault::Fire() ? fault::Failure() : cudaStreamCreateWithPriority(&s, flags, priority);
  if (e == cudaSuccess) out->Adopt(s, 1);
  return detail::Finish(e);
}

inline cudaError_t TryEventCreate(unsigned flags, Event* out) {
  cudaEvent_t ev = nullptr;
  cudaError_t e = fault::Fire() ? fault::Failure() : cudaEventCreateWithFlags(&ev, flags);
  if (e == cudaSuccess) out->Adopt(ev, 1);
  return detail::Finish(e);
}

inline cudaError_t TryGraphInstantiate(cudaGraph_t graph, GraphExec* out) {
  cudaGraphExec_t exec = nullptr;
  cudaError_t e = fault::Fire() ? fault::Failure() : cudaGraphInstantiate(&exec, graph, 0);
  if (e == cudaSuccess) out->Adopt(exec, 1);
  return detail::Finish(e);
}

// Throws the right exception for a failed acquisition; `what` names the thing and the
// option that sizes it.
[[noreturn]] inline void ThrowAcquireFailure(cudaError_t e, const std::string& what) {
  std::string msg = what + " (" + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
  if (e == cudaErrorMemoryAllocation) throw CudaOutOfMemory(e, msg);
  throw CudaError(e, msg);
}

inline std::string FormatBytes(int64_t b) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  if (b >= (int64_t{1} << 30)) os << b / double(int64_t{1} << 30) << " GiB";
  else if (b >= (int64_t{1} << 20)) os << b / double(int64_t{1} << 20) << " MiB";
  else os << b << " B";
  return os.str();
}

}  // namespace cuwfst
