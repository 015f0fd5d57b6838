// Pooling algorithm builders: 2-D max and average pooling and global pooling of an NHWC
// tensor, with ONNX's semantics as the reference interpreter states them
// (graph/reference_ops_compute.cpp).
#pragma once

#include "Halide.h"
#include "graph/ir.h"

namespace kiln::generators::ops {

struct PoolAlgorithm {
  Halide::Func out;  // (c, x, y, n)
  Halide::Var c, x, y, n;
  // Average pooling only: how many window positions count, per output column and row; tiny
  // Funcs a schedule computes once (at root).
  Halide::Func count_x, count_y;
  // Global average pooling only: the sum over the image, (c, n), an update over `r` (x, y),
  // which a schedule may split by rows (rfactor); `out` divides it by the pixel count.
  Halide::Func total;
  Halide::RDom r;
};

// `input` is NHWC, (c, x, y, n), with an image of in_width x in_height pixels. Max pooling
// ignores the padding (an all-padding window gives float's lowest value); average pooling
// divides by the window positions inside the image, or with count_include_pad by those inside
// the padded image (a window that starts in the padding may end past it with ceil_mode), and
// gives 0 for a window with nothing inside.
PoolAlgorithm pool2d(const Halide::Func& input, int in_width, int in_height,
                     const graph::Pool2d& p);

// Over all of H and W: out(c, 0, 0, n) = max or mean of input(c, :, :, n).
PoolAlgorithm global_pool(const Halide::Func& input, int in_width, int in_height,
                          graph::PoolKind kind);

}  // namespace kiln::generators::ops
