// Winograd convolution builder (see winograd.h).
#include "generators/ops/winograd.h"

#include <cmath>
#include <vector>

#include "generators/ops/conv.h"
#include "runtime/conv_weights.h"

namespace kiln::generators::ops {

using Halide::Expr;

namespace {

// sum_k m[row][k] * term(k) with the zero coefficients left out and +-1 as additions, so the
// transforms cost what their sparse matrices say.
template <typename Term>
Expr combine(const std::vector<double>& row, Term term) {
  Expr sum;
  for (size_t k = 0; k < row.size(); ++k) {
    if (row[k] == 0) continue;
    const Expr v = term(static_cast<int>(k));
    const Expr scaled = row[k] == 1 || row[k] == -1 ? v : static_cast<float>(std::abs(row[k])) * v;
    if (!sum.defined())
      sum = row[k] < 0 ? -scaled : scaled;
    else
      sum = row[k] < 0 ? sum - scaled : sum + scaled;
  }
  return sum.defined() ? sum : Expr(0.0f);
}

// One row of `m` per value of `index`: a mux the schedule's unrolled loops resolve to the row.
template <typename Term>
Expr rows_of(const std::vector<std::vector<double>>& m, const Expr& index, Term term) {
  std::vector<Expr> rows;
  for (const std::vector<double>& row : m) rows.push_back(combine(row, term));
  return Halide::mux(index, rows);
}

}  // namespace

WinogradAlgorithm winograd_conv2d(const Halide::Func& input, int in_width, int in_height,
                                  int in_channels, const Halide::Func& weights,
                                  const Halide::Func& bias, int pad_x, int pad_y, int out_width,
                                  int tile, int stride) {
  const runtime::WinogradMatrices& m = runtime::winograd_matrices(tile, stride);
  WinogradAlgorithm w{Halide::Func("winograd_input_x"),
                      Halide::Func("winograd_input"),
                      Halide::Func("winograd_product"),
                      Halide::Func("winograd_products"),
                      Halide::Func("winograd_output_x"),
                      Halide::Func("acc"),
                      Halide::Var("c"),
                      Halide::Var("co"),
                      Halide::Var("a"),
                      Halide::Var("b"),
                      Halide::Var("i"),
                      Halide::Var("t"),
                      Halide::Var("x"),
                      Halide::Var("y"),
                      Halide::Var("n"),
                      Halide::RDom(0, in_channels, "r"),
                      tile,
                      stride,
                      m.alpha,
                      (out_width + tile - 1) / tile,
                      in_channels};
  // The input pixels of tile t: (s (tx * m) + a - pad_x, s (ty * m) + y - pad_y) for stride s,
  // zero off the image.
  const Halide::Func padded = zero_padded(input, in_width, in_height);
  const Expr tx = w.t % w.tiles_x, ty = w.t / w.tiles_x;
  // V = B^T d B: B^T along x, then along y.
  w.input_x(w.c, w.a, w.y, w.t, w.n) = rows_of(m.bt, w.a, [&](int k) {
    return padded(w.c, tx * (tile * stride) + k - pad_x, ty * (tile * stride) + w.y - pad_y, w.n);
  });
  w.input(w.c, w.a, w.b, w.t, w.n) =
      rows_of(m.bt, w.b, [&](int k) { return w.input_x(w.c, w.a, k, w.t, w.n); });
  // For each of the alpha^2 positions, [tiles x Ci] x [Ci x Co].
  w.product(w.co, w.t, w.a, w.b, w.n) = 0.0f;
  w.product(w.co, w.t, w.a, w.b, w.n) +=
      weights(w.co, w.r.x, w.a, w.b) * w.input(w.r.x, w.a, w.b, w.t, w.n);
  w.products(w.co, w.t, w.a, w.b, w.n) = w.product(w.co, w.t, w.a, w.b, w.n);
  // Y = A^T M A: A^T along x, then along y, at the pixel's place (x % m, y % m) in its tile.
  w.output_x(w.co, w.i, w.b, w.t, w.n) =
      rows_of(m.at, w.i, [&](int k) { return w.products(w.co, w.t, k, w.b, w.n); });
  const Expr t_of_pixel = w.x / tile + w.tiles_x * (w.y / tile);
  w.acc(w.co, w.x, w.y, w.n) =
      bias(w.co) + rows_of(m.at, w.y % tile, [&](int k) {
        return w.output_x(w.co, w.x % tile, k, t_of_pixel, w.n);
      });
  return w;
}

}  // namespace kiln::generators::ops
