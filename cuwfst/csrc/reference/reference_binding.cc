// TVM-FFI exports of the CPU reference decoder. Every tensor is checked here; the
// decoder itself trusts a validated graph (cuwfst/graph/image.py) and these checks.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cuwfst/pool_bins.h"
#include "cuwfst/tensor_checks.h"
#include "lattice_posteriors.h"
#include "reference_decoder.h"
#include "reference_lattice.h"

namespace {

using tvm::ffi::TensorView;
using cuwfst::reference::GraphView;
using cuwfst::reference::Options;

using cuwfst::CheckHostTensor;

struct RefGraph {
  GraphView view;
  // each state's largest emitting weight (-inf without emitting arcs), as the image's
  // emit_maxw: built on first use by ref_decode_step_sizes
  std::once_flag emit_once;
  std::vector<float> emit_maxw;
  const std::vector<float>& EmitMaxw() {
    std::call_once(emit_once, [&] {
      emit_maxw.assign(view.num_states, -INFINITY);
      for (int32_t s = 0; s < view.num_states; ++s)
        for (int32_t a = view.EmitBegin(s); a < view.EmitEnd(s); ++a) emit_maxw[s] = std::max(emit_maxw[s], view.weight[a]);
    });
    return emit_maxw;
  }
};

RefGraph* GetGraph(int64_t h) {
  if (h == 0) TVM_FFI_THROW(ValueError) << "null graph handle";
  return reinterpret_cast<RefGraph*>(h);
}

// source_arc: [num_arcs] i32, each image arc's source arc id (GraphView::source_arc), or [0]
// where the image kept the source order.
int64_t RefGraphCreate(TensorView row_splits, TensorView final_count, TensorView eps_count,
                       TensorView dest, TensorView ilabel, TensorView weight, TensorView source_arc,
                       int64_t vocab_size, int64_t start_state, bool finals_at_end) {
  int64_t n = final_count.ndim() == 1 ? final_count.shape()[0] : -1;
  int64_t a = dest.ndim() == 1 ? dest.shape()[0] : -1;
  if (n < 1 || a < 0) TVM_FFI_THROW(ValueError) << "final_count and dest must be 1-D";
  if (a >= cuwfst::reference::kRedirectArcBit)
    TVM_FFI_THROW(ValueError) << "graphs are limited to 2^30 arcs, got " << a;
  CheckHostTensor(row_splits, "row_splits", kDLInt, 32, {n + 1});
  CheckHostTensor(final_count, "final_count", kDLInt, 32, {n});
  CheckHostTensor(dest, "dest", kDLInt, 32, {a});
  CheckHostTensor(ilabel, "ilabel", kDLInt, 32, {a});
  CheckHostTensor(weight, "weight", kDLFloat, 32, {a});
  bool has_eps = eps_count.ndim() == 1 && eps_count.shape()[0] == n && n > 0;
  if (has_eps) CheckHostTensor(eps_count, "eps_count", kDLInt, 32, {n});
  const bool has_src = source_arc.ndim() == 1 && source_arc.shape()[0] > 0;
  if (has_src) CheckHostTensor(source_arc, "source_arc", kDLInt, 32, {a});
  auto g = std::make_unique<RefGraph>();
  GraphView& v = g->view;
  v.num_states = static_cast<int32_t>(n);
  v.num_arcs = static_cast<int32_t>(a);
  v.vocab_size = static_cast<int32_t>(vocab_size);
  v.start_state = static_cast<int32_t>(start_state);
  v.finals_at_end = finals_at_end;
  v.row_splits = static_cast<const int32_t*>(row_splits.data_ptr());
  v.final_count = static_cast<const int32_t*>(final_count.data_ptr());
  v.eps_count = has_eps ? static_cast<const int32_t*>(eps_count.data_ptr()) : nullptr;
  v.dest = static_cast<const int32_t*>(dest.data_ptr());
  v.ilabel = static_cast<const int32_t*>(ilabel.data_ptr());
  v.weight = static_cast<const float*>(weight.data_ptr());
  v.source_arc = has_src ? static_cast<const int32_t*>(source_arc.data_ptr()) : nullptr;
  if (v.start_state < 0 || v.start_state >= v.num_states)
    TVM_FFI_THROW(ValueError) << "start state out of range";
  return reinterpret_cast<int64_t>(g.release());
}

void RefGraphFree(int64_t h) { delete GetGraph(h); }

Options MakeOptions(double search_beam, double output_beam, int64_t min_active, int64_t max_active,
                    bool allow_partial, int64_t eps_iterations, bool online) {
  if (!(search_beam > 0)) TVM_FFI_THROW(ValueError) << "search_beam must be > 0";
  if (!(output_beam > 0)) TVM_FFI_THROW(ValueError) << "output_beam must be > 0";
  if (min_active < 0) TVM_FFI_THROW(ValueError) << "min_active_states must be >= 0";
  if (max_active <= min_active)
    TVM_FFI_THROW(ValueError) << "max_active_states must be greater than min_active_states";
  if (eps_iterations < 0) TVM_FFI_THROW(ValueError) << "eps_iterations must be >= 0";
  Options o;
  o.search_beam = static_cast<float>(search_beam);
  o.output_beam = static_cast<float>(output_beam);
  o.min_active = static_cast<int32_t>(min_active);
  o.max_active = static_cast<int32_t>(std::min<int64_t>(max_active, INT32_MAX));
  o.allow_partial = allow_partial;
  o.eps_iterations = static_cast<int32_t>(eps_iterations);
  o.online = online;
  return o;
}

// A batch of rows: log_probs [B, T, V >= vocab] f32, lengths [B] i32 in [0, T].
struct RowBatch {
  int64_t B, T, V;
  const float* lp;
  const int32_t* len;
};

RowBatch CheckBatch(const GraphView& g, const TensorView& log_probs, const TensorView& lengths) {
  if (log_probs.ndim() != 3) TVM_FFI_THROW(ValueError) << "log_probs must be [B, T, V]";
  const int64_t B = log_probs.shape()[0], T = log_probs.shape()[1], V = log_probs.shape()[2];
  CheckHostTensor(log_probs, "log_probs", kDLFloat, 32, {B, T, V});
  if (V < g.vocab_size)
    TVM_FFI_THROW(ValueError) << "log_probs has " << V << " columns but the graph's vocab_size is "
                              << g.vocab_size;
  CheckHostTensor(lengths, "lengths", kDLInt, 32, {B});
  const int32_t* len = static_cast<const int32_t*>(lengths.data_ptr());
  for (int64_t b = 0; b < B; ++b)
    if (len[b] < 0 || len[b] > T)
      TVM_FFI_THROW(ValueError) << "lengths[" << b << "] = " << len[b] << " outside [0, " << T << "]";
  return {B, T, V, static_cast<const float*>(log_probs.data_ptr()), len};
}

// One result row per batch row: out_arcs [B, cap] i32 (the first min(len, cap) arcs),
// out_len [B] i32 (the TRUE length), out_score [B] f32, out_meta [B, 4] i32 =
// {reached_final, redirected, redirect_arc, max_frontier}, out_stats [B, 2] i64 =
// {frontier_total, closure_added} (RowResult).
struct RowOutputs {
  int64_t cap;
  int32_t *arcs, *len;
  float* score;
  int32_t* meta;
  int64_t* stats;
  void Write(int64_t b, const cuwfst::reference::RowResult& r) const {
    len[b] = static_cast<int32_t>(r.arcs.size());
    const int64_t n = std::min<int64_t>(cap, r.arcs.size());
    if (n > 0) std::memcpy(arcs + b * cap, r.arcs.data(), n * sizeof(int32_t));
    score[b] = r.score;
    meta[b * 4 + 0] = r.reached_final;
    meta[b * 4 + 1] = r.redirected;
    meta[b * 4 + 2] = r.redirect_arc;
    meta[b * 4 + 3] = r.max_frontier;
    stats[b * 2 + 0] = r.frontier_total;
    stats[b * 2 + 1] = r.closure_added;
  }
};

RowOutputs CheckOutputs(int64_t B, const TensorView& out_arcs, const TensorView& out_len, const TensorView& out_score,
                        const TensorView& out_meta, const TensorView& out_stats) {
  if (out_arcs.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_arcs must be [B, cap]";
  const int64_t cap = out_arcs.shape()[1];
  CheckHostTensor(out_arcs, "out_arcs", kDLInt, 32, {B, cap});
  CheckHostTensor(out_len, "out_len", kDLInt, 32, {B});
  CheckHostTensor(out_score, "out_score", kDLFloat, 32, {B});
  CheckHostTensor(out_meta, "out_meta", kDLInt, 32, {B, 4});
  CheckHostTensor(out_stats, "out_stats", kDLInt, 64, {B, 2});
  return {cap, static_cast<int32_t*>(out_arcs.data_ptr()), static_cast<int32_t*>(out_len.data_ptr()),
          static_cast<float*>(out_score.data_ptr()), static_cast<int32_t*>(out_meta.data_ptr()),
          static_cast<int64_t*>(out_stats.data_ptr())};
}

// Runs fn(slot, i) for i in [0, n) on up to num_threads threads; each thread has its own
// state-slot scratch of slot_size entries of -1 (RowSearch's `slot`; 0 where unused).
template <typename F>
void ForEachRow(int64_t slot_size, int64_t n, int64_t num_threads, F&& fn) {
  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    std::vector<int32_t> slot(slot_size, -1);
    for (int64_t i = next++; i < n; i = next++) fn(&slot, i);
  };
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(num_threads, n));
  if (nt == 1) {
    worker();
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < nt; ++i) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
}

