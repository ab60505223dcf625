// ArcDestAndLabel (types.cuh), which the records pass's walk reads an arc's destination and label
// with in one load, against ArcDest and ArcLabel on the host: graphs packed as the upload packs them
// (gpu_binding.cu: the label's code above dest_bits bits of destination, epsilon and final as the
// two codes past the labels) at label widths 2 to 16 bits, and the same arcs unpacked (two arrays),
// destinations up to the widest each width leaves, labels 0, the largest, and the special ones.
// Built and run by tests/test_cuda_resources.py.
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include <cuda_runtime.h>  // __host__ / __device__ for the host compiler

#include "cuwfst/types.cuh"

using namespace cuwfst;

#include "check.h"

int main() {
  std::mt19937 rng(7);
  int64_t checked = 0;
  for (int label_bits = 2; label_bits <= 16; ++label_bits) {
    const int dest_bits = 32 - label_bits;
    const uint32_t special = static_cast<uint32_t>((1ull << label_bits) - 2ull);
    const int64_t A = 4096;
    std::vector<int32_t> dest(A), il(A);  // il: -2 epsilon, -1 final, else a label below special
    for (int64_t i = 0; i < A; ++i) {
      const uint32_t dmax = dest_bits >= 31 ? 0x7FFFFFFFu : (1u << dest_bits) - 1u;
      dest[i] = static_cast<int32_t>(i % 3 == 0 ? dmax : rng() % (static_cast<uint64_t>(dmax) + 1));
      const uint32_t r = rng() % 8;
      il[i] = r == 0 ? -2 : r == 1 ? -1 : r == 2 ? 0 : r == 3 ? static_cast<int32_t>(special - 1)
                                                            : static_cast<int32_t>(rng() % special);
    }
    std::vector<uint32_t> packed(A);
    std::vector<uint16_t> il16(A);
    for (int64_t i = 0; i < A; ++i) {
      const uint32_t code = il[i] == -2 ? special : il[i] == -1 ? special + 1u : static_cast<uint32_t>(il[i]);
      packed[i] = (code << dest_bits) | static_cast<uint32_t>(dest[i]);
      il16[i] = il[i] == -1 ? kFinalIlabel : il[i] == -2 ? kEpsIlabel : static_cast<uint16_t>(il[i]);
    }
    DeviceGraph p{}, u{};
    p.arc_packed = packed.data();
    p.dest_bits = dest_bits;
    p.label_special = special;
    u.arc_dest = dest.data();
    u.arc_ilabel = il16.data();
    for (int64_t i = 0; i < A; ++i) {
      const int32_t arc = static_cast<int32_t>(i);
      for (const DeviceGraph* g : {&p, &u}) {
        const ArcDestLabel dl = ArcDestAndLabel(*g, arc);
        CHECK(dl.dest == ArcDest(*g, arc) && dl.label == ArcLabel(*g, arc));
        CHECK(dl.dest == dest[i] && dl.label == il16[i]);  // (the arcs as given)
        ++checked;
      }
    }
  }
  std::printf("%lld arcs checked\n", static_cast<long long>(checked));
  if (failures == 0) std::printf("ALL OK\n");
  return failures == 0 ? 0 : 1;
}
