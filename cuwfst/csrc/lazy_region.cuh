// Lazily committed device regions (spec §6.2): the worst case is reserved once as address
// space (cuMemAddressReserve) and physical memory is mapped behind it as use grows
// (cuMemCreate / cuMemMap / cuMemSetAccess), so kernel arguments and captured CUDA graphs
// stay valid while the memory held tracks what is used. A region may also be backed by
// pinned host memory mapped into the same addresses (SetHost: the winners log of pooled
// offline batches, which the kernels only append to and the backtrack reads once). Where the driver has no virtual
// memory management, or the caller asks for it, the same interface holds one cudaMalloc'd
// buffer that is replaced by a larger one (the eager mode: the pointer moves, and the
// caller drops what captured it).
//
// The driver API is reached through cudaGetDriverEntryPointByVersion: the module is built
// by a JIT that links only the runtime, and the runtime's primary context (current after
// cudaSetDevice) is the context the driver calls act on. Every acquisition (a reservation,
// a commit) goes through the fault-injection counter of cuda_resources.cuh and is counted
// in its live counters (committed bytes as device bytes, a reservation as one handle), so
// the failure walks of tests/test_gpu_faults.py cover these sites like any cudaMalloc.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda_resources.cuh"

namespace cuwfst {

// The driver entry points of CUDA's virtual memory management, resolved once per process.
struct VmmApi {
  CUresult(CUDAAPI* address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult(CUDAAPI* address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult(CUDAAPI* create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                            unsigned long long) = nullptr;
  CUresult(CUDAAPI* release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult(CUDAAPI* map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) = nullptr;
  CUresult(CUDAAPI* unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult(CUDAAPI* set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult(CUDAAPI* granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) = nullptr;
  CUresult(CUDAAPI* device_get)(CUdevice*, int) = nullptr;
  CUresult(CUDAAPI* device_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  bool loaded = false;
};

namespace detail {
template <typename F>
bool DriverEntry(const char* name, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  // the ABI of these functions has not changed since CUDA 10.2; ask for 12.0's
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status);
#else
  cudaError_t e = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &status);
#endif
  if (e != cudaSuccess || status != cudaDriverEntryPointSuccess || p == nullptr) {
    ClearHandledError();
    return false;
  }
  *fn = reinterpret_cast<F>(p);
  return true;
}
}  // namespace detail

inline const VmmApi& Vmm() {
  static const VmmApi api = [] {
    VmmApi a;
    a.loaded = detail::DriverEntry("cuMemAddressReserve", &a.address_reserve) &&
               detail::DriverEntry("cuMemAddressFree", &a.address_free) &&
               detail::DriverEntry("cuMemCreate", &a.create) && detail::DriverEntry("cuMemRelease", &a.release) &&
               detail::DriverEntry("cuMemMap", &a.map) && detail::DriverEntry("cuMemUnmap", &a.unmap) &&
               detail::DriverEntry("cuMemSetAccess", &a.set_access) &&
               detail::DriverEntry("cuMemGetAllocationGranularity", &a.granularity) &&
               detail::DriverEntry("cuDeviceGet", &a.device_get) &&
               detail::DriverEntry("cuDeviceGetAttribute", &a.device_attribute);
    return a;
  }();
  return api;
}

// Driver and runtime error codes coincide for the failures that matter here
// (CUDA_ERROR_OUT_OF_MEMORY == cudaErrorMemoryAllocation == 2, the sticky 7xx codes,
// CUDA_ERROR_NOT_SUPPORTED == cudaErrorNotSupported == 801).
inline cudaError_t FromDriver(CUresult r) { return static_cast<cudaError_t>(static_cast<int>(r)); }

inline CUmemAllocationProp VmmProp(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

// Where a region's physical pieces can lie in host memory (pinned, mapped into the region's
// device addresses, read and written by the kernels over the bus): the allocation properties
// of a host piece for `device` (the host NUMA node next to it where the driver can place
// pieces on one, else the host as a whole), or false where the driver or the device cannot.
inline bool VmmHostProp(int device, CUmemAllocationProp* out) {
  const VmmApi& api = Vmm();
  if (!api.loaded) return false;
  CUdevice dev = 0;
  if (api.device_get(&dev, device) != CUDA_SUCCESS) return false;
  int numa_ok = 0, host_ok = 0, numa_id = -1;
  if (api.device_attribute(&numa_ok, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) !=
      CUDA_SUCCESS)
    numa_ok = 0;
  if (api.device_attribute(&host_ok, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) !=
      CUDA_SUCCESS)
    host_ok = 0;
  if (api.device_attribute(&numa_id, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS) numa_id = -1;
  ClearHandledError();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  if (numa_ok) {
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    prop.location.id = numa_id >= 0 ? numa_id : 0;  // 0 where the system has no NUMA (the driver's rule)
  } else if (host_ok) {
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 0;
  } else {
    return false;
  }
  *out = prop;
  return true;
}

// The mapping granularity on `device` (2 MiB on the H200), or 0 where the driver or the
// device has no virtual memory management.
inline size_t VmmGranularity(int device) {
  const VmmApi& api = Vmm();
  if (!api.loaded) return 0;
  CUdevice dev = 0;
  int supported = 0;
  if (api.device_get(&dev, device) != CUDA_SUCCESS ||
      api.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS ||
      !supported)
    return 0;
  const CUmemAllocationProp prop = VmmProp(device);
  size_t g = 0;
  if (api.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return 0;
  return g;
}

// A device region of up to `reserved()` bytes of which the first `committed()` are backed.
// VMM: the base never moves; eager: Commit replaces the buffer (base moves, contents up to
// `keep` bytes copied). Not copyable; frees itself on its own device and never throws from
// its destructor.
class LazyRegion {
 public:
  LazyRegion() = default;
  LazyRegion(const LazyRegion&) = delete;
  LazyRegion& operator=(const LazyRegion&) = delete;
  ~LazyRegion() { Reset(); }

  // Prepares a region of up to max_bytes on the current device: with want_vmm and a driver
  // that supports it, reserves the address range (one acquisition site); else eager, and
  // nothing is taken yet. On failure nothing is held. want_host: the region may also hold
  // host pieces (SetHost), where the driver can map host memory (host_ok()); the reservation
  // is then aligned to both kinds' granularity.
  cudaError_t Init(size_t max_bytes, bool want_vmm, bool want_host = false) {
    Reset();
    if (cudaGetDevice(&device_) != cudaSuccess) {
      ClearHandledError();
      device_ = 0;
    }
    granularity_ = want_vmm ? VmmGranularity(device_) : 0;
    if (granularity_ == 0) {  // eager
      max_bytes_ = max_bytes;
      return cudaSuccess;
    }
    if (want_host && VmmHostProp(device_, &host_prop_)) {
      size_t hg = 0;
      if (Vmm().granularity(&hg, &host_prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && hg > 0 &&
          (hg % granularity_ == 0 || granularity_ % hg == 0)) {
        granularity_ = std::max(granularity_, hg);
        host_ok_ = true;
      }
      ClearHandledError();
    }
    const size_t size = RoundUp(std::max<size_t>(max_bytes, 1), granularity_);
    CUdeviceptr p = 0;
    cudaError_t e;
    if (fault::Fire()) {
      e = fault::Failure();
    } else {
      e = FromDriver(Vmm().address_reserve(&p, size, granularity_, 0, 0));
    }
    if (e != cudaSuccess) {
      granularity_ = 0;
      return detail::Finish(e);
    }
    base_ = p;
    reserved_ = size;
    max_bytes_ = size;
    live::handles.fetch_add(1);
    return cudaSuccess;
  }

  // Backs at least the first `bytes` (at most the reservation). VMM: maps one new piece,
  // rounded up to the granularity; eager: a new buffer of `bytes`, the first `keep` bytes
  // copied on `stream` (then synchronized), the old buffer freed. fill >= 0: every newly
  // usable byte (eager: all past `keep`) is set to it. On failure nothing changed.
  // *moved: the base pointer changed.
  cudaError_t Commit(size_t bytes, size_t keep, int fill, cudaStream_t stream, bool* moved) {
    *moved = false;
    bytes = std::min(bytes, max_bytes_);
    if (bytes <= committed_) return cudaSuccess;
    const size_t old = committed_;
    if (granularity_ == 0) {
      DeviceBuffer fresh;
      cudaError_t e = TryDeviceAlloc(bytes, &fresh);
      if (e != cudaSuccess) return e;
      keep = std::min(keep, old);
      if (keep) e = cudaMemcpyAsync(fresh.get(), eager_.get(), keep, cudaMemcpyDeviceToDevice, stream);
      // a new buffer: everything past what was kept is new
      if (e == cudaSuccess && fill >= 0)
        e = cudaMemsetAsync(static_cast<char*>(fresh.get()) + keep, fill, bytes - keep, stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
      if (e != cudaSuccess) return detail::Finish(e);
      eager_ = std::move(fresh);
      committed_ = bytes;
      *moved = true;
      return cudaSuccess;
    }
    const size_t top = RoundUp(bytes, granularity_);
    const size_t size = top - old;
    const VmmApi& api = Vmm();
    pieces_.reserve(pieces_.size() + 1);  // may throw, before anything is taken
    CUmemGenericAllocationHandle h = 0;
    cudaError_t e;
    if (fault::Fire()) {
      e = fault::Failure();
    } else {
      const CUmemAllocationProp prop = host_ ? host_prop_ : VmmProp(device_);
      e = FromDriver(api.create(&h, size, &prop, 0));
      if (e != cudaSuccess && host_ && e != cudaErrorMemoryAllocation && !IsStickyError(e)) {
        // a driver that reported host pieces but refuses them: this piece and every later
        // one on the device (pieces record their kind, so a region may hold both)
        ClearHandledError();
        host_ = host_ok_ = false;
        const CUmemAllocationProp dev_prop = VmmProp(device_);
        e = FromDriver(api.create(&h, size, &dev_prop, 0));
      }
    }
    if (e != cudaSuccess) return detail::Finish(e);
    e = FromDriver(api.map(base_ + old, size, 0, h, 0));
    if (e != cudaSuccess) {
      (void)api.release(h);
      return detail::Finish(e);
    }
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    e = FromDriver(api.set_access(base_ + old, size, &access, 1));
    if (e == cudaSuccess && fill >= 0) {
      e = cudaMemsetAsync(reinterpret_cast<void*>(base_ + old), fill, size, stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    }
    if (e != cudaSuccess) {
      (void)api.unmap(base_ + old, size);
      (void)api.release(h);
      return detail::Finish(e);
    }
    pieces_.push_back({old, size, h, host_});
    committed_ = top;
    if (host_) {
      host_committed_ += size;
      live::pinned_bytes.fetch_add(static_cast<int64_t>(size));
    } else {
      live::AddDeviceBytes(static_cast<int64_t>(size));
    }
    return cudaSuccess;
  }

  // Gives back the mapped pieces that lie wholly above `bytes` (VMM; a piece is unmapped
  // whole, as cuMemUnmap requires). The caller makes sure no queued work reads them.
  // Eager regions keep their buffer. Returns the bytes given back.
  size_t Trim(size_t bytes) noexcept {
    if (granularity_ == 0) return 0;
    size_t freed = 0;
    NoThrowDeviceGuard guard(device_);
    while (!pieces_.empty() && pieces_.back().offset >= bytes) {
      const Piece p = pieces_.back();
      pieces_.pop_back();
      (void)Vmm().unmap(base_ + p.offset, p.size);
      (void)Vmm().release(p.handle);
      committed_ = p.offset;
      freed += p.size;
      if (p.host) {
        host_committed_ -= p.size;
        live::pinned_bytes.fetch_sub(static_cast<int64_t>(p.size));
      } else {
        live::device_bytes.fetch_sub(static_cast<int64_t>(p.size));
      }
    }
    return freed;
  }

  // Where the pieces committed from now on lie: host memory (true; only where host_ok()) or
  // the device. Only while nothing is committed (the caller trims first: the contents go), so a
  // region's pieces are of one kind (but after a driver's refusal of a host piece: Commit).
  // Returns whether the region now commits where asked.
  bool SetHost(bool host) {
    if (host && !host_ok_) return false;
    if (host == host_) return true;
    if (committed_ != 0) return false;
    host_ = host;
    return true;
  }
  bool host() const { return host_; }
  bool host_ok() const { return host_ok_; }
  // Of committed(), the bytes in host memory.
  size_t host_committed() const { return host_committed_; }

  void Reset() noexcept {
    if (granularity_ != 0 && base_ != 0) {
      Trim(0);
      NoThrowDeviceGuard guard(device_);
      (void)Vmm().address_free(base_, reserved_);
      live::handles.fetch_sub(1);
    }
    eager_.Reset();
    base_ = 0;
    reserved_ = committed_ = max_bytes_ = host_committed_ = 0;
    granularity_ = 0;
    host_ = host_ok_ = false;
  }

  void* get() const {
    return granularity_ ? reinterpret_cast<void*>(base_) : eager_.get();
  }
  bool vmm() const { return granularity_ != 0; }
  size_t granularity() const { return granularity_; }
  size_t committed() const { return committed_; }
  // Address space held: the reservation (VMM) or the buffer (eager).
  size_t reserved() const { return granularity_ ? reserved_ : committed_; }
  // The most Commit can back.
  size_t max_bytes() const { return max_bytes_; }

 private:
  static size_t RoundUp(size_t x, size_t g) { return (x + g - 1) / g * g; }
  struct Piece {
    size_t offset, size;
    CUmemGenericAllocationHandle handle;
    bool host;  // in host memory (counted as pinned bytes)
  };
  int device_ = 0;
  size_t granularity_ = 0;  // 0: eager
  CUdeviceptr base_ = 0;    // VMM reservation
  size_t reserved_ = 0, committed_ = 0, max_bytes_ = 0;
  std::vector<Piece> pieces_;  // VMM: mapped pieces, in address order
  CUmemAllocationProp host_prop_{};  // a host piece's properties (host_ok_)
  bool host_ok_ = false;             // Init found that host pieces can be mapped here
  bool host_ = false;                // new pieces go to host memory
  size_t host_committed_ = 0;
  DeviceBuffer eager_;         // eager: the buffer
};

}  // namespace cuwfst
