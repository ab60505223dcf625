// Host-side lattice posteriors: the log-semiring forward/backward scores and the word
// confidences of cuwfst.Lattice (cuwfst/decoder/lattice.py), bit-identical to its numpy
// form (tests/lattice_reference_impl.py): the same float64 additions in the same order, and
// numpy's logaddexp (npy_logaddexp: libm exp and log1p) as the one nonlinear step. Built
// without fast-math or fp contraction (cuwfst/jit/reference.py).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace cuwfst {
namespace reference {

struct LatticeView {
  int64_t num_states, num_arcs, num_words;
  const int32_t* src;          // [A]
  const int32_t* dst;          // [A]
  const float* score;          // [A]
  const int32_t* frame;        // [A] the arc's time
  const int32_t* word_splits;  // [A + 1]
  const int32_t* word_ids;     // [W]
  const int32_t* state_frame;  // [S]
  const int32_t* state_level;  // [S]
};

// numpy's npy_logaddexp (what np.logaddexp and np.logaddexp.at compute for float64). Inline:
// the passes call it once an arc, and an exported function in a shared object is called
// through the PLT, not inlined.
inline double NpyLogAddExp(double x, double y) {
  constexpr double kLogE2 = 0.693147180559945309417232121458176568;  // NPY_LOGE2
  if (x == y) return x + kLogE2;  // infinities of the same sign too
  const double tmp = x - y;
  // |tmp| > 750 (an -inf operand among them: a state's first arc): exp underflows to +0
  // exactly and log1p(+0) = +0, so the sum is the larger operand + 0.0, as numpy's is
  if (tmp > 0) return tmp > 750.0 ? x + 0.0 : x + std::log1p(std::exp(-tmp));
  if (tmp <= 0) return tmp < -750.0 ? y + 0.0 : y + std::log1p(std::exp(tmp));
  return tmp;  // NaN
}

// alpha, beta [S]: the log-semiring forward / backward scores (Lattice._forward(True) /
// _backward(True)), computed when `have_scores` is false, else read. spans [N, 3] =
// {word, first frame, last frame}; out_hit[n] = 0 where no arc carries the word in the
// span (confidence 0), else out_rest[n] = log of the total over the paths that avoid the
// span's word arcs (Lattice.word_confidences' `rest`); the caller forms
// -expm1(rest - tot) with numpy as before.
void LatticeWordRests(const LatticeView& lat, bool have_scores, double* alpha, double* beta, int64_t num_spans,
                      const int64_t* spans, double* out_rest, int32_t* out_hit);

// Lattice.nbest(n) (cuwfst/decoder/lattice.py): the n best distinct word sequences, best
// first, by the same A* over word prefixes as its Python form (Lattice._nbest_python), with
// the same float64 additions, the same heap order (priority, complete before open, then the
// words as a tuple) and the same insertion orders: the same sequences and bits. `beta` [S]:
// the tropical backward scores (Lattice.backward_scores(False)). The arcs must be grouped by
// source state in increasing order (the decoders' lattices are). Appends to `words` and
// `scores`, `splits` (starting at 0) delimiting each sequence's words.
void LatticeNBest(const LatticeView& lat, const double* beta, int64_t n, std::vector<int32_t>* words,
                  std::vector<int64_t>* splits, std::vector<double>* scores);

}  // namespace reference
}  // namespace cuwfst
