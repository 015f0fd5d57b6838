// Pooling algorithm builders (see pool.h).
#include "generators/ops/pool.h"

#include <limits>

#include "generators/ops/elementwise.h"

namespace kiln::generators::ops {

using Halide::Expr;

namespace {

// Window positions along one axis that count for output position o: inside [0, extent), or
// with include_pad below extent + pad_after (a window never starts before -pad_before). In
// closed form, without a reduction, so a consumer may inline it: taps k in [0, kernel) with
// lo <= start + k * dilation < hi are those from ceil((lo - start) / dilation) to
// ceil((hi - start) / dilation) - 1 (Halide's division rounds down for negative numerators).
Halide::Func window_count(const Halide::Var& o, int kernel, int stride, int dilation,
                          int pad_before, int pad_after, int extent, bool include_pad,
                          const std::string& name) {
  const Expr start = o * stride - pad_before;
  const Expr lo = include_pad ? Expr(-pad_before) : Expr(0);
  const Expr hi = include_pad ? Expr(extent + pad_after) : Expr(extent);
  const Expr first = Halide::clamp((lo - start + dilation - 1) / dilation, 0, kernel);
  const Expr end = Halide::clamp((hi - start + dilation - 1) / dilation, 0, kernel);
  Halide::Func count(name);
  count(o) = Halide::max(end - first, 0);
  return count;
}

// The maximum of v over its RDom, NaN if any v is NaN (ONNX; Halide's max drops a NaN operand).
Expr nan_propagating_maximum(const Expr& v) {
  const Expr any_nan = Halide::maximum(Halide::select(is_nan_bits(v), 1, 0)) > 0;
  return Halide::select(any_nan, Expr(std::numeric_limits<float>::quiet_NaN()), Halide::maximum(v));
}

}  // namespace

PoolAlgorithm pool2d(const Halide::Func& input, int in_width, int in_height,
                     const graph::Pool2d& p) {
  PoolAlgorithm a{Halide::Func("pool"), Halide::Var("c"), Halide::Var("x"), Halide::Var("y"),
                  Halide::Var("n"),     Halide::Func(),   Halide::Func()};
  const bool is_max = p.kind == graph::PoolKind::max;
  const Expr outside = is_max ? std::numeric_limits<float>::lowest() : 0.0f;
  const Halide::Func padded = Halide::BoundaryConditions::constant_exterior(
      input, outside, {{Expr(), Expr()}, {0, in_width}, {0, in_height}, {Expr(), Expr()}});
  const auto tap = [&](const Expr& kx, const Expr& ky) {
    return padded(a.c, a.x * p.stride_w + kx * p.dilation_w - p.pad_left,
                  a.y * p.stride_h + ky * p.dilation_h - p.pad_top, a.n);
  };
  // Windows of up to kUnrolledTaps taps (3x3, 2x2, 5x5) as one expression over the taps, which
  // compiles to straight-line vector code; larger ones reduce over an RDom (a loop per window,
  // several times the instructions of the taps themselves on a 3x3).
  constexpr int kUnrolledTaps = 25;
  const bool unrolled = p.kernel_w * p.kernel_h <= kUnrolledTaps;
  Expr v, total, largest, any_nan;  // v: one tap of the RDom; the rest over every tap
  if (!unrolled) {
    Halide::RDom r(0, p.kernel_w, 0, p.kernel_h, "pool_r");
    v = tap(r.x, r.y);
  } else {
    for (int ky = 0; ky < p.kernel_h; ++ky)
      for (int kx = 0; kx < p.kernel_w; ++kx) {
        const Expr t = tap(kx, ky);
        total = total.defined() ? total + t : t;
        largest = largest.defined() ? Halide::max(largest, t) : t;
        any_nan = any_nan.defined() ? any_nan || is_nan_bits(t) : is_nan_bits(t);
      }
  }
  if (is_max) {
    // NaN if any tap is NaN (ONNX; Halide's max drops a NaN operand).
    a.out(a.c, a.x, a.y, a.n) =
        unrolled ? Halide::select(any_nan, Expr(std::numeric_limits<float>::quiet_NaN()), largest)
                 : nan_propagating_maximum(v);
    return a;
  }
  // The window is a product of its rows and columns, so is the count.
  a.count_x = window_count(a.x, p.kernel_w, p.stride_w, p.dilation_w, p.pad_left, p.pad_right,
                           in_width, p.count_include_pad, "count_x");
  a.count_y = window_count(a.y, p.kernel_h, p.stride_h, p.dilation_h, p.pad_top, p.pad_bottom,
                           in_height, p.count_include_pad, "count_y");
  const Expr count = a.count_x(a.x) * a.count_y(a.y);
  a.out(a.c, a.x, a.y, a.n) = Halide::select(
      count > 0, (unrolled ? total : Halide::sum(v)) / Halide::cast<float>(count), 0.0f);
  return a;
}

PoolAlgorithm global_pool(const Halide::Func& input, int in_width, int in_height,
                          graph::PoolKind kind) {
  PoolAlgorithm a{Halide::Func("global_pool"),
                  Halide::Var("c"),
                  Halide::Var("x"),
                  Halide::Var("y"),
                  Halide::Var("n"),
                  Halide::Func(),
                  Halide::Func()};
  Halide::RDom r(0, in_width, 0, in_height, "r");
  const Expr v = input(a.c, r.x, r.y, a.n);
  if (kind == graph::PoolKind::max) {
    a.out(a.c, a.x, a.y, a.n) = nan_propagating_maximum(v);
    return a;
  }
  a.total = Halide::Func("global_total");
  a.r = r;
  a.total(a.c, a.n) = 0.0f;
  a.total(a.c, a.n) += v;
  a.out(a.c, a.x, a.y, a.n) = a.total(a.c, a.n) / static_cast<float>(in_width * in_height);
  return a;
}

}  // namespace kiln::generators::ops
