// The records pass's slots a chunk a warp at a time (types.cuh AfterChunkSlotOf, AfterChunkUsed;
// lattice_after.cuh AfterWriteChunk and AfterReleaseChunk, CUWFST_LATTICE_RESERVE=chunk) in a host
// model: warps take rounds in a random interleaving, each round keeping 0 to 32 records (its lanes'
// ranks 0 .. n - 1), taking a new chunk at a shared cursor when the round passes its chunk's room,
// as the kernel does; at the end each warp's last chunk's rest is marked holes. Every slot below the
// cursor must then be written exactly once (a record or a hole), the records be every round's,
// each warp leave at most kAfterReserve - 1 holes, and the cursor move once a chunk.
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
  std::mt19937 rng(11);
  int64_t cases = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int W = 1 + static_cast<int>(rng() % 64);
    const int rounds = static_cast<int>(rng() % 200);
    // how full a round is: mostly sparse (a tenth of lanes keep), sometimes dense or full
    const int density = static_cast<int>(rng() % 4);
    std::vector<uint64_t> chunk(W, 0);
    std::vector<int32_t> used(W, kAfterReserve);
    std::vector<int32_t> left(W, rounds);
    uint64_t cursor = 0, chunks = 0, records = 0;
    std::vector<int> written;  // per slot: how many writes
    auto write = [&](uint64_t r) {
      if (written.size() <= r) written.resize(r + 1, 0);
      ++written[r];
    };
    int busy = rounds > 0 ? W : 0;
    while (busy > 0) {
      const int w = static_cast<int>(rng() % W);
      if (left[w] == 0) continue;
      if (--left[w] == 0) --busy;
      int n = 0;
      for (int lane = 0; lane < 32; ++lane) {
        const uint32_t x = rng() % 100;
        n += density == 0 ? x < 10 : density == 1 ? x < 50 : density == 2 ? x < 95 : 1;
      }
      if (n == 0) continue;  // (no kept record: AfterWriteChunk returns before anything)
      uint64_t base = chunk[w], fresh = 0;
      const bool take = n > kAfterReserve - used[w];
      if (take) {
        fresh = cursor;
        cursor += kAfterReserve;
        ++chunks;
      }
      for (int rank = 0; rank < n; ++rank) {
        const AfterChunkSlot at = AfterChunkSlotOf(used[w], n, rank);
        CHECK(at.offset >= 0 && at.offset < kAfterReserve);
        CHECK(!at.fresh || take);
        write((at.fresh ? fresh : base) + static_cast<uint64_t>(at.offset));
      }
      if (take) chunk[w] = fresh;
      used[w] = AfterChunkUsed(used[w], n);
      CHECK(used[w] >= 1 && used[w] <= kAfterReserve);
      records += static_cast<uint64_t>(n);
    }
    uint64_t holes = 0;
    for (int w = 0; w < W; ++w) {
      int mine = 0;
      for (int lane = 0; lane < 32; ++lane)
        if (used[w] + lane < kAfterReserve) {  // AfterReleaseChunk
          write(chunk[w] + static_cast<uint64_t>(used[w] + lane));
          ++mine;
        }
      CHECK(mine <= kAfterReserve - 1);
      holes += static_cast<uint64_t>(mine);
    }
    CHECK(cursor == chunks * kAfterReserve);
    CHECK(records + holes == cursor);
    CHECK(written.size() == cursor);
    for (uint64_t r = 0; r < written.size(); ++r) CHECK(written[r] == 1);
    ++cases;
  }
  std::printf("%lld interleavings\n", static_cast<long long>(cases));
  if (failures == 0) std::printf("ALL OK\n");
  return failures == 0 ? 0 : 1;
}
