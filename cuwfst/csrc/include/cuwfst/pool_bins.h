// The "bins" bound of the pooled lane layout (CUWFST_POOL_BOUND=bins; types.cuh
// Workspace::pool_bound), shared by the GPU kernels and the CPU accounting
// (reference_binding.cc ref_decode_step_sizes), which must compute it bit for bit alike.
//
// A real step's tokens are binned by their upper bound ub = score + (max_lp + max emitting
// weight) (the scans' tok_ub, the shape of ArcEnd) relative to the lane's previous maximum ref
// (the best score of the frontier): bin = clamp(floor((ub - ref) * 4) + 192, 0, 255), so
// 0.25-wide bins over ub - ref in [-48, 16), everything below in bin 0 and above in bin 255.
// Each bin counts the slots (arcs) of its tokens. Once the step's exact cutoff c = max - beam
// is known (MaxKernel's last block), the bound is the slots of the bins at or above
// PoolBinOf(PoolBinThreshold(c), ref):
//  * every arc ExpandKernel admits has end > c and end = fl(score + fl(acoustic + weight)) <=
//    ub (fp32 addition is monotone in each operand, weight <= max emitting weight, acoustic
//    <= max_lp), so ub > c;
//  * PoolBinThreshold is the smallest float u > c, so exactly the ub >= u pass (-inf where c is
//    not finite: count every bin);
//  * PoolBinOf is monotone in ub (fp32 subtraction, a multiplication by a power of two, floor
//    and clamp are), so ub >= u implies bin(ub) >= bin(u).
// So the bound covers every admitted arc, hence the step's claims, whatever ref is (ref only
// decides how tight it is). It is a token-level bound: a token counts all its arcs once its
// best conceivable arc passes the cutoff.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define CUWFST_POOL_HD __host__ __device__ __forceinline__
#else
#define CUWFST_POOL_HD inline
#endif

namespace cuwfst {

constexpr int32_t kPoolBins = 256;
constexpr int32_t kPoolBinZero = 192;  // the bin of ub - ref in [0, 0.25)
constexpr float kPoolBinScale = 4.f;   // bins per score unit: a power of two, so the product is exact

// The bin of upper bound `ub` against the lane's reference `ref` (monotone in ub).
CUWFST_POOL_HD int32_t PoolBinOf(float ub, float ref) {
  const float x = floorf((ub - ref) * kPoolBinScale);
  if (!(x > static_cast<float>(-kPoolBinZero))) return 0;  // at or below the range (or NaN: -inf - -inf)
  if (x >= static_cast<float>(kPoolBins - 1 - kPoolBinZero)) return kPoolBins - 1;
  return static_cast<int32_t>(x) + kPoolBinZero;
}

// The smallest float u > cutoff (a token passes the walkers' test ub > cutoff iff ub >= u);
// -inf (count every bin) where the cutoff is not finite.
CUWFST_POOL_HD float PoolBinThreshold(float cutoff) {
  if (!(cutoff - cutoff == 0.f)) return -INFINITY;  // inf or NaN
  return nextafterf(cutoff, INFINITY);
}

// The first bin a step with this cutoff counts.
CUWFST_POOL_HD int32_t PoolFirstBin(float cutoff, float ref) {
  return PoolBinOf(PoolBinThreshold(cutoff), ref);
}

}  // namespace cuwfst