// A batch (CheckBatch) decoded row by row on num_threads threads; outputs as CheckOutputs.
void RefDecode(int64_t graph_h, TensorView log_probs, TensorView lengths, double search_beam,
               double output_beam, int64_t min_active, int64_t max_active, bool allow_partial,
               int64_t eps_iterations, bool online, int64_t num_threads, TensorView out_arcs,
               TensorView out_len, TensorView out_score, TensorView out_meta, TensorView out_stats) {
  const GraphView& g = GetGraph(graph_h)->view;
  Options opt = MakeOptions(search_beam, output_beam, min_active, max_active, allow_partial,
                            eps_iterations, online);
  const RowBatch in = CheckBatch(g, log_probs, lengths);
  const RowOutputs out = CheckOutputs(in.B, out_arcs, out_len, out_score, out_meta, out_stats);
  ForEachRow(g.num_states, in.B, num_threads, [&](std::vector<int32_t>* slot, int64_t b) {
    out.Write(b, cuwfst::reference::DecodeRow(g, in.lp + b * in.T * in.V, in.V, in.len[b], opt, slot, nullptr));
  });
}

// One row with per-step snapshots. Snapshot k (k = 0 the initial frontier, k = t + 1 after
// step t) fills out_count[k] tokens of out_state/out_score/out_arc[k, :] (arc = the token's
// winning arc, -1 for the start token, kRedirectArcBit set on a redirect) and
// out_step[k] = {phase, beam, cutoff, frontier size before the step's epsilon closure}.
// cap must be >= num_states.
void RefDecodeSnapshots(int64_t graph_h, TensorView log_probs, int64_t length, double search_beam,
                        double output_beam, int64_t min_active, int64_t max_active,
                        bool allow_partial, int64_t eps_iterations, bool online,
                        TensorView out_count, TensorView out_state, TensorView out_score,
                        TensorView out_arc, TensorView out_step) {
  const GraphView& g = GetGraph(graph_h)->view;
  Options opt = MakeOptions(search_beam, output_beam, min_active, max_active, allow_partial,
                            eps_iterations, online);
  if (log_probs.ndim() != 2) TVM_FFI_THROW(ValueError) << "log_probs must be [T, V]";
  const int64_t T = log_probs.shape()[0], V = log_probs.shape()[1];
  CheckHostTensor(log_probs, "log_probs", kDLFloat, 32, {T, V});
  if (V < g.vocab_size) TVM_FFI_THROW(ValueError) << "log_probs narrower than vocab_size";
  if (length < 0 || length > T) TVM_FFI_THROW(ValueError) << "length outside [0, T]";
  const int64_t K = length + 2;
  if (out_state.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_state must be [K, cap]";
  const int64_t cap = out_state.shape()[1];
  if (cap < g.num_states) TVM_FFI_THROW(ValueError) << "snapshot cap must be >= num_states";
  CheckHostTensor(out_count, "out_count", kDLInt, 32, {K});
  CheckHostTensor(out_state, "out_state", kDLInt, 32, {K, cap});
  CheckHostTensor(out_score, "out_score", kDLFloat, 32, {K, cap});
  CheckHostTensor(out_arc, "out_arc", kDLInt, 32, {K, cap});
  CheckHostTensor(out_step, "out_step", kDLFloat, 32, {K, 4});
  std::vector<int32_t> slot(g.num_states, -1);
  std::vector<cuwfst::reference::StepSnapshot> snaps;
  cuwfst::reference::DecodeRow(g, static_cast<const float*>(log_probs.data_ptr()), V,
                               static_cast<int32_t>(length), opt, &slot, &snaps);
  int32_t* cnt = static_cast<int32_t*>(out_count.data_ptr());
  int32_t* st = static_cast<int32_t*>(out_state.data_ptr());
  float* sc = static_cast<float*>(out_score.data_ptr());
  int32_t* ar = static_cast<int32_t*>(out_arc.data_ptr());
  float* step = static_cast<float*>(out_step.data_ptr());
  for (int64_t k = 0; k < K; ++k) {
    const auto& s = snaps[k];
    cnt[k] = static_cast<int32_t>(s.frontier.size());
    step[k * 4 + 0] = static_cast<float>(s.phase);
    step[k * 4 + 1] = s.beam;
    step[k * 4 + 2] = s.cutoff;
    step[k * 4 + 3] = static_cast<float>(s.before_closure);
    for (size_t i = 0; i < s.frontier.size(); ++i) {
      st[k * cap + i] = s.frontier[i].state;
      sc[k * cap + i] = s.frontier[i].score;
      ar[k * cap + i] = s.arcs[i];
    }
  }
}

// One row's per-step search sizes, for memory accounting (benchmarks/pool_accounting.py):
// out[k] = {frontier the step expanded, arcs it offered (slots: every arc of the step's
// phase out of that frontier), the frontier it built (distinct admitted destinations, i.e.
// the step's claims; after the closure on epsilon graphs), arcs admitted (end > cutoff),
// arcs admissible against L - beam (L: the end of the best arc of the best-scoring token
// with arcs, the GPU scan's lower bound of the max; what the pooled MaxKernel counts)} for
// the length + 1 steps; with 8 columns also {slots of the tokens whose upper bound
// fl(score + fl(max_lp + max emitting weight)) passes L - beam, slots of those whose bound passes
// the cutoff, the "bins" bound (cuwfst/pool_bins.h: what CUWFST_POOL_BOUND=bins hands out
// by)}; the last three are the step's slots on the final step (its bound is 1 anyway).
class SizeObserver : public cuwfst::reference::StepObserver {
 public:
  SizeObserver(const GraphView& g, const std::vector<float>& emit_maxw, int64_t* out, int64_t cols)
      : g_(g), emit_maxw_(emit_maxw), out_(out), cols_(cols) {}
  // the frontier a step expands and its log-prob row (nullptr: the final step)
  void SetFrontier(const std::vector<cuwfst::reference::Token>& f, const float* row = nullptr) {
    frontier_ = f;
    row_ = row;
  }
  void OnArc(int32_t src, int32_t, int32_t arc, float acoustic) override {
    const cuwfst::reference::Token& tok = frontier_[src];
    src_.push_back(src);
    // the search's order, score + (acoustic + weight); acoustic is 0 off real steps
    end_.push_back(tok.score + (acoustic + g_.weight[arc & ~cuwfst::reference::kRedirectArcBit]));
  }
  void OnStepEnd(const std::vector<cuwfst::reference::Token>& frontier, float cutoff) override {
    float mx = -INFINITY;
    if (k_ >= 0) {  // k_ = -1: the start closure
      int64_t* o = out_ + k_ * cols_;
      o[0] = prev_;
      o[1] = static_cast<int64_t>(end_.size());
      o[2] = static_cast<int64_t>(frontier.size());
      int32_t best = -1;
      for (size_t i = 0; i < end_.size(); ++i) {
        mx = std::max(mx, end_[i]);
        const int32_t t = src_[i];
        if (best < 0 || frontier_[t].score > frontier_[best].score ||
            (frontier_[t].score == frontier_[best].score && t > best))
          best = t;
      }
      float L = -INFINITY;
      for (size_t i = 0; i < end_.size(); ++i)
        if (src_[i] == best) L = std::max(L, end_[i]);
      const float beam = mx - cutoff;
      const float low = L - beam;
      int64_t admitted = 0, admissible = 0;
      for (float e : end_) {
        admitted += e > cutoff;
        admissible += e > low;
      }
      o[3] = admitted;
      o[4] = admissible;
      if (cols_ >= 8) {
        int64_t tok_low = 0, tok_cut = 0, bins = 0;
        if (row_ == nullptr) {
          tok_low = tok_cut = bins = o[1];
        } else {
          // the GPU's arithmetic: tok_ub = score + (max_lp + emit_maxw) (ScanKernel), the
          // walkers' test tok_ub > x, max_lp the max of the row's vocab_size columns
          float max_lp = -INFINITY;
          for (int32_t v = 0; v < g_.vocab_size; ++v) max_lp = std::max(max_lp, row_[v]);
          deg_.assign(frontier_.size(), 0);
          for (int32_t t : src_) ++deg_[t];
          const int32_t first = cuwfst::PoolFirstBin(cutoff, ref_);
          for (size_t t = 0; t < frontier_.size(); ++t) {
            if (deg_[t] == 0) continue;
            const float ub = frontier_[t].score + (max_lp + emit_maxw_[frontier_[t].state]);
            tok_low += ub > low ? deg_[t] : 0;
            tok_cut += ub > cutoff ? deg_[t] : 0;
            bins += cuwfst::PoolBinOf(ub, ref_) >= first ? deg_[t] : 0;
          }
        }
        o[5] = tok_low;
        o[6] = tok_cut;
        o[7] = bins;
      }
      ref_ = mx;  // the GPU's bin reference for the next step: this step's exact max
    }
    prev_ = static_cast<int64_t>(frontier.size());
    src_.clear();
    end_.clear();
    ++k_;
  }

 private:
  const GraphView& g_;
  const std::vector<float>& emit_maxw_;
  int64_t* out_;
  int64_t cols_;
  const float* row_ = nullptr;
  std::vector<cuwfst::reference::Token> frontier_;
  std::vector<int32_t> src_;
  std::vector<float> end_;
  std::vector<int64_t> deg_;
  int64_t k_ = -1, prev_ = 1;
  float ref_ = 0.f;  // the start token's score (LaneSetupKernel's max_ord)
};

void RefDecodeStepSizes(int64_t graph_h, TensorView log_probs, int64_t length, double search_beam,
                        double output_beam, int64_t min_active, int64_t max_active, bool allow_partial,
                        int64_t eps_iterations, TensorView out) {
  RefGraph* rg = GetGraph(graph_h);
  const GraphView& g = rg->view;
  Options opt = MakeOptions(search_beam, output_beam, min_active, max_active, allow_partial,
                            eps_iterations, false);
  if (log_probs.ndim() != 2) TVM_FFI_THROW(ValueError) << "log_probs must be [T, V]";
  const int64_t T = log_probs.shape()[0], V = log_probs.shape()[1];
  CheckHostTensor(log_probs, "log_probs", kDLFloat, 32, {T, V});
  if (V < g.vocab_size) TVM_FFI_THROW(ValueError) << "log_probs narrower than vocab_size";
  if (length < 0 || length > T) TVM_FFI_THROW(ValueError) << "length outside [0, T]";
  if (out.ndim() != 2 || (out.shape()[1] != 5 && out.shape()[1] != 8))
    TVM_FFI_THROW(ValueError) << "out must be [length + 1, 5] or [length + 1, 8]";
  const int64_t cols = out.shape()[1];
  CheckHostTensor(out, "out", kDLInt, 64, {length + 1, cols});
  std::vector<int32_t> slot(g.num_states, -1);
  static const std::vector<float> kNone;
  SizeObserver obs(g, cols >= 8 ? rg->EmitMaxw() : kNone, static_cast<int64_t*>(out.data_ptr()), cols);
  cuwfst::reference::RowSearch search(g, opt, &slot, nullptr, &obs);
  // (the constructor reports the start and its closure: k = -1)
  const float* lp = static_cast<const float*>(log_probs.data_ptr());
  for (int32_t t = 0; t < length; ++t) {
    const float* row = lp + static_cast<int64_t>(t) * V;
    obs.SetFrontier(search.frontier(), row);
    search.Step(row, static_cast<int32_t>(length) + 1);
  }
  obs.SetFrontier(search.frontier());
  search.Final();
}

// ---------------------------------------------------------------- streams
// One stream = one RowSearch in online beam mode, fed chunk by chunk; the graph handle
// must outlive it (the Python StreamingDecoder keeps the graph alive).
struct RefStream {
  std::vector<int32_t> slot;
  std::unique_ptr<cuwfst::reference::RowSearch> search;
};
std::atomic<int64_t> g_live_streams{0};  // RefStreams alive (a leak test reads it)

RefStream* GetStream(int64_t h) {
  if (h == 0) TVM_FFI_THROW(ValueError) << "null stream handle";
  return reinterpret_cast<RefStream*>(h);
}

int64_t RefStreamCreate(int64_t graph_h, double search_beam, double output_beam, int64_t min_active,
                        int64_t max_active, bool allow_partial, int64_t eps_iterations) {
  const GraphView& g = GetGraph(graph_h)->view;
  Options opt = MakeOptions(search_beam, output_beam, min_active, max_active, allow_partial,
                            eps_iterations, /*online=*/true);
  auto st = std::make_unique<RefStream>();
  st->slot.assign(g.num_states, -1);
  st->search = std::make_unique<cuwfst::reference::RowSearch>(g, opt, &st->slot, nullptr);
  ++g_live_streams;
  return reinterpret_cast<int64_t>(st.release());
}

void RefStreamFree(int64_t h) {
  delete GetStream(h);
  --g_live_streams;
}

int64_t RefStreamsLive() { return g_live_streams.load(); }

// Advances streams[i] by lengths[i] frames of log_probs[i] ([S, Tc, V] f32), threads over
// the streams; with `compact`, each stream then moves its committed prefix out of its
// winners log (RowSearch::Compact), so its memory does not grow with its length.
void RefStreamsAdvance(TensorView streams, TensorView log_probs, TensorView lengths, int64_t num_threads,
                       bool compact) {
  if (streams.ndim() != 1) TVM_FFI_THROW(ValueError) << "streams must be 1-D";
  const int64_t S = streams.shape()[0];
  CheckHostTensor(streams, "streams", kDLInt, 64, {S});
  if (log_probs.ndim() != 3) TVM_FFI_THROW(ValueError) << "log_probs must be [S, Tc, V]";
  const int64_t Tc = log_probs.shape()[1], V = log_probs.shape()[2];
  CheckHostTensor(log_probs, "log_probs", kDLFloat, 32, {S, Tc, V});
  CheckHostTensor(lengths, "lengths", kDLInt, 32, {S});
  const int64_t* hs = static_cast<const int64_t*>(streams.data_ptr());
  const int32_t* len = static_cast<const int32_t*>(lengths.data_ptr());
  for (int64_t i = 0; i < S; ++i) {
    RefStream* st = GetStream(hs[i]);
    if (st->search->finished()) TVM_FFI_THROW(ValueError) << "stream " << i << " is already finalized";
    if (len[i] < 0 || len[i] > Tc) TVM_FFI_THROW(ValueError) << "lengths[" << i << "] outside [0, " << Tc << "]";
    if (V < st->search->vocab_size())
      TVM_FFI_THROW(ValueError) << "log_probs has " << V << " columns, the graph's vocab_size is "
                                << st->search->vocab_size();
    for (int64_t j = 0; j < i; ++j)
      if (hs[j] == hs[i]) TVM_FFI_THROW(ValueError) << "a stream appears twice in one advance";
  }
  const float* lp = static_cast<const float*>(log_probs.data_ptr());
  ForEachRow(0, S, num_threads, [&](std::vector<int32_t>*, int64_t i) {  // a stream has its own slot
    RefStream* st = GetStream(hs[i]);
    for (int32_t t = 0; t < len[i]; ++t)
      st->search->Step(lp + (i * Tc + t) * V, cuwfst::reference::RowSearch::kUnknownLength);
    if (compact) st->search->Compact();
  });
}

// The best path so far: out_arcs [cap] i32, out_info [4] i32 = {path length (true), committed
// arcs, frames, ok (0: empty frontier)}, out_score [1] f32.
void RefStreamPartial(int64_t h, TensorView out_arcs, TensorView out_info, TensorView out_score) {
  RefStream* st = GetStream(h);
  if (out_arcs.ndim() != 1) TVM_FFI_THROW(ValueError) << "out_arcs must be 1-D";
  const int64_t cap = out_arcs.shape()[0];
  CheckHostTensor(out_arcs, "out_arcs", kDLInt, 32, {cap});
  CheckHostTensor(out_info, "out_info", kDLInt, 32, {4});
  CheckHostTensor(out_score, "out_score", kDLFloat, 32, {1});
  std::vector<int32_t> arcs;
  int32_t committed = 0;
  float score = -INFINITY;
  bool ok = !st->search->finished() && st->search->Partial(&arcs, &committed, &score);
  int32_t* info = static_cast<int32_t*>(out_info.data_ptr());
  info[0] = static_cast<int32_t>(arcs.size());
  info[1] = committed;
  info[2] = st->search->frames();
  info[3] = ok;
  static_cast<float*>(out_score.data_ptr())[0] = score;
  int64_t n = std::min<int64_t>(cap, arcs.size());
  if (n > 0) std::memcpy(out_arcs.data_ptr(), arcs.data(), n * sizeof(int32_t));
}

// The final step (k2's rules, T = the frames fed) and the result, laid out as one row of
// ref_decode's outputs (out_arcs [1, cap], out_len [1], out_score [1], out_meta [1, 4],
// out_stats [1, 2]).
void RefStreamFinalize(int64_t h, TensorView out_arcs, TensorView out_len, TensorView out_score,
                       TensorView out_meta, TensorView out_stats) {
  RefStream* st = GetStream(h);
  if (st->search->finished()) TVM_FFI_THROW(ValueError) << "the stream is already finalized";
  const RowOutputs out = CheckOutputs(1, out_arcs, out_len, out_score, out_meta, out_stats);
  st->search->Final();
  out.Write(0, st->search->Result());
}

// out [2] i64 = {frames, winners-log entries held} (memory: the log is the only part that
// grows with the stream's length unless Compact() runs).
void RefStreamStats(int64_t h, TensorView out) {
  CheckHostTensor(out, "out", kDLInt, 64, {2});
  RefStream* st = GetStream(h);
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  o[0] = st->search->frames();
  o[1] = static_cast<int64_t>(st->search->winners_size());
}

// ---------------------------------------------------------------- lattices
// The lattices of one decoded batch, held until the caller has copied them out.
struct RefLattices {
  std::vector<cuwfst::reference::RowLattice> rows;
};

RefLattices* GetLattices(int64_t h) {
  if (h == 0) TVM_FFI_THROW(ValueError) << "null lattice handle";
  return reinterpret_cast<RefLattices*>(h);
}

// ref_decode plus each row's pruned lattice (reference_lattice.h). The outputs of
// ref_decode, and out_lat_size [B, 3] i64 = {states, arcs, arcs recorded before pruning}.
// Returns a handle to the lattices: read them with ref_lattice_row, free with
// ref_lattice_free.
int64_t RefDecodeLattice(int64_t graph_h, TensorView log_probs, TensorView lengths, double search_beam,
                         double output_beam, int64_t min_active, int64_t max_active, bool allow_partial,
                         int64_t eps_iterations, bool online, int64_t num_threads, TensorView out_arcs,
                         TensorView out_len, TensorView out_score, TensorView out_meta, TensorView out_stats,
                         TensorView out_lat_size) {
  const GraphView& g = GetGraph(graph_h)->view;
  Options opt = MakeOptions(search_beam, output_beam, min_active, max_active, allow_partial,
                            eps_iterations, online);
  const RowBatch in = CheckBatch(g, log_probs, lengths);
  const int64_t B = in.B;
  const RowOutputs out = CheckOutputs(B, out_arcs, out_len, out_score, out_meta, out_stats);
  CheckHostTensor(out_lat_size, "out_lat_size", kDLInt, 64, {B, 3});
  int64_t* lat_size = static_cast<int64_t*>(out_lat_size.data_ptr());

  auto lats = std::make_unique<RefLattices>();
  lats->rows.resize(B);
  std::vector<std::string> errors(B);
  ForEachRow(g.num_states, B, num_threads, [&](std::vector<int32_t>* slot, int64_t b) {
    cuwfst::reference::RowResult r;
    cuwfst::reference::RowLattice& lat = lats->rows[b];
    cuwfst::reference::DecodeRowLattice(g, in.lp + b * in.T * in.V, in.V, in.len[b], opt, slot, &r, &lat, &errors[b]);
    out.Write(b, r);
    lat_size[b * 3 + 0] = lat.num_states;
    lat_size[b * 3 + 1] = static_cast<int64_t>(lat.src.size());
    lat_size[b * 3 + 2] = lat.recorded_arcs;
  });
  for (int64_t b = 0; b < B; ++b)
    if (!errors[b].empty()) TVM_FFI_THROW(ValueError) << "row " << b << ": " << errors[b];
  return reinterpret_cast<int64_t>(lats.release());
}

// Row `row` of a lattice handle: out_states [3, S] i32 = {time, graph state (-1: k2's extra
// final state), topological level}; out_arcs [4, A] i32 = {src, dst, frame, image arc id
// (kRedirectArcBit set on allow_partial's redirected arcs)}; out_scores [3, A] f32 =
// {acoustic, graph, score}. S and A as ref_decode_lattice's out_lat_size reported.
void RefLatticeRow(int64_t h, int64_t row, TensorView out_states, TensorView out_arcs, TensorView out_scores) {
  RefLattices* lats = GetLattices(h);
  if (row < 0 || row >= static_cast<int64_t>(lats->rows.size()))
    TVM_FFI_THROW(ValueError) << "row " << row << " outside [0, " << lats->rows.size() << ")";
  const cuwfst::reference::RowLattice& lat = lats->rows[row];
  const int64_t S = lat.num_states, A = static_cast<int64_t>(lat.src.size());
  CheckHostTensor(out_states, "out_states", kDLInt, 32, {3, S});
  CheckHostTensor(out_arcs, "out_arcs", kDLInt, 32, {4, A});
  CheckHostTensor(out_scores, "out_scores", kDLFloat, 32, {3, A});
  int32_t* st = static_cast<int32_t*>(out_states.data_ptr());
  int32_t* ar = static_cast<int32_t*>(out_arcs.data_ptr());
  float* sc = static_cast<float*>(out_scores.data_ptr());
  auto put = [](auto* dst, const auto& v) {
    if (!v.empty()) std::memcpy(dst, v.data(), v.size() * sizeof(v[0]));
  };
  put(st, lat.state_time);
  put(st + S, lat.state_graph);
  put(st + 2 * S, lat.state_level);
  put(ar, lat.src);
  put(ar + A, lat.dst);
  put(ar + 2 * A, lat.frame);
  put(ar + 3 * A, lat.arc);
  put(sc, lat.acoustic);
  put(sc + A, lat.graph);
  put(sc + 2 * A, lat.score);
}

void RefLatticeFree(int64_t h) { delete GetLattices(h); }

// The CPU records filter's counts of a lattice handle's rows (reference_lattice.h,
// LatticeBuilder's records filter): out [B, 2] i64 = {arcs stored before the windows, 1 where
// the row was decoded again without the filter}.
void RefLatticeFilterStats(int64_t h, TensorView out) {
  RefLattices* lats = GetLattices(h);
  const int64_t B = static_cast<int64_t>(lats->rows.size());
  CheckHostTensor(out, "out", kDLInt, 64, {B, 2});
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  for (int64_t b = 0; b < B; ++b) {
    o[2 * b] = lats->rows[b].stored_arcs;
    o[2 * b + 1] = lats->rows[b].filter_redone ? 1 : 0;
  }
}

// ---------------------------------------------------------------- lattice records
// Lattices from a search that ran elsewhere (the GPU decoder), by the CPU's own search and
// builder (reference_lattice.h, LatticeFromRecords). lengths [B] i32; records [N, 3] i32 =
// {source state, image arc | redirect bit, acoustic bits}, row by row, each row step by
// step; counts [B, S] i32 (records of step t of row b; S >= max length + 1), cutoffs
// [B, S] f32, sizes [B, S] i32 (each step's frontier size after its closure). Outputs:
// out_lat_size [B, 3] i64 as ref_decode_lattice's, out_score [B] f32 (the replay's
// 1-best score, a check against the producer's). Returns a lattice handle (ref_lattice_row,
// ref_lattice_free). Rows whose `skip` [B] u8 is set get an empty lattice (their records
// are not trusted: an overflowed GPU row); every other inconsistency is an error.
// producer_a [B, S] f32 (or [0, 0]: none): where > 0 the producer filtered the step's records
// (RecordedRow::producer_a); out_redo [B] u8 = 1 where that filter broke its guard: the row got
// an empty lattice and needs unfiltered records. out_lat_size[b, 2] (recorded arcs) is -1 on a
// row the producer filtered (not known).
int64_t RefLatticesFromRecords(int64_t graph_h, TensorView lengths, TensorView records, TensorView counts,
                               TensorView cutoffs, TensorView sizes, TensorView skip, double search_beam,
                               double output_beam, int64_t min_active, int64_t max_active, bool allow_partial,
                               int64_t eps_iterations, int64_t num_threads, TensorView out_lat_size,
                               TensorView out_score, TensorView producer_a, TensorView out_redo) {
  const GraphView& g = GetGraph(graph_h)->view;
  Options opt = MakeOptions(search_beam, output_beam, min_active, max_active, allow_partial,
                            eps_iterations, false);
  if (lengths.ndim() != 1 || counts.ndim() != 2 || records.ndim() != 2)
    TVM_FFI_THROW(ValueError) << "lengths must be [B], counts [B, S], records [N, 3]";
  const int64_t B = lengths.shape()[0], S = counts.shape()[1], N = records.shape()[0];
  CheckHostTensor(lengths, "lengths", kDLInt, 32, {B});
  CheckHostTensor(records, "records", kDLInt, 32, {N, cuwfst::reference::kRecordInts});
  CheckHostTensor(counts, "counts", kDLInt, 32, {B, S});
  CheckHostTensor(cutoffs, "cutoffs", kDLFloat, 32, {B, S});
  CheckHostTensor(sizes, "sizes", kDLInt, 32, {B, S});
  CheckHostTensor(skip, "skip", kDLUInt, 8, {B});
  CheckHostTensor(out_lat_size, "out_lat_size", kDLInt, 64, {B, 3});
  CheckHostTensor(out_score, "out_score", kDLFloat, 32, {B});
  CheckHostTensor(out_redo, "out_redo", kDLUInt, 8, {B});
  const bool have_pa = producer_a.ndim() == 2 && producer_a.shape()[0] != 0;
  if (have_pa) CheckHostTensor(producer_a, "producer_a", kDLFloat, 32, {B, S});
  else CheckHostTensor(producer_a, "producer_a", kDLFloat, 32, {0, 0});
  const float* pa = have_pa ? static_cast<const float*>(producer_a.data_ptr()) : nullptr;
  uint8_t* redo = static_cast<uint8_t*>(out_redo.data_ptr());
  const int32_t* len = static_cast<const int32_t*>(lengths.data_ptr());
  const int32_t* cnt = static_cast<const int32_t*>(counts.data_ptr());
  // each row's first record: the counts must add up to the records given
  std::vector<int64_t> first(B + 1, 0);
  for (int64_t b = 0; b < B; ++b) {
    if (len[b] < 0 || len[b] + 1 > S) TVM_FFI_THROW(ValueError) << "lengths[" << b << "] outside [0, " << S - 1 << "]";
    int64_t n = 0;
    for (int64_t t = 0; t <= len[b]; ++t) {
      if (cnt[b * S + t] < 0) TVM_FFI_THROW(ValueError) << "negative record count";
      n += cnt[b * S + t];
    }
    first[b + 1] = first[b] + n;
  }
  if (first[B] != N) TVM_FFI_THROW(ValueError) << "the counts add up to " << first[B] << " records, not " << N;
  const int32_t* rec = static_cast<const int32_t*>(records.data_ptr());
  const float* cut = static_cast<const float*>(cutoffs.data_ptr());
  const int32_t* sz = static_cast<const int32_t*>(sizes.data_ptr());
  const uint8_t* sk = static_cast<const uint8_t*>(skip.data_ptr());
  int64_t* lat_size = static_cast<int64_t*>(out_lat_size.data_ptr());
  float* score = static_cast<float*>(out_score.data_ptr());
  auto lats = std::make_unique<RefLattices>();
  lats->rows.resize(B);
  std::vector<std::string> errors(B);
  ForEachRow(2 * static_cast<int64_t>(g.num_states), B, num_threads, [&](std::vector<int32_t>* scratch, int64_t b) {
    cuwfst::reference::RowLattice& lat = lats->rows[b];
    score[b] = -INFINITY;
    if (!sk[b]) {
      cuwfst::reference::RecordedRow row;
      row.length = len[b];
      row.records = rec + first[b] * cuwfst::reference::kRecordInts;
      row.counts = cnt + b * S;
      row.cutoffs = cut + b * S;
      row.sizes = sz + b * S;
      row.producer_a = pa != nullptr ? pa + b * S : nullptr;
      cuwfst::reference::RowResult r;
      if (cuwfst::reference::LatticeFromRecords(g, opt, row, scratch, &r, &lat, &errors[b]) && !lat.producer_redo)
        score[b] = r.score;
    }
    redo[b] = lat.producer_redo ? 1 : 0;
    lat_size[b * 3 + 0] = lat.num_states;
    lat_size[b * 3 + 1] = static_cast<int64_t>(lat.src.size());
    lat_size[b * 3 + 2] = lat.recorded_arcs;
  });
  for (int64_t b = 0; b < B; ++b)
    if (!errors[b].empty()) TVM_FFI_THROW(RuntimeError) << "row " << b << ": " << errors[b];
  return reinterpret_cast<int64_t>(lats.release());
}

// The records the GPU decoder makes, made by the CPU search (RecordingObserver): the
// producer half of tests/test_lattice_records.py. out_counts [B, S] i32, out_cutoffs
// [B, S] f32, out_sizes [B, S] i32 (S >= T + 1); returns a handle whose records
// ref_records_take copies out ([N, 3] i32, N from out_total [1] i64) and ref_records_free frees.
// filter: the CPU twin of the GPU's records filter on epsilon graphs (RecordingObserver), its
// offset plus filter_pad; out_producer_a [B, S] f32 gets each step's assumed magnitude (0: the
// step was not filtered).
struct RefRecords {
  std::vector<int32_t> records;
  std::vector<int32_t> frontiers;    // every row's RecordingObserver::frontiers, row by row
  std::vector<int32_t> start_sizes;  // [B]
  int64_t trim_guards = 0;           // rows recorded again without the trim (its guard)
  int64_t trimmed = 0;               // arcs into surviving states the trim left out (kept rows)
  int64_t trim_walked = 0, trim_kept = 0, trim_best = 0;  // the trimmed steps' walked arcs, those at or
                                                          // above the low and those at or above the cutoff
  int64_t trim_bound_low = 0, trim_bound_cut = 0;          // a sorted walk's reads to the low, to the cutoff
  int64_t trim_label_low = 0, trim_label_cut = 0;          // a walk by labels' lookups to the low, the cutoff
  int64_t trim_sbound_low = 0, trim_sbound_cut = 0;        // a sorted walk by the state's own bound
  int64_t trim_top3_low = 0, trim_top3_cut = 0;            // ... by the row's top-3 labels' bound
  int64_t pass_row = 0, pass_lb = 0;                       // the records pass's reads, modelled
  int64_t pass_small_tokens = 0, pass_small_arcs = 0;      // its one-round tokens and their arcs
};

int64_t RefDecodeRecords(int64_t graph_h, TensorView log_probs, TensorView lengths, double search_beam,
                         double output_beam, int64_t min_active, int64_t max_active, bool allow_partial,
                         int64_t eps_iterations, bool online, int64_t num_threads, TensorView out_counts,
                         TensorView out_cutoffs, TensorView out_sizes, TensorView out_total, int64_t filter,
                         double filter_pad, TensorView out_producer_a) {
  // filter: 0 none, 1 the records' filter on epsilon graphs (RecordingObserver), 2 that and the
  // twin of the GPU's lattice trim on epsilon graphs (a row whose trim guard fires is recorded
  // again without the trim, as the GPU decodes the batch again)
  if (filter < 0 || filter > 2) TVM_FFI_THROW(ValueError) << "filter must be 0, 1 or 2";
  const GraphView& g = GetGraph(graph_h)->view;
  Options opt = MakeOptions(search_beam, output_beam, min_active, max_active, allow_partial,
                            eps_iterations, online);
  const RowBatch in = CheckBatch(g, log_probs, lengths);
  if (out_counts.ndim() != 2) TVM_FFI_THROW(ValueError) << "out_counts must be [B, S]";
  const int64_t S = out_counts.shape()[1];
  if (S < in.T + 1) TVM_FFI_THROW(ValueError) << "out_counts needs T + 1 columns";
  CheckHostTensor(out_counts, "out_counts", kDLInt, 32, {in.B, S});
  CheckHostTensor(out_cutoffs, "out_cutoffs", kDLFloat, 32, {in.B, S});
  CheckHostTensor(out_sizes, "out_sizes", kDLInt, 32, {in.B, S});
  CheckHostTensor(out_total, "out_total", kDLInt, 64, {1});
  CheckHostTensor(out_producer_a, "out_producer_a", kDLFloat, 32, {in.B, S});
  std::vector<std::unique_ptr<cuwfst::reference::RecordingObserver>> rows(in.B);
  std::vector<uint8_t> redone(in.B, 0);
  ForEachRow(g.num_states, in.B, num_threads, [&](std::vector<int32_t>* slot, int64_t b) {
    for (bool trim = filter == 2;; trim = false) {
      rows[b] = std::make_unique<cuwfst::reference::RecordingObserver>(
          g, slot, filter != 0, static_cast<float>(output_beam), static_cast<int32_t>(eps_iterations),
          static_cast<float>(filter_pad), trim);
      cuwfst::reference::DecodeRowRecords(g, in.lp + b * in.T * in.V, in.V, in.len[b], opt, slot, rows[b].get());
      if (!rows[b]->trim_guard) break;
      redone[b] = 1;
    }
  });
  auto out = std::make_unique<RefRecords>();
  for (int64_t b = 0; b < in.B; ++b) {
    out->trim_guards += redone[b];
    out->trimmed += rows[b]->trimmed;
    out->trim_walked += rows[b]->trim_walked;
    out->trim_kept += rows[b]->trim_kept;
    out->trim_best += rows[b]->trim_best;
    out->trim_bound_low += rows[b]->trim_bound_low;
    out->trim_bound_cut += rows[b]->trim_bound_cut;
    out->trim_label_low += rows[b]->trim_label_low;
    out->trim_label_cut += rows[b]->trim_label_cut;
    out->trim_sbound_low += rows[b]->trim_sbound_low;
    out->trim_sbound_cut += rows[b]->trim_sbound_cut;
    out->trim_top3_low += rows[b]->trim_top3_low;
    out->trim_top3_cut += rows[b]->trim_top3_cut;
    out->pass_row += rows[b]->pass_row;
    out->pass_lb += rows[b]->pass_lb;
    out->pass_small_tokens += rows[b]->pass_small_tokens;
    out->pass_small_arcs += rows[b]->pass_small_arcs;
  }
  int32_t* cnt = static_cast<int32_t*>(out_counts.data_ptr());
  float* cut = static_cast<float*>(out_cutoffs.data_ptr());
  int32_t* sz = static_cast<int32_t*>(out_sizes.data_ptr());
  float* pa = static_cast<float*>(out_producer_a.data_ptr());
  for (int64_t b = 0; b < in.B; ++b) {
    const auto& r = *rows[b];
    for (size_t t = 0; t < r.counts.size(); ++t) {
      cnt[b * S + t] = r.counts[t];
      cut[b * S + t] = r.cutoffs[t];
      sz[b * S + t] = r.sizes[t];
      pa[b * S + t] = r.producer_a[t];
    }
    out->records.insert(out->records.end(), r.records.begin(), r.records.end());
    out->frontiers.insert(out->frontiers.end(), r.frontiers.begin(), r.frontiers.end());
    out->start_sizes.push_back(r.start_size);
  }
  static_cast<int64_t*>(out_total.data_ptr())[0] =
      static_cast<int64_t>(out->records.size()) / cuwfst::reference::kRecordInts;
  return reinterpret_cast<int64_t>(out.release());
}

// The trim's twin (ref_decode_records with filter 2): out i64[5] gets the rows its guard
// recorded again without the trim, the arcs into surviving states it left out, the arcs the
// search walked on the trimmed steps, those of them at or above the trim's low, those at or
// above the step's cutoff, and what a walk of each token's sorted arcs by their bound reads to
// the low and to the cutoff (RecordingObserver::trim_bound_low, trim_bound_cut), and a walk by
// the row's labels' lookups to the low and to the cutoff (trim_label_low, trim_label_cut), and a
// sorted walk by the state's own best log-prob (trim_sbound_low, trim_sbound_cut) and by the row's
// top-3 labels' bound (trim_top3_low, trim_top3_cut), and the records pass's reads modelled with
// the row's bound and with the label bound (pass_row, pass_lb), in rounds of 32 arcs, and its
// one-round tokens and their arcs (pass_small_tokens, pass_small_arcs).
void RefRecordsTrimStats(int64_t h, TensorView out) {
  if (h == 0) TVM_FFI_THROW(ValueError) << "null records handle";
  CheckHostTensor(out, "out", kDLInt, 64, {17});
  const RefRecords* r = reinterpret_cast<const RefRecords*>(h);
  int64_t* o = static_cast<int64_t*>(out.data_ptr());
  o[0] = r->trim_guards;
  o[1] = r->trimmed;
  o[2] = r->trim_walked;
  o[3] = r->trim_kept;
  o[4] = r->trim_best;
  o[5] = r->trim_bound_low;
  o[6] = r->trim_bound_cut;
  o[7] = r->trim_label_low;
  o[8] = r->trim_label_cut;
  o[9] = r->trim_sbound_low;
  o[10] = r->trim_sbound_cut;
  o[11] = r->trim_top3_low;
  o[12] = r->trim_top3_cut;
  o[13] = r->pass_row;
  o[14] = r->pass_lb;
  o[15] = r->pass_small_tokens;
  o[16] = r->pass_small_arcs;
}

void RefRecordsTake(int64_t h, TensorView out_records) {
  if (h == 0) TVM_FFI_THROW(ValueError) << "null records handle";
  const RefRecords* r = reinterpret_cast<const RefRecords*>(h);
  const int64_t N = static_cast<int64_t>(r->records.size()) / cuwfst::reference::kRecordInts;
  CheckHostTensor(out_records, "out_records", kDLInt, 32, {N, cuwfst::reference::kRecordInts});
  if (N) std::memcpy(out_records.data_ptr(), r->records.data(), r->records.size() * sizeof(int32_t));
}

// The rows' frontiers (RecordingObserver::frontiers): out_start_sizes [B] i32 gets each row's
// |S_0|; returns how many states ref_records_frontiers_take copies out (S_0 then S_1 ..
// S_{n+1} of each row in turn, the later sizes being the records' out_sizes).
int64_t RefRecordsFrontierCount(int64_t h, TensorView out_start_sizes) {
  if (h == 0) TVM_FFI_THROW(ValueError) << "null records handle";
  const RefRecords* r = reinterpret_cast<const RefRecords*>(h);
  const int64_t B = static_cast<int64_t>(r->start_sizes.size());
  CheckHostTensor(out_start_sizes, "out_start_sizes", kDLInt, 32, {B});
  std::copy(r->start_sizes.begin(), r->start_sizes.end(), static_cast<int32_t*>(out_start_sizes.data_ptr()));
  return static_cast<int64_t>(r->frontiers.size());
}

void RefRecordsFrontiersTake(int64_t h, TensorView out_states) {
  if (h == 0) TVM_FFI_THROW(ValueError) << "null records handle";
  const RefRecords* r = reinterpret_cast<const RefRecords*>(h);
  CheckHostTensor(out_states, "out_states", kDLInt, 32, {static_cast<int64_t>(r->frontiers.size())});
  std::copy(r->frontiers.begin(), r->frontiers.end(), static_cast<int32_t*>(out_states.data_ptr()));
}

void RefRecordsFree(int64_t h) { delete reinterpret_cast<RefRecords*>(h); }

// ---------------------------------------------------------------- lattice posteriors
// A lattice's eight arrays (src, dst, score, frame, word_splits, word_ids, state_frame,
// state_level; i32, f32 scores) as a LatticeView of S states, checked: dtypes and sizes,
// word_splits running from 0 to len(word_ids) without decreasing, every arc's states in
// [0, S). `lattice` >= 0 names the lattice in the errors (RefLatticesWordRests' batch).
// The errors' prefix naming lattice `lattice` of a batch (none for -1).
static std::string LatticeAt(int64_t lattice) {
  return lattice >= 0 ? "lattice " + std::to_string(lattice) + ": " : "";
}

// A lattice's arcs' shapes and dtypes checked: the view's arc fields (not yet their values:
// ArcValuesError); `at` prefixes the errors.
static cuwfst::reference::LatticeView ShapedArcs(TensorView src, TensorView dst, TensorView score,
                                                 TensorView word_splits, TensorView word_ids, int64_t S,
                                                 const std::string& at) {
  if (src.ndim() != 1 || word_ids.ndim() != 1) TVM_FFI_THROW(ValueError) << at << "src and word_ids must be 1-D";
  const int64_t A = src.shape()[0], W = word_ids.shape()[0];
  CheckHostTensor(src, "src", kDLInt, 32, {A});
  CheckHostTensor(dst, "dst", kDLInt, 32, {A});
  CheckHostTensor(score, "score", kDLFloat, 32, {A});
  CheckHostTensor(word_splits, "word_splits", kDLInt, 32, {A + 1});
  CheckHostTensor(word_ids, "word_ids", kDLInt, 32, {W});
  cuwfst::reference::LatticeView v{};
  v.num_states = S;
  v.num_arcs = A;
  v.num_words = W;
  v.src = static_cast<const int32_t*>(src.data_ptr());
  v.dst = static_cast<const int32_t*>(dst.data_ptr());
  v.score = static_cast<const float*>(score.data_ptr());
  v.word_splits = static_cast<const int32_t*>(word_splits.data_ptr());
  v.word_ids = static_cast<const int32_t*>(word_ids.data_ptr());
  return v;
}

// The arcs' values checked (word splits from 0 to W without decreasing, every arc's states in
// [0, S)): "" where they hold, else the error (prefixed by `at`). A pass over the arcs, so the
// batch call (RefLatticesWordRests) makes it on its worker threads.
static std::string ArcValuesError(const cuwfst::reference::LatticeView& v, const std::string& at) {
  const int32_t* ws = v.word_splits;
  const int64_t A = v.num_arcs, S = v.num_states;
  if (ws[0] != 0 || ws[A] != v.num_words) return at + "word_splits must run from 0 to len(word_ids)";
  for (int64_t i = 0; i < A; ++i) {
    if (ws[i + 1] < ws[i]) return at + "word_splits must not decrease";
    if (v.src[i] < 0 || v.src[i] >= S || v.dst[i] < 0 || v.dst[i] >= S)
      return at + "arc " + std::to_string(i) + ": a state outside [0, " + std::to_string(S) + ")";
  }
  return "";
}

// A lattice's arcs checked, shapes and values: the view's arc fields; `at` prefixes the errors.
static cuwfst::reference::LatticeView CheckedArcs(TensorView src, TensorView dst, TensorView score,
                                                  TensorView word_splits, TensorView word_ids, int64_t S,
                                                  const std::string& at) {
  const cuwfst::reference::LatticeView v = ShapedArcs(src, dst, score, word_splits, word_ids, S, at);
  const std::string err = ArcValuesError(v, at);
  if (!err.empty()) TVM_FFI_THROW(ValueError) << err;
  return v;
}

// A lattice's eight arrays as a LatticeView, their shapes and dtypes checked; with
// `values`, the arcs' values too (ArcValuesError). `lattice` >= 0 names the lattice in the
// errors (RefLatticesWordRests' batch).
static cuwfst::reference::LatticeView CheckedLatticeView(TensorView src, TensorView dst, TensorView score,
                                                         TensorView frame, TensorView word_splits, TensorView word_ids,
                                                         TensorView state_frame, TensorView state_level, int64_t S,
                                                         int64_t lattice, bool values = true) {
  const std::string at = LatticeAt(lattice);
  cuwfst::reference::LatticeView v = values ? CheckedArcs(src, dst, score, word_splits, word_ids, S, at)
                                            : ShapedArcs(src, dst, score, word_splits, word_ids, S, at);
  CheckHostTensor(frame, "frame", kDLInt, 32, {v.num_arcs});
  CheckHostTensor(state_frame, "state_frame", kDLInt, 32, {S});
  CheckHostTensor(state_level, "state_level", kDLInt, 32, {S});
  v.frame = static_cast<const int32_t*>(frame.data_ptr());
  v.state_frame = static_cast<const int32_t*>(state_frame.data_ptr());
  v.state_level = static_cast<const int32_t*>(state_level.data_ptr());
  return v;
}

// The outputs both calls share: alpha, beta [S] f64, spans [N, 3] i64, out_rest [N] f64,
// out_hit [N] i32 (N from spans).
static void CheckWordRestOutputs(int64_t S, TensorView alpha, TensorView beta, TensorView spans, TensorView out_rest,
                                 TensorView out_hit) {
  if (spans.ndim() != 2) TVM_FFI_THROW(ValueError) << "spans must be [N, 3]";
  const int64_t N = spans.shape()[0];
  CheckHostTensor(alpha, "alpha", kDLFloat, 64, {S});
  CheckHostTensor(beta, "beta", kDLFloat, 64, {S});
  CheckHostTensor(spans, "spans", kDLInt, 64, {N, 3});
  CheckHostTensor(out_rest, "out_rest", kDLFloat, 64, {N});
  CheckHostTensor(out_hit, "out_hit", kDLInt, 32, {N});
}

// cuwfst.Lattice's log-semiring forward/backward and word-confidence passes
// (lattice_posteriors.h): the lattice's arrays (i32, f32 scores), alpha/beta [S] f64
// (computed into them unless have_scores), spans [N, 3] i64, out_rest [N] f64, out_hit [N] i32.
void RefLatticeWordRests(TensorView src, TensorView dst, TensorView score, TensorView frame, TensorView word_splits,
                         TensorView word_ids, TensorView state_frame, TensorView state_level, bool have_scores,
                         TensorView alpha, TensorView beta, TensorView spans, TensorView out_rest, TensorView out_hit) {
  if (state_frame.ndim() != 1) TVM_FFI_THROW(ValueError) << "state_frame must be 1-D";
  const int64_t S = state_frame.shape()[0];
  CheckWordRestOutputs(S, alpha, beta, spans, out_rest, out_hit);
  const int64_t N = spans.shape()[0];
  const cuwfst::reference::LatticeView v =
      CheckedLatticeView(src, dst, score, frame, word_splits, word_ids, state_frame, state_level, S, -1);
  cuwfst::reference::LatticeWordRests(v, have_scores, static_cast<double*>(alpha.data_ptr()),
                                      static_cast<double*>(beta.data_ptr()), N,
                                      static_cast<const int64_t*>(spans.data_ptr()),
                                      static_cast<double*>(out_rest.data_ptr()), static_cast<int32_t*>(out_hit.data_ptr()));
}

// Lattice.nbest(n)'s search (LatticeNBest) for one lattice: src, dst [A] i32 (grouped by source
// state in increasing order), score [A] f32, word_splits [A + 1] i32, word_ids [W] i32, beta [S]
// f64 (the tropical backward scores), n >= 1. The k <= n sequences found go to out_scores [m]
// f64, out_splits [m + 1] i64 (from 0) and out_words [cap] i32 where they fit (k <= m, their words
// <= cap; m may be less than n); out_need [2] i64 = {k, their words} either way. Returns k, or -1
// when they did not fit (the caller calls again with out_need's room).
int64_t RefLatticeNBest(TensorView src, TensorView dst, TensorView score, TensorView word_splits, TensorView word_ids,
                        TensorView beta, int64_t n, TensorView out_scores, TensorView out_splits, TensorView out_words,
                        TensorView out_need) {
  if (beta.ndim() != 1 || out_words.ndim() != 1 || out_scores.ndim() != 1)
    TVM_FFI_THROW(ValueError) << "beta, out_scores and out_words must be 1-D";
  if (n < 1) TVM_FFI_THROW(ValueError) << "n must be >= 1, got " << n;
  const int64_t S = beta.shape()[0], m = out_scores.shape()[0];
  CheckHostTensor(beta, "beta", kDLFloat, 64, {S});
  CheckHostTensor(out_scores, "out_scores", kDLFloat, 64, {m});
  CheckHostTensor(out_splits, "out_splits", kDLInt, 64, {m + 1});
  CheckHostTensor(out_words, "out_words", kDLInt, 32, {out_words.shape()[0]});
  CheckHostTensor(out_need, "out_need", kDLInt, 64, {2});
  const cuwfst::reference::LatticeView v = CheckedArcs(src, dst, score, word_splits, word_ids, S, "");
  for (int64_t i = 0; i < v.num_arcs; ++i) {
    if (i && v.src[i] < v.src[i - 1])
      TVM_FFI_THROW(ValueError) << "the arcs must be grouped by source state in increasing order (arc " << i << ")";
    if (std::isnan(v.score[i])) TVM_FFI_THROW(ValueError) << "arc " << i << ": a NaN score";
  }
  const double* b = static_cast<const double*>(beta.data_ptr());
  for (int64_t i = 0; i < S; ++i)
    if (std::isnan(b[i])) TVM_FFI_THROW(ValueError) << "beta[" << i << "] is NaN";
  std::vector<int32_t> words;
  std::vector<int64_t> splits;
  std::vector<double> scores;
  try {
    cuwfst::reference::LatticeNBest(v, b, n, &words, &splits, &scores);
  } catch (const std::invalid_argument& e) {
    TVM_FFI_THROW(ValueError) << e.what();
  }
  const int64_t k = static_cast<int64_t>(scores.size());
  int64_t* need = static_cast<int64_t*>(out_need.data_ptr());
  need[0] = k;
  need[1] = static_cast<int64_t>(words.size());
  if (k > m || need[1] > out_words.shape()[0]) return -1;
  std::copy(scores.begin(), scores.end(), static_cast<double*>(out_scores.data_ptr()));
  std::copy(splits.begin(), splits.end(), static_cast<int64_t*>(out_splits.data_ptr()));
  std::copy(words.begin(), words.end(), static_cast<int32_t*>(out_words.data_ptr()));
  return k;
}

// Many lattices at once on num_threads threads (Lattice.word_confidences of each, with
// fresh scores). arrays: lattice l's own eight arrays at [8 l, 8 l + 8) (src, dst, score,
// frame, word_splits, word_ids, state_frame, state_level, as cuwfst.Lattice holds them: no
// concatenation, each checked here); state_off / span_off [L + 1] i64: lattice l's states and
// spans in the batch arrays alpha, beta [S] f64 and spans [N, 3] i64, out_rest [N] f64,
// out_hit [N] i32.
void RefLatticesWordRests(tvm::ffi::Array<tvm::ffi::Tensor> arrays, TensorView state_off, TensorView span_off,
                          TensorView alpha, TensorView beta, TensorView spans, TensorView out_rest, TensorView out_hit,
                          int64_t num_threads) {
  if (state_off.ndim() != 1) TVM_FFI_THROW(ValueError) << "state_off must be 1-D";
  const int64_t L = state_off.shape()[0] - 1;
  if (L < 0 || static_cast<int64_t>(arrays.size()) != 8 * L)
    TVM_FFI_THROW(ValueError) << "arrays must hold 8 arrays a lattice, state_off L + 1 entries";
  CheckHostTensor(state_off, "state_off", kDLInt, 64, {L + 1});
  CheckHostTensor(span_off, "span_off", kDLInt, 64, {L + 1});
  const int64_t* so = static_cast<const int64_t*>(state_off.data_ptr());
  const int64_t* po = static_cast<const int64_t*>(span_off.data_ptr());
  const int64_t S = alpha.ndim() == 1 ? alpha.shape()[0] : -1;
  CheckWordRestOutputs(S, alpha, beta, spans, out_rest, out_hit);
  const int64_t total[2] = {S, spans.shape()[0]};
  const int64_t* offs[2] = {so, po};
  for (int k = 0; k < 2; ++k) {
    if (offs[k][0] != 0 || offs[k][L] != total[k]) TVM_FFI_THROW(ValueError) << "offsets must run from 0 to the size";
    for (int64_t l = 0; l < L; ++l)
      if (offs[k][l + 1] < offs[k][l]) TVM_FFI_THROW(ValueError) << "offsets must not decrease";
  }
  std::vector<cuwfst::reference::LatticeView> views;
  views.reserve(L);
  for (int64_t l = 0; l < L; ++l)
    views.push_back(CheckedLatticeView(arrays[8 * l], arrays[8 * l + 1], arrays[8 * l + 2], arrays[8 * l + 3],
                                       arrays[8 * l + 4], arrays[8 * l + 5], arrays[8 * l + 6], arrays[8 * l + 7],
                                       so[l + 1] - so[l], l, /*values=*/false));
  double* al = static_cast<double*>(alpha.data_ptr());
  double* be = static_cast<double*>(beta.data_ptr());
  const int64_t* sp = static_cast<const int64_t*>(spans.data_ptr());
  double* rest = static_cast<double*>(out_rest.data_ptr());
  int32_t* hit = static_cast<int32_t*>(out_hit.data_ptr());
  // the largest lattices first, so that no thread is left with a large one at the end
  std::vector<int64_t> by_size(L);
  std::iota(by_size.begin(), by_size.end(), int64_t{0});
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](int64_t x, int64_t y) { return views[x].num_arcs > views[y].num_arcs; });
  // each lattice's arc values are checked on the thread that takes it (a pass over its arcs);
  // the first bad lattice by index is reported, as a check before the passes would
  std::vector<std::string> errors(L);
  ForEachRow(0, L, num_threads, [&](std::vector<int32_t>*, int64_t i) {
    const int64_t l = by_size[i];
    errors[l] = ArcValuesError(views[l], LatticeAt(l));
    if (!errors[l].empty()) return;
    cuwfst::reference::LatticeWordRests(views[l], false, al + so[l], be + so[l], po[l + 1] - po[l], sp + 3 * po[l],
                                        rest + po[l], hit + po[l]);
  });
  for (const std::string& e : errors)
    if (!e.empty()) TVM_FFI_THROW(ValueError) << e;
}


