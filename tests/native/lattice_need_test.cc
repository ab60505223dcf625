// LatticeNeedOfRun (types.cuh): what a lattice run that overflowed the records made and needs,
// from its step counts. The H200 failure it answers (lattice_speed --long, c0be1f0): the first
// bounded run of 16 rows x 64 steps on the full HLG asked for 5.4e9 records (81 GiB) from a
// cursor of 4,346,998,143 = 2^32 + 52,030,847, about 50k records per row and step, which is
// what the step counts of such a run add up to. The growth now comes from the counts, and
// a cursor that disagrees with them is a decoder bug, reported as one. Built and run by
// tests/test_cuda_resources.py.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>  // __host__ / __device__ for the host compiler

#include "cuwfst/types.cuh"

using namespace cuwfst;

#include "check.h"

int main() {
  {  // the shape of the H200 run: B 16, 64-step runs, rows of 1,000 and 858 frames
    const int32_t B = 16, seg = 1026, chunk = 64;
    std::vector<int32_t> count(static_cast<size_t>(B) * seg, 0);
    int64_t made = 0, most = 0;
    for (int32_t t = 0; t < chunk; ++t) {
      int64_t step = 0;
      for (int32_t b = 0; b < B; ++b) {
        const int32_t n = 40000 + 150 * t + 7 * b;  // frontiers grow from the start token
        count[static_cast<size_t>(b) * seg + t] = n;
        step += n;
      }
      made += step;
      most = step > most ? step : most;
    }
    // the steps of a later run were never made: zero, whatever the range asked
    const LatticeRunNeed r = LatticeNeedOfRun(count.data(), B, seg, 0, 5000, chunk);
    CHECK(r.made == made);
    CHECK(r.most == most);
    CHECK(r.need == most * chunk);
    CHECK(r.need >= r.made);
    CHECK(r.need < (int64_t{1} << 32));  // ~60 M records (2 GiB with the side array), not 5.4e9
    CHECK(static_cast<unsigned long long>(r.made) != (1ull << 32) + static_cast<unsigned long long>(made));
    // a run that took fewer steps (a pause, lanes at their end) is scaled by its largest step
    const LatticeRunNeed s = LatticeNeedOfRun(count.data(), B, seg, 10, 13, chunk);
    int64_t m3 = 0, s3 = 0;
    for (int32_t t = 10; t < 13; ++t) {
      int64_t step = 0;
      for (int32_t b = 0; b < B; ++b) step += count[static_cast<size_t>(b) * seg + t];
      s3 += step;
      m3 = step > m3 ? step : m3;
    }
    CHECK(s.made == s3 && s.most == m3 && s.need == m3 * chunk);
    // the whole batch (steps 0): what it made
    const LatticeRunNeed w = LatticeNeedOfRun(count.data(), B, seg, 0, seg, 0);
    CHECK(w.made == made && w.need == made);
    // only lanes < B count (a batch of fewer rows than lanes)
    const LatticeRunNeed h = LatticeNeedOfRun(count.data(), 1, seg, 0, seg, 0);
    int64_t lane0 = 0;
    for (int32_t t = 0; t < chunk; ++t) lane0 += count[t];
    CHECK(h.made == lane0);
  }
  {  // a last run whose need is its own records (one step larger than the rest)
    const int32_t B = 2, seg = 8;
    std::vector<int32_t> count = {1, 1, 1, 9, 0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0};
    const LatticeRunNeed r = LatticeNeedOfRun(count.data(), B, seg, 0, seg, 2);
    CHECK(r.made == 20 && r.most == 11 && r.need == 22);
    const LatticeRunNeed q = LatticeNeedOfRun(count.data(), B, seg, 0, seg, 1);
    CHECK(q.need == 20);  // never below what the run made
    const LatticeRunNeed e = LatticeNeedOfRun(count.data(), B, seg, 4, 4, 64);
    CHECK(e.made == 0 && e.most == 0 && e.need == 0);
    const LatticeRunNeed n = LatticeNeedOfRun(count.data(), B, seg, -3, 100, 0);  // clamped to [0, seg)
    CHECK(n.made == 20);
  }
  if (failures) return 1;
  std::printf("ALL OK\n");
  return 0;
}
