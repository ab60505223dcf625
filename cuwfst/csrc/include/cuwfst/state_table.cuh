// A frontier's states as an open-addressing table, state -> its index in the frontier: 2^bits slots
// of int32 keys (-1 empty) beside an index array of type Pos, linear probing from a multiplicative
// hash, at most half full. The records after the search (lattice_after.cuh) build S_{t+1} in one
// (in shared memory, or in global memory past 2^14 slots); benchmarks/lattice_post.cu, the pass's
// microbenchmark, uses the same three functions. StateIndex*: indices alone, the states read from
// the frontier.
#pragma once

#include <cstdint>

#include <vector_types.h>

namespace cuwfst {

__device__ __forceinline__ uint32_t StateTableHash(int32_t s, int32_t bits) {
  return (static_cast<uint32_t>(s) * 2654435761u) >> (32 - bits);
}

// Inserts state s with index i (a frontier's states are distinct; concurrent inserts are safe).
template <typename Pos>
__device__ __forceinline__ void StateTableInsert(int32_t* keys, Pos* pos, int32_t bits, int32_t s, int32_t i) {
  const uint32_t mask = (1u << bits) - 1u;
  uint32_t h = StateTableHash(s, bits);
  while (true) {
    const int32_t old = atomicCAS(&keys[h], -1, s);
    if (old == -1 || old == s) break;
    h = (h + 1) & mask;
  }
  pos[h] = static_cast<Pos>(i);
}

// The index of state d, -1 when it is not in the table.
template <typename Pos>
__device__ __forceinline__ int32_t StateTableFind(const int32_t* keys, const Pos* pos, int32_t bits, int32_t d) {
  const uint32_t mask = (1u << bits) - 1u;
  uint32_t h = StateTableHash(d, bits);
  while (true) {
    const int32_t key = keys[h];
    if (key == d) return static_cast<int32_t>(pos[h]);
    if (key == -1) return -1;
    h = (h + 1) & mask;
  }
}

// The same table of 2^bits uint16 indices alone (0xFFFF empty): a slot's state is read from the
// frontier's own states (`states`, the frontier in index order), so the table takes a third of the
// bytes (the records pass's one grid: 2^14 slots in 32 KB of shared memory) and a probe one load of
// `states` a slot it passes. At most 65,535 states.
__device__ __forceinline__ void StateIndexInsert(uint16_t* idx, int32_t bits, int32_t s, int32_t i) {
  const uint32_t mask = (1u << bits) - 1u;
  uint32_t h = StateTableHash(s, bits);
  // (the states are distinct, so a slot taken is another state's: the next one)
  while (atomicCAS(reinterpret_cast<unsigned short*>(&idx[h]), static_cast<unsigned short>(0xFFFFu),
                   static_cast<unsigned short>(i)) != static_cast<unsigned short>(0xFFFFu))
    h = (h + 1) & mask;
}

__device__ __forceinline__ int32_t StateIndexFind(const uint16_t* idx, const int32_t* states, int32_t bits, int32_t d) {
  const uint32_t mask = (1u << bits) - 1u;
  uint32_t h = StateTableHash(d, bits);
  while (true) {
    const uint32_t i = idx[h];
    if (i == 0xFFFFu) return -1;
    if (states[i] == d) return static_cast<int32_t>(i);
    h = (h + 1) & mask;
  }
}

// The same table with each slot's state, index and score in one 16-byte slot: x the state (low half)
// and the index (high half), kStateSlotEmpty where empty (state -1); y the token's score (its float
// bits). A probe that finds its state has its index and score in the same load, where the two
// arrays above take a second, dependent load for the index and the records' filter a third for the
// score (the records pass's global tables, CUWFST_LATTICE_TABLES=packed).
constexpr unsigned long long kStateSlotEmpty = ~0ull;
__host__ __device__ constexpr unsigned long long StateSlotPack(int32_t s, int32_t i) {
  return (static_cast<unsigned long long>(static_cast<uint32_t>(i)) << 32) | static_cast<uint32_t>(s);
}

// Inserts state s with index i and score `score` (distinct states; concurrent inserts are safe; the
// score is read only by a later kernel).
__device__ __forceinline__ void StateTableInsertPacked(ulonglong2* slots, int32_t bits, int32_t s, int32_t i,
                                                       float score) {
  const uint32_t mask = (1u << bits) - 1u;
  const unsigned long long word = StateSlotPack(s, i);
  uint32_t h = StateTableHash(s, bits);
  while (true) {
    const unsigned long long old = atomicCAS(&slots[h].x, kStateSlotEmpty, word);
    if (old == kStateSlotEmpty || static_cast<int32_t>(static_cast<uint32_t>(old)) == s) break;
    h = (h + 1) & mask;
  }
  slots[h].y = __float_as_uint(score);
}

// The index of state d (-1 when it is not in the table) and, when found, its score into *score.
__device__ __forceinline__ int32_t StateTableFindPacked(const ulonglong2* slots, int32_t bits, int32_t d, float* score) {
  const uint32_t mask = (1u << bits) - 1u;
  uint32_t h = StateTableHash(d, bits);
  while (true) {
    const ulonglong2 e = slots[h];
    const int32_t key = static_cast<int32_t>(static_cast<uint32_t>(e.x));
    if (key == d) {
      *score = __uint_as_float(static_cast<uint32_t>(e.y));
      return static_cast<int32_t>(e.x >> 32);
    }
    if (key == -1) return -1;
    h = (h + 1) & mask;
  }
}

}  // namespace cuwfst