// ---------------------------------------------------------------- lattice assembly
// cuwfst.lattice_from_arrays' per-arc graph lookups for many lattices at once, on
// num_threads threads. codes [A] i32 (the lattices' arcs[3] concatenated: image arc id |
// kRedirectArcBit), arc_off [L + 1] i64; the graph's ilabel [E] i32 (any positive stride: the
// image keeps it interleaved with dest), aux_row_splits [E + 1] i32, arc_id [E] i32 or [0]
// (identity). Writes per arc graph_arc (source arc id, -1 on a redirect), redirect_arc (the
// source arc id on a redirect, else -1), token (ilabel, -1 on a redirect), lo (the arc's
// first word in aux_pool); word_splits [A + L] (lattice l's A_l + 1 from arc_off[l] + l,
// running from 0; no words on redirects) and word_count [L].
void RefLatticesArcs(TensorView arc_off, TensorView codes, TensorView ilabel, TensorView aux_row_splits,
                     TensorView arc_id, TensorView graph_arc, TensorView redirect_arc, TensorView token,
                     TensorView lo, TensorView word_splits, TensorView word_count, int64_t num_threads) {
  if (arc_off.ndim() != 1 || codes.ndim() != 1 || ilabel.ndim() != 1 || arc_id.ndim() != 1)
    TVM_FFI_THROW(ValueError) << "arc_off, codes, ilabel and arc_id must be 1-D";
  const int64_t L = arc_off.shape()[0] - 1, A = codes.shape()[0], E = ilabel.shape()[0];
  if (L < 0) TVM_FFI_THROW(ValueError) << "arc_off must have L + 1 entries";
  CheckHostTensor(arc_off, "arc_off", kDLInt, 64, {L + 1});
  CheckHostTensor(codes, "codes", kDLInt, 32, {A});
  if (ilabel.device().device_type != kDLCPU || !cuwfst::IsType(ilabel.dtype(), kDLInt, 32) ||
      (E > 1 && ilabel.strides()[0] < 1))
    TVM_FFI_THROW(ValueError) << "ilabel must be a CPU int32 vector with a positive stride";
  CheckHostTensor(aux_row_splits, "aux_row_splits", kDLInt, 32, {E + 1});
  const bool ids = arc_id.shape()[0] != 0;
  if (ids) CheckHostTensor(arc_id, "arc_id", kDLInt, 32, {E});
  CheckHostTensor(graph_arc, "graph_arc", kDLInt, 32, {A});
  CheckHostTensor(redirect_arc, "redirect_arc", kDLInt, 32, {A});
  CheckHostTensor(token, "token", kDLInt, 32, {A});
  CheckHostTensor(lo, "lo", kDLInt, 32, {A});
  CheckHostTensor(word_splits, "word_splits", kDLInt, 32, {A + L});
  CheckHostTensor(word_count, "word_count", kDLInt, 64, {L});
  const int64_t* ao = static_cast<const int64_t*>(arc_off.data_ptr());
  if (ao[0] != 0 || ao[L] != A) TVM_FFI_THROW(ValueError) << "arc_off must run from 0 to len(codes)";
  for (int64_t l = 0; l < L; ++l)
    if (ao[l + 1] < ao[l]) TVM_FFI_THROW(ValueError) << "arc_off must not decrease";
  const int32_t* cd = static_cast<const int32_t*>(codes.data_ptr());
  const int32_t* il = static_cast<const int32_t*>(ilabel.data_ptr());
  const int64_t il_stride = E > 1 ? ilabel.strides()[0] : 1;
  const int32_t* rs = static_cast<const int32_t*>(aux_row_splits.data_ptr());
  const int32_t* id = ids ? static_cast<const int32_t*>(arc_id.data_ptr()) : nullptr;
  int32_t* ga = static_cast<int32_t*>(graph_arc.data_ptr());
  int32_t* ra = static_cast<int32_t*>(redirect_arc.data_ptr());
  int32_t* tk = static_cast<int32_t*>(token.data_ptr());
  int32_t* lw = static_cast<int32_t*>(lo.data_ptr());
  int32_t* ws = static_cast<int32_t*>(word_splits.data_ptr());
  int64_t* wc = static_cast<int64_t*>(word_count.data_ptr());
  std::vector<int64_t> bad(L, -1);  // per lattice: an arc whose image id is outside [0, E)
  constexpr int64_t kAhead = 16;
  ForEachRow(0, L, num_threads, [&](std::vector<int32_t>*, int64_t l) {
    int32_t* w = ws + ao[l] + l;
    int64_t n = 0;
    w[0] = 0;
    const int64_t end = ao[l + 1];
    for (int64_t i = ao[l]; i < end; ++i) {
      if (i + kAhead < end) {  // the lookups are random reads of large arrays: ask for them early
        const int32_t f = cd[i + kAhead] & ~cuwfst::reference::kRedirectArcBit;
        if (f >= 0 && f < E) {
          __builtin_prefetch(il + f * il_stride);
          __builtin_prefetch(rs + f);
          if (id) __builtin_prefetch(id + f);
        }
      }
      const int32_t c = cd[i];
      const bool redirect = (c & cuwfst::reference::kRedirectArcBit) != 0;
      const int32_t img = c & ~cuwfst::reference::kRedirectArcBit;
      if (img < 0 || img >= E) {
        bad[l] = i;
        return;
      }
      const int32_t src = id ? id[img] : img;
      const int32_t b = rs[img];
      ga[i] = redirect ? -1 : src;
      ra[i] = redirect ? src : -1;
      tk[i] = redirect ? -1 : il[img * il_stride];
      lw[i] = b;
      n += redirect ? 0 : rs[img + 1] - b;
      w[i - ao[l] + 1] = static_cast<int32_t>(n);
    }
    wc[l] = n;
  });
  for (int64_t l = 0; l < L; ++l)
    if (bad[l] >= 0) TVM_FFI_THROW(IndexError) << "lattice " << l << ": arc code " << cd[bad[l]] << " names no graph arc";
}

