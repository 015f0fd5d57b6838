// The convolution algorithm builder: dense convolution of an NHWC input with HWIO weights, as
// Halide Funcs. The AOT generator (generators/conv_generator.cpp) and the kernels generated per
// model (codegen/) both build their convolutions here; the epilogue is theirs to add.
#pragma once

#include <string>

#include "Halide.h"

namespace kiln::generators::ops {

// Stride, padding before the first pixel, and dilation, in x and y. Runtime values in the AOT
// kernels, constants in the generated ones.
struct ConvWindow {
  Halide::Expr stride_x, stride_y, pad_x, pad_y, dilation_x, dilation_y;
};

// input (c, x, y, n) with zeros outside the in_width x in_height image.
Halide::Func zero_padded(const Halide::Func& input, const Halide::Expr& in_width,
                         const Halide::Expr& in_height);

// v (float32) rounded to the nearest bfloat16, ties to even, as a BFloat(16) value; a NaN stays
// a NaN. Integer arithmetic on the bits (what graph::to_bf16_bits does in C++), so no target
// needs a conversion instruction.
Halide::Expr round_to_bf16(const Halide::Expr& v);

// How a bf16 convolution widens its bfloat16 operands to float32: `cast`, the form Halide lowers
// to vdpbf16ps on targets with AVX512_BF16; `bits` (the 16 bits moved to the top of a float32),
// the same value for targets without it, where Halide would otherwise emulate the cast (and
// warn about it).
enum class Bf16Widen { none, cast, bits };
Halide::Expr widen_bf16(const Halide::Expr& v, Bf16Widen how);

struct ConvAlgorithm {
  Halide::Func input_padded;  // (c, x, y, n): the input, zero outside the image
  Halide::Func acc;           // (co, x, y, n): bias + sum over (ci, kx, ky); one update
  Halide::Var co, x, y, n, c;
  Halide::RDom r;  // r.x = ci, r.y = kx, r.z = ky
};

// acc(co, x, y, n) = bias(co) + sum_{ci, kx, ky} weights(co, ci, kx, ky) *
//                    input(g(co) * in_channels + ci, x * sx + kx * dx - px, y * sy + ky * dy - py,
//                    n)
// `input` is NHWC, (c, x, y, n), with an image of in_width x in_height pixels; weights are HWIO,
// (co, ci, kx, ky), with `in_channels` input channels per group. Dense: g(co) = 0. Grouped
// (out_per_group defined): output channel co belongs to group g(co) = co / out_per_group.
// pad_input = false: the window never leaves the image (a 1x1 window without padding), so
// input_padded is the input itself and needs no boundary condition.
// bf16 (not none): input_padded holds the input rounded to bfloat16 and the update sums
// widen_bf16(input_padded) * weights, for weights that are widened bfloat16 values alike:
// exact products, summed in float32 (with `cast`, the form Halide lowers to vdpbf16ps).
// `prefix` starts the names of the Funcs made here: a pipeline with two convolutions needs
// different ones (Halide tells Funcs apart by name).
// interleave > 1 (grouped, interleave * out_per_group == kInterleaveBlock): the channels are
// interleaved by group, see interleaved_position. acc's first coordinate is then a position,
// weights(position, ci, kx, ky) are read by position, input_padded(q, ...) holds the input's
// channels interleaved alike (q runs over blocks of interleave * in_channels), and a caller
// reads output channel co at acc(interleaved_position(co, ...), ...).
// weights_per_image: weights take the image as a fifth argument, (co, ci, kx, ky, n) (a
// convolution whose input is scaled per image: the scale folded into its weights).
// skip_padding_rows: the reduction leaves out the kernel rows that fall on the zero padding
// above or below the image (a predicate on r.z and y, RDom::where). A schedule that runs the
// output rows outside the reduction over input channels gets loops trimmed to the rows that
// do something (ResNet-50's 7x7 3x3 layers: 2 of 21 row taps); inside it, a branch per step.
// skip_padding_cols: the same for the kernel columns left or right of the image (a predicate on
// r.y and x): free only where the schedule unrolls both the pixels of a row and r.y, so that
// every copy's predicate is a constant (ConvFuncs::unroll_kernel_columns).
ConvAlgorithm conv2d(const Halide::Func& input, const Halide::Expr& in_width,
                     const Halide::Expr& in_height, const Halide::Func& weights,
                     const Halide::Func& bias, const Halide::Expr& in_channels,
                     const Halide::Expr& kernel_w, const Halide::Expr& kernel_h,
                     const ConvWindow& window, bool pad_input,
                     const Halide::Expr& out_per_group = Halide::Expr(),
                     Bf16Widen bf16 = Bf16Widen::none, const std::string& prefix = "",
                     int interleave = 1, bool weights_per_image = false,
                     bool skip_padding_rows = false, bool skip_padding_cols = false);

// Grouped convolutions whose groups are narrower than a vector can hold their channels
// interleaved by group: in each block of kInterleaveBlock output channels, the `interleave`
// groups' channel k sit side by side (position k * interleave + the group's place in the
// block). A vector of positions then needs, per input channel of the group, the same
// `interleave` input values repeated: one broadcast load of a contiguous run when the input is
// interleaved alike, instead of a load per group and a permute. The position of output
// channel co (of groups of `per_group` channels):
inline constexpr int kInterleaveBlock = 16;
Halide::Expr interleaved_position(const Halide::Expr& co, int interleave, const Halide::Expr& per_group);

struct ConvMatmulAlgorithm {
  // (k, p): the zero-padded input's window of output pixel p = x + Wo * (y + Ho * n) at step
  // k = ci + Ci * (kx + Kw * ky), rounded to bfloat16; zero for k past the Kh * Kw * Ci steps
  // (up to `reduction`). Pixels past the batch read its last image: never stored.
  Halide::Func windows;
  Halide::Func acc;  // (co, p) = sum over k of windows(k, p) * weights(co, k); zero, one update
  Halide::Var co, k, p;
  Halide::RDom r;    // r.x = k, 0 .. reduction
};

// A convolution as a matrix multiply of gathered windows (im2col) by weights (co, k), float32
// values of bfloat16 ones: the form Halide lowers to AMX tile instructions (tdpbf16ps). No bias:
// the caller adds it after the sums. `input` as for conv2d, `batch` images.
ConvMatmulAlgorithm conv2d_as_matmul(const Halide::Func& input, int in_width, int in_height,
                                     int batch, const Halide::Func& weights, int in_channels,
                                     int kernel_w, int kernel_h, int reduction, int out_width,
                                     int out_height, const ConvWindow& window);

struct DepthwiseAlgorithm {
  Halide::Func input_padded;  // (c, x, y, n): the input, zero outside the image
  Halide::Func acc;           // (c, x, y, n): bias + sum over (kx, ky); one update
  Halide::Var c, x, y, n;
  Halide::RDom r;  // r.x = kx, r.y = ky
};

// Depthwise convolution, one filter per channel (groups == channels, no channel multiplier):
// acc(c, x, y, n) = bias(c) + sum_{kx, ky} weights(c, 0, kx, ky) *
//                   input(c, x * sx + kx * dx - px, y * sy + ky * dy - py, n)
// weights are [Kh, Kw, 1, C]: (c, 0, kx, ky) innermost first.
DepthwiseAlgorithm depthwise_conv2d(const Halide::Func& input, const Halide::Expr& in_width,
                                    const Halide::Expr& in_height, const Halide::Func& weights,
                                    const Halide::Func& bias, const Halide::Expr& kernel_w,
                                    const Halide::Expr& kernel_h, const ConvWindow& window);

}  // namespace kiln::generators::ops
