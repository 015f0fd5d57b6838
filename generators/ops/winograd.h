// Winograd F(m x m, 3 x 3) convolution, stride 1 or 2, as Halide Funcs (runtime/conv_weights.h
// has the matrices): input transform per tile, a batched matrix multiply over tiles, output
// transform. The weights arrive transformed (runtime::winograd_conv_weights); the epilogue is the
// caller's.
#pragma once

#include "Halide.h"

namespace kiln::generators::ops {

// Tiles are numbered t = tx + tiles_x * ty, so a register block of the matrix multiply can run
// along a task's tiles across tile rows.
struct WinogradAlgorithm {
  Halide::Func input_x;   // (c, a, y, t, n): B^T applied along x to the tile's input rows
  Halide::Func input;     // (c, a, b, t, n): V = B^T d B, the transformed input tiles
  Halide::Func product;   // (co, t, a, b, n): sum over ci of U(co, ci, a, b) * V(ci, a, b, t, n)
  Halide::Func products;  // (co, t, a, b, n): the product stored, read by the output transform
  Halide::Func output_x;  // (co, i, b, t, n): A^T applied along x to the products
  Halide::Func acc;       // (co, x, y, n): bias + A^T M A at the output pixel
  Halide::Var c, co, a, b, i, t, x, y, n;
  Halide::RDom r;         // r.x = ci
  int tile = 0, stride = 1, alpha = 0, tiles_x = 0, in_channels = 0;
};

// acc(co, x, y, n) equals the direct convolution's (stride `stride`, dilation 1, padding pad_x,
// pad_y before the first pixel) for any output size: tiles overhanging the output's right or bottom
// edge read zeros past the image and their extra outputs are never stored. `weights` is
// (co, ci, a, b) = U[b][a][ci][co]; `input` NHWC (c, x, y, n) of in_width x in_height pixels.
WinogradAlgorithm winograd_conv2d(const Halide::Func& input, int in_width, int in_height,
                                  int in_channels, const Halide::Func& weights,
                                  const Halide::Func& bias, int pad_x, int pad_y, int out_width,
                                  int tile, int stride = 1);

}  // namespace kiln::generators::ops
