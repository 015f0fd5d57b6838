// The convolution algorithm builder (see conv.h).
#include "generators/ops/conv.h"

namespace kiln::generators::ops {

using Halide::Expr;

// Zero outside the image in x and y; channels and batch are never read out of range.
Halide::Func zero_padded(const Halide::Func& input, const Expr& in_width, const Expr& in_height) {
  return Halide::BoundaryConditions::constant_exterior(
      input, 0.0f, {{Expr(), Expr()}, {0, in_width}, {0, in_height}, {Expr(), Expr()}});
}

ConvAlgorithm conv2d(const Halide::Func& input, const Expr& in_width, const Expr& in_height,
                     const Halide::Func& weights, const Halide::Func& bias, const Expr& in_channels,
                     const Expr& kernel_w, const Expr& kernel_h, const ConvWindow& w,
                     bool pad_input, const Expr& out_per_group) {
  ConvAlgorithm a{Halide::Func("input_padded"),
                  Halide::Func("acc"),
                  Halide::Var("co"),
                  Halide::Var("x"),
                  Halide::Var("y"),
                  Halide::Var("n"),
                  Halide::Var("c"),
                  Halide::RDom()};
  if (pad_input) {
    a.input_padded(a.c, a.x, a.y, a.n) =
        zero_padded(input, in_width, in_height)(a.c, a.x, a.y, a.n);
  } else {
    a.input_padded(a.c, a.x, a.y, a.n) = input(a.c, a.x, a.y, a.n);
  }
  a.r = Halide::RDom(0, in_channels, 0, kernel_w, 0, kernel_h, "r");
  a.acc(a.co, a.x, a.y, a.n) = bias(a.co);
  const Expr ci =
      out_per_group.defined() ? a.co / out_per_group * in_channels + a.r.x : Expr(a.r.x);
  a.acc(a.co, a.x, a.y, a.n) +=
      weights(a.co, a.r.x, a.r.y, a.r.z) *
      a.input_padded(ci, a.x * w.stride_x + a.r.y * w.dilation_x - w.pad_x,
                     a.y * w.stride_y + a.r.z * w.dilation_y - w.pad_y, a.n);
  return a;
}

DepthwiseAlgorithm depthwise_conv2d(const Halide::Func& input, const Expr& in_width,
                                    const Expr& in_height, const Halide::Func& weights,
                                    const Halide::Func& bias, const Expr& kernel_w,
                                    const Expr& kernel_h, const ConvWindow& w) {
  DepthwiseAlgorithm a{Halide::Func("input_padded"),
                       Halide::Func("acc"),
                       Halide::Var("c"),
                       Halide::Var("x"),
                       Halide::Var("y"),
                       Halide::Var("n"),
                       Halide::RDom()};
  a.input_padded(a.c, a.x, a.y, a.n) = zero_padded(input, in_width, in_height)(a.c, a.x, a.y, a.n);
  a.r = Halide::RDom(0, kernel_w, 0, kernel_h, "r");
  a.acc(a.c, a.x, a.y, a.n) = bias(a.c);
  a.acc(a.c, a.x, a.y, a.n) +=
      weights(a.c, 0, a.r.x, a.r.y) *
      a.input_padded(a.c, a.x * w.stride_x + a.r.x * w.dilation_x - w.pad_x,
                     a.y * w.stride_y + a.r.y * w.dilation_y - w.pad_y, a.n);
  return a;
}

}  // namespace kiln::generators::ops