// The word ids of RefLatticesArcs' lattices: word_ids [W] i32 (lattice l's from word_off[l]),
// aux_pool [P] i32; lo and word_splits as RefLatticesArcs wrote them.
void RefLatticesWordIds(TensorView arc_off, TensorView word_off, TensorView lo, TensorView word_splits,
                        TensorView aux_pool, TensorView word_ids, int64_t num_threads) {
  if (arc_off.ndim() != 1 || lo.ndim() != 1 || aux_pool.ndim() != 1 || word_ids.ndim() != 1)
    TVM_FFI_THROW(ValueError) << "arc_off, lo, aux_pool and word_ids must be 1-D";
  const int64_t L = arc_off.shape()[0] - 1, A = lo.shape()[0], P = aux_pool.shape()[0], W = word_ids.shape()[0];
  if (L < 0) TVM_FFI_THROW(ValueError) << "arc_off must have L + 1 entries";
  CheckHostTensor(arc_off, "arc_off", kDLInt, 64, {L + 1});
  CheckHostTensor(word_off, "word_off", kDLInt, 64, {L + 1});
  CheckHostTensor(lo, "lo", kDLInt, 32, {A});
  CheckHostTensor(word_splits, "word_splits", kDLInt, 32, {A + L});
  CheckHostTensor(aux_pool, "aux_pool", kDLInt, 32, {P});
  CheckHostTensor(word_ids, "word_ids", kDLInt, 32, {W});
  const int64_t* ao = static_cast<const int64_t*>(arc_off.data_ptr());
  const int64_t* wo = static_cast<const int64_t*>(word_off.data_ptr());
  if (ao[0] != 0 || ao[L] != A || wo[0] != 0 || wo[L] != W)
    TVM_FFI_THROW(ValueError) << "offsets must run from 0 to the size";
  const int32_t* lw = static_cast<const int32_t*>(lo.data_ptr());
  const int32_t* ws = static_cast<const int32_t*>(word_splits.data_ptr());
  for (int64_t l = 0; l < L; ++l) {
    if (ao[l + 1] < ao[l] || ws[ao[l + 1] + l] != wo[l + 1] - wo[l])
      TVM_FFI_THROW(ValueError) << "lattice " << l << ": word_splits must end at its word count";
  }
  const int32_t* pool = static_cast<const int32_t*>(aux_pool.data_ptr());
  int32_t* out = static_cast<int32_t*>(word_ids.data_ptr());
  std::vector<char> bad(L, 0);
  ForEachRow(0, L, num_threads, [&](std::vector<int32_t>*, int64_t l) {
    const int32_t* w = ws + ao[l] + l;
    int32_t* o = out + wo[l];
    for (int64_t k = 0; k < ao[l + 1] - ao[l]; ++k) {
      const int32_t n = w[k + 1] - w[k];
      if (n == 0) continue;
      const int64_t b = lw[ao[l] + k];
      if (n < 0 || b < 0 || b + n > P) {
        bad[l] = 1;
        return;
      }
      for (int32_t j = 0; j < n; ++j) o[w[k] + j] = pool[b + j];
    }
  });
  for (int64_t l = 0; l < L; ++l)
    if (bad[l]) TVM_FFI_THROW(IndexError) << "lattice " << l << ": a word range outside aux_pool";
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_graph_create, RefGraphCreate);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_graph_free, RefGraphFree);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_decode, RefDecode);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_decode_snapshots, RefDecodeSnapshots);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_decode_step_sizes, RefDecodeStepSizes);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_stream_create, RefStreamCreate);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_stream_free, RefStreamFree);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_streams_live, RefStreamsLive);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_streams_advance, RefStreamsAdvance);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_stream_partial, RefStreamPartial);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_stream_finalize, RefStreamFinalize);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_stream_stats, RefStreamStats);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_decode_lattice, RefDecodeLattice);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_lattice_row, RefLatticeRow);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_lattice_free, RefLatticeFree);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_lattice_filter_stats, RefLatticeFilterStats);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_lattices_from_records, RefLatticesFromRecords);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_decode_records, RefDecodeRecords);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_records_take, RefRecordsTake);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_records_trim_stats, RefRecordsTrimStats);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_records_free, RefRecordsFree);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_records_frontier_count, RefRecordsFrontierCount);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_records_frontiers_take, RefRecordsFrontiersTake);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_lattice_word_rests, RefLatticeWordRests);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_lattices_word_rests, RefLatticesWordRests);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_lattice_nbest, RefLatticeNBest);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_lattices_arcs, RefLatticesArcs);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(ref_lattices_word_ids, RefLatticesWordIds);
