// The convolution algorithm builder (see conv.h).
#include "generators/ops/conv.h"

namespace kiln::generators::ops {

using Halide::Expr;

// Zero outside the image in x and y; channels and batch are never read out of range.
Halide::Func zero_padded(const Halide::Func& input, const Expr& in_width, const Expr& in_height) {
  return Halide::BoundaryConditions::constant_exterior(
      input, 0.0f, {{Expr(), Expr()}, {0, in_width}, {0, in_height}, {Expr(), Expr()}});
}

Expr round_to_bf16(const Expr& v) {
  const Expr bits = Halide::reinterpret(Halide::UInt(32), v);
  const Expr rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
  const Expr quiet_nan = (bits >> 16) | 0x40;
  const Expr nan = (bits & 0x7fffffff) > 0x7f800000;
  return Halide::reinterpret(Halide::BFloat(16),
                             Halide::cast(Halide::UInt(16), Halide::select(nan, quiet_nan, rounded)));
}

Expr widen_bf16(const Expr& v, Bf16Widen how) {
  if (how == Bf16Widen::cast) return Halide::cast<float>(v);
  const Expr bits = Halide::cast(Halide::UInt(32), Halide::reinterpret(Halide::UInt(16), v));
  return Halide::reinterpret(Halide::Float(32), bits << 16);
}

ConvAlgorithm conv2d(const Halide::Func& input, const Expr& in_width, const Expr& in_height,
                     const Halide::Func& weights, const Halide::Func& bias, const Expr& in_channels,
                     const Expr& kernel_w, const Expr& kernel_h, const ConvWindow& w,
                     bool pad_input, const Expr& out_per_group, Bf16Widen bf16,
                     const std::string& prefix, int interleave, bool weights_per_image,
                     bool skip_padding_rows, bool skip_padding_cols) {
  ConvAlgorithm a{Halide::Func(prefix + "input_padded"),
                  Halide::Func(prefix + "acc"),
                  Halide::Var("co"),
                  Halide::Var("x"),
                  Halide::Var("y"),
                  Halide::Var("n"),
                  Halide::Var("c"),
                  Halide::RDom()};
  Expr in = pad_input ? zero_padded(input, in_width, in_height)(a.c, a.x, a.y, a.n)
                      : input(a.c, a.x, a.y, a.n);
  a.r = Halide::RDom(0, in_channels, 0, kernel_w, 0, kernel_h, "r");
  if (skip_padding_rows) {
    const Expr row = a.y * w.stride_y + a.r.z * w.dilation_y - w.pad_y;
    a.r.where(row >= 0 && row < in_height);
  }
  if (skip_padding_cols) {
    const Expr col = a.x * w.stride_x + a.r.y * w.dilation_x - w.pad_x;
    a.r.where(col >= 0 && col < in_width);
  }
  Expr ci =
      out_per_group.defined() ? a.co / out_per_group * in_channels + a.r.x : Expr(a.r.x);
  Expr out_channel = a.co;
  if (interleave > 1) {
    // Input position q of a block of interleave * in_channels holds channel ci of the block's
    // group q % interleave, ci = q / interleave % in_channels; output position co reads the
    // positions of its group's inputs (interleaved_position, the input's way).
    const Expr block_in = interleave * in_channels;
    const Expr group = a.c / block_in * interleave + a.c % interleave;
    const Expr channel = group * in_channels + a.c / interleave % in_channels;
    in = pad_input ? zero_padded(input, in_width, in_height)(channel, a.x, a.y, a.n)
                   : input(channel, a.x, a.y, a.n);
    ci = a.co / kInterleaveBlock * block_in + a.r.x * interleave + a.co % interleave;
    out_channel = (a.co / kInterleaveBlock * interleave + a.co % interleave) * out_per_group +
                  a.co / interleave % out_per_group;
  }
  a.input_padded(a.c, a.x, a.y, a.n) = bf16 != Bf16Widen::none ? round_to_bf16(in) : in;
  a.acc(a.co, a.x, a.y, a.n) = bias(out_channel);
  const Expr x_in = a.input_padded(ci, a.x * w.stride_x + a.r.y * w.dilation_x - w.pad_x,
                                   a.y * w.stride_y + a.r.z * w.dilation_y - w.pad_y, a.n);
  const Expr weight = weights_per_image ? weights(a.co, a.r.x, a.r.y, a.r.z, a.n)
                                        : weights(a.co, a.r.x, a.r.y, a.r.z);
  a.acc(a.co, a.x, a.y, a.n) += weight * (bf16 != Bf16Widen::none ? widen_bf16(x_in, bf16) : x_in);
  return a;
}

Expr interleaved_position(const Expr& co, int interleave, const Expr& per_group) {
  return co / kInterleaveBlock * kInterleaveBlock + co % per_group * interleave +
         co / per_group % interleave;
}

ConvMatmulAlgorithm conv2d_as_matmul(const Halide::Func& input, int in_width, int in_height,
                                     int batch, const Halide::Func& weights, int in_channels,
                                     int kernel_w, int kernel_h, int reduction, int out_width,
                                     int out_height, const ConvWindow& w) {
  ConvMatmulAlgorithm a{Halide::Func("windows"), Halide::Func("acc"), Halide::Var("co"),
                        Halide::Var("k"), Halide::Var("p"), Halide::RDom()};
  const Expr x = a.p % out_width, y = a.p / out_width % out_height;
  const Expr n = Halide::min(a.p / (out_width * out_height), batch - 1);
  const Expr ci = a.k % in_channels, tap = a.k / in_channels;
  const Expr kx = tap % kernel_w, ky = tap / kernel_w;
  const Expr v = zero_padded(input, in_width, in_height)(
      ci, x * w.stride_x + kx * w.dilation_x - w.pad_x, y * w.stride_y + ky * w.dilation_y - w.pad_y, n);
  a.windows(a.k, a.p) =
      round_to_bf16(Halide::select(a.k < in_channels * kernel_w * kernel_h, v, 0.0f));
  a.r = Halide::RDom(0, reduction, "r");
  a.acc(a.co, a.p) = 0.0f;
  a.acc(a.co, a.p) += Halide::cast<float>(a.windows(a.r.x, a.p)) * weights(a.co, a.r.x);
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
