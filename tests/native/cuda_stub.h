// The stub CUDA runtime of gpu_decoder_host_test.cu (cuda_stub_runtime.cc): "device" memory
// is host memory, kernels do nothing except BacktrackKernel, which is simulated.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <set>

namespace stub {
extern cudaError_t pending;
extern std::set<void*> device_mem, pinned_mem;
extern bool bad_access;       // a simulated kernel touched freed or too small memory
extern int64_t g_need;        // winners entries the simulated batch uses
extern int64_t g_pool_need[3];  // what a pooled batch asks of each lane pool (0: nothing)
extern bool sticky;           // cudaStreamSynchronize reports an illegal address
extern int64_t copy2d_width, copy2d_height;
extern int captures_begun, launches;
// Lattice decodes: the simulated BacktrackKernel also writes each lane's records (step by
// step, lanes interleaved, as LatPersistKernel's atomics leave them), lat_extra more per step
// than (t + lane) % 3, appending at *lat_cursor (which the host zeroes when a batch starts);
// lattice_runs counts the simulations. A pooled batch that pauses has recorded steps
// [0, lat_pause_step) of its lanes; the run that resumes it records the rest.
extern int32_t lat_extra;
extern int lattice_runs;
extern int32_t lat_pause_step;
// Steps a simulated run moves each lane (0: every row ends in the run that starts it), so that
// continuous batching's rows can span segments.
extern int32_t steps_per_run;
// The stub driver's virtual memory management (cudaGetDriverEntryPointByVersion): reserved
// ranges are PROT_NONE host mappings made readable and writable piece by piece.
extern bool vmm;                 // the driver offers VMM
extern int last_stream_priority;  // the priority of the last stream made with one
extern size_t vmm_granularity;   // a multiple of the host page
extern std::set<void*> vmm_reserved;
extern int64_t vmm_pieces;       // physical pieces created and not yet released
}  // namespace stub

// Defined by the test (the kernel's host stub lives in the nvcc-compiled file).
extern "C" const void* cuwfst_test_backtrack_kernel();
