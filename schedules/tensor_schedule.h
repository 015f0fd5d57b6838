// Schedules of the reductions and matrix products of generators/ops/tensor.h (data movement
// uses the elementwise schedules: its output is a pure function of the output's coordinates).
#pragma once

#include <cstdint>
#include <vector>

#include "Halide.h"
#include "schedules/elementwise_schedule.h"

namespace kiln::schedules {

// A reduction: `out` (an elementwise Func of the partial results) and the partial results
// themselves (each a Func with one update over an RDom, e.g. a sum, or Softmax's maximum and
// sum). CPU: each partial computed once, parallel over its outer rows and, with
// `vectorize_inner` (the partials are as wide as `out` in its innermost dimension), vectorized
// along it; with `rows_in_vectors` instead (a reduction along the innermost axis only, such as
// an attention's Softmax over its last axis), vectorized across the rows of the next dimension,
// each lane reducing a row of its own; `out` as an elementwise kernel. `lane_sum` > 0: each
// partial is a sum of that many elements per result, its innermost reduction variable along
// the input's innermost axis (a mean over H and W of NCHW): summed in vector lanes (Halide's
// rfactor, the lanes added at the end), results in parallel by that work. `band_sum` > 1: each
// partial is a sum whose results beside the vectorized innermost dimension are too few to run
// in parallel (the L2 norm over H and W of an NHWC image: one row of channels), and its
// outermost reduction variable has this extent: summed in bands of it in parallel (rfactor),
// the bands added at the end.
void schedule_reduction_cpu(const ElementwiseFuncs& out, const std::vector<Halide::Func>& partials,
                            bool vectorize_inner, const Halide::Target& target,
                            bool rows_in_vectors = false, int64_t lane_sum = 0,
                            int64_t band_sum = 0);
// A sum `p` (computed at root, one update over an RDom whose outermost variable has extent
// `outer_extent`) whose results are too few to run in parallel beside its vectorized innermost
// pure dimension (one row of channels: a norm over H and W of an NHWC image): in about 8
// bands of that variable in parallel (Halide's rfactor), each with the innermost dimension in
// vectors, the bands added up at the end.
void sum_in_parallel_bands(Halide::Func p, int64_t outer_extent, const Halide::Target& target);
// A Softmax or LogSoftmax along the innermost axis whose rows are kMinSoftmaxRow elements or
// longer (an attention's scores): rows in parallel tasks, each row's partials (its maximum,
// then its sum of exponentials) computed for that row in vectors along it (the lanes combined
// at the end), the exponentials `exps` once per row into a buffer the sum and a Softmax's
// output read, then the row written in vectors: the row is read from L1 after its first pass.
// The vectors are the target's, or half or a quarter of one where a row is shorter. Rows one
// per lane instead (`rows_in_vectors`) gathered each element from 16 rows 1 KB apart, and
// computed each exponential twice: MobileViT-XXS's Softmax over [4, 4, 256, 256] took 0.50 ms,
// and Swin's over rows of 49 (its 7x7 windows, [64, 3, 49, 49]) 0.35 ms against 0.21 by rows
// (AVX-512; rows of 16 0.104 -> 0.053 ms, of 32 0.193 -> 0.117).
inline constexpr int64_t kMinSoftmaxRow = 4;
void schedule_softmax_rows_cpu(const ElementwiseFuncs& out,
                               const std::vector<Halide::Func>& partials, Halide::Func exps,
                               const Halide::Target& target);
// GPU: each partial a kernel of one thread per result, `out` an elementwise one.
void schedule_reduction_gpu(const ElementwiseFuncs& out, const std::vector<Halide::Func>& partials,
                            const Halide::Target& target);

// A Concat built from one update per input (generators/ops/tensor.h's concat_piecewise, along
// the innermost dimension) with output `extents` (innermost first): update u's RVar
// `pieces[u].x` in vectors, the other dimensions fused into rows, in parallel tasks of at least
// 16K elements.
void schedule_concat_cpu(const Halide::Func& out, const std::vector<Halide::RDom>& pieces,
                         const std::vector<int64_t>& extents, const Halide::Target& target);

// A matrix product: out(n, m, batch...) from acc(n, m, batch...) (generators/ops/tensor.h),
// with N and M the extents of n and m.
struct MatMulFuncs {
  Halide::Func out, acc;
  Halide::Var n, m;
  std::vector<Halide::Var> batch;  // innermost first
  Halide::RDom k;
  int64_t n_extent, m_extent, batch_count;
  // B(n, k, batch...) as the product reads it, and whether to copy it into a dense buffer first
  // (B is a strided view whose rows lie apart, attention's v read in place; every row tile
  // reads all of B again, and rows a few hundred bytes long, scattered over a larger tensor,
  // were measured 24% slower to read so).
  Halide::Func b;
  bool stage_b = false;
};
// CPU: register tiles of two vectors of n by up to 8 rows of m with AVX-512, 6 with AVX2, 4
// otherwise (four vectors by one or two rows for a matrix-vector product), acc in registers
// through the whole reduction, parallel over tiles; B staged whole first where stage_b asks. A
// matrix-vector product with a B of 1 MB or more sums B's rows in 8 chunks instead, a parallel
// task each, so that each task streams a contiguous part of B.
void schedule_matmul_cpu(const MatMulFuncs& f, const Halide::Target& target);
// GPU: one thread per output element, 16 x 16 blocks.
void schedule_matmul_gpu(const MatMulFuncs& f, const Halide::Target& target);

}  // namespace kiln::schedules
