// Schedules of reductions and matrix products (see tensor_schedule.h).
#include "schedules/tensor_schedule.h"

#include "schedules/loop_util.h"

#include <algorithm>
#include <optional>

namespace kiln::schedules {
namespace {

using Halide::TailStrategy;
using Halide::Var;

// Fuses every pure Var of `stage` but the innermost into one (the rows); returns it, or the
// innermost Var when there is one Var.
template <typename Stage>
Var fuse_rows(Stage stage, const std::vector<Var>& dims) {
  if (dims.size() == 1) return dims[0];
  return fuse_vars(stage, {dims.begin() + 1, dims.end()});
}

// Parallel over `rows` (`row_count` of them, `row_elements` elements each) in tasks of at
// least 16K elements, at most 64 tasks: one task per row would cost a thread-pool dispatch per
// few vectors of work.
template <typename Stage>
void parallel_rows(Stage stage, const Var& rows, int64_t row_count, int64_t row_elements) {
  const int64_t tasks =
      std::min({kMaxTasks, row_count, row_count * row_elements / kMinTaskElements});
  if (tasks < 2) return;
  stage.parallel(rows, static_cast<int>((row_count + tasks - 1) / tasks), TailStrategy::GuardWithIf);
}

std::vector<Var> pure_vars(const Halide::Func& f) {
  std::vector<Var> v;
  for (const Var& a : f.args()) v.push_back(a);
  return v;
}

}  // namespace

void sum_in_parallel_bands(Halide::Func p, int64_t outer_extent, const Halide::Target& target) {
  const int vw = target.natural_vector_size<float>();
  const std::vector<Var> dims = pure_vars(p);
  const std::vector<Halide::RVar> rv = p.rvars(0);  // innermost first
  // About 8 bands (2 threads get 4 each), each summed into a partial of its own with the
  // innermost dimension in vectors, then added up.
  constexpr int64_t kBands = 8;
  const int rows = static_cast<int>((outer_extent + kBands - 1) / kBands);
  Halide::RVar ro("band_o"), ri("band_i");
  Var band("band");
  Halide::Func banded =
      p.update().split(rv.back(), ro, ri, rows, TailStrategy::GuardWithIf).rfactor(ro, band);
  banded.compute_root().vectorize(dims[0], vw, TailStrategy::GuardWithIf);
  std::vector<Halide::VarOrRVar> order = {dims[0]};
  for (size_t i = 0; i + 1 < rv.size(); ++i) order.emplace_back(rv[i]);
  order.emplace_back(ri);
  for (size_t i = 1; i < dims.size(); ++i) order.emplace_back(dims[i]);
  order.emplace_back(band);
  banded.update().reorder(order).vectorize(dims[0], vw, TailStrategy::GuardWithIf).parallel(band);
  Halide::Stage(p).vectorize(dims[0], vw, TailStrategy::GuardWithIf);
  p.update().vectorize(dims[0], vw, TailStrategy::GuardWithIf);
}

void schedule_softmax_rows_cpu(const ElementwiseFuncs& out,
                               const std::vector<Halide::Func>& partials, Halide::Func exps,
                               const Halide::Target& target) {
  int vw = target.natural_vector_size<float>();
  while (vw > kMinSoftmaxRow && vw > out.extents[0]) vw /= 2;  // a short row: narrower vectors
  Halide::Func o = out.out;
  o.vectorize(out.dims[0], vw, TailStrategy::GuardWithIf);
  int64_t rows = 1;
  for (size_t d = 1; d < out.extents.size(); ++d) rows *= out.extents[d];
  Halide::LoopLevel at = Halide::LoopLevel::root();
  if (out.dims.size() > 1) {
    const Var row = fuse_rows(o, out.dims);
    const int64_t tasks = std::min({kMaxTasks, rows, rows * out.extents[0] / kMinTaskElements});
    Var task("task"), in_task("in_task");
    if (tasks >= 2) {
      o.split(row, task, in_task, static_cast<int>((rows + tasks - 1) / tasks),
              TailStrategy::GuardWithIf)
          .parallel(task);
      at = Halide::LoopLevel(o, in_task);
    } else {
      at = Halide::LoopLevel(o, row);
    }
  }
  for (Halide::Func p : partials) {
    p.compute_at(at);
    // Float max and addition reassociated across the lanes: a row in vw partial results.
    p.update().atomic().vectorize(p.rvars(0)[0], vw, TailStrategy::GuardWithIf);
  }
  if (exps.defined()) exps.compute_at(at).vectorize(exps.args()[0], vw, TailStrategy::GuardWithIf);
}

void schedule_reduction_cpu(const ElementwiseFuncs& out, const std::vector<Halide::Func>& partials,
                            bool vectorize_inner, const Halide::Target& target,
                            bool rows_in_vectors, int64_t lane_sum, int64_t band_sum) {
  schedule_elementwise_cpu(out, target);
  const int vw = target.natural_vector_size<float>();
  int64_t total = 1;
  for (int64_t e : out.extents) total *= e;
  for (Halide::Func p : partials) {
    p.compute_root();
    const std::vector<Var> dims = pure_vars(p);
    const std::vector<Halide::RVar> rv = p.rvars(0);  // innermost first
    if (band_sum >= 2 && !dims.empty() && !rv.empty()) {
      // As one serial loop, the L2 norm over 56 x 56 pixels of a 160-channel NHWC image
      // (ConvNeXt-V2's global response norm) took 0.095 ms on one thread.
      sum_in_parallel_bands(p, band_sum, target);
      continue;
    }
    if (lane_sum > 0 && !dims.empty()) {
      // A partial sum per lane: as one scalar loop per result, ResNeSt's mean over 56 x 56 of
      // 64 channels (NCHW) ran at 5 GB/s on one thread.
      Halide::RVar lane_of("lane_of"), in_lane("in_lane");
      Var lane("lane");
      Halide::Func lanes =
          p.update()
              .split(p.rvars(0)[0], lane_of, in_lane, vw, TailStrategy::GuardWithIf)
              .rfactor(in_lane, lane);
      lanes.compute_root().vectorize(lane);
      Halide::Stage s = lanes.update().vectorize(lane);
      if (dims.size() > 1) parallel_rows(s, fuse_rows(s, dims), total, lane_sum);
      continue;
    }
    if (dims.empty()) continue;  // a reduction to one scalar: one serial loop
    if (rows_in_vectors && dims.size() > 1 && out.extents.size() > 1 && out.extents[1] >= vw) {
      // One row per lane: the reduction's loads gather a row's element from vw rows (a few KB,
      // in L1) and its exps are vector exps. As one serial scalar loop (the innermost
      // dimension is 1 wide here), a MobileViT attention's Softmax over [4, 4, 64, 64] took
      // 0.50 ms, 19% of the model.
      const int64_t plane = out.extents[0] * out.extents[1];
      for (int stage = 0; stage < 2; ++stage) {
        Halide::Stage s = stage == 0 ? Halide::Stage(p) : p.update();
        s.vectorize(dims[1], vw, TailStrategy::GuardWithIf);
        if (dims.size() > 2)
          parallel_rows(s, dims.size() == 3 ? dims[2] : fuse_vars(s, {dims.begin() + 2, dims.end()}),
                        total / plane, plane);
      }
      continue;
    }
    // Both stages the same way: rows in parallel, the innermost dimension in vectors when it
    // is wide (a reduction over the innermost axis leaves it 1 wide). A partial is at most as
    // large as the output; its rows are counted as the output's, an upper bound.
    const bool wide = vectorize_inner && out.extents[0] >= vw;
    const int64_t inner = wide ? out.extents[0] : 1;
    for (int stage = 0; stage < 2; ++stage) {
      Halide::Stage s = stage == 0 ? Halide::Stage(p) : p.update();
      if (wide) s.vectorize(dims[0], vw, TailStrategy::GuardWithIf);
      if (dims.size() > 1) parallel_rows(s, fuse_rows(s, dims), total / out.extents[0], inner);
    }
  }
}

void schedule_reduction_gpu(const ElementwiseFuncs& out, const std::vector<Halide::Func>& partials,
                            const Halide::Target& target) {
  schedule_elementwise_gpu(out, target);
  for (Halide::Func p : partials) {
    p.compute_root();
    const std::vector<Var> dims = pure_vars(p);
    if (dims.empty()) {  // a reduction to one scalar: one thread
      p.gpu_single_thread();
      p.update().gpu_single_thread();
      continue;
    }
    for (int stage = 0; stage < 2; ++stage) {
      Halide::Stage s = stage == 0 ? Halide::Stage(p) : p.update();
      const Var all = fuse_vars(s, dims);
      Var block("block"), thread("thread");
      s.gpu_tile(all, block, thread, 64, TailStrategy::GuardWithIf);
    }
  }
}

void schedule_concat_cpu(const Halide::Func& out, const std::vector<Halide::RDom>& pieces,
                         const std::vector<int64_t>& extents, const Halide::Target& target) {
  Halide::Func f = out;
  const int vw = target.natural_vector_size<float>();
  const std::vector<Var> dims = pure_vars(f);
  int64_t rows = 1;
  for (size_t d = 1; d < extents.size(); ++d) rows *= extents[d];
  for (size_t u = 0; u < pieces.size(); ++u) {
    Halide::Stage s = f.update(static_cast<int>(u));
    s.vectorize(pieces[u].x, vw, TailStrategy::GuardWithIf);
    if (dims.size() > 1) parallel_rows(s, fuse_rows(s, dims), rows, extents[0]);
  }
}

namespace {

// A matrix-vector product (one or two rows of A, no batch) with a large B [K, N] sums B's rows
// in kMatVecChunks chunks, a parallel task each, into a partial row of the output (in L1), four
// rows at a time, then adds the partial rows. Each task reads its rows of B as one contiguous
// run, which the hardware prefetchers follow. Register tiles of a few vectors of columns (the
// general schedule below) read each row of B as a 256-byte run, the next a whole row further
// on: VGG-11's classifier (2304 -> 2048, 2048 -> 2048, 2048 -> 1000) took 0.97-1.09, 0.79-0.84
// and 0.38-0.43 ms that way, and 0.57-0.65, 0.56-0.60 and 0.25-0.29 chunked; ResNet-50's
// 2048 -> 1000 0.43-0.47 -> 0.28-0.32 ms (2 threads, alternating runs, in the network).
constexpr int kMatVecChunks = 8;  // 2 threads take 4 each

std::optional<int64_t> chunked_rows(const MatMulFuncs& f, int vw) {
  const std::optional<int64_t> k = Halide::Internal::as_const_int(f.k.x.extent());
  if (!k || f.m_extent > 2 || !f.batch.empty() || f.n_extent < vw || *k < 64 * kMatVecChunks ||
      f.n_extent * *k * 4 < (int64_t{1} << 20))
    return std::nullopt;
  return (*k + kMatVecChunks - 1) / kMatVecChunks;
}

void schedule_matvec_chunked(const MatMulFuncs& f, int64_t rows, int vw) {
  Halide::Func out = f.out, acc = f.acc;
  Halide::RVar ko("ko"), ki("ki"), kio("kio"), kii("kii");
  Var u("u");
  Halide::Func partial =
      acc.update().split(f.k.x, ko, ki, static_cast<int>(rows), TailStrategy::GuardWithIf).rfactor(ko, u);
  partial.compute_root().vectorize(f.n, vw, TailStrategy::GuardWithIf).parallel(u);
  partial.update()
      .split(ki, kio, kii, 4, TailStrategy::GuardWithIf)
      .reorder(kii, f.n, f.m, kio, u)
      .vectorize(f.n, vw, TailStrategy::GuardWithIf)
      .unroll(kii)
      .parallel(u);
  acc.compute_root().vectorize(f.n, vw, TailStrategy::GuardWithIf);
  acc.update().reorder(f.n, f.m).vectorize(f.n, vw, TailStrategy::GuardWithIf);
  out.vectorize(f.n, vw, TailStrategy::GuardWithIf);
}

}  // namespace

void schedule_matmul_cpu(const MatMulFuncs& f, const Halide::Target& target) {
  Halide::Func out = f.out, acc = f.acc;
  const int vw = target.natural_vector_size<float>();
  if (f.stage_b) {  // one dense copy of B, vectorized along its rows, a task per batch
    Halide::Func b = f.b;
    b.compute_root().vectorize(b.args()[0], vw, TailStrategy::GuardWithIf);
    if (b.args().size() > 2) b.parallel(b.args().back());
  }
  if (const std::optional<int64_t> rows = chunked_rows(f, vw)) {
    schedule_matvec_chunked(f, *rows, vw);
    return;
  }
  // Accumulators of 2 vectors of columns by 8 rows with AVX-512's 32 registers (16, and the 2
  // vectors of B and a broadcast of A beside them), 6 rows with AVX2's 16 and FMA, 4 without
  // FMA (SSE: a multiply and an add need a temporary each); or for a matrix-vector product (1
  // or 2 rows, memory-bound on B) 4 vectors, so each row of B is read in longer contiguous
  // runs; one vector, or no vectorization, for narrow outputs. Attention's products with 4
  // rows everywhere (ViT-Tiny's q @ k^T, [197, 64] x [64, 197] per head, and attn @ v, [197,
  // 197] x [197, 64]): 0.089 and 0.086 ms with AVX-512, 0.074 and 0.063 with 8 rows (12 rows
  // measured within 5% of 8, 3 or 4 vectors of columns slower); with AVX2 0.112 and 0.111,
  // 0.106 and 0.090 with 6 rows; SSE 0.276 and 0.266 with 4, 0.351 and 0.252 with 6.
  const int tile_rows = target.has_feature(Halide::Target::AVX512) ? 8
                        : target.has_feature(Halide::Target::FMA)  ? 6
                                                                   : 4;
  const int tm = static_cast<int>(std::min<int64_t>(f.m_extent, tile_rows));
  const int wide = tm <= 2 ? 4 : 2;
  const int tn = f.n_extent >= wide * vw ? wide * vw : f.n_extent >= vw ? vw : 0;
  Var no("no"), ni("ni"), mo("mo"), mi("mi");
  if (tn > 0) {
    out.split(f.n, no, ni, tn, TailStrategy::ShiftInwards);
  } else {
    out.split(f.n, no, ni, 1);
  }
  out.split(f.m, mo, mi, tm, TailStrategy::ShiftInwards).reorder(ni, mi, no, mo);
  if (tn > 0) out.vectorize(ni, vw).unroll(ni);
  out.unroll(mi);
  // Tasks: the tiles, over every batch.
  std::vector<Var> outer = {no, mo};
  outer.insert(outer.end(), f.batch.begin(), f.batch.end());
  const Var task = fuse_vars(out, outer);
  const int64_t tiles = (f.n_extent + std::max(tn, 1) - 1) / std::max(tn, 1) *
                        ((f.m_extent + tm - 1) / tm) * f.batch_count;
  if (tiles > 1) out.parallel(task);
  // The tile's sums stay in registers through the whole reduction (k outermost).
  acc.compute_at(out, task);
  Halide::Stage update = acc.update();
  update.reorder(f.n, f.m, f.k.x);
  if (tn > 0) {
    acc.vectorize(f.n, vw);
    update.vectorize(f.n, vw).unroll(f.n);
  }
  update.unroll(f.m);
}

void schedule_matmul_gpu(const MatMulFuncs& f, const Halide::Target& /*target*/) {
  Halide::Func out = f.out;
  Var nb("nb"), mb("mb"), nt("nt"), mt("mt");
  out.gpu_tile(f.n, f.m, nb, mb, nt, mt, 16, 16, TailStrategy::GuardWithIf);
  if (!f.batch.empty()) out.gpu_blocks(fuse_vars(out, f.batch));
  Halide::Func acc = f.acc;
  acc.compute_at(out, nt);
}

}  // namespace kiln::schedules
